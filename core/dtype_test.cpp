#include "core/dtype.h"

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <mpfr.h>

#include <Eigen/Core>
#include <gtest/gtest.h>

namespace bitparity {
namespace {

// Every bf16 pattern decodes to the value Eigen decodes, and encodes back to itself.
TEST(DTypeTest, Bf16AgreesWithEigenOnAllPatterns) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float ours = f32_from_bf16(static_cast<uint16_t>(bits));
    const float eigen = static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(static_cast<uint16_t>(bits)));
    if (std::isnan(eigen)) {
      ASSERT_TRUE(std::isnan(ours)) << std::hex << bits;
      ASSERT_TRUE(is_nan_bits(DType::kBF16, bits));
      continue;
    }
    ASSERT_EQ(f32_bits(ours), f32_bits(eigen)) << std::hex << bits;
    ASSERT_EQ(bf16_from_f32(ours), bits) << std::hex << bits;
    ASSERT_EQ(to_double(DType::kBF16, bits), static_cast<double>(eigen));
    ASSERT_EQ(from_double(DType::kBF16, ours), bits) << std::hex << bits;
  }
}

TEST(DTypeTest, Fp16AgreesWithEigenOnAllPatterns) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float ours = f32_from_fp16(static_cast<uint16_t>(bits));
    const float eigen = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(static_cast<uint16_t>(bits)));
    if (std::isnan(eigen)) {
      ASSERT_TRUE(std::isnan(ours)) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(f32_bits(ours), f32_bits(eigen)) << std::hex << bits;
    ASSERT_EQ(fp16_from_f32(ours), bits) << std::hex << bits;
  }
}

// fp32 -> bf16 rounding against an independent method: the two bf16 neighbours of the value
// (truncation and the next pattern up in magnitude), the nearer one by exact double arithmetic,
// ties to the even pattern. Beyond the largest finite bf16 the upper neighbour stands at 2^128.
uint16_t bf16_by_neighbours(float f) {
  const uint32_t bits = f32_bits(f);
  const uint16_t lo = static_cast<uint16_t>(bits >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double v = std::fabs(static_cast<double>(f));
  const double lo_v = std::fabs(static_cast<double>(f32_from_bf16(lo)));
  const double hi_v = (hi & 0x7fff) == 0x7f80 ? 0x1p128 : std::fabs(static_cast<double>(f32_from_bf16(hi)));
  if (v - lo_v < hi_v - v) return lo;
  if (hi_v - v < v - lo_v) return hi;
  return (lo & 1) ? hi : lo;
}

std::vector<float> rounding_samples() {
  std::mt19937 rng(7);
  std::vector<float> v;
  for (int i = 0; i < 200000; ++i) v.push_back(f32_from_bits(rng()));
  for (uint32_t hi = 0; hi < 0x10000; hi += 7)
    for (uint32_t lo : {0x7fffu, 0x8000u, 0x8001u, 0x0001u, 0xffffu}) v.push_back(f32_from_bits((hi << 16) | lo));
  for (float f : {3.3895314e38f, 3.4028235e38f, 1e-40f, 1.401298e-45f, 65504.f, 65520.f, 65519.f, 5.96e-8f, 2.98e-8f})
    v.push_back(f), v.push_back(-f);
  return v;
}

TEST(DTypeTest, Fp32ToBf16RoundsLikeNeighboursAndEigen) {
  for (float f : rounding_samples()) {
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan_bits(DType::kBF16, bf16_from_f32(f)));
      continue;
    }
    const uint16_t ours = bf16_from_f32(f);
    ASSERT_EQ(ours, bf16_by_neighbours(f)) << f;
    ASSERT_EQ(ours, Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(f))) << f;
  }
}

TEST(DTypeTest, Fp32ToFp16RoundsLikeEigen) {
  for (float f : rounding_samples()) {
    if (std::isnan(f)) continue;
    const uint16_t ours = fp16_from_f32(f);
    ASSERT_EQ(ours, Eigen::numext::bit_cast<uint16_t>(Eigen::half(f))) << f;
  }
}

TEST(DTypeTest, RoundsTiesToEvenAndOverflowsToInf) {
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0x3f808000)), 0x3f80);  // tie, even below
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0x3f818000)), 0x3f82);  // tie, even above
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0x7f7fffff)), 0x7f80);  // FLT_MAX rounds to +Inf
  EXPECT_EQ(bf16_from_f32(-0.0f), 0x8000);
  EXPECT_EQ(fp16_from_f32(65520.0f), 0x7c00);  // halfway above fp16 max: ties to even = Inf
  EXPECT_EQ(fp16_from_f32(65519.0f), 0x7bff);
  EXPECT_EQ(from_double(DType::kFP32, 0x1p-150), 0u);      // tie below the smallest subnormal: even (0)
  EXPECT_EQ(from_double(DType::kFP32, 0x1.8p-149), 2u);    // tie between 1 and 2 subnormal ulps: even
}

