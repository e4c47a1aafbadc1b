// The toy op's own spec: its validation, output metas and the row-count dependence of y_sum, which
// the generic harnesses rely on being there.
#include <gtest/gtest.h>

#include "core/error.h"
#include "testing/toy_op.h"

namespace bitparity::testing {
namespace {

const ContractInfo& contract(const OpInfo& op, const std::string& name) { return *op.contract(name); }

TEST(ToyOp, ValidateReturnsEachContractsOutputMetas) {
  const OpInfo op = toy_op();
  const Case c = toy_case(2, 3, {});
  EXPECT_EQ(op.validate(c, contract(op, "exact")).at("y"), (TensorMeta{{2, 3}, DType::kBF16}));
  EXPECT_EQ(op.validate(c, contract(op, "flat")).at("y"), (TensorMeta{{6}, DType::kBF16}));
  EXPECT_EQ(op.validate(c, contract(op, "strict")).at("y_sum"), (TensorMeta{{2}, DType::kBF16}));
  EXPECT_NO_THROW(op.validate(toy_case(0, 3, {}), contract(op, "exact")));
  EXPECT_THROW(op.validate(toy_case(0, 3, {}), contract(op, "strict")), RejectError);
}

TEST(ToyOp, EveryErrorInputIsRejectedByValidateWithItsClass) {
  const OpInfo op = toy_op();
  for (const ErrorInput& e : op.error_inputs(Direction::kForward))
    for (const ContractInfo& c : op.contracts) {
      const bool listed = e.contracts.empty() || std::count(e.contracts.begin(), e.contracts.end(), c.name);
      try {
        op.validate(e.c, c);
        EXPECT_FALSE(listed) << e.name << " accepted under " << c.name;
      } catch (const RejectError& r) {
        EXPECT_TRUE(listed) << e.name << " rejected under " << c.name << ": " << r.what();
        EXPECT_EQ(r.error_class(), e.error_class) << e.name;
      }
    }
}

// Row [1000, 1, 1, 1, 1]: from the first column every partial sum rounds back to 1000 (bf16's
// spacing there is 4); from the last the ones add up to 4 first. Alone (one row, odd) the row sums
// from the first column; beside a second row (even) from the last.
TEST(ToyOp, RowSumsDependOnTheRowCount) {
  const Registry registry = make_fake_registry();
  const std::vector<float> row = {1000, 1, 1, 1, 1};
  std::vector<float> two_rows = row;
  two_rows.insert(two_rows.end(), row.begin(), row.end());
  const TensorMap alone = run_impl(registry, "ref:exact", toy_case(1, 5, row));
  const TensorMap pair = run_impl(registry, "ref:exact", toy_case(2, 5, two_rows));
  EXPECT_EQ(alone.at("y_sum").f32(0), 1000.0f);
  EXPECT_EQ(pair.at("y_sum").f32(0), 1004.0f);
  EXPECT_EQ(pair.at("y_sum").f32(1), 1004.0f);
}

TEST(ToyOp, ReferenceInputsAreAcceptedAndNotAllZero) {
  const OpInfo op = toy_op();
  const std::vector<ReferenceInput> inputs = op.reference_inputs(Direction::kForward);
  ASSERT_FALSE(inputs.empty());
  for (const ReferenceInput& in : inputs) {
    const Case c = in.make();
    EXPECT_NO_THROW(op.validate(c, contract(op, "sloppy"))) << in.name;
    bool nonzero = false;
    for (int64_t i = 0; i < c.input("x")->numel(); ++i) nonzero = nonzero || c.input("x")->f32(i) != 0;
    EXPECT_TRUE(nonzero) << in.name;
  }
}

}  // namespace
}  // namespace bitparity::testing
