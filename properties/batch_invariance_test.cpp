// Batch invariance: a row's outputs depend on that row's values only. Refilling every other row
// with fresh random values leaves the row's outputs bit-identical, for every output and contract.
// Cutting the row out on its own (a batch of one) leaves the elementwise outputs (out, d_y)
// bit-identical, but not the per-row sums: under megatron_eager d_scale is torch.sum's last-dim
// reduce (spec rule 7), whose lane count, and so whose summation order, is set by the number of
// rows in the tensor (height = min(P2(rows), 512 / lanes), then lanes = min(P2(width), 512 /
// height)). A one-row batch sums a 1408-wide row over 256 lanes where a 32-row batch uses 32, so
// d_scale is only invariant to the other rows' values, not to their number.
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/gen.h"
#include "properties/harness.h"
#include "properties/rows.h"

namespace bitparity::props {
namespace {

// Outputs that reduce over a row in an order that depends on the row count (rule 7).
bool row_count_dependent(const std::string& output) { return output == "d_scale"; }

bool row_wise(const Target& t) { return !row_inputs(op_info(t.op), t.direction).empty(); }

class BatchInvariance : public testing::TestWithParam<Target> {};

// A case of at least two rows and one of its rows, with the case's classes as tags.
struct RowCase {
  Case c;
  int64_t rows, row;
};
RowCase draw_row_case(const Target& target) {
  const OpInfo& op = op_info(target.op);
  const Case c = *op.generate(target.direction);
  const int64_t rows = case_rows(c);
  RC_PRE(rows >= 2);
  RC_TAG(gen::rows_class(rows), op.classes(c).shape_class);
  return {c, rows, *rc::gen::inRange<int64_t>(0, rows)};
}

TEST_P(BatchInvariance, OtherRowsValuesDoNotChangeARow) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const RowCase rc = draw_row_case(target);
    const Case refilled = *refill_other_rows(rc.c, rc.row);
    const Outcome a = run_outcome(target.impl, rc.c), b = run_outcome(target.impl, refilled);
    RC_ASSERT(a.rejected() == b.rejected());
    if (a.rejected()) return RC_ASSERT(a.reject_class == b.reject_class);
    for (const auto& [name, tensor] : *a.outputs)
      RC_ASSERT(bit_identical(tensor_rows(tensor, rc.row, 1), tensor_rows(b.outputs->at(name), rc.row, 1)));
  });
}

TEST_P(BatchInvariance, ARowAloneKeepsItsElementwiseOutputs) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const RowCase rc = draw_row_case(target);
    const Outcome whole = run_outcome(target.impl, rc.c), alone = run_outcome(target.impl, take_rows(rc.c, rc.row, 1));
    // A layout the reduction model does not cover at this row count may be covered at another.
    if (whole.rejected() || alone.rejected()) {
      RC_ASSERT(whole.reject_class == alone.reject_class || whole.reject_class == "unmodelled" ||
                alone.reject_class == "unmodelled");
      return;
    }
    for (const auto& [name, tensor] : *whole.outputs) {
      const bool same = bit_identical(tensor_rows(tensor, rc.row, 1), alone.outputs->at(name));
      if (row_count_dependent(name)) {
        RC_CLASSIFY(!same, name + " changes with the row count");
        continue;
      }
      RC_ASSERT(same);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Rows, BatchInvariance, testing::ValuesIn(targets_where(row_wise)), target_name);

}  // namespace
}  // namespace bitparity::props
