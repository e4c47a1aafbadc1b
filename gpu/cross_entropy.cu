// The cross_entropy kernels (spec OP-8): eager F.cross_entropy's orders (the softmax kernel PyTorch
// 2.11 picks for the V, with its threads' orders and reduction trees) and the fused contract's
// one-pass online max and sum. gpu/cross_entropy_kernels.h states the arithmetic.
//
// One row a block (1024 threads) for the eager block orders, one row a warp for the eager warp
// order. The eager kernels read a row twice (its max, then its sum; the backward a third time for
// the outputs), as PyTorch's do. The fused forward reads each logit once, one row a block walking all
// eight segments at once; the fused backward also reads each logit once from HBM: a cluster of 8
// blocks takes a row, each block keeping its segment in shared memory for the output pass, two
// blocks an SM.

// Every rounding is an explicit __f*_rn intrinsic, so that nvcc's contraction (--fmad=true) fuses
// nothing the contracts round twice; expf and logf are libdevice's (no fast math), as in ATen.
#include "gpu/cross_entropy_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

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

__device__ __forceinline__ Online combine(Online a, Online b) {
  if (b.m > a.m) return {b.m, __fmaf_rn(a.s, expf(__fsub_rn(a.m, b.m)), b.s)};
  if (b.m == -INFINITY) return a;
  return {a.m, __fmaf_rn(b.s, expf(__fsub_rn(b.m, a.m)), a.s)};
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

// --- fused backward: one row a cluster, a segment a block, rows in turn --------------------------
// Block s of a cluster owns segment s of every row the cluster takes (rows c, c + clusters, ...).
// 256 threads a segment; thread q holds the 4 consecutive lanes 4q, ..., 4q + 3, so that a step of
// its walk is one 4-vector (where V % 4 == 0 and the rows are 16-byte aligned; 4 scalars elsewhere).
// Buffered (S floats fit in shared memory), the walk also stores what it loads into one buffer, and
// the output pass reads it there: the logits come from HBM once. Two blocks share an SM (77.8 KB of
// buffer each at V 151552), so that one block's tree, cluster barrier and output pass overlap the
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

// A segment's halving tree over lanes 4q + j: the levels whose partner is another thread (h >= 4:
// thread q + h / 4, the same j) through shared memory down to 32 threads, then warp 0's shuffles, then
// the two levels inside thread 0 (h = 2, 1). Valid in thread 0; every thread calls it.
__device__ Online backward_segment_tree(Online (&o)[kBackwardLanes], float (*sm_m)[kBackwardThreads],
                                        float (*sm_s)[kBackwardThreads]) {
  const int q = threadIdx.x;
#pragma unroll
  for (int j = 0; j < kBackwardLanes; ++j) sm_m[j][q] = o[j].m, sm_s[j][q] = o[j].s;
  __syncthreads();
#pragma unroll
  for (int d = kBackwardThreads / 2; d >= 32; d >>= 1) {
    if (q < d) {
#pragma unroll
      for (int j = 0; j < kBackwardLanes; ++j) {
        o[j] = combine(o[j], {sm_m[j][q + d], sm_s[j][q + d]});
        if (d > 32) sm_m[j][q] = o[j].m, sm_s[j][q] = o[j].s;
      }
    }
    if (d > 32) __syncthreads();
  }
  if (q < 32) {
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1)
#pragma unroll
      for (int j = 0; j < kBackwardLanes; ++j) {
        const Online other{__shfl_down_sync(0xffffffffu, o[j].m, d), __shfl_down_sync(0xffffffffu, o[j].s, d)};
        o[j] = combine(o[j], other);
      }
  }
  o[0] = combine(o[0], o[2]);
  o[1] = combine(o[1], o[3]);
  return combine(o[0], o[1]);
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
    const Online r = backward_segment_tree(o, sm_m, sm_s);
    if (q == 0) part[parity] = r;
    cluster.sync();  // every segment's result of this row is written
    if (q < 32) {    // the 8 segments' halving tree (h = 4, 2, 1) in warp 0's lanes 0..7
      Online b = q < kSegments ? *cluster.map_shared_rank(&part[parity], q) : Online{-INFINITY, 0.0f};
#pragma unroll
      for (int h = kSegments / 2; h >= 1; h >>= 1) {
        const Online other{__shfl_down_sync(0xffffffffu, b.m, h), __shfl_down_sync(0xffffffffu, b.s, h)};
        if (q < h) b = combine(b, other);
      }
      if (q == 0) row_m = b.m, row_L = logf(b.s);
    }
    __syncthreads();
    const float m = row_m, L = row_L;
    const int64_t label = static_cast<const int64_t*>(a.labels)[row];
    const bool ignored = label == a.ignore_index;
    const float gO_t = ignored ? 0.0f : __fmul_rn(-1.0f, static_cast<const float*>(a.g)[row]);
    const float G = ignored ? 0.0f : __fadd_rn(0.0f, gO_t);  // +0 + gO_t: a -0 becomes +0, at V = 1 too
    float* d = static_cast<float*>(a.d_logits) + row * V + begin + first_lane;
    const int64_t label_at = ignored ? -1 : label - begin - first_lane;  // the label's offset from d
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
      for (int j = 0; j < kBackwardLanes; ++j) {
        const float e = expf(__fsub_rn(__fsub_rn(v[j], m), L));
        const float gO = label_at == k * kSegmentLanes + j ? gO_t : 0.0f;
        out[j] = __fmaf_rn(-e, G, gO);
      }
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

// Clusters of the backward that are resident at once: the persistent grid. Asked once per device,
// kernel and shared-memory size (the occupancy query costs more than a launch).
template <bool kBuffered, bool kVector>
int resident_clusters(size_t shared_bytes) {
  static std::mutex mutex;
  static std::map<std::pair<int, size_t>, int> known;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cross_entropy fused backward: cudaGetDevice");
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find({device, shared_bytes}); it != known.end()) return it->second;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(kSegments * 1024, 1, 1);
  config.blockDim = dim3(kBackwardThreads, 1, 1);
  config.dynamicSmemBytes = shared_bytes;
  int clusters = 0;
  check_cuda(cudaOccupancyMaxActiveClusters(&clusters, fused_backward_kernel<kBuffered, kVector>, &config),
             "cross_entropy fused backward: cudaOccupancyMaxActiveClusters");
  if (clusters < 1) throw CudaError(cudaErrorInvalidConfiguration, "cross_entropy fused backward: no cluster of 8 fits");
  known[{device, shared_bytes}] = clusters;
  return clusters;
}

