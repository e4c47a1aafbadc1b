// The cross_entropy kernels (spec OP-8): eager F.cross_entropy's orders (the softmax kernel PyTorch
// 2.11 picks for the V, with its threads' orders and reduction trees) and the fused contract's
// one-pass online max and sum. gpu/cross_entropy_kernels.h states the arithmetic.
//
// One row a block (1024 threads) for the eager block orders, one row a warp for the eager warp
// order. The eager kernels read a row twice (its max, then its sum; the backward a third time for
// the outputs), as PyTorch's do. The fused forward reads each logit once, one row a block walking all
// eight segments at once (or, as ILP variants, a cluster of 8 blocks a row, a segment a block);
// the fused backward also reads each logit once from HBM: a cluster of 8 blocks takes a row, each
// block keeping its segment in shared memory for the output pass, the segments brought by the bulk
// copy engine a row ahead where V % 4 == 0.

// Every rounding is an explicit __f*_rn intrinsic, so that nvcc's contraction (--fmad=true) fuses
// nothing the contracts round twice; expf and logf are libdevice's (no fast math), as in ATen.
#include "gpu/cross_entropy_kernels.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "gpu/common/shared_limit.h"
#include "gpu/runtime.h"

namespace bitparity::gpu {
namespace {

constexpr int kBlock = 1024;           // the block kernels' threads (SoftMaxForward_getBlockSize for V > 2048)
constexpr int kWarpRowsPerBlock = 4;   // rows of the warp kernel a block
constexpr int64_t kWarpMaxV = 2048;    // softmax_warp_forward up to here
constexpr int64_t kRegMaxCount = 9;    // cunn_SoftMaxForwardReg while ceil(V / 1024) < 10
constexpr int64_t kSmemLimitV = 12256; // cunn_SoftMaxForwardSmem below (49152 - 4 * 1024 / 32) / 4

enum class Kind { kReg, kSmem, kIlp };

__device__ __forceinline__ float exp_of(float x, float m) { return expf(__fsub_rn(x, m)); }

__device__ __forceinline__ float warp_max(float v) {
  for (int h = 16; h >= 1; h >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, h));
  return v;
}

// The max of a row over a block: exact in any order (fmaxf; a NaN, dropped here, makes S NaN anyway).
__device__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = warp_max(shared[lane]);
  __syncthreads();
  return v;
}

// cuda_utils::BlockReduce of 1024 threads: each warp's halving tree (shfl_down 16, ..., 1), then the
// 32 warp sums' halving tree in warp 0; every thread gets the total.
__device__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int h = 16; h >= 1; h >>= 1) v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, h));
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float r = shared[lane];
    for (int h = 16; h >= 1; h >>= 1) r = __fadd_rn(r, __shfl_down_sync(0xffffffffu, r, h));
    if (lane == 0) shared[32] = r;
  }
  __syncthreads();
  return shared[32];
}

// The outputs of row `row` from its m and L: the loss (thread 0), or every d_logits element, the
// threads `tid` of `threads` taking columns tid, tid + threads, ... (from the last, with streaming
// stores, where `reverse`).
__device__ void row_outputs(const CrossEntropy& a, int64_t row, float m, float L, int tid, int threads,
                            bool reverse) {
  const float* x = static_cast<const float*>(a.logits) + row * a.vocab;
  const int64_t t = static_cast<const int64_t*>(a.labels)[row];
  const bool ignored = t == a.ignore_index;
  if (!a.backward) {
    if (tid == 0)
      static_cast<float*>(a.loss)[row] = ignored ? 0.0f : __fmul_rn(-1.0f, __fsub_rn(__fsub_rn(x[t], m), L));
    return;
  }
  const float gO_t = ignored ? 0.0f : __fmul_rn(-1.0f, static_cast<const float*>(a.g)[row]);
  const float G = ignored ? 0.0f : __fadd_rn(0.0f, gO_t);  // +0 + gO_t: a -0 becomes +0, at V = 1 too
  float* d = static_cast<float*>(a.d_logits) + row * a.vocab;
  auto one = [&](int64_t j) {
    const float e = expf(__fsub_rn(__fsub_rn(x[j], m), L));
    const float gO = (!ignored && j == t) ? gO_t : 0.0f;
    const float v = __fmaf_rn(-e, G, gO);
    if (reverse) {
      __stcs(d + j, v);
    } else {
      d[j] = v;
    }
  };
  if (!reverse) {
    for (int64_t j = tid; j < a.vocab; j += threads) one(j);
    return;
  }
  if (tid >= a.vocab) return;
  for (int64_t j = tid + (a.vocab - 1 - tid) / threads * threads; j >= 0; j -= threads) one(j);
}

// --- megatron_eager --------------------------------------------------------------------------

// softmax_warp_forward: one row a warp; lanes l < W add x_{l + it W} (it < IT) from +0, then a
// halving tree over the W lanes (shfl_xor W/2, ..., 1; lanes >= W hold +0 and never mix in).
__global__ void __launch_bounds__(32 * kWarpRowsPerBlock) eager_warp_kernel(CrossEntropy a, int W, int IT) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t{blockIdx.x} * kWarpRowsPerBlock + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const float* x = static_cast<const float*>(a.logits) + row * a.vocab;
  float m = -INFINITY;
  for (int64_t j = lane; j < a.vocab; j += 32) m = fmaxf(m, x[j]);
  m = warp_max(m);
  float s = 0.0f;
  if (lane < W)
    for (int it = 0; it < IT; ++it) {
      const int64_t j = lane + int64_t{it} * W;
      if (j < a.vocab) s = __fadd_rn(s, exp_of(x[j], m));
    }
  for (int h = W / 2; h >= 1; h >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, h));
  s = __shfl_sync(0xffffffffu, s, 0);
  const float L = logf(s);
  row_outputs(a, row, m, L, lane, 32, false);
}