// from_double to bf16 against MPFR's single rounding (8-bit significand, bf16's exponent range,
// subnormals) on doubles around every kind of bf16 boundary: exact ties and their neighbours one
// double ulp away (where rounding through fp32 first would go wrong), subnormals, the overflow
// threshold, and random bit patterns.
uint16_t mpfr_bf16(double v) {
  if (std::isnan(v)) return std::signbit(v) ? 0xFFC0u : 0x7FC0u;
  mpfr_set_emin(-132);  // 2^-133, bf16's smallest subnormal, is 0.5 * 2^-132
  mpfr_set_emax(128);
  mpfr_t x;
  mpfr_init2(x, 8);
  const int inex = mpfr_set_d(x, v, MPFR_RNDN);
  mpfr_subnormalize(x, inex, MPFR_RNDN);
  const float f = mpfr_get_flt(x, MPFR_RNDN);  // exact: every bf16 value is an fp32
  mpfr_clear(x);
  mpfr_set_emin(mpfr_get_emin_min());
  mpfr_set_emax(mpfr_get_emax_max());
  return static_cast<uint16_t>(f32_bits(f) >> 16);
}

TEST(DTypeTest, DoubleToBf16RoundsOnceAsMpfrDoes) {
  std::mt19937_64 rng(11);
  std::vector<double> values = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 0x1p-134, 0x1p-133, 0x1.8p-133,
                                0x1p-1074, -0x1p-1074, 0x1.fep127, 0x1.ffp127, std::nextafter(0x1.ffp127, 0.0),
                                0x1p128, 1e300, -1e300, static_cast<double>(std::numeric_limits<float>::max())};
  for (int i = 0; i < 200000; ++i) {
    // A bf16 value (normal or subnormal) plus half its ulp: the tie, and a double ulp either side.
    const uint16_t h = static_cast<uint16_t>(rng() & 0x7F7Fu) | static_cast<uint16_t>(rng() & 0x8000u);
    const double base = f32_from_bf16(h);
    const int exponent = (h >> 7) & 0xFF;
    const double half_ulp = std::ldexp(1.0, (exponent == 0 ? 1 : exponent) - 127 - 8);
    const double tie = base + std::copysign(half_ulp, base);
    values.insert(values.end(), {tie, std::nextafter(tie, 0.0), std::nextafter(tie, INFINITY), std::nextafter(tie, -INFINITY)});
    values.push_back(std::bit_cast<double>(rng()));
    values.push_back(std::ldexp(static_cast<double>(rng() >> 11), -53 - static_cast<int>(rng() % 200)));
  }
  for (double v : values) ASSERT_EQ(from_double(DType::kBF16, v), mpfr_bf16(v)) << std::hexfloat << v;
}

TEST(DTypeTest, UlpDistanceCountsRepresentableSteps) {
  EXPECT_EQ(ulp_distance(DType::kBF16, 0x3f80, 0x3f81), 1u);
  EXPECT_EQ(ulp_distance(DType::kBF16, 0x0000, 0x8000), 0u);        // +0 and -0
  EXPECT_EQ(ulp_distance(DType::kBF16, 0x0001, 0x8001), 2u);        // across zero
  EXPECT_EQ(ulp_distance(DType::kBF16, 0x7f7f, 0x7f80), 1u);        // max finite to Inf
  EXPECT_FALSE(ulp_distance(DType::kBF16, 0x7fc0, 0x3f80).has_value());
  EXPECT_EQ(ulp_distance(DType::kFP64, f64_bits(1.0), f64_bits(-1.0)), 2 * 0x3ff0000000000000ull);
}

TEST(DTypeTest, Fp8FormatsDecodeTheirExtremes) {
  EXPECT_EQ(to_double(DType::kFP8E4M3, 0x7e), 448.0);
  EXPECT_TRUE(is_nan_bits(DType::kFP8E4M3, 0x7f));
  EXPECT_EQ(from_double(DType::kFP8E4M3, 1e6), 0x7fu);  // e4m3fn has no Inf: overflow is NaN
  EXPECT_EQ(to_double(DType::kFP8E5M2, 0x7b), 57344.0);
  EXPECT_TRUE(is_inf_bits(DType::kFP8E5M2, 0x7c));
}

}  // namespace
}  // namespace bitparity

namespace bitparity {
namespace {

// is_nan_bits' masks for the common formats against the hardware's and Eigen's NaN: every bf16 and
// fp16 pattern, and fp32 at the boundaries and on a stride through all patterns.
TEST(DTypeTest, NanBitsAgreeWithTheHardwareOnEveryFormat) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    ASSERT_EQ(is_nan_bits(DType::kBF16, bits), std::isnan(f32_from_bits(bits << 16))) << std::hex << bits;
    const float half = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(static_cast<uint16_t>(bits)));
    ASSERT_EQ(is_nan_bits(DType::kFP16, bits), std::isnan(half)) << std::hex << bits;
  }
  for (uint32_t bits : {0x7F800000u, 0x7F800001u, 0xFF800000u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7F7FFFFFu,
                        0x7FC00000u, 0x00000000u, 0x80000000u})
    EXPECT_EQ(is_nan_bits(DType::kFP32, bits), std::isnan(f32_from_bits(bits))) << std::hex << bits;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 65521)
    ASSERT_EQ(is_nan_bits(DType::kFP32, bits), std::isnan(f32_from_bits(static_cast<uint32_t>(bits)))) << std::hex << bits;
}

}  // namespace
}  // namespace bitparity