template <bool kBuffered, bool kVector>
void launch_fused_backward(const CrossEntropy& a, cudaStream_t stream) {
  const size_t shared_bytes = kBuffered ? static_cast<size_t>(fused_segment_span(a.vocab)) * sizeof(float) : 0;
  {
    // The shared-memory limit is the kernel's, for the whole process, and both the occupancy query
    // and the launch read it: set, asked and launched under one lock, so that another thread's
    // smaller vocabulary cannot lower it in between (the launch would fail with
    // cudaErrorInvalidValue, the query find no cluster). The launch reads it when enqueued.
    static std::mutex launch_mutex;
    const std::lock_guard<std::mutex> lock(launch_mutex);
    check_cuda(cudaFuncSetAttribute(fused_backward_kernel<kBuffered, kVector>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)),
               "cross_entropy fused backward: cudaFuncSetAttribute");
    const int64_t clusters = std::min<int64_t>(a.rows, resident_clusters<kBuffered, kVector>(shared_bytes));
    fused_backward_kernel<kBuffered, kVector>
        <<<static_cast<unsigned>(clusters * kSegments), kBackwardThreads, shared_bytes, stream>>>(a);
  }
  check_launch("cross_entropy fused backward", a.stream);
}

template <bool kBuffered>
void launch_fused_backward(const CrossEntropy& a, cudaStream_t stream) {
  // 4-vectors where every row and every segment starts on a 16-byte boundary.
  const bool vector = a.vocab % 4 == 0 && reinterpret_cast<uintptr_t>(a.logits) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(a.d_logits) % 16 == 0;
  if (vector) {
    launch_fused_backward<kBuffered, true>(a, stream);
  } else {
    launch_fused_backward<kBuffered, false>(a, stream);
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
      fused_forward_kernel<<<rows, kBlock, 0, stream>>>(a);
      check_launch("cross_entropy fused forward", a.stream);
    } else if (fused_segment_span(a.vocab) <= kFusedBufferedMaxSpan) {
      launch_fused_backward<true>(a, stream);
    } else {
      launch_fused_backward<false>(a, stream);
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