template <Kind kKind>
__global__ void __launch_bounds__(kBlock) eager_block_kernel(CrossEntropy a, int reg_count) {
  __shared__ float shared[33];
  const int t = threadIdx.x;
  const int64_t row = blockIdx.x;
  const int64_t V = a.vocab;
  const float* x = static_cast<const float*>(a.logits) + row * V;
  float m = -INFINITY;
  for (int64_t j = t; j < V; j += kBlock) m = fmaxf(m, x[j]);
  m = block_max(m, shared);
  float acc = 0.0f;
  auto add4 = [&](float4 v) {
    acc = __fadd_rn(acc, exp_of(v.x, m));
    acc = __fadd_rn(acc, exp_of(v.y, m));
    acc = __fadd_rn(acc, exp_of(v.z, m));
    acc = __fadd_rn(acc, exp_of(v.w, m));
  };
  if constexpr (kKind == Kind::kReg) {
    // cunn_SoftMaxForwardReg: thread t holds x_{t + 1024 r}, r < ceil(V / 1024).
    for (int r = 0; r < reg_count; ++r) {
      const int64_t j = t + int64_t{r} * kBlock;
      if (j < V) acc = __fadd_rn(acc, exp_of(x[j], m));
    }
  } else if constexpr (kKind == Kind::kSmem) {
    // cunn_SoftMaxForwardSmem: 4-vectors at 4 (t + 1024 k) (V % 4 == 0: every row 16-byte aligned).
    const float4* v = reinterpret_cast<const float4*>(x);
    for (int64_t o = t; 4 * o < V; o += kBlock) add4(v[o]);
  } else {
    // ilpReduce (ILP = 4): the row's misalignment to 16 bytes in elements; an unaligned head of one
    // element a thread, 4-vectors from the first aligned element, then a scalar tail.
    const int shift = static_cast<int>((reinterpret_cast<uintptr_t>(x) % 16) / 4);
    const float* base = x;
    int64_t size = V;
    if (shift > 0) {
      base = x - shift;
      size = V + shift;
      if (t >= shift && t < size) acc = __fadd_rn(acc, exp_of(base[t], m));
      size -= size < kBlock ? size : kBlock;
      base += kBlock;
    }
    const int64_t last = size % (4 * kBlock);
    const float4* v = reinterpret_cast<const float4*>(base);
    for (int64_t o = t; 4 * o < size - last; o += kBlock) add4(v[o]);
    for (int64_t o = size - last + t; o < size; o += kBlock) acc = __fadd_rn(acc, exp_of(base[o], m));
  }
  const float S = block_sum(acc, shared);
  row_outputs(a, row, m, logf(S), t, kBlock, false);
}

// --- fused -----------------------------------------------------------------------------------

struct Online {
  float m, s;
};

// One element into a lane's (m, s): a new max rescales s by expf(m - x) and adds 1 (one fma); -Inf
// adds nothing; any other x adds expf(x - m). One expf either way.
__device__ __forceinline__ void online_add(Online& o, float x) {
  const bool up = x > o.m;
  const float e = expf(up ? __fsub_rn(o.m, x) : __fsub_rn(x, o.m));
  o.s = up ? __fmaf_rn(o.s, e, 1.0f) : (x == -INFINITY ? o.s : __fadd_rn(o.s, e));
  o.m = up ? x : o.m;
}

// The same, both candidate sums computed and one selected in PTX (m - x is -(x - m) exactly), so
// that an element costs two selects, not the branch the compiler emits for the conditional: fewer
// instructions where the logits come from shared memory (the backward), more registers (the
// forward keeps the branch, within 32 registers).
__device__ __forceinline__ void online_add_selected(Online& o, float x) {
  const bool up = x > o.m;
  const float diff = __fsub_rn(x, o.m);
  const float e = expf(up ? -diff : diff);
  const float rescaled = __fmaf_rn(o.s, e, 1.0f), added = __fadd_rn(o.s, e);
  float s;
  asm("{ .reg .pred up, ninf; .reg .f32 kept;\n\t"
      "setp.gt.f32 up, %1, %2;\n\t"
      "setp.eq.f32 ninf, %1, 0fFF800000;\n\t"
      "selp.f32 kept, %3, %4, ninf;\n\t"
      "selp.f32 %0, %5, kept, up; }"
      : "=f"(s)
      : "f"(x), "f"(o.m), "f"(o.s), "f"(added), "f"(rescaled));
  o.s = s;
  o.m = up ? x : o.m;
}

// The same step on a lane whose running max starts at -FLT_MAX (the floor) instead of -Inf, so that
// no element needs the -Inf test: while every element so far is -Inf or NaN (the true max -Inf, s 0
// or NaN), x - m is -Inf for x = -Inf (e = 0, s + 0 = s), NaN for NaN; x = -FLT_MAX gives e = 1 and
// s + 1, any x above it e = 0 and fma(s, 0, 1): the same 1 (or NaN) as the rescale from -Inf. So s is
// the same at every step and m is max(true m, -FLT_MAX). expf(-|x - m|) has the value of the branch's
// expf (x > m makes x - m > 0; else x - m <= 0 or NaN; at x == m the zero's sign differs and expf(+-0)
// is 1). unfloor() restores the true m after the walk.
constexpr float kFloor = -FLT_MAX;

__device__ __forceinline__ void online_add_floored(Online& o, float x) {
  const float e = expf(-fabsf(__fsub_rn(x, o.m)));
  const float rescaled = __fmaf_rn(o.s, e, 1.0f), added = __fadd_rn(o.s, e);
  float s, m;
  asm("{ .reg .pred up;\n\t"
      "setp.gt.f32 up, %2, %3;\n\t"
      "selp.f32 %0, %4, %5, up;\n\t"
      "selp.f32 %1, %2, %3, up; }"
      : "=f"(s), "=f"(m)
      : "f"(x), "f"(o.m), "f"(rescaled), "f"(added));
  o.s = s;
  o.m = m;
}

// The true m of a floored lane: a lane still at the floor saw only -Inf and NaN (true m -Inf, s 0 or
// NaN) or also -FLT_MAX itself (true m -FLT_MAX, s >= 1 or NaN). Only s NaN leaves both open; then the
// lane's elements (`count` of them, `stride` apart from `at`) are read again, which happens only for
// a lane of NaN beside nothing above -FLT_MAX.
__device__ __forceinline__ void unfloor(Online& o, const float* at, int count, int stride) {
  if (o.m != kFloor || o.s >= 1.0f) return;
  bool floor_seen = false;
  if (o.s != 0.0f)
    for (int i = 0; i < count; ++i) floor_seen = floor_seen || at[i * stride] == kFloor;
  if (!floor_seen) o.m = -INFINITY;
}

__device__ __forceinline__ Online combine(Online a, Online b) {
  if (b.m > a.m) return {b.m, __fmaf_rn(a.s, expf(__fsub_rn(a.m, b.m)), b.s)};
  if (b.m == -INFINITY) return a;
  return {a.m, __fmaf_rn(b.s, expf(__fsub_rn(b.m, a.m)), a.s)};
}

