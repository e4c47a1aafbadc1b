// cross_entropy's row statistics (spec OP-8, cross-entropy-order.md): which of PyTorch 2.11's
// softmax kernels eager F.cross_entropy runs for a vocabulary of V fp32 logits, the order in which
// each of its threads adds the row's exp(x - max) and how the threads' sums are combined; and the
// order of bitparity's fused contract (one pass, an online max and sum). The reference's own plan:
// the CUDA kernels write theirs, so that a diff can catch either.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace bitparity::ref {

// The softmax forward kernel PyTorch 2.11 launches for a contiguous fp32 [N, V] (last dim, inner
// size 1) with 16-byte-aligned input and output bases and 48 KiB of shared memory per block.
enum class SoftmaxKernel {
  kWarp,  // softmax_warp_forward<log2 P>: V <= 2048
  kReg,   // cunn_SoftMaxForwardReg<ceil(V / 1024)>: 2048 < V <= 9216
  kSmem,  // cunn_SoftMaxForwardSmem<4>: V % 4 == 0 and V < 12256 (and not Reg)
  kIlp,   // cunn_SoftMaxForward<4>: every other V
};
const char* softmax_kernel_name(SoftmaxKernel kernel);  // "warp", "reg", "smem", "ilp"

struct EagerForwardPlan {
  SoftmaxKernel kernel = SoftmaxKernel::kWarp;
  int64_t threads = 1;  // warp: W = min(next_pow2(V), 32) lanes; block kernels: B threads
  int64_t per_thread = 1;  // warp: IT = next_pow2(V) / W; reg: ceil(V / 1024); otherwise unused
};
EagerForwardPlan eager_forward_plan(int64_t V);

// The forward block size (SoftMaxForward_getBlockSize): min(V, 1024) rounded up to a multiple of 32.
int64_t softmax_forward_block(int64_t V);

// The kernel boundaries that the dispatch rule names (each V where the kernel changes on one side).
inline constexpr int64_t kWarpMaxV = 2048;       // softmax_warp_forward up to here
inline constexpr int64_t kRegMaxV = 9216;        // ceil(V / 1024) < 10
inline constexpr int64_t kSmemLimitV = 12256;    // V < (49152 - 4 * 1024 / 32) / 4
inline constexpr int64_t kWarpBackwardMaxV = 1024;  // softmax_warp_backward up to here (bits unaffected)
inline constexpr int64_t kSmemBackwardLimitV = 12272;  // backward Smem with 512 threads (bits unaffected)

// Row statistics: the row's max m as the kernel holds it and S = the kernel's fp32 sum of
// expf(x_j - m) (libdevice expf). `row_index` sets the ILP kernel's misalignment
// (row_index * V) mod 4 of a row inside a tensor whose base is 16-byte aligned.
struct RowStats {
  float max = 0;
  float sum = 0;
};
RowStats eager_row_stats(std::span<const float> row, int64_t row_index);

// The fused contract's order: a row is cut into kFusedSegments contiguous segments of
// fused_segment_span(V) elements each (a multiple of kFusedSegmentLanes, the last segment shorter or
// empty), each walked by kFusedSegmentLanes lanes: lane t of segment s takes x_{sS + t}, x_{sS + t + 1024},
// ... (below (s + 1) S and V) and keeps an online (m, s) from (-Inf, +0): x > m: s = fma(s, expf(m - x), 1),
// m = x; x == -Inf: nothing; otherwise s = s + expf(x - m). Each segment's 1024 lanes then combine by
// a halving tree v[t] = combine(v[t], v[t + h]), h = 512, ..., 1, and the 8 segment results by a
// halving tree over the segments (h = 4, 2, 1), where combine(a, b) is: b.m > a.m:
// (b.m, fma(a.s, expf(a.m - b.m), b.s)); b.m == -Inf: a; otherwise (a.m, fma(b.s, expf(b.m - a.m), a.s)).
// Contiguous segments let one block of a cluster hold its segment on chip (the backward's two passes)
// while another kernel walks all eight segments at once (the forward's one pass).
// (ops::kFusedSegments, ops::kFusedSegmentLanes, ops::fused_segment_span in ops/training.h.)
RowStats fused_row_stats(std::span<const float> row);

}  // namespace bitparity::ref
