// The case generators: every generated case is well formed for every implementation (it is
// rejected with a RejectError or yields exactly the declared outputs, with their shapes and
// dtypes, and the same bits when run again), and every required edge class is actually generated.
#include <algorithm>
#include <iostream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/error.h"
#include "core/gen.h"
#include "properties/harness.h"
#include "properties/swiglu_model.h"

namespace bitparity::props {
namespace {

std::set<std::string> declared_outputs(const OpInfo& op, Direction d) {
  std::set<std::string> names;
  for (const TensorSpec& spec : op.outputs.at(d)) names.insert(spec.name);
  return names;
}

// The error classes a RejectError may carry (core/error.h; "unmodelled" for a layout the
// reference's reduction model does not cover, reference/numerics.h).
const std::set<std::string> kRejectClasses = {"shape", "dtype", "attr", "unmodelled"};

class GeneratedCases : public testing::TestWithParam<Target> {};

// Every implementation either rejects the case with a RejectError of a known class and a message,
// or returns exactly the declared outputs with the shapes and dtypes of the spec, and does either
// deterministically. Cases are tagged with their signature classes (shape class, value class);
// GeneratorCoverage below prints the histogram of every edge-class tag.
TEST_P(GeneratedCases, EveryImplementationRejectsOrReturnsTheDeclaredOutputs) {
  const Target target = GetParam();
  const OpInfo& op = op_info(target.op);
  for (const std::string& impl : registry().impls_of(op.name))
    if (const auto why = unavailable(impl)) std::cout << "not checked here: " << impl << ": " << *why << "\n";
  check_property([&] {
    const Case c = *op.generate(target.direction);
    const CaseClasses classes = op.classes(c);
    RC_TAG(classes.shape_class.empty() ? std::string("plain") : classes.shape_class, classes.value_class);
    for (const std::string& impl : registry().impls_of(op.name)) {
      if (unavailable(impl)) continue;
      const Outcome outcome = run_outcome(impl, c);
      if (const auto again = difference(outcome, run_outcome(impl, c), op.name + " " + impl + " run twice"))
        RC_FAIL("nondeterminism: " + *again);
      if (outcome.rejected()) {
        RC_CLASSIFY(true, impl + " rejects (" + outcome.reject_class + ")");
        RC_ASSERT(kRejectClasses.count(outcome.reject_class) == 1u);
        RC_ASSERT(!outcome.message.empty());
        continue;
      }
      std::set<std::string> names;
      for (const auto& [name, tensor] : *outcome.outputs) names.insert(name);
      RC_ASSERT(names == declared_outputs(op, target.direction));
      const std::string contract = split_backend_name(impl).second;
      for (const auto& [name, tensor] : *outcome.outputs) {
        const swiglu::OutputSpec want = swiglu::expected_output(c, contract, name);
        RC_ASSERT(tensor.shape() == want.shape);
        RC_ASSERT(tensor.dtype() == want.dtype);
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

// style.md: show that edge classes (zero rows, M < 17, 1-D scale, clamp <= 0, NaN/Inf/-0/
// subnormal values) are actually generated. Tags are those of OpInfo::classes.
std::vector<std::string> required_tags(const OpInfo& op, Direction d) {
  std::vector<std::string> tags = {"rows=0", "rows=1..16", "rows=17", "rows=32", "rows=large"};
  if (op.attr("clamp"))
    for (const char* cls : {"clamp=none", "clamp=0", "clamp=-0", "clamp=negative", "clamp=tiny", "clamp=normal",
                            "clamp=+inf", "clamp=nan"})
      tags.push_back(cls);
  for (const TensorSpec& input : op.inputs.at(d)) {
    if (input.optional) continue;
    for (const char* value : {"nan", "inf", "-0", "subnormal", "bf16_tie"}) tags.push_back(input.name + ":" + value);
  }
  // The SwiGLU family's hidden sizes (small, GLM-4.5-Air's 1408, not a multiple of the 16-byte
  // vector) and scale ranks.
  static const std::map<std::string, std::vector<std::string>> kOpTags = {
      {"swiglu", {"F=small", "F=1408", "F%8!=0"}},
      {"swiglu_scale", {"F=small", "F=1408", "F%8!=0", "scale=1d", "scale=2d"}}};
  if (auto it = kOpTags.find(op.name); it != kOpTags.end()) tags.insert(tags.end(), it->second.begin(), it->second.end());
  return tags;
}

class GeneratorCoverage : public testing::TestWithParam<Target> {};

TEST_P(GeneratorCoverage, EveryRequiredClassOccurs) {
  const Target target = GetParam();
  const OpInfo& op = op_info(target.op);
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
  for (const std::string& tag : required_tags(op, target.direction))
    EXPECT_TRUE(histogram.count(tag)) << target.name() << ": class " << tag << " never occurs in "
                                      << cases << " generated cases";
}

INSTANTIATE_TEST_SUITE_P(Classes, GeneratorCoverage, testing::ValuesIn(op_directions()), target_name);

}  // namespace
}  // namespace bitparity::props