// The same step, both sides selected rather than branched (b.m == -Inf never beats a.m), so that
// arrays of pairs combined in a tree stay in registers.
__device__ __forceinline__ Online combine_selected(Online a, Online b) {
  const bool up = b.m > a.m;
  const Online hi = up ? b : a, lo = up ? a : b;
  const Online r{hi.m, __fmaf_rn(lo.s, expf(__fsub_rn(lo.m, hi.m)), hi.s)};
  return b.m == -INFINITY ? a : r;
}

constexpr int kSegments = kFusedSegments;
constexpr int kSegmentLanes = kFusedSegmentLanes;

// The first levels of a segment's halving tree, from 1024 lanes down to lane 0, where lane t of the
// segment is `lanes` per thread: thread q of `threads` holds lanes q, q + threads, ... in o[0..]. Levels
// whose partner is in the same thread run in registers; then shared memory down to 32 lanes, then warp
// q < 32's shuffles. The result is valid in thread q == 0; every thread of the block calls it (its
// __syncthreads), the threads of one segment being `first`, ..., `first + threads - 1`.
template <int kLanes>
__device__ Online segment_tree(Online (&o)[kLanes], int threads, int first, float* sm_m, float* sm_s) {
#pragma unroll
  for (int h = kLanes / 2; h >= 1; h >>= 1)
#pragma unroll
    for (int u = 0; u < h; ++u) o[u] = combine(o[u], o[u + h]);
  const int p = threadIdx.x, q = p - first;
  sm_m[p] = o[0].m;
  sm_s[p] = o[0].s;
  __syncthreads();
  for (int h = threads / 2; h >= 64; h >>= 1) {
    if (q < h) {
      const Online r = combine({sm_m[p], sm_s[p]}, {sm_m[p + h], sm_s[p + h]});
      sm_m[p] = r.m;
      sm_s[p] = r.s;
    }
    __syncthreads();
  }
  Online r{-INFINITY, 0.0f};
  if (q < 32) {
    r = combine({sm_m[p], sm_s[p]}, {sm_m[p + 32], sm_s[p + 32]});
    for (int h = 16; h >= 1; h >>= 1) {
      const Online other{__shfl_down_sync(0xffffffffu, r.m, h), __shfl_down_sync(0xffffffffu, r.s, h)};
      r = combine(r, other);
    }
  }
  return r;
}

// The 8 segment results' halving tree (h = 4, 2, 1).
__device__ Online segments_tree(Online (&b)[kSegments]) {
#pragma unroll
  for (int h = kSegments / 2; h >= 1; h >>= 1)
#pragma unroll
    for (int r = 0; r < h; ++r) b[r] = combine(b[r], b[r + h]);
  return b[0];
}

// --- fused forward: one row a block, every segment at once ---------------------------------------
// 128 threads a segment; thread q holds lanes q + 128 u (u < 8), so that the tree's levels 512, 256
// and 128 run in registers. It walks them in two passes of 4 lanes (u < 4, then u >= 4: each pass
// issues 4 independent coalesced loads a step), parking the first pass's (m, s) in shared memory:
// 32 registers, so that two blocks share an SM and one's tree overlaps the other's loads. Measured
// on the H200 (N 8192, V 151552): 85.6 % of the copy, against 70.0 % for one pass of 8 lanes (46
// registers, one block an SM).
constexpr int kForwardGroup = kBlock / kSegments;                  // 128
constexpr int kForwardLanes = kSegmentLanes / kForwardGroup;       // 8
constexpr int kForwardPasses = 2;

// A lane's walk over its segment: every 1024-element step, then the partial last one. kLive lanes
// (u0, ..., u0 + kLive - 1) at once.
template <int kLive>
__device__ __forceinline__ void walk_lanes(Online (&w)[kLive], const float* x, int64_t begin, int64_t end, int q, int u0) {
#pragma unroll
  for (int k = 0; k < kLive; ++k) w[k] = {-INFINITY, 0.0f};
  const int64_t full = end > begin ? (end - begin) / kSegmentLanes : 0;  // 1024-element steps every lane takes
  const float* at = x + begin + q + u0 * kForwardGroup;
#pragma unroll 2
  for (int64_t i = 0; i < full; ++i, at += kSegmentLanes) {
    float v[kLive];
#pragma unroll
    for (int k = 0; k < kLive; ++k) v[k] = __ldcs(at + k * kForwardGroup);
#pragma unroll
    for (int k = 0; k < kLive; ++k) online_add(w[k], v[k]);
  }
#pragma unroll
  for (int k = 0; k < kLive; ++k) {  // the partial last step of the last segment
    const int64_t j = begin + full * kSegmentLanes + q + (u0 + k) * kForwardGroup;
    if (j < end) online_add(w[k], __ldcs(x + j));
  }
}

__global__ void __launch_bounds__(kBlock) fused_forward_kernel(CrossEntropy a) {
  constexpr int kLive = kForwardLanes / kForwardPasses;  // lanes a thread walks at once
  __shared__ float sm_m[kBlock];
  __shared__ float sm_s[kBlock];
  __shared__ Online parts[kSegments];
  __shared__ Online parked[kForwardPasses > 1 ? kForwardLanes - kLive : 1][kBlock];  // earlier passes' lanes
  const int p = threadIdx.x, seg = p / kForwardGroup, q = p % kForwardGroup;
  const int64_t row = blockIdx.x, V = a.vocab, S = fused_segment_span(V);
  const float* x = static_cast<const float*>(a.logits) + row * V;
  const int64_t begin = seg * S, end = V < begin + S ? V : begin + S;
  Online o[kForwardLanes];
#pragma unroll
  for (int pass = 0; pass < kForwardPasses; ++pass) {
    Online w[kLive];
    walk_lanes(w, x, begin, end, q, pass * kLive);
#pragma unroll
    for (int k = 0; k < kLive; ++k) {
      if (pass + 1 < kForwardPasses) {
        parked[pass * kLive + k][p] = w[k];
      } else {
        o[pass * kLive + k] = w[k];
      }
    }
  }
#pragma unroll
  for (int u = 0; u < kForwardLanes - kLive; ++u) o[u] = parked[u][p];
  const Online r = segment_tree(o, kForwardGroup, seg * kForwardGroup, sm_m, sm_s);
  if (q == 0) parts[seg] = r;
  __syncthreads();
  if (p != 0) return;
  Online b[kSegments];
#pragma unroll
  for (int k = 0; k < kSegments; ++k) b[k] = parts[k];
  const Online total = segments_tree(b);
  row_outputs(a, row, total.m, logf(total.s), 0, 1, false);
}

