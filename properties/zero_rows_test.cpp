// Zero rows: a case cut to zero rows (every rows-first input emptied, the rest kept) returns the
// outputs that validate declares for the contract, every rows-first one empty, with the declared
// shapes. It is rejected only where the full case is, for the same reason (a shape, dtype or
// attribute that zero rows do not change), or where the contract refuses zero rows by design: its
// validate refuses the empty case and the op lists that refusal among its error inputs.
#include <algorithm>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "properties/harness.h"
#include "properties/rows.h"

namespace bitparity::props {
namespace {

// Whether the op lists, for the target's contract, a zero-row error input of this class.
bool declares_zero_row_refusal(const Target& target, const std::string& error_class) {
  const OpInfo& op = op_info(target.op);
  if (!op.error_inputs) return false;
  for (const ErrorInput& e : op.error_inputs(target.direction)) {
    const bool listed = e.contracts.empty() || std::count(e.contracts.begin(), e.contracts.end(), target.contract());
    if (!listed || e.error_class != error_class) continue;
    try {
      if (case_rows(e.c) == 0) return true;
    } catch (const std::logic_error&) {
      // an error input without row inputs is about something else
    }
  }
  return false;
}

class ZeroRows : public testing::TestWithParam<Target> {};

TEST_P(ZeroRows, ZeroRowsGiveEmptyOutputsOfTheDeclaredShapes) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const OpInfo& op = op_info(target.op);
  check_property([&] {
    const Case full = *op.generate(target.direction);
    const Case empty = take_rows(full, 0, 0);
    RC_TAG(op.classes(empty).shape_class);
    reproduce_with(empty, "shape_mismatch");
    const Outcome outcome = run(target, empty);
    const Metas want = output_metas(target, empty);
    if (outcome.rejected()) {
      const Outcome whole = run(target, full);
      if (whole.rejected() && whole.reject_class == outcome.reject_class) return;
      RC_ASSERT(!want.metas.has_value());  // refused by the implementation, not by validate
      RC_ASSERT(want.reject_class == outcome.reject_class);
      if (!declares_zero_row_refusal(target, outcome.reject_class))
        RC_FAIL(target.name() + " refuses zero rows (" + outcome.message +
                ") and the op lists no zero-row error input of class " + outcome.reject_class + " for it");
      RC_CLASSIFY(true, "the contract refuses zero rows (a declared error input)");
      return;
    }
    RC_ASSERT(want.metas.has_value());
    RC_ASSERT(outcome.outputs->size() == want.metas->size());
    for (const TensorSpec& spec : op.output_specs(target.direction)) {
      auto meta = want.metas->find(spec.name);
      if (meta == want.metas->end()) continue;
      const Tensor& t = outcome.outputs->at(spec.name);
      RC_ASSERT(t.shape() == meta->second.shape);
      RC_ASSERT(t.dtype() == meta->second.dtype);
      if (spec.rows_first) {
        RC_ASSERT(t.numel() == 0);
        RC_ASSERT(!t.shape().empty() && t.dim(0) == 0);
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Rows, ZeroRows, testing::ValuesIn(targets_where(is_row_wise)), target_name);

}  // namespace
}  // namespace bitparity::props
