// Launchers of the cross_entropy kernels (spec OP-8), in gpu/cross_entropy.cu; the kernel records
// (gpu/cross_entropy_records.cpp) bind them. No CUDA types here, and nothing of C++20.
//
// Every tensor is fp32 except labels (i64); logits is a contiguous [N, V] whose base is 16-byte
// aligned (a fresh allocation), so that row i sits (i * V) mod 4 elements past a 16-byte boundary.
// Per row, both contracts compute m = max_j x_j, an fp32 sum S of expf(x_j - m) in the contract's
// order, L = logf(S) and logp_j = (x_j - m) - L (libdevice expf and logf, every other step one
// rounding), then
//   forward:  loss = -1 * logp_t, or +0 where labels[i] == ignore_index;
//   backward: gO_t = -1 * g (none where ignored), G = +0 + gO_t (megatron_eager's one-lane warp of
//             V = 1: gO_t itself), d_logits_j = fma(-expf(logp_j), G, gO_j), gO_j = +0 off the label.
// The orders:
// - kEager: PyTorch 2.11's softmax kernel for the V (cross-entropy-order.md): warp (V <= 2048:
//   W = min(next_pow2(V), 32) lanes, lane l adds x_{l + it W}, then a halving tree), Reg (V <= 9216:
//   1024 threads, thread t adds x_{t + 1024 r}), Smem (V % 4 == 0, V < 12256: 4-vectors at 4 (t + 1024 k))
//   or ILP (an unaligned head of (row address mod 16) / 4 elements, 4-vectors, a scalar tail); the
//   block kernels then BlockReduce (each warp's halving tree, then a halving tree of the 32 warp sums).
// - kFused: 8 contiguous segments of S = ceil(V / 8192) * 1024 elements, lane t of segment s walking
//   x_{sS + t}, x_{sS + t + 1024}, ... with an online (m, s); each segment's 1024 lanes combine by a
//   halving tree of (m, s) pairs, then the 8 segments (reference/cross_entropy.h states the steps).
// Labels are in [0, V) or equal ignore_index (the op's validate has checked). A launcher launches
// nothing for N == 0 and throws gpu::CudaError on a failed launch.
#pragma once

#include <cstdint>

namespace bitparity::gpu {

enum class CrossEntropyOrder { kEager, kFused };

// The fused order's segments, as ops/training.h states them (gpu/cross_entropy_records.cpp checks
// that the two agree), and the widest segment the fused backward keeps in shared memory (two
// buffers of 100 KB a block; a wider one reads global memory in both passes).
inline constexpr int kFusedSegments = 8;
inline constexpr int kFusedSegmentLanes = 1024;
inline constexpr int64_t kFusedBufferedMaxSpan = 25600;
// The fused forward's row blocks resident at once on a 132-SM H100 or H200 (two an SM): the ILP 1
// variant takes full waves of rows in row blocks, the rows after the last full wave in clusters.
inline constexpr int64_t kFusedForwardWaveRows = 264;
#if defined(__CUDACC__)
__host__ __device__
#endif
constexpr int64_t fused_segment_span(int64_t V) {
  return (V + int64_t{kFusedSegments} * kFusedSegmentLanes - 1) / (int64_t{kFusedSegments} * kFusedSegmentLanes) *
         kFusedSegmentLanes;
}

struct CrossEntropy {
  CrossEntropyOrder order = CrossEntropyOrder::kEager;
  bool backward = false;
  int64_t rows = 0, vocab = 0;  // N, V (V >= 1)
  int64_t ignore_index = -100;
  const void* logits = nullptr;  // [N, V] fp32
  const void* labels = nullptr;  // [N] i64
  const void* g = nullptr;       // [N] fp32 (backward)
  void* loss = nullptr;          // [N] fp32 (forward)
  void* d_logits = nullptr;      // [N, V] fp32 (backward)
  void* stream = nullptr;
  int ilp = 0;  // the fused kernels' shapes (gpu/common/ilp.h's knob; 0: the default)
};
void launch_cross_entropy(const CrossEntropy& args);

}  // namespace bitparity::gpu