// --- fused forward: a cluster a row, a segment a block (ILP 1 and 4, not the default) -------------
// This kernel takes a row with a cluster of 8 blocks, block s walking segment s with thread t as
// lane t (the same elements, in the same order, as the row block's lanes), the segment's 1024 lanes
// through the same halving tree (every level in shared memory and shuffles), block 0 combining the 8
// results from its cluster's shared memory: every bit is the row block's. It was written for the
// rows after the row blocks' last full wave (8 at N = 8192) and measured on the H200: at N 8192 the
// split loses 0.4 points (those rows start as the last wave's first blocks leave, so they never cost
// a wave), and 64 rows in clusters take 41.0 us against 44.4 in row blocks (bench/NOTES.md).
constexpr int kClusterWalkUnroll = 8;  // loads a thread has in flight

__global__ void __cluster_dims__(kSegments, 1, 1) __launch_bounds__(kBlock)
    fused_forward_cluster_kernel(CrossEntropy a, int64_t first_row) {
  __shared__ float sm_m[kBlock];
  __shared__ float sm_s[kBlock];
  __shared__ Online part;
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int t = threadIdx.x, seg = static_cast<int>(cluster.block_rank());
  const int64_t row = first_row + blockIdx.x / kSegments, V = a.vocab, S = fused_segment_span(V);
  const int64_t begin = seg * S, end = V < begin + S ? V : begin + S;
  const int64_t full = end > begin ? (end - begin) / kSegmentLanes : 0;
  const float* at = static_cast<const float*>(a.logits) + row * V + begin + t;  // step i at at + 1024 i
  Online o[1] = {{-INFINITY, 0.0f}};
  int64_t i = 0;
  for (; i + kClusterWalkUnroll <= full; i += kClusterWalkUnroll) {
    float v[kClusterWalkUnroll];
#pragma unroll
    for (int u = 0; u < kClusterWalkUnroll; ++u) v[u] = __ldcs(at + (i + u) * kSegmentLanes);
#pragma unroll
    for (int u = 0; u < kClusterWalkUnroll; ++u) online_add(o[0], v[u]);
  }
  for (; i < full; ++i) online_add(o[0], __ldcs(at + i * kSegmentLanes));
  if (begin + full * kSegmentLanes + t < end) online_add(o[0], __ldcs(at + full * kSegmentLanes));
  const Online r = segment_tree(o, kBlock, 0, sm_m, sm_s);
  if (t == 0) part = r;
  cluster.sync();  // every segment's result of the row is written
  if (seg == 0 && t == 0) {
    Online b[kSegments];
#pragma unroll
    for (int k = 0; k < kSegments; ++k) b[k] = *cluster.map_shared_rank(&part, k);
    const Online total = segments_tree(b);
    row_outputs(a, row, total.m, logf(total.s), 0, 1, false);
  }
  cluster.sync();  // no block leaves while block 0 may still read its result
}

// The fused forward's launches. The ILP knob: 0 (the default) and 2, row blocks for every row; 1, row
// blocks for every full wave of kFusedForwardWaveRows rows and clusters for the rest (all of N below
// one wave); 4, clusters for every row.
void launch_fused_forward(const CrossEntropy& a, cudaStream_t stream) {
  int64_t blocks = a.rows;
  if (a.ilp == 1) blocks = a.rows - a.rows % kFusedForwardWaveRows;
  if (a.ilp == 4) blocks = 0;
  if (blocks > 0) {
    fused_forward_kernel<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(a);
    check_launch("cross_entropy fused forward", a.stream);
  }
  if (blocks < a.rows) {
    fused_forward_cluster_kernel<<<static_cast<unsigned>((a.rows - blocks) * kSegments), kBlock, 0, stream>>>(a, blocks);
    check_launch("cross_entropy fused forward (clusters)", a.stream);
  }
}

// --- fused backward: one row a cluster, a segment a block, rows in turn --------------------------
// Block s of a cluster owns segment s of every row the cluster takes (rows c, c + clusters, ...).
// This kernel's threads load the logits: it runs where the bulk-copy kernel below cannot (V % 4 != 0,
// or a segment wider than shared memory holds).
// 256 threads a segment; thread q holds the 4 consecutive lanes 4q, ..., 4q + 3, so that a step of
// its walk is one 4-vector (where V % 4 == 0 and the rows are 16-byte aligned; 4 scalars elsewhere).
// Buffered (S floats fit in shared memory), the walk also stores what it loads into one buffer, and
// the output pass reads it there: the logits come from HBM once. Two blocks share an SM (at most
// 100 KB of buffer each), so that one block's tree, cluster barrier and output pass overlap the
// other's loads. The segment results travel through distributed shared memory, double-buffered by
// row parity so that one cluster barrier a row suffices. Unbuffered (a wider V), the output pass
// reads global memory again.
constexpr int kBackwardLanes = 4;                                  // consecutive lanes a thread
constexpr int kBackwardThreads = kSegmentLanes / kBackwardLanes;   // 256
constexpr int kBackwardUnroll = 8;                                 // steps whose loads are in flight at once

template <bool kVector>
__device__ __forceinline__ void load_step(float (&v)[kBackwardLanes], const float* at) {
  if constexpr (kVector) {
    const float4 w = __ldcs(reinterpret_cast<const float4*>(at));
    v[0] = w.x, v[1] = w.y, v[2] = w.z, v[3] = w.w;
  } else {
#pragma unroll
    for (int j = 0; j < kBackwardLanes; ++j) v[j] = __ldcs(at + j);
  }
}

// A segment tree's last levels: warp 0's shuffles over its 32 threads (h = 16 kL, ..., kL), then the
// levels inside a thread (h = kL / 2, ..., 1), whose result is valid in thread 0.
template <int kL>
__device__ __forceinline__ void warp_lanes_levels(Online (&o)[kL]) {
#pragma unroll
  for (int d = 16; d >= 1; d >>= 1)
#pragma unroll
    for (int j = 0; j < kL; ++j) {
      const Online other{__shfl_down_sync(0xffffffffu, o[j].m, d), __shfl_down_sync(0xffffffffu, o[j].s, d)};
      o[j] = combine(o[j], other);
    }
}

template <int kL>
__device__ __forceinline__ Online thread_lanes_levels(Online (&o)[kL]) {
#pragma unroll
  for (int h = kL / 2; h >= 1; h >>= 1)
#pragma unroll
    for (int j = 0; j < h; ++j) o[j] = combine(o[j], o[j + h]);
  return o[0];
}

