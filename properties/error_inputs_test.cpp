// Error inputs (OpInfo::error_inputs): every implementation of every contract an error input names
// rejects it with the error class it declares and a message that names the field, so a user
// learns which tensor or attribute to fix. (A contract an error input does not name may refuse it
// too, with its own message: an op may list one case once per contract family.)
#include <algorithm>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "corpus/reproducer.h"
#include "properties/harness.h"

namespace bitparity::props {
namespace {

const std::set<std::string> kRejectClasses = {"shape", "dtype", "attr", "unmodelled"};

std::vector<ErrorInput> error_inputs_of(const Target& target) {
  const OpInfo& op = op_info(target.op);
  return op.error_inputs ? op.error_inputs(target.direction) : std::vector<ErrorInput>{};
}

bool names_contract(const ErrorInput& e, const std::string& contract) {
  return e.contracts.empty() || std::find(e.contracts.begin(), e.contracts.end(), contract) != e.contracts.end();
}

bool has_error_input(const Target& target) {
  for (const ErrorInput& e : error_inputs_of(target))
    if (names_contract(e, target.contract())) return true;
  return false;
}

class ErrorInputSpecs : public testing::TestWithParam<Target> {};

// Each op direction lists error inputs, each with a unique name, a known class, a field, and only
// contracts the op has; validate alone already refuses each, with its class, under the contracts
// it names.
TEST_P(ErrorInputSpecs, EveryOpDirectionListsWellFormedErrorInputs) {
  const Target target = GetParam();
  const OpInfo& op = op_info(target.op);
  const std::vector<ErrorInput> inputs = error_inputs_of(target);
  ASSERT_FALSE(inputs.empty()) << target.name() << " lists no error inputs";
  std::set<std::string> names;
  for (const ErrorInput& e : inputs) {
    EXPECT_TRUE(names.insert(e.name).second) << target.name() << ": error input " << e.name << " listed twice";
    EXPECT_EQ(kRejectClasses.count(e.error_class), 1u) << e.name << ": unknown class " << e.error_class;
    EXPECT_FALSE(e.field.empty()) << e.name;
    EXPECT_EQ(e.c.op, op.name) << e.name;
    EXPECT_EQ(e.c.direction, target.direction) << e.name;
    for (const std::string& contract : e.contracts) EXPECT_TRUE(op.has_contract(contract)) << e.name << ": " << contract;
    for (const ContractInfo& contract : op.contracts) {
      if (!names_contract(e, contract.name)) continue;
      const Metas metas = output_metas({target.op, target.direction, "ref:" + contract.name}, e.c);
      EXPECT_EQ(metas.reject_class, e.error_class) << e.name << ": validate of " << contract.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ErrorInputs, ErrorInputSpecs, testing::ValuesIn(op_directions()), target_name);

class ErrorInputs : public testing::TestWithParam<Target> {};

TEST_P(ErrorInputs, EachIsRejectedWithItsClassAndAMessageNamingTheField) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  int checked = 0;
  for (const ErrorInput& e : error_inputs_of(target)) {
    if (!names_contract(e, target.contract())) continue;
    ++checked;
    const Outcome outcome = run(target, e.c);
    std::string problem;
    if (!outcome.rejected())
      problem = "accepts it (" + describe(outcome) + ")";
    else if (outcome.reject_class != e.error_class)
      problem = "rejects it as " + outcome.reject_class + ", not " + e.error_class + ": " + outcome.message;
    else if (outcome.message.find(e.field) == std::string::npos)
      problem = "rejects it with a message that does not name " + e.field + ": " + outcome.message;
    if (problem.empty()) continue;
    const std::string message = target.name() + " error input " + e.name + ": " + target.impl + " " + problem;
    ADD_FAILURE() << message << "\n" << corpus::write_reproducer(e.c, "error_mismatch", std::nullopt, message);
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(ErrorInputs, ErrorInputs, testing::ValuesIn(targets_where(has_error_input)), target_name);

}  // namespace
}  // namespace bitparity::props
