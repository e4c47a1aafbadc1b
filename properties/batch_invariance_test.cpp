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

// Row `r` of every output.
Outcome row_outcome(const Outcome& outcome, int64_t r) {
  Outcome row = outcome;
  if (row.outputs)
    for (auto& [name, tensor] : *row.outputs) tensor = tensor_rows(tensor, r, 1);
  return row;
}

// The outcome without the outputs whose summation order depends on the row count.
Outcome elementwise_outcome(Outcome outcome) {
  if (outcome.outputs) std::erase_if(*outcome.outputs, [](const auto& kv) { return row_count_dependent(kv.first); });
  return outcome;
}

TEST_P(BatchInvariance, OtherRowsValuesDoNotChangeARow) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const RowCase rc = draw_row_case(target);
    const Case refilled = *refill_other_rows(rc.c, rc.row);
    const Outcome a = run_outcome(target.impl, rc.c), b = run_outcome(target.impl, refilled);
    const auto diff = difference(row_outcome(a, rc.row), row_outcome(b, rc.row),
                                 target.name() + " row " + std::to_string(rc.row) + " with the other rows refilled");
    if (diff) RC_FAIL(*diff);
  });
}

TEST_P(BatchInvariance, ARowAloneKeepsItsElementwiseOutputs) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const RowCase rc = draw_row_case(target);
    const Outcome whole = row_outcome(run_outcome(target.impl, rc.c), rc.row);
    const Outcome alone = run_outcome(target.impl, take_rows(rc.c, rc.row, 1));
    const auto diff = difference(elementwise_outcome(whole), elementwise_outcome(alone),
                                 target.name() + " row " + std::to_string(rc.row) + " of " +
                                     std::to_string(rc.rows) + " vs that row alone");
    if (diff) RC_FAIL(*diff);
    if (whole.rejected()) return;
    for (const auto& [name, tensor] : *whole.outputs)
      if (row_count_dependent(name))
        RC_CLASSIFY(!bit_identical(tensor, alone.outputs->at(name)), name + " changes with the row count");
  });
}

INSTANTIATE_TEST_SUITE_P(Rows, BatchInvariance, testing::ValuesIn(targets_where(is_row_wise)), target_name);

}  // namespace
}  // namespace bitparity::props