// A segment's halving tree over its 1024 lanes, thread q of kThreads holding the kL consecutive
// lanes kL q + j: the levels whose partner is another warp (h >= 32 kL: thread q + h / kL, the same
// j) in warp 0 after one block barrier, lane q < 32 combining the values of threads q + 32 k
// (k < kThreads / 32) in registers in the same halving order; then warp 0's shuffles, then the levels
// inside thread 0 (h = kL / 2, ..., 1). Valid in thread 0; every thread calls it.
template <int kL, int kThreads>
__device__ Online lanes_tree(Online (&o)[kL], float (*sm_m)[kThreads], float (*sm_s)[kThreads]) {
  static_assert(kL * kThreads == kSegmentLanes && kThreads >= 64);
  constexpr int kWarps = kThreads / 32;
  const int q = threadIdx.x;
#pragma unroll
  for (int j = 0; j < kL; ++j) sm_m[j][q] = o[j].m, sm_s[j][q] = o[j].s;
  __syncthreads();
  if (q < 32) {
#pragma unroll
    for (int j = 0; j < kL; ++j) {
      Online b[kWarps / 2];  // the first level as the values are read: half of them live at once
#pragma unroll
      for (int k = 0; k < kWarps / 2; ++k) {
        const int far = q + 32 * (k + kWarps / 2);
        b[k] = combine_selected({sm_m[j][q + 32 * k], sm_s[j][q + 32 * k]}, {sm_m[j][far], sm_s[j][far]});
      }
#pragma unroll
      for (int h = kWarps / 4; h >= 1; h >>= 1)
#pragma unroll
        for (int k = 0; k < h; ++k) b[k] = combine_selected(b[k], b[k + h]);
      o[j] = b[0];
    }
    warp_lanes_levels(o);
  }
  return thread_lanes_levels(o);
}

// The row's m and L from the 8 segments' results, part[] of each block of the cluster: their
// halving tree (h = 4, 2, 1) in warp 0's lanes 0..7 (only warp 0 calls it); lane 0 writes m and
// logf(s).
__device__ __forceinline__ void cluster_segments_tree(const cooperative_groups::cluster_group& cluster, Online* part,
                                                      float& row_m, float& row_L) {
  const int q = threadIdx.x;
  Online b = q < kSegments ? *cluster.map_shared_rank(part, q) : Online{-INFINITY, 0.0f};
#pragma unroll
  for (int h = kSegments / 2; h >= 1; h >>= 1) {
    const Online other{__shfl_down_sync(0xffffffffu, b.m, h), __shfl_down_sync(0xffffffffu, b.s, h)};
    if (q < h) b = combine(b, other);
  }
  if (q == 0) row_m = b.m, row_L = logf(b.s);
}

// One row's gradient: d_j = fma(-expf((x_j - m) - L), G, [j == t] gO_t), gO_t = -g (0 where ignored),
// G = +0 + gO_t. label_at is the label's offset from the caller's first element (-1 where ignored).
struct RowGrad {
  float m, L, gO_t, G;
  int64_t label_at;
};

__device__ __forceinline__ RowGrad row_grad(int64_t label, float g, int64_t ignore_index, float m, float L,
                                            int64_t first) {
  const bool ignored = label == ignore_index;
  const float gO_t = ignored ? 0.0f : __fmul_rn(-1.0f, g);
  const float G = ignored ? 0.0f : __fadd_rn(0.0f, gO_t);  // +0 + gO_t: a -0 becomes +0, at V = 1 too
  return {m, L, gO_t, G, ignored ? -1 : label - first};
}

__device__ __forceinline__ RowGrad row_grad(const CrossEntropy& a, int64_t row, float m, float L, int64_t first) {
  return row_grad(static_cast<const int64_t*>(a.labels)[row], static_cast<const float*>(a.g)[row], a.ignore_index, m,
                  L, first);
}

__device__ __forceinline__ float grad_at(const RowGrad& r, float x, int64_t at) {
  const float e = expf(__fsub_rn(__fsub_rn(x, r.m), r.L));
  return __fmaf_rn(-e, r.G, r.label_at == at ? r.gO_t : 0.0f);
}

