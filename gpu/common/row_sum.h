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
inline constexpr int kRuleVector = 4;          // accumulators of an fp32 lane, and of an unvectorized one
inline constexpr int kRuleVector16 = 8;        // accumulators of a lane of 16-bit values (16-byte loads)
inline constexpr int64_t kRuleVectorizeFrom = 128;  // rows at least this wide load vectors
// The widest row the rule models: beyond it ATen splits a row across warps (not modelled); rows of
// 16-bit values are verified up to 4096.
inline constexpr int64_t kRuleMaxRowWidth = 8192;
inline constexpr int64_t kRuleMaxRowWidth16 = 4096;

// Rule 7, last-dim row sum: the lane count, whether lanes load vectors, and the vector's elements
// (a lane's accumulators).
struct RowSumPlan {
  bool vectorized = false;
  int lanes = 1;
  int vector = kRuleVector;
};

// The plan for a row of `width` values (width >= 1) of a tensor of `element_bytes`-byte elements (4:
// fp32; 2: bf16 or fp16, summed with fp32 accumulation) with `rows` rows:
//   vector = 16 / element_bytes; dim0 = width / vector when vectorized (width >= 128), else width;
//   lanes = min(P2(dim0), 32); height = min(P2(rows), 512 / lanes); lanes = min(P2(dim0), 512 / height)
// with P2(n) the largest power of two <= n, capped at 512. Throws RejectError("unmodelled") for
// the layouts the rule does not cover: width >= 128 and not a multiple of the vector, width above
// 8192 (4096 for 16-bit elements).
RowSumPlan rule7_row_sum_plan(int64_t width, int64_t rows, int element_bytes = 4);

}  // namespace bitparity::gpu
