// The case generators: every generated case is well formed for every implementation (it is
// rejected with a RejectError or yields exactly the outputs that the op's validate declares for the
// contract, with their shapes and dtypes, and the same bits when run again), and every edge class
// the op requires (OpInfo::required_tags) is actually generated, as are the cases of one addend an
// output that an order-of-arrival contract is held to bit for bit (ContractInfo::arrival_order_free).
#include <algorithm>
#include <iostream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/error.h"
#include "properties/harness.h"

namespace bitparity::props {
namespace {

std::set<std::string> declared_outputs(const OpInfo& op, Direction d) {
  std::set<std::string> names;
  for (const TensorSpec& spec : op.output_specs(d)) names.insert(spec.name);
  return names;
}

// The error classes a RejectError may carry (core/error.h; "unmodelled" for a layout the
// reference's reduction model does not cover, reference/numerics.h).
const std::set<std::string> kRejectClasses = {"shape", "dtype", "attr", "unmodelled"};

class GeneratedCases : public testing::TestWithParam<Target> {};

// Every implementation either rejects the case with a RejectError of a known class and a message,
// or returns exactly the outputs that validate declares for its contract, with those shapes and
// dtypes; the declared outputs are among the op's output specs, every required one included. It
// does either deterministically. Cases are tagged with their signature classes (shape class,
// value class); GeneratorCoverage below prints the histogram of every edge-class tag.
TEST_P(GeneratedCases, EveryImplementationRejectsOrReturnsTheDeclaredOutputs) {
  const Target target = GetParam();
  const OpInfo& op = op_info(target.op);
  const std::set<std::string> specs = declared_outputs(op, target.direction);
  for (const std::string& impl : harness_registry().impls_of(op.name))
    if (const auto why = unavailable(impl)) std::cout << "not checked here: " << impl << ": " << *why << "\n";
  check_property([&] {
    const Case c = *op.generate(target.direction);
    const CaseClasses classes = op.classes(c);
    RC_TAG(classes.shape_class.empty() ? std::string("plain") : classes.shape_class, classes.value_class);
    for (const std::string& impl : harness_registry().impls_of(op.name)) {
      if (unavailable(impl)) continue;
      const Target t{target.op, target.direction, impl};
      reproduce_with(c, "nondeterminism");
      const Outcome outcome = run(t, c);
      if (const auto again = difference(outcome, run(t, c), op.name + " " + impl + " run twice"))
        RC_FAIL("nondeterminism: " + *again);
      reproduce_with(c, "shape_mismatch");
      const Metas want = output_metas(t, c);
      if (outcome.rejected()) {
        RC_CLASSIFY(true, impl + " rejects (" + outcome.reject_class + ")");
        RC_ASSERT(kRejectClasses.count(outcome.reject_class) == 1u);
        RC_ASSERT(!outcome.message.empty());
        // A case that validate refuses is refused with validate's class, before any arithmetic.
        if (!want.metas) RC_ASSERT(outcome.reject_class == want.reject_class);
        continue;
      }
      RC_ASSERT(want.metas.has_value());  // an implementation ran on a case that validate refuses
      std::set<std::string> names, metas;
      for (const auto& [name, tensor] : *outcome.outputs) names.insert(name);
      for (const auto& [name, meta] : *want.metas) metas.insert(name);
      RC_ASSERT(names == metas);
      RC_ASSERT(std::includes(specs.begin(), specs.end(), metas.begin(), metas.end()));
      for (const TensorSpec& spec : op.output_specs(target.direction))
        if (!spec.optional) RC_ASSERT(metas.count(spec.name) == 1u);
      for (const auto& [name, tensor] : *outcome.outputs) {
        const TensorMeta& meta = want.metas->at(name);
        if (tensor.shape() != meta.shape || tensor.dtype() != meta.dtype)
          RC_FAIL(impl + " output " + name + " is " + std::string(dtype_name(tensor.dtype())) +
                  shape_string(tensor.shape()) + "; validate declares " + std::string(dtype_name(meta.dtype)) +
                  shape_string(meta.shape));
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Classes, GeneratedCases, testing::ValuesIn(op_directions()), target_name);

// --- the edge classes every generator must reach ----------------------------------------------

constexpr int kQuickCoverageCases = 400;  // label cpu
constexpr int kDeepCoverageCases = 3000;  // label slow (BITPARITY_DEEP=1)
constexpr int kMaxSize = 100;  // RapidCheck sizes 0..100, as a property run uses
constexpr uint64_t kSeed = 0x5eed'b17'9a21;

class GeneratorCoverage : public testing::TestWithParam<Target> {};

// style.md: show that edge classes (zero rows, M < 17, 1-D scale, clamp <= 0, NaN/Inf/-0/
// subnormal values) are actually generated. The op names them (OpInfo::required_tags); the tags
// are those of OpInfo::classes.
TEST_P(GeneratorCoverage, EveryRequiredClassOccurs) {
  const Target target = GetParam();
  const OpInfo& op = op_info(target.op);
  ASSERT_TRUE(op.required_tags) << op.name << " declares no required tags";
  const std::vector<std::string> required = op.required_tags(target.direction);
  ASSERT_FALSE(required.empty()) << target.name() << ": no required tags, so no edge class is shown generated";
  const rc::Gen<Case> generator = op.generate(target.direction);
  const int cases = deep_run() ? kDeepCoverageCases : kQuickCoverageCases;
  rc::Random random(kSeed + static_cast<uint64_t>(target.direction));
  std::map<std::string, int> histogram;
  for (int i = 0; i < cases; ++i) {
    const Case c = generator(random.split(), i % (kMaxSize + 1)).value();
    for (const std::string& tag : op.classes(c).tags) ++histogram[tag];
  }
  std::cout << target.name() << ": class histogram over " << cases << " cases\n";
  for (const auto& [tag, count] : histogram) std::cout << "  " << tag << ": " << count << "\n";
  for (const std::string& tag : required)
    EXPECT_TRUE(histogram.count(tag)) << target.name() << ": class " << tag << " never occurs in "
                                      << cases << " generated cases";
}

INSTANTIATE_TEST_SUITE_P(Classes, GeneratorCoverage, testing::ValuesIn(op_directions()), target_name);

// --- the cases an order-of-arrival contract is held to bit for bit ----------------------------------

// An order-of-arrival contract's backend can fail a differential test on its values only on the cases
// its arrival_order_free clears (one addend an output): the generator must draw them often (at least
// one accepted case in kOneAddendShare of each direction), and the predicate must also say no, on
// some direction's accepted cases, or it would clear sums whose order matters.
constexpr int kOneAddendShare = 20;

TEST(OrderOfArrival, OneAddendCasesAreGeneratedAndNotEveryCaseIsOne) {
  int contracts = 0;
  for (const OpInfo& op : harness_registry().ops())
    for (const ContractInfo& contract : op.contracts) {
      if (!contract.order_of_arrival) continue;
      ++contracts;
      ASSERT_TRUE(contract.arrival_order_free) << op.name << " " << contract.name
                                               << ": an order-of-arrival contract without arrival_order_free";
      int order_matters = 0;
      int64_t fixed_elements = 0, summed_elements = 0;
      for (const auto& [direction, specs] : op.inputs) {
        const std::string where = op.name + " " + std::string(direction_name(direction)) + " " + contract.name;
        const rc::Gen<Case> generator = op.generate(direction);
        rc::Random random(kSeed + static_cast<uint64_t>(direction));
        int accepted = 0, one_addend = 0;
        for (int i = 0; i < kQuickCoverageCases; ++i) {
          const Case c = generator(random.split(), i % (kMaxSize + 1)).value();
          OutputMetas metas;
          try {
            metas = op.validate(c, contract);
          } catch (const RejectError&) {
            continue;
          }
          ++accepted;
          if (!arrival_order_matters(contract, c)) {
            ++one_addend;
            continue;
          }
          ++order_matters;
          // The elements of one addend in a case whose order matters: masks of the outputs' sizes.
          if (!contract.arrival_order_fixed) continue;
          for (const auto& [name, one] : contract.arrival_order_fixed(c)) {
            ASSERT_EQ(metas.count(name), 1u) << where << ": arrival_order_fixed names " << name << ", no output of the case";
            EXPECT_EQ(static_cast<int64_t>(one.size()), shape_numel(metas.at(name).shape)) << where << " " << name;
            fixed_elements += std::count(one.begin(), one.end(), true);
            summed_elements += std::count(one.begin(), one.end(), false);
          }
        }
        std::cout << where << ": " << one_addend << " of " << accepted << " accepted cases of one addend an output\n";
        EXPECT_GE(one_addend * kOneAddendShare, accepted) << where;
        EXPECT_GT(one_addend, 0) << where;
      }
      EXPECT_GT(order_matters, 0) << op.name << " " << contract.name
                                  << ": arrival_order_free cleared every accepted case of every direction";
      // Where it names elements of one addend, both kinds occur in the cases whose order matters.
      if (contract.arrival_order_fixed) {
        EXPECT_GT(fixed_elements, 0) << op.name << " " << contract.name << ": no element of one addend named";
        EXPECT_GT(summed_elements, 0) << op.name << " " << contract.name << ": every element named one addend";
      }
    }
  if (contracts == 0) GTEST_SKIP() << "no op of this registry has an order-of-arrival contract";
}

}  // namespace
}  // namespace bitparity::props