template <bool kBuffered, bool kVector>
__global__ void __cluster_dims__(kSegments, 1, 1) __launch_bounds__(kBackwardThreads, 2)
    fused_backward_kernel(CrossEntropy a) {
  extern __shared__ float4 buffer[];  // kBuffered: S / 4 4-vectors, step i of thread q at q + 256 i
  __shared__ float sm_m[kBackwardLanes][kBackwardThreads];
  __shared__ float sm_s[kBackwardLanes][kBackwardThreads];
  __shared__ Online part[2];
  __shared__ float row_m, row_L;
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int q = threadIdx.x, first_lane = kBackwardLanes * q;
  const int seg = static_cast<int>(cluster.block_rank());
  const int64_t V = a.vocab, S = fused_segment_span(V), N = a.rows;
  const int64_t begin = seg * S, size = V - begin < S ? (V > begin ? V - begin : 0) : S;
  const int64_t steps = size / kSegmentLanes;                           // steps every lane takes
  const bool in_last = first_lane < size - steps * kSegmentLanes;       // this thread's lanes in the partial step
  const int64_t walked = steps + (in_last ? 1 : 0);
  const int64_t first_row = blockIdx.x / kSegments, clusters = gridDim.x / kSegments;
  int parity = 0;
  for (int64_t row = first_row; row < N; row += clusters, parity ^= 1) {
    const float* x = static_cast<const float*>(a.logits) + row * V + begin + first_lane;  // step i at x + 1024 i
    Online o[kBackwardLanes];
#pragma unroll
    for (int j = 0; j < kBackwardLanes; ++j) o[j] = {-INFINITY, 0.0f};
    auto add = [&](const float (&v)[kBackwardLanes], int64_t i) {
      if constexpr (kBuffered) buffer[q + i * kBackwardThreads] = make_float4(v[0], v[1], v[2], v[3]);
#pragma unroll
      for (int j = 0; j < kBackwardLanes; ++j) online_add(o[j], v[j]);
    };
    int64_t i = 0;
    for (; i + kBackwardUnroll <= steps; i += kBackwardUnroll) {
      float v[kBackwardUnroll][kBackwardLanes];
#pragma unroll
      for (int u = 0; u < kBackwardUnroll; ++u) load_step<kVector>(v[u], x + (i + u) * kSegmentLanes);
#pragma unroll
      for (int u = 0; u < kBackwardUnroll; ++u) add(v[u], i + u);
    }
    for (; i < steps; ++i) {
      float v[kBackwardLanes];
      load_step<kVector>(v, x + i * kSegmentLanes);
      add(v, i);
    }
    if (in_last) {  // the partial step: the vector path's lanes are all in (V and S multiples of 4) or all out
      const int64_t rest = size - steps * kSegmentLanes - first_lane;
      float v[kBackwardLanes];
      if (kVector || rest >= kBackwardLanes) {
        load_step<kVector>(v, x + steps * kSegmentLanes);
      } else {
#pragma unroll
        for (int j = 0; j < kBackwardLanes; ++j) v[j] = j < rest ? __ldcs(x + steps * kSegmentLanes + j) : 0.0f;
      }
      if constexpr (kBuffered) buffer[q + steps * kBackwardThreads] = make_float4(v[0], v[1], v[2], v[3]);
#pragma unroll
      for (int j = 0; j < kBackwardLanes; ++j)
        if (j < rest) online_add(o[j], v[j]);
    }
    const Online r = lanes_tree<kBackwardLanes, kBackwardThreads>(o, sm_m, sm_s);
    if (q == 0) part[parity] = r;
    cluster.sync();  // every segment's result of this row is written
    if (q < 32) cluster_segments_tree(cluster, &part[parity], row_m, row_L);
    __syncthreads();
    const RowGrad rg = row_grad(a, row, row_m, row_L, begin + first_lane);
    float* d = static_cast<float*>(a.d_logits) + row * V + begin + first_lane;
    const int64_t rest = size - steps * kSegmentLanes - first_lane;      // lanes of the partial step
    for (int64_t k = 0; k < walked; ++k) {
      float v[kBackwardLanes];
      if constexpr (kBuffered) {
        const float4 w = buffer[q + k * kBackwardThreads];
        v[0] = w.x, v[1] = w.y, v[2] = w.z, v[3] = w.w;
      } else if (kVector || k < steps || rest >= kBackwardLanes) {
        load_step<kVector>(v, x + k * kSegmentLanes);
      } else {
#pragma unroll
        for (int j = 0; j < kBackwardLanes; ++j) v[j] = j < rest ? x[k * kSegmentLanes + j] : 0.0f;
      }
      float out[kBackwardLanes];
#pragma unroll
      for (int j = 0; j < kBackwardLanes; ++j) out[j] = grad_at(rg, v[j], k * kSegmentLanes + j);
      float* at = d + k * kSegmentLanes;
      if (kVector) {
        __stcs(reinterpret_cast<float4*>(at), make_float4(out[0], out[1], out[2], out[3]));
      } else {
#pragma unroll
        for (int j = 0; j < kBackwardLanes; ++j)
          if (k < steps || j < rest) __stcs(at + j, out[j]);
      }
    }
  }
  cluster.sync();  // no block leaves while another may still read its part
}

// --- fused backward through the bulk copy engine: V % 4 == 0, a segment on chip ------------------
// The same rows, clusters and trees as above, but no thread loads a logit from global memory: thread
// 0 hands the row's segment (size * 4 bytes, 16-byte aligned as V % 4 == 0) to the bulk copy engine
// (cp.async.bulk into shared memory) in kChunks runs, each completing on its own mbarrier, and hands
// each run back for the next row as soon as the output pass has read it, so that the next row
// arrives during this one's output pass and the other block's arithmetic (two blocks an SM). Thread
// q of kThreads holds the kL = 1024 / kThreads consecutive lanes kL q + j, reading them from shared
// memory as one vector. The row's label and g are read before the walk; the label's element is
// written again by its thread after the output pass, so that the pass itself compares nothing.
// The segments' results travel by st.async into every block's slots, each block waiting on its own
// barrier for the 8 it reads (no cluster barrier a row), and the segment tree's cross-warp levels run
// in warp 0 behind one block barrier. The walk's running max starts at -FLT_MAX (kFloored;
// online_add_floored), so that an element costs no -Inf test, and each lane's true max is restored
// after the walk. Measured on the H200 (bench/NOTES.md): 75 % of the copy at N 8192, V 151552
// (before the floor), against 45 % for the kernel whose threads load the logits.

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Thread 0: the barrier expects `bytes` and the copy engine brings them (no copy for an empty
// segment; the arrival alone completes the phase).
__device__ __forceinline__ void bulk_load(float* dst, const float* src, uint32_t bytes, uint64_t* barrier) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
  if (bytes > 0)
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     shared_address(dst)),
                 "l"(src), "r"(bytes), "r"(shared_address(barrier))
                 : "memory");
}

__device__ __forceinline__ void wait_parity(uint64_t* barrier, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(shared_address(barrier)), "r"(parity)
        : "memory");
  } while (!done);
}

// The segments' results of a row, pushed to every block of the cluster: lane s < 8 of warp 0 (r valid
// in lane 0) stores the block's (m, s) into slot[seg] of block s with st.async, which completes 8
// bytes of that block's barrier `got`; lane 0 tells its own barrier to expect the 8 results (64
// bytes). No cluster barrier, so no thread waits for the others' stores to global memory to drain
// (a release fence would): a block waits only for the 8 results it reads.
__device__ __forceinline__ void push_segment(Online r, int seg, Online* slot, uint64_t* got) {
  const int lane = threadIdx.x & 31;
  r.m = __shfl_sync(0xffffffffu, r.m, 0);
  r.s = __shfl_sync(0xffffffffu, r.s, 0);
  if (lane < kSegments) {
    uint32_t to, bar;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(to) : "r"(shared_address(slot + seg)), "r"(lane));
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(bar) : "r"(shared_address(got)), "r"(lane));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(to),
                 "f"(r.m), "f"(r.s), "r"(bar)
                 : "memory");
  }
  if (lane == 0)
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(got)),
                 "r"(static_cast<uint32_t>(kSegments * sizeof(Online)))
                 : "memory");
}

// The row's m and L from the 8 results in slot[] (arrived: the caller waited on their barrier): their
// halving tree (h = 4, 2, 1) in warp 0's lanes 0..7; lane 0 writes m and logf(s).
__device__ __forceinline__ void local_segments_tree(const Online* slot, float& row_m, float& row_L) {
  const int q = threadIdx.x;
  Online b = q < kSegments ? slot[q] : Online{-INFINITY, 0.0f};
#pragma unroll
  for (int h = kSegments / 2; h >= 1; h >>= 1) {
    const Online other{__shfl_down_sync(0xffffffffu, b.m, h), __shfl_down_sync(0xffffffffu, b.s, h)};
    if (q < h) b = combine(b, other);
  }
  if (q == 0) row_m = b.m, row_L = logf(b.s);
}

