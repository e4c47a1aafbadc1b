#include "gpu/common/row_sum.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace bitparity::gpu {
namespace {

// P2(n): the largest power of two <= n, capped at 512 (rule 7).
int64_t pow2_floor_capped(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n && p * 2 <= kReduceMaxThreads) p *= 2;
  return p;
}

}  // namespace

RowSumPlan rule7_row_sum_plan(int64_t width, int64_t rows) {
  if (width > kRuleMaxRowWidth)
    throw RejectError("unmodelled", "rule 7 (torch.sum, last dim) is modelled for rows up to " +
                                        std::to_string(kRuleMaxRowWidth) + " wide; got " + std::to_string(width));
  const bool vectorized = width >= kRuleVectorizeFrom;
  if (vectorized && width % kRuleVector != 0)
    throw RejectError("unmodelled", "rule 7 (torch.sum, last dim) is not modelled for rows of width >= " +
                                        std::to_string(kRuleVectorizeFrom) + " that are not a multiple of " +
                                        std::to_string(kRuleVector) + "; got " + std::to_string(width));
  const int64_t dim0 = vectorized ? width / kRuleVector : width;
  const int64_t first_lanes = std::min<int64_t>(pow2_floor_capped(dim0), kWarpLanes);
  const int64_t height = std::min(pow2_floor_capped(std::max<int64_t>(rows, 1)), kReduceMaxThreads / first_lanes);
  const int64_t lanes = std::min(pow2_floor_capped(dim0), kReduceMaxThreads / height);
  return {vectorized, static_cast<int>(lanes)};
}

}  // namespace bitparity::gpu
