#include "gpu/common/row_sum.h"

#include <algorithm>
#include <stdexcept>
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

RowSumPlan rule7_row_sum_plan(int64_t width, int64_t rows, int element_bytes) {
  if (element_bytes != 2 && element_bytes != 4)
    throw std::invalid_argument("rule 7 plans rows of 2- or 4-byte elements; got " + std::to_string(element_bytes));
  const int64_t max_width = element_bytes == 2 ? kRuleMaxRowWidth16 : kRuleMaxRowWidth;
  if (width > max_width)
    throw RejectError("unmodelled", "rule 7 (torch.sum, last dim) is modelled for rows of " +
                                        std::to_string(element_bytes) + "-byte elements up to " +
                                        std::to_string(max_width) + " wide; got " + std::to_string(width));
  const int vector = element_bytes == 2 ? kRuleVector16 : kRuleVector;
  const bool vectorized = width >= kRuleVectorizeFrom;
  if (vectorized && width % vector != 0)
    throw RejectError("unmodelled", "rule 7 (torch.sum, last dim) is not modelled for rows of width >= " +
                                        std::to_string(kRuleVectorizeFrom) + " that are not a multiple of " +
                                        std::to_string(vector) + " (" + std::to_string(element_bytes) +
                                        "-byte elements); got " + std::to_string(width));
  const int64_t dim0 = vectorized ? width / vector : width;
  const int64_t first_lanes = std::min<int64_t>(pow2_floor_capped(dim0), kWarpLanes);
  const int64_t height = std::min(pow2_floor_capped(std::max<int64_t>(rows, 1)), kReduceMaxThreads / first_lanes);
  const int64_t lanes = std::min(pow2_floor_capped(dim0), kReduceMaxThreads / height);
  return {vectorized, static_cast<int>(lanes), vector};
}

}  // namespace bitparity::gpu