template <int kL>
__device__ __forceinline__ void shared_lanes(float (&v)[kL], const float* at) {
  if constexpr (kL == 4) {
    const float4 w = *reinterpret_cast<const float4*>(at);
    v[0] = w.x, v[1] = w.y, v[2] = w.z, v[3] = w.w;
  } else if constexpr (kL == 2) {
    const float2 w = *reinterpret_cast<const float2*>(at);
    v[0] = w.x, v[1] = w.y;
  } else {
    v[0] = *at;
  }
}

template <int kL>
__device__ __forceinline__ void store_lanes(float* at, const float (&v)[kL]) {
  if constexpr (kL == 4) {
    __stcs(reinterpret_cast<float4*>(at), make_float4(v[0], v[1], v[2], v[3]));
  } else if constexpr (kL == 2) {
    __stcs(reinterpret_cast<float2*>(at), make_float2(v[0], v[1]));
  } else {
    __stcs(at, v[0]);
  }
}

template <int kThreads, int kChunks, bool kFloored>
__global__ void __cluster_dims__(kSegments, 1, 1) __launch_bounds__(kThreads, 2)
    fused_backward_bulk_kernel(CrossEntropy a) {
  constexpr int kL = kSegmentLanes / kThreads;
  extern __shared__ float4 staged[];  // the segment: S floats
  __shared__ float sm_m[kL][kThreads];
  __shared__ float sm_s[kL][kThreads];
  __shared__ uint64_t full[kChunks];
  __shared__ Online slot[2][kSegments];  // the row's 8 segment results, by row parity
  __shared__ uint64_t got[2];            // their arrival, by row parity
  __shared__ float row_m, row_L;
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int q = threadIdx.x, first_lane = kL * q;
  const int seg = static_cast<int>(cluster.block_rank());
  const int64_t V = a.vocab, S = fused_segment_span(V), N = a.rows;
  const int64_t begin = seg * S, size = V - begin < S ? (V > begin ? V - begin : 0) : S;
  // Every lane of a step is in or out of the partial last one (size % 4 == 0, kL divides 4).
  const int walked = static_cast<int>(size / kSegmentLanes) + (first_lane < size % kSegmentLanes ? 1 : 0);
  // The buffer is filled and released in kChunks runs of `per` steps, each completing on its own
  // barrier: once every thread has read a run in the output pass, thread 0 hands it to the copy
  // engine for the next row, so that the next row arrives during this one's output pass.
  const int steps = static_cast<int>((size + kSegmentLanes - 1) / kSegmentLanes);
  const int per = (steps + kChunks - 1) / kChunks;
  const int64_t first_row = blockIdx.x / kSegments, clusters = gridDim.x / kSegments;
  const float* logits = static_cast<const float*>(a.logits);
  float* const buffer0 = reinterpret_cast<float*>(staged);
  auto load = [&](int c, int64_t row) {  // run c of `row`'s segment
    const int64_t from = int64_t{c} * per * kSegmentLanes;
    const int64_t to = ::min(from + int64_t{per} * kSegmentLanes, size);
    bulk_load(buffer0 + from, logits + row * V + begin + from,
              static_cast<uint32_t>(to > from ? (to - from) * sizeof(float) : 0), &full[c]);
  };
  if (q == 0) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&full[c])) : "memory");
    }
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&got[p])) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    if (first_row < N)
#pragma unroll
      for (int c = 0; c < kChunks; ++c) load(c, first_row);
  }
  cluster.sync();  // every block's barriers are initialized before another block's results arrive
  const float* buffer = buffer0 + first_lane;  // step i at buffer + 1024 i
  int64_t it = 0;
  for (int64_t row = first_row; row < N; row += clusters, ++it) {
    const int parity = static_cast<int>(it & 1);
    // The row's label and g, asked for now so that their latency passes during the walk.
    const int64_t label = static_cast<const int64_t*>(a.labels)[row];
    const float g = static_cast<const float*>(a.g)[row];
    Online o[kL];
#pragma unroll
    for (int j = 0; j < kL; ++j) o[j] = {kFloored ? kFloor : -INFINITY, 0.0f};
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      wait_parity(&full[c], static_cast<uint32_t>(parity));
      const int end = ::min(walked, (c + 1) * per);
      const float* from = buffer + c * per * kSegmentLanes;  // advanced a step at a time: no 64-bit index math
#pragma unroll 4
      for (int i = c * per; i < end; ++i, from += kSegmentLanes) {
        float v[kL];
        shared_lanes<kL>(v, from);
#pragma unroll
        for (int j = 0; j < kL; ++j) {
          if constexpr (kFloored) online_add_floored(o[j], v[j]);
          else online_add_selected(o[j], v[j]);
        }
      }
    }
    if constexpr (kFloored)
#pragma unroll
      for (int j = 0; j < kL; ++j) unfloor(o[j], buffer + j, walked, kSegmentLanes);
    const Online r = lanes_tree<kL, kThreads>(o, sm_m, sm_s);
    if (q < 32) {
      // slot[parity] is free: the other blocks push this row's results only after they received
      // this block's result of the row before, which it sent after reading the row before that.
      push_segment(r, seg, slot[parity], &got[parity]);
      wait_parity(&got[parity], static_cast<uint32_t>((it >> 1) & 1));
      local_segments_tree(slot[parity], row_m, row_L);
    }
    __syncthreads();
    // Every element as if off the label (gO = 0); the thread holding the label's lane writes it
    // again afterwards, with gO_t (its own later store: the value that stays). Its logit is read
    // before the buffer is handed back.
    const RowGrad rg = row_grad(label, g, a.ignore_index, row_m, row_L, begin);
    const bool holds_label = rg.label_at >= 0 && rg.label_at < size && rg.label_at % kSegmentLanes / kL == q;
    const float x_label = holds_label ? buffer0[rg.label_at] : 0.0f;
    float* d = static_cast<float*>(a.d_logits) + row * V + begin + first_lane;
    const int64_t next = row + clusters;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int end = ::min(walked, (c + 1) * per);
      const float* from = buffer + c * per * kSegmentLanes;
      float* to = d + c * per * kSegmentLanes;
