// The numeric features that guide the generic fuzz target, on the toy op (testing/toy_op.h): its
// `sloppy` contract is one ulp high on an input of exactly 3.0, `strict` rejects zero rows.
#include "fuzz/numeric_features.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

#include "core/error.h"
#include "testing/toy_op.h"

namespace bitparity::fuzz {
namespace {

bool has(const std::vector<std::string>& features, const std::string& text) {
  return std::find(features.begin(), features.end(), text) != features.end();
}

TEST(NumericFeatures, NameTheClassesAndWhatEachContractPairShowed) {
  const Registry registry = testing::make_fake_registry();
  const Case three = testing::toy_case(1, 2, {3.0f, 1.0f});
  const std::vector<std::string> features = numeric_features(registry, three);
  ASSERT_FALSE(features.empty());
  const std::string classes = "|" + registry.op("toy")->classes(three).shape_class + "|" +
                              registry.op("toy")->classes(three).value_class;
  EXPECT_EQ(features[0], "toy|fwd" + classes);
  EXPECT_TRUE(has(features, "toy|fwd|ref:exact vs ref:sloppy" + classes + "|bit_mismatch|y|ulp=1"))
      << ::testing::PrintToString(features);
  EXPECT_TRUE(has(features, "toy|fwd|ref:exact vs ref:strict" + classes + "|agree"));
  EXPECT_TRUE(has(features, "toy|fwd|ref:exact vs ref:flat" + classes + "|shape_mismatch|y|ulp=-"));

  // Another value class and verdict: no 3.0, so exact and sloppy agree; zero rows, which strict rejects.
  const Case two = testing::toy_case(1, 2, {2.0f, 1.0f});
  EXPECT_TRUE(has(numeric_features(registry, two),
                  "toy|fwd|ref:exact vs ref:sloppy|" + registry.op("toy")->classes(two).shape_class + "|" +
                      registry.op("toy")->classes(two).value_class + "|agree"));
  const Case empty = testing::toy_case(0, 2, {});
  const std::vector<std::string> rejected = numeric_features(registry, empty);
  EXPECT_TRUE(std::any_of(rejected.begin(), rejected.end(), [](const std::string& f) {
    return f.find("ref:exact vs ref:strict") != std::string::npos && f.find("|error_mismatch|") != std::string::npos &&
           f.find("|ulp=-") != std::string::npos;
  })) << ::testing::PrintToString(rejected);
}

// A decoded case may be one the op rejects; its classes are not read then, and nothing throws.
TEST(NumericFeatures, ACaseTheOpRejectsHasNoClasses) {
  // The toy op whose classes, like some ops', index dims only a valid case has.
  const Registry fake = testing::make_fake_registry();
  OpInfo op = testing::toy_op();
  op.classes = [classes = op.classes](const Case& c) {
    if (c.input("x")->rank() != 2) throw std::out_of_range("toy classes read a dim the case lacks");
    return classes(c);
  };
  Registry registry;
  registry.add_op(op);
  registry.add_backend(*fake.backend("ref"));
  for (const char* contract : {"exact", "sloppy"})
    registry.add_impl("toy", "ref", contract, *fake.impl("toy", std::string("ref:") + contract));
  Case rank3 = testing::toy_case(1, 2, {2.0f, 1.0f});
  rank3.inputs["x"] = Tensor(DType::kBF16, {1, 1, 2});
  std::vector<std::string> features;
  ASSERT_NO_THROW(features = numeric_features(registry, rank3));
  ASSERT_FALSE(features.empty());
  EXPECT_EQ(features[0], "toy|fwd|rejected:shape|");
}

TEST(NumericFeatures, SlotsAreStableAndInRange) {
  EXPECT_EQ(feature_slot("toy|fwd|x", 4096), feature_slot("toy|fwd|x", 4096));
  std::set<size_t> slots;
  for (int i = 0; i < 200; ++i) {
    const size_t slot = feature_slot("feature " + std::to_string(i), 4096);
    EXPECT_LT(slot, 4096u);
    slots.insert(slot);
  }
  EXPECT_GT(slots.size(), 190u);  // distinct texts spread over the counters
  EXPECT_EQ(feature_slot("anything", 0), 0u);
}

}  // namespace
}  // namespace bitparity::fuzz
