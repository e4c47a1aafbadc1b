#include "core/compare.h"

#include <gtest/gtest.h>

namespace bitparity {
namespace {

Tensor bf16(Shape shape, std::vector<uint16_t> bits) {
  Tensor t(DType::kBF16, std::move(shape));
  for (size_t i = 0; i < bits.size(); ++i) t.set_bits(static_cast<int64_t>(i), bits[i]);
  return t;
}

TEST(CompareTest, IdenticalBitsAreIdentical) {
  const TensorMap a{{"out", bf16({2}, {0x3f80, 0x4000})}};
  EXPECT_EQ(compare_outputs(a, a).verdict, Verdict::kIdentical);
}

TEST(CompareTest, NaNsAreEqualUnlessStrict) {
  const TensorMap a{{"out", bf16({1}, {0x7fc0})}}, b{{"out", bf16({1}, {0xffff})}};
  EXPECT_EQ(compare_outputs(a, b).verdict, Verdict::kIdentical);
  EXPECT_EQ(compare_outputs(a, b, {.strict_nan = true}).verdict, Verdict::kBitMismatch);
}

TEST(CompareTest, SignedZerosDiffer) {
  const Comparison c = compare_outputs({{"out", bf16({1}, {0x0000})}}, {{"out", bf16({1}, {0x8000})}});
  EXPECT_EQ(c.verdict, Verdict::kBitMismatch);
  EXPECT_EQ(c.outputs[0].first->ulps, 0u);
  EXPECT_EQ(c.outputs[0].ulp_histogram.at("0"), 1);
}

TEST(CompareTest, ShapesAreComparedBeforeBits) {
  const Comparison c = compare_outputs({{"d_scale", bf16({3}, {1, 2, 3})}}, {{"d_scale", bf16({3, 1}, {1, 2, 3})}});
  EXPECT_EQ(c.verdict, Verdict::kShapeMismatch);
  const std::string msg = format_comparison(c, "swiglu_scale bwd", "a", "b");
  EXPECT_NE(msg.find("[3, 1]"), std::string::npos) << msg;
}

TEST(CompareTest, ReportsFirstMismatchWithBitsAndUlps) {
  const Comparison c = compare_outputs({{"out", bf16({2, 2}, {0x3f80, 0x3f80, 0x3f80, 0x3f80})}},
                                       {{"out", bf16({2, 2}, {0x3f80, 0x3f80, 0x3f83, 0x3f81})}});
  ASSERT_EQ(c.verdict, Verdict::kBitMismatch);
  const OutputComparison& o = c.outputs[0];
  EXPECT_EQ(o.mismatches, 2);
  EXPECT_EQ(o.first->index, 2);
  EXPECT_EQ(o.first->position, (Shape{1, 0}));
  EXPECT_EQ(o.first->ulps, 3u);
  EXPECT_EQ(o.max_ulps, 3u);
  EXPECT_EQ(o.ulp_histogram.at("1"), 1);
  EXPECT_EQ(o.ulp_histogram.at("3-4"), 1);
  const std::string msg = format_comparison(c, "swiglu fwd", "ref:a", "ref:b");
  EXPECT_NE(msg.find("Mismatched elements in out: 2 / 4 (50.00%)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out[1, 0]: ref:a=0x3f80 (1) ref:b=0x3f83 (1.0234375), 3 ulp"), std::string::npos) << msg;
}

TEST(CompareTest, MissingOutputIsAShapeFinding) {
  const Comparison c = compare_outputs({{"out", bf16({1}, {1})}, {"extra", bf16({1}, {1})}}, {{"out", bf16({1}, {1})}});
  EXPECT_EQ(c.verdict, Verdict::kShapeMismatch);
}

TEST(CompareTest, ArbitrationPicksTheSideNearerTheTruth) {
  // truth 1.01: bf16 1.0078125 (0x3f81) is 0.29 ulp away, 1.0 is 1.28 ulp away.
  const Arbitration r = arbitrate(DType::kBF16, 0x3f80, 0x3f81, 1.01);
  EXPECT_EQ(r.closer, "b");
  EXPECT_NEAR(r.a_ulps, 1.28, 0.01);
  EXPECT_NEAR(r.b_ulps, 0.28, 0.01);
  EXPECT_EQ(arbitrate(DType::kBF16, 0x7fc0, 0x3f80, 1.0).closer, "b");
}

TEST(CompareTest, UlpBuckets) {
  EXPECT_EQ(ulp_bucket(std::nullopt), "nan");
  EXPECT_EQ(ulp_bucket(2), "2");
  EXPECT_EQ(ulp_bucket(3), "3-4");
  EXPECT_EQ(ulp_bucket(5), "5-8");
  EXPECT_EQ(ulp_bucket(1668), "1025-2048");
}

}  // namespace
}  // namespace bitparity

namespace bitparity {
namespace {

// Equal blocks of a large output are skipped whole: mismatches in several blocks are all counted,
// the first is the lowest index, and NaNs inside a differing block still compare equal.
TEST(CompareTest, CountsEveryMismatchOfALargeOutputAndReportsTheLowest) {
  std::vector<uint16_t> x(5000, 0x3f80), y = x;
  y[4999] = 0x3f81;
  y[1030] = 0x3f82;
  y[257] = 0x3f81;
  x[258] = 0x7fc0, y[258] = 0xffff;  // NaN against NaN, in a block that differs
  const Comparison c = compare_outputs({{"out", bf16({50, 100}, x)}}, {{"out", bf16({50, 100}, y)}});
  EXPECT_EQ(c.verdict, Verdict::kBitMismatch);
  EXPECT_EQ(c.outputs[0].mismatches, 3);
  ASSERT_TRUE(c.outputs[0].first);
  EXPECT_EQ(c.outputs[0].first->index, 257);
  EXPECT_EQ(c.outputs[0].max_ulps, 2u);
  EXPECT_EQ(compare_outputs({{"out", bf16({50, 100}, x)}}, {{"out", bf16({50, 100}, y)}}, {.strict_nan = true})
                .outputs[0]
                .mismatches,
            4);
}

}  // namespace
}  // namespace bitparity