#pragma unroll 4
      for (int i = c * per; i < end; ++i, from += kSegmentLanes, to += kSegmentLanes) {
        float v[kL];
        shared_lanes<kL>(v, from);
#pragma unroll
        for (int j = 0; j < kL; ++j) v[j] = __fmaf_rn(-expf(__fsub_rn(__fsub_rn(v[j], rg.m), rg.L)), rg.G, 0.0f);
        store_lanes<kL>(to, v);
      }
      __syncthreads();  // run c is read: the copy engine may refill it
      if (q == 0 && next < N) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        load(c, next);
      }
    }
    if (holds_label) d[rg.label_at - first_lane] = grad_at(rg, x_label, rg.label_at);
  }
  cluster.sync();  // no block leaves while its results may still be on their way to another
}

// Clusters of a fused backward kernel that are resident at once: its persistent grid. Asked once per
// device, kernel and shared-memory size (the occupancy query costs more than a launch).
template <typename Kernel>
int resident_clusters(Kernel kernel, int device, int threads, size_t shared_bytes) {
  static std::mutex mutex;
  static std::map<std::tuple<int, const void*, size_t>, int> known;
  const auto key = std::make_tuple(device, reinterpret_cast<const void*>(kernel), shared_bytes);
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(kSegments * 1024, 1, 1);
  config.blockDim = dim3(threads, 1, 1);
  config.dynamicSmemBytes = shared_bytes;
  int clusters = 0;
  check_cuda(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config),
             "cross_entropy fused backward: cudaOccupancyMaxActiveClusters");
  if (clusters < 1) throw CudaError(cudaErrorInvalidConfiguration, "cross_entropy fused backward: no cluster of 8 fits");
  known[key] = clusters;
  return clusters;
}

// A persistent launch of kKernel: as many clusters as are resident, at most one a row.
template <auto kKernel>
void launch_persistent(int threads, size_t shared_bytes, const CrossEntropy& a, cudaStream_t stream) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cross_entropy fused backward: cudaGetDevice");
  raise_shared_limit<kKernel>(shared_bytes, "cross_entropy fused backward: cudaFuncSetAttribute");
  const int64_t clusters = std::min<int64_t>(a.rows, resident_clusters(kKernel, device, threads, shared_bytes));
  kKernel<<<static_cast<unsigned>(clusters * kSegments), threads, shared_bytes, stream>>>(a);
  check_launch("cross_entropy fused backward", a.stream);
}

template <bool kBuffered, bool kVector>
void launch_fused_backward(const CrossEntropy& a, cudaStream_t stream) {
  const size_t shared_bytes = kBuffered ? static_cast<size_t>(fused_segment_span(a.vocab)) * sizeof(float) : 0;
  launch_persistent<fused_backward_kernel<kBuffered, kVector>>(kBackwardThreads, shared_bytes, a, stream);
}

template <int kThreads, int kChunks, bool kFloored = true>
void launch_fused_backward_bulk(const CrossEntropy& a, cudaStream_t stream) {
  const size_t shared_bytes = static_cast<size_t>(fused_segment_span(a.vocab)) * sizeof(float);
  launch_persistent<fused_backward_bulk_kernel<kThreads, kChunks, kFloored>>(kThreads, shared_bytes, a, stream);
}

// The fused backward's kernels. The bulk-copy kernel where V % 4 == 0, the rows are 16-byte aligned
// and a segment fits on chip; else the kernel whose threads load the logits (4-vectors where
// aligned). The ILP knob picks the bulk kernel's shape for the benchmarks (bench/NOTES.md): the
// default, 512 threads refilling their buffer in 4 runs; 1, the same in 8 runs; 2, the default's
// shape with the -Inf test an element (the walk without the floor); 4, 256 threads, 4 runs.
void launch_fused_backward(const CrossEntropy& a, cudaStream_t stream) {
  const bool buffered = fused_segment_span(a.vocab) <= kFusedBufferedMaxSpan;
  const bool vector = a.vocab % 4 == 0 && reinterpret_cast<uintptr_t>(a.logits) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(a.d_logits) % 16 == 0;
  if (buffered && vector) {
    if (a.ilp == 1) {
      launch_fused_backward_bulk<512, 8>(a, stream);
    } else if (a.ilp == 2) {
      launch_fused_backward_bulk<512, 4, false>(a, stream);
    } else if (a.ilp == 4) {
      launch_fused_backward_bulk<256, 4>(a, stream);
    } else {
      launch_fused_backward_bulk<512, 4>(a, stream);
    }
  } else if (buffered) {
    launch_fused_backward<true, false>(a, stream);
  } else {
    vector ? launch_fused_backward<false, true>(a, stream) : launch_fused_backward<false, false>(a, stream);
  }
}

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

void launch_cross_entropy(const CrossEntropy& a) {
  if (a.rows == 0) return;
  const auto stream = static_cast<cudaStream_t>(a.stream);
  const auto rows = static_cast<unsigned>(a.rows);
  if (a.order == CrossEntropyOrder::kFused) {
    if (!a.backward) {
      launch_fused_forward(a, stream);
    } else {
      launch_fused_backward(a, stream);
    }
    return;
  }
  const int64_t V = a.vocab;
  if (V <= kWarpMaxV) {
    const int64_t P = next_pow2(V);
    const int W = static_cast<int>(P < 32 ? P : 32);
    const int IT = static_cast<int>(P / W);
    const auto blocks = static_cast<unsigned>((a.rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock);
    eager_warp_kernel<<<blocks, 32 * kWarpRowsPerBlock, 0, stream>>>(a, W, IT);
    check_launch("cross_entropy megatron_eager (warp)", a.stream);
    return;
  }
  const int64_t reg_count = (V + kBlock - 1) / kBlock;
  const bool aligned = reinterpret_cast<uintptr_t>(a.logits) % 16 == 0;
  if (reg_count <= kRegMaxCount) {
    eager_block_kernel<Kind::kReg><<<rows, kBlock, 0, stream>>>(a, static_cast<int>(reg_count));
  } else if (V % 4 == 0 && V < kSmemLimitV && aligned) {
    eager_block_kernel<Kind::kSmem><<<rows, kBlock, 0, stream>>>(a, 0);
  } else {
    eager_block_kernel<Kind::kIlp><<<rows, kBlock, 0, stream>>>(a, 0);
  }
  check_launch("cross_entropy megatron_eager (block)", a.stream);
}

}  // namespace bitparity::gpu
