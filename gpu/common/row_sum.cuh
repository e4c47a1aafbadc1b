// Rule 7, last-dim reduce, on the device: the combination of a row's lane accumulators into the
// row's sum in torch.sum's order (gpu/common/row_sum.h has the plan that fixes the lanes).
//
// Rule 7 assigns the row's values to L lanes: in the vectorized plan lane l owns the N-element
// groups N * (l + L * it) (N = 4 for fp32 rows, 8 for 16-bit ones: one 16-byte load), one
// accumulator per position in the group; otherwise lane l owns the elements l + L * it,
// accumulator it % 4. Lane values ((acc0 + acc1) + acc2) + ... then meet in a halving tree. A
// kernel may give a thread V consecutive lanes (V = 2 lets a thread of 16-bit data with fp32 sums
// read one 16-byte packet, two groups, per iteration); G = L / V threads then share a row.
// Tree strides of at least V are warp shuffles (G <= 32: several rows per block) or shared memory
// (G > 32: one row per block); stride 1 of V = 2 is in-thread.
#pragma once

#include <cuda_runtime.h>

#include "gpu/common/row_sum.h"

namespace bitparity::gpu::device {

// The row's sum, at thread t == 0 of the row's `group` threads; acc[q][i] is accumulator i of the
// thread's lane V * t + q (N accumulators a lane: 4, or 8 for a vectorized row of 16-bit values,
// combined left to right), and `lanes` the plan's L. Every thread of the block calls it (the
// shared-memory tree synchronizes the block); `tree` is L floats of shared memory when
// group > 32, unused otherwise.
template <int V, int N>
__device__ __forceinline__ float rule7_row_total(const float (&acc)[V][N], int lanes, int group, int t,
                                                 float* tree) {
  const int L = lanes;
  float v[V];
#pragma unroll
  for (int q = 0; q < V; ++q) {
    v[q] = acc[q][0];
#pragma unroll
    for (int i = 1; i < N; ++i) v[q] = __fadd_rn(v[q], acc[q][i]);
  }

  if (group <= kWarpLanes) {
    for (int stride = L / 2; stride >= 1; stride /= 2) {
      if (stride >= V) {
#pragma unroll
        for (int q = 0; q < V; ++q) v[q] = __fadd_rn(v[q], __shfl_down_sync(0xffffffffu, v[q], stride / V, group));
      } else {
        v[0] = __fadd_rn(v[0], v[1 % V]);  // V == 2, stride 1: the thread's own second lane
      }
    }
  } else {
#pragma unroll
    for (int q = 0; q < V; ++q) tree[V * t + q] = v[q];
    __syncthreads();
    for (int stride = L / 2; stride >= 1; stride /= 2) {
#pragma unroll
      for (int q = 0; q < V; ++q) {
        const int lane = V * t + q;
        if (lane < stride) tree[lane] = __fadd_rn(tree[lane], tree[lane + stride]);
      }
      __syncthreads();
    }
    v[0] = tree[0];
  }
  return v[0];
}

}  // namespace bitparity::gpu::device
