// The cross_entropy kernels (spec OP-8): eager F.cross_entropy's orders (the softmax kernel PyTorch
// 2.11 picks for the V, with its threads' orders and reduction trees) and the fused contract's
// one-pass online max and sum. gpu/cross_entropy_kernels.h states the arithmetic.
//
// One row a block (1024 threads) for the eager block orders, one row a warp for the eager warp
// order, one row a cluster of 8 blocks (8192 lanes) for the fused order. The eager kernels read a
// row twice (its max, then its sum; the backward a third time for the outputs), as PyTorch's do;
// the fused forward reads each logit once, and the fused backward twice: spreading a row over a
// cluster keeps the rows in flight (2 blocks an SM, 75 KB of a GLM-4.5 row each: about 20 MB) inside
// L2, so the second pass, walking each lane's elements from the last, reads L2 and not HBM, and its
// stores stream past L2 (__stcs) so as not to evict the rows still to be read.

// Every rounding is an explicit __f*_rn intrinsic, so that nvcc's contraction (--fmad=true) fuses
// nothing the contracts round twice; expf and logf are libdevice's (no fast math), as in ATen.
#include "gpu/cross_entropy_kernels.h"

#include <cmath>
#include <cstdint>

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

constexpr int kFusedBlocks = 8;                        // a row's cluster (ref::kFusedBlocks)
constexpr int64_t kFusedLanes = int64_t{kFusedBlocks} * kBlock;  // 8192 (ref::kFusedLanes)
constexpr int kFusedUnroll = 4;  // loads a lane issues before it folds them in

// Lane l = rank * 1024 + t of the row's cluster walks x_l, x_{l+8192}, ...; each block's halving tree
// of (m, s); then every block reads the 8 block results from the cluster's shared memory and takes
// the same halving tree over them (so all 8 hold the row's m and S, bit for bit the same).
__global__ void __cluster_dims__(kFusedBlocks, 1, 1) __launch_bounds__(kBlock) fused_kernel(CrossEntropy a) {
  __shared__ float shared_m[kBlock];
  __shared__ float shared_s[kBlock];
  __shared__ Online part;       // this block's (m, s), read by the cluster's blocks
  __shared__ float row_m, row_L;
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int t = threadIdx.x;
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t lane = int64_t{rank} * kBlock + t;
  const int64_t row = blockIdx.x / kFusedBlocks;
  const int64_t V = a.vocab;
  const float* x = static_cast<const float*>(a.logits) + row * V;
  Online o{-INFINITY, 0.0f};
  int64_t j = lane;
  for (; j + (kFusedUnroll - 1) * kFusedLanes < V; j += kFusedUnroll * kFusedLanes) {
    float v[kFusedUnroll];
#pragma unroll
    for (int u = 0; u < kFusedUnroll; ++u) v[u] = a.backward ? x[j + u * kFusedLanes] : __ldcs(x + j + u * kFusedLanes);
#pragma unroll
    for (int u = 0; u < kFusedUnroll; ++u) online_add(o, v[u]);
  }
  for (; j < V; j += kFusedLanes) online_add(o, a.backward ? x[j] : __ldcs(x + j));
  // The block's halving tree of (m, s) over 1024 lanes: shared memory down to 32 lanes, then warp 0.
  shared_m[t] = o.m;
  shared_s[t] = o.s;
  __syncthreads();
  for (int h = kBlock / 2; h >= 32; h >>= 1) {
    if (t < h) {
      const Online r = combine({shared_m[t], shared_s[t]}, {shared_m[t + h], shared_s[t + h]});
      shared_m[t] = r.m;
      shared_s[t] = r.s;
    }
    __syncthreads();
  }
  if (t < 32) {
    Online r{shared_m[t], shared_s[t]};
    for (int h = 16; h >= 1; h >>= 1) {
      const Online other{__shfl_down_sync(0xffffffffu, r.m, h), __shfl_down_sync(0xffffffffu, r.s, h)};
      r = combine(r, other);
    }
    if (t == 0) part = r;
  }
  cluster.sync();  // every block's part is written
  if (t == 0) {
    Online b[kFusedBlocks];
#pragma unroll
    for (int r = 0; r < kFusedBlocks; ++r) b[r] = *cluster.map_shared_rank(&part, r);
#pragma unroll
    for (int h = kFusedBlocks / 2; h >= 1; h >>= 1)
#pragma unroll
      for (int r = 0; r < h; ++r) b[r] = combine(b[r], b[r + h]);
    row_m = b[0].m;
    row_L = logf(b[0].s);
  }
  cluster.sync();  // row_m and row_L are set, and no block leaves while another may read its part
  if (!a.backward && rank != 0) return;  // the loss is one element, written by rank 0's thread 0
  row_outputs(a, row, row_m, row_L, static_cast<int>(lane), static_cast<int>(kFusedLanes), true);
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
    if (a.rows > INT32_MAX / kFusedBlocks)
      throw CudaError(cudaErrorInvalidValue, "cross_entropy fused: more rows than one launch takes");
    fused_kernel<<<rows * kFusedBlocks, kBlock, 0, stream>>>(a);
    check_launch("cross_entropy fused", a.stream);
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
