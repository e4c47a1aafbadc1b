// The shrinker against the fake "toy" op, with differential and synthetic predicates.
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "core/case_json.h"
#include "corpus/differential.h"
#include "fuzz/shrink.h"
#include "testing/toy_op.h"

namespace bitparity::fuzz {
namespace {

using testing::make_fake_registry;
using testing::toy_case;

bool any_element(const Case& c, const std::function<bool(double)>& pred) {
  const Tensor& x = *c.input("x");
  for (int64_t i = 0; i < x.numel(); ++i)
    if (pred(x.f64(i))) return true;
  return false;
}

std::vector<double> values_of(const Case& c) {
  std::vector<double> v;
  const Tensor& x = *c.input("x");
  for (int64_t i = 0; i < x.numel(); ++i) v.push_back(x.f64(i));
  return v;
}

class ShrinkTest : public ::testing::Test {
 protected:
  Registry registry = make_fake_registry();
  const OpInfo& toy = *registry.op("toy");
};

TEST_F(ShrinkTest, DifferentialFindingShrinksToOneElementWithoutAttributes) {
  std::vector<float> values(4 * 8, 1.5f);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.375f * static_cast<float>(i % 7) - 1.0f;
  values[2 * 8 + 5] = 3.0f;  // the only element on which ref:sloppy differs from ref:exact
  Case failing = toy_case(4, 8, values, 0.375);
  failing.attrs["flag"] = true;
  const corpus::BackendPair pair{"ref:exact", "ref:sloppy"};
  const StillFails still_fails = [&](const Case& c) {
    const corpus::DiffResult r = corpus::diff_case(registry, c, pair);
    return r.verdict == corpus::DiffVerdict::kFinding && r.kind == corpus::kBitMismatch && r.output == "y";
  };
  ASSERT_TRUE(still_fails(failing));

  const ShrinkResult result = shrink_case(toy, failing, still_fails);
  EXPECT_TRUE(still_fails(result.smallest));
  EXPECT_EQ(result.smallest.input("x")->shape(), (Shape{1, 1}));
  EXPECT_EQ(values_of(result.smallest), std::vector<double>{3.0});
  EXPECT_TRUE(result.smallest.attrs.empty()) << case_to_json(result.smallest).dump();
  EXPECT_FALSE(result.exhausted);
  EXPECT_LE(result.calls, kDefaultMaxShrinkCalls);
}

TEST_F(ShrinkTest, ValuesGoToTheSimplestThatStillFails) {
  const Case failing = toy_case(2, 3, {37.25f, 1000.0f, -5.5f, 0.1f, 7.0f, 1e-3f});
  const ShrinkResult result =
      shrink_case(toy, failing, [](const Case& c) { return any_element(c, [](double v) { return v >= 100; }); });
  EXPECT_EQ(result.smallest.input("x")->shape(), (Shape{1, 1}));
  // 128 is the first value in the simple order (0, +-1, +-2, +-0.5, +-4, ...) that is >= 100.
  EXPECT_EQ(values_of(result.smallest), std::vector<double>{128.0});
}

TEST_F(ShrinkTest, ElementsBecomeSimpleWhenTheShapeCannotShrink) {
  const Case failing = toy_case(1, 4, {3.5f, 5.25f, 7.75f, 2.125f});
  const StillFails sum_over_ten = [](const Case& c) {
    const std::vector<double> v = values_of(c);
    double sum = 0;
    for (double x : v) sum += x;
    return v.size() == 4 && sum > 10 && std::count(v.begin(), v.end(), 0.0) == 0;
  };
  const std::vector<double> v = values_of(shrink_case(toy, failing, sum_over_ten).smallest);
  EXPECT_EQ(v, (std::vector<double>{1, 1, 8, 1}));
}

TEST_F(ShrinkTest, FewerDistinctValues) {
  // Non-integers above 2.6: no simple value qualifies, so only rounding and merging can help.
  const Case failing = toy_case(1, 4, {3.3f, 5.7f, 9.1f, 17.9f});
  const StillFails still_fails = [](const Case& c) {
    const std::vector<double> v = values_of(c);
    return v.size() == 4 && std::all_of(v.begin(), v.end(), [](double x) { return x > 2.6 && x != std::floor(x); });
  };
  const std::vector<double> v = values_of(shrink_case(toy, failing, still_fails).smallest);
  EXPECT_EQ(std::set<double>(v.begin(), v.end()).size(), 1u) << v[0] << " " << v[1] << " " << v[2] << " " << v[3];
  EXPECT_TRUE(still_fails(toy_case(
      1, 4, {static_cast<float>(v[0]), static_cast<float>(v[1]), static_cast<float>(v[2]), static_cast<float>(v[3])})));
}

TEST_F(ShrinkTest, AttributesAreDroppedOrSimplified) {
  Case failing = toy_case(1, 1, {0.0f}, 0.375);
  failing.attrs["flag"] = true;
  const auto positive_scale = [](const Case& c) { return c.float_attr("scale").value_or(0) > 0; };
  Case smallest = shrink_case(toy, failing, positive_scale).smallest;
  EXPECT_EQ(smallest.attrs.size(), 1u);  // flag dropped, scale kept
  EXPECT_EQ(smallest.float_attr("scale"), 1.0);

  const auto negative_scale = [](const Case& c) { return c.float_attr("scale").value_or(0) < 0; };
  smallest = shrink_case(toy, toy_case(1, 1, {0.0f}, -7.25), negative_scale).smallest;
  EXPECT_EQ(smallest.float_attr("scale"), -1.0);
}

TEST_F(ShrinkTest, StaysWithinTheDtypeAndKeepsValidBitPatterns) {
  Case failing = toy_case(1, 1, {});
  Tensor x(DType::kFP8E4M3, {1, 1});
  x.set_bits(0, from_double(DType::kFP8E4M3, 448.0));  // the largest finite e4m3 value
  failing.inputs["x"] = x;
  const ShrinkResult result =
      shrink_case(toy, failing, [](const Case& c) { return any_element(c, [](double v) { return v > 300; }); });
  const Tensor& out = *result.smallest.input("x");
  EXPECT_EQ(out.dtype(), DType::kFP8E4M3);
  // 512 (one significant bit) does not exist in e4m3; 384 (two bits) does.
  EXPECT_EQ(out.f64(0), 384.0);
}

TEST_F(ShrinkTest, AlwaysFailingPredicateReachesAFixpoint) {
  OpInfo stubborn = toy;
  stubborn.shrink_shape = [](const Case& c) { return std::vector<Case>{c, c}; };  // never smaller
  int calls = 0;
  const ShrinkResult result =
      shrink_case(stubborn, toy_case(3, 5, std::vector<float>(15, 6.5f), 3.0), [&](const Case&) {
        ++calls;
        return true;
      });
  EXPECT_FALSE(result.exhausted);
  EXPECT_EQ(calls, result.calls);
  EXPECT_TRUE(result.smallest.attrs.empty());
  for (double v : values_of(result.smallest)) EXPECT_EQ(v, 0.0);
}

TEST_F(ShrinkTest, PredicateCallsAreBounded) {
  int calls = 0;
  ShrinkOptions options;
  options.max_calls = 7;
  const ShrinkResult result = shrink_case(
      toy, toy_case(4, 8, std::vector<float>(32, 2.75f)),
      [&](const Case& c) {
        ++calls;
        return c.input("x")->numel() > 3;
      },
      options);
  EXPECT_EQ(calls, 7);
  EXPECT_TRUE(result.exhausted);
}

TEST_F(ShrinkTest, StopRequestEndsShrinking) {
  int calls = 0;
  ShrinkOptions options;
  options.should_stop = [&] { return calls >= 3; };
  shrink_case(
      toy, toy_case(4, 8, std::vector<float>(32, 2.75f)), [&](const Case&) { return ++calls, true; }, options);
  EXPECT_EQ(calls, 3);
}

TEST_F(ShrinkTest, ThrowingPredicateKeepsTheOriginal) {
  const Case failing = toy_case(2, 2, {1.5f, 2.5f, 3.5f, 4.5f}, 2.0);
  const ShrinkResult result =
      shrink_case(toy, failing, [](const Case&) -> bool { throw std::runtime_error("cannot evaluate"); });
  EXPECT_GT(result.calls, 0);
  EXPECT_EQ(case_to_json(result.smallest), case_to_json(failing));
}

TEST(ValueCost, OrdersValuesFromSimplest) {
  const DType bf16 = DType::kBF16;
  auto cost = [&](double v) { return value_cost(bf16, from_double(bf16, v)); };
  EXPECT_EQ(cost(0.0), 0);
  EXPECT_LT(cost(0.0), cost(-0.0));
  EXPECT_LT(cost(1.0), cost(-1.0));
  EXPECT_LT(cost(-1.0), cost(2.0));
  EXPECT_LT(cost(2.0), cost(0.5));
  EXPECT_LT(cost(256.0), cost(3.0));  // any power of two in the list beats a value outside it
  EXPECT_LT(cost(3.0), cost(3.5));    // fewer significant bits
  EXPECT_LT(cost(3.5), cost(-3.5));
  EXPECT_LT(cost(1e30), cost(INFINITY));
  EXPECT_EQ(value_cost(bf16, 0x7fc0), value_cost(bf16, 0xffc1));               // every NaN is equally complex
  EXPECT_LT(value_cost(DType::kI32, 1), value_cost(DType::kI32, 0xffffffff));  // 1 before -1
  EXPECT_LT(value_cost(DType::kI32, 0xffffffff), value_cost(DType::kI32, 2));
}

}  // namespace
}  // namespace bitparity::fuzz
