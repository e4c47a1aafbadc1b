// Rule 7 of the spec, last-dim reduce: the order in which torch.sum on CUDA (ATen's Reduce.cuh)
// adds the fp32 values of a contiguous row. A plan fixes how many lanes share a row and whether
// each lane loads 4-element vectors; the device half (gpu/common/row_sum.cuh) combines the lanes'
// accumulators in the rule's halving tree. The row count is part of the order: it sets the lanes.
// Written from the spec for the CUDA backend alone: a bug in the reference's plan must show in
// every cuda-vs-reference diff. Host code, no CUDA types.
#pragma once

#include <cstdint>

namespace bitparity::gpu {

// Rule 7's constants of ATen's Reduce.cuh launch configuration.
inline constexpr int kReduceMaxThreads = 512;  // threads of one reduction block; P2 caps at it
inline constexpr int kWarpLanes = 32;
inline constexpr int kRuleVector = 4;          // elements per vectorized load of the fp32 row
inline constexpr int64_t kRuleVectorizeFrom = 128;  // rows at least this wide load vectors
// The widest row the rule models: beyond it ATen splits a row across warps (not modelled).
inline constexpr int64_t kRuleMaxRowWidth = 8192;

// Rule 7, last-dim row sum: the lane count and whether lanes load 4-element vectors.
struct RowSumPlan {
  bool vectorized = false;
  int lanes = 1;
};

// The plan for a row of `width` fp32 values (width >= 1) in a tensor of `rows` rows:
//   dim0 = width / 4 when vectorized (width >= 128), else width;
//   lanes = min(P2(dim0), 32); height = min(P2(rows), 512 / lanes); lanes = min(P2(dim0), 512 / height)
// with P2(n) the largest power of two <= n, capped at 512. Throws RejectError("unmodelled") for
// the layouts the rule does not cover: width >= 128 and not a multiple of 4, width above 8192.
RowSumPlan rule7_row_sum_plan(int64_t width, int64_t rows);

}  // namespace bitparity::gpu
