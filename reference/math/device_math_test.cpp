// CPU tests of the device-math emulation: the table format, the committed sm_90 capture, the
// directed-rounding step, special values, powf against results measured on an H200, and the
// replay of the GPU's own results (the sample captured on an H200 by gpu/math/capture_math), which
// must match bit for bit.
#include <gtest/gtest.h>
#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "reference/math/device_math.h"
#include "reference/math/device_sample.h"
#include "reference/math/ex2_tables.h"

namespace bitparity::ref::math {
namespace {

uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

std::string hex(uint32_t b) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", b);
  return buf;
}

const std::string kDataDir = BITPARITY_MATH_DATA_DIR;

// --- add.rz -----------------------------------------------------------------------------------

float add_rz_by_fenv(float a, float b) {
  const int old = std::fegetround();
  std::fesetround(FE_TOWARDZERO);
  volatile float va = a, vb = b;
  volatile float s = va + vb;
  std::fesetround(old);
  return s;
}

TEST(AddRz, MatchesTheFpuInRoundTowardZeroMode) {
  std::mt19937_64 rng(7);
  int rounded_differently_from_rne = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    // Random bit patterns half the time, values near 1 (log1pf's case: a + 1) otherwise.
    const float a = from_bits(static_cast<uint32_t>(rng()));
    const float b = (i % 2) ? 1.0f : from_bits(static_cast<uint32_t>(rng()));
    if (std::isnan(a) || std::isnan(b)) continue;
    const float want = add_rz_by_fenv(a, b);
    const float got = add_rz(a, b);
    ASSERT_EQ(bits(got), bits(want)) << hex(bits(a)) << " + " << hex(bits(b));
    if (bits(want) != bits(a + b)) ++rounded_differently_from_rne;
  }
  EXPECT_GT(rounded_differently_from_rne, 100000);  // the cases that matter were exercised
  EXPECT_EQ(bits(add_rz(-0x1p-100f, 1.0f)), 0x3F7FFFFFu);  // 1 - tiny rounds toward zero
  EXPECT_EQ(bits(add_rz(std::numeric_limits<float>::max(), std::numeric_limits<float>::max())),
            bits(std::numeric_limits<float>::max()));
  EXPECT_EQ(bits(add_rz(-1.0f, 1.0f)), 0u);  // exact zero is +0
}

// --- the table file format --------------------------------------------------------------------

Ex2Tables synthetic_tables() {
  Ex2Tables t;
  t.meta.arch = "sm_test";
  t.meta.gpu_name = "synthetic \"quoted\" GPU";
  t.tp.resize(kEx2TableSize);
  t.tn.resize(kEx2TableSize);
  for (uint32_t f = 0; f < kEx2TableSize; ++f) {
    t.tp[f] = static_cast<float>(std::exp2(static_cast<double>(f) * 0x1p-23));
    t.tn[f] = static_cast<float>(std::exp2(-static_cast<double>(f) * 0x1p-23));
  }
  // Steps a 2-bit code cannot hold: a jump of 5 ulps, a step backwards, a NaN.
  t.tp[12345] = from_bits(bits(t.tp[12345]) + 5);
  t.tp[777] = from_bits(bits(t.tp[776]) - 1);
  t.tn[4] = from_bits(kCanonicalNanBits);
  return t;
}

TEST(Ex2TableFormat, RoundTripsExactlyIncludingExceptions) {
  const Ex2Tables t = synthetic_tables();
  const std::vector<unsigned char> bytes = encode_ex2_tables(t);
  EXPECT_LT(bytes.size(), 2 * (kEx2TableSize / 4) + 4096u);  // 2 bits an entry plus a little
  const Ex2Tables d = decode_ex2_tables(bytes, /*verify_hashes=*/true);
  EXPECT_EQ(d.meta.arch, "sm_test");
  EXPECT_EQ(d.meta.gpu_name, t.meta.gpu_name);
  ASSERT_EQ(d.tp.size(), kEx2TableSize);
  EXPECT_TRUE(std::equal(d.tp.begin(), d.tp.end(), t.tp.begin(), [](float a, float b) { return bits(a) == bits(b); }));
  EXPECT_TRUE(std::equal(d.tn.begin(), d.tn.end(), t.tn.begin(), [](float a, float b) { return bits(a) == bits(b); }));
}

TEST(Ex2TableFormat, RejectsTruncatedCorruptAndForeignFiles) {
  std::vector<unsigned char> bytes = encode_ex2_tables(synthetic_tables());
  std::vector<unsigned char> truncated(bytes.begin(), bytes.end() - 1);
  EXPECT_THROW(decode_ex2_tables(truncated), Ex2TableError);
  std::vector<unsigned char> foreign = bytes;
  foreign[0] = 'X';
  EXPECT_THROW(decode_ex2_tables(foreign), Ex2TableError);
  std::vector<unsigned char> corrupt = bytes;
  corrupt[corrupt.size() - 100] ^= 0x01;  // one code of TN's tail changes by one step
  EXPECT_NO_THROW(decode_ex2_tables(corrupt));
  EXPECT_THROW(decode_ex2_tables(corrupt, /*verify_hashes=*/true), Ex2TableError);
  EXPECT_THROW(load_ex2_tables_file("/nonexistent/ex2.bin"), Ex2TableError);
}

// --- the committed sm_90 capture --------------------------------------------------------------

TEST(Ex2Tables, CommittedCaptureIsSm90AndIntact) {
  ASSERT_TRUE(has_embedded_ex2_tables()) << "reference/math/data/ex2_sm90.bin was not compiled in";
  const Ex2Tables file = load_ex2_tables_file(kDataDir + "/ex2_sm90.bin", /*verify_hashes=*/true);
  EXPECT_EQ(file.meta.arch, "sm_90");
  EXPECT_EQ(file.meta.cc_major, 9);
  EXPECT_EQ(file.meta.cc_minor, 0);
  EXPECT_FALSE(file.meta.gpu_name.empty());
  EXPECT_FALSE(file.meta.driver_version.empty());
  EXPECT_GT(file.meta.cuda_runtime_version, 0);
  const Ex2Tables& t = default_ex2_tables();
  EXPECT_EQ(t.meta.tp_hash, file.meta.tp_hash);
  EXPECT_EQ(t.meta.tn_hash, file.meta.tn_hash);
  EXPECT_EQ(t.tp[0], 1.0f);
  EXPECT_EQ(t.tn[0], 1.0f);
  // Close to the correctly rounded 2^x (the sm_90 capture: TP within [-1, +1] ulp, TN within
  // [-2, +1]; rule 12's "±1 ulp" holds for TP only), and monotonic.
  for (uint32_t f = 0; f < kEx2TableSize; f += 97) {
    const double x = static_cast<double>(f) * 0x1p-23;
    EXPECT_LE(std::abs(static_cast<int64_t>(bits(t.tp[f])) - bits(static_cast<float>(std::exp2(x)))), 1) << f;
    EXPECT_LE(std::abs(static_cast<int64_t>(bits(t.tn[f])) - bits(static_cast<float>(std::exp2(-x)))), 2) << f;
    if (f > 0) {
      EXPECT_LE(t.tp[f - 1], t.tp[f]);
      EXPECT_GE(t.tn[f - 1], t.tn[f]);
    }
  }
}

TEST(Ex2Tables, RefuseToMirrorAnotherArchitecture) {
  EXPECT_NO_THROW(ex2_tables_for_device("sm_90"));
  try {
    ex2_tables_for_device("sm_100");
    FAIL() << "sm_90 tables accepted for an sm_100 device";
  } catch (const Ex2TableError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("sm_90"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sm_100"), std::string::npos) << msg;
    EXPECT_NE(msg.find("capture-math"), std::string::npos) << msg;
  }
  EXPECT_EQ(gpu_arch_name(9, 0), "sm_90");
  EXPECT_EQ(gpu_arch_name(10, 0), "sm_100");
}

// --- special values -----------------------------------------------------------------------------

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(DeviceMath, SpecialValuesOfBothModels) {
  for (MathModel m : {MathModel::kLibdevice, MathModel::kCorrectlyRounded}) {
    SCOPED_TRACE(math_model_name(m));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(bits(expf(m, 0.0f)), bits(1.0f));
    EXPECT_EQ(bits(expf(m, -kInf)), 0u);
    EXPECT_EQ(bits(expf(m, kInf)), bits(kInf));
    EXPECT_EQ(bits(expf(m, 89.0f)), bits(kInf));
    EXPECT_EQ(bits(expf(m, nan)), kCanonicalNanBits);
    EXPECT_EQ(bits(logf(m, 1.0f)), 0u);
    EXPECT_EQ(bits(logf(m, 0.0f)), bits(-kInf));
    EXPECT_EQ(bits(logf(m, -0.0f)), bits(-kInf));
    EXPECT_EQ(bits(logf(m, -1.0f)), kCanonicalNanBits);
    EXPECT_EQ(bits(logf(m, kInf)), bits(kInf));
    EXPECT_EQ(bits(log1pf(m, 0.0f)), 0u);
    EXPECT_EQ(bits(log1pf(m, -0.0f)), 0x80000000u);
    EXPECT_EQ(bits(log1pf(m, -1.0f)), bits(-kInf));
    EXPECT_EQ(bits(log1pf(m, -2.0f)), kCanonicalNanBits);
    EXPECT_EQ(bits(log1pf(m, kInf)), bits(kInf));
    EXPECT_EQ(bits(sigmoid(m, -kInf)), 0u);  // rule 10
    EXPECT_EQ(bits(silu(m, -kInf)), kCanonicalNanBits);
    EXPECT_EQ(bits(silu(m, kInf)), bits(kInf));
    EXPECT_EQ(bits(softplus(m, 30.0f)), bits(30.0f));
  }
}

// sigmoid and silu take x = +-0 without the table (padded expert rows are zeros): the shortcut gives
// the formula's bits, computed here from the expf factors as the batched forms compute them.
TEST(DeviceMath, SigmoidAndSiluOfZeroTakeTheFormulasValue) {
  const Ex2Tables& t = default_ex2_tables();
  for (float x : {0.0f, -0.0f}) {
    const ExpfFactors e = libdevice_expf_factors(t, -x);
    const float denominator = std::fma(e.mantissa, e.scale, 1.0f);
    EXPECT_EQ(bits(sigmoid(MathModel::kLibdevice, x)), bits(1.0f / denominator)) << hex(bits(x));
    EXPECT_EQ(bits(silu(MathModel::kLibdevice, x)), bits(x / denominator)) << hex(bits(x));
    std::vector<float> in = {x, 1.0f, x}, out(3);
    silu_n(MathModel::kLibdevice, in, out);
    EXPECT_EQ(bits(out[0]), bits(silu(MathModel::kLibdevice, x)));
    sigmoid_n(MathModel::kLibdevice, in, out);
    EXPECT_EQ(bits(out[2]), bits(sigmoid(MathModel::kLibdevice, x)));
  }
  EXPECT_EQ(bits(silu(MathModel::kLibdevice, -0.0f)), 0x80000000u);
  EXPECT_EQ(bits(sigmoid(MathModel::kLibdevice, -0.0f)), bits(0.5f));
}

TEST(DeviceMath, Ex2ApproxFlushesAndSaturatesAsRule12Says) {
  EXPECT_EQ(ex2_approx(0x1p-127f), 1.0f);  // subnormal input counts as 0
  EXPECT_EQ(ex2_approx(-0x1p-127f), 1.0f);
  EXPECT_EQ(bits(ex2_approx(from_bits(0x7FC00000u))), kCanonicalNanBits);
  EXPECT_EQ(ex2_approx(128.0f), kInf);
  EXPECT_EQ(bits(ex2_approx(-kInf)), 0u);
  EXPECT_EQ(ex2_approx(-126.0f), 0x1p-126f);
  EXPECT_EQ(bits(ex2_approx(-127.0f)), 0u);  // 2^-127 is subnormal: flushed
  EXPECT_EQ(ex2_approx(3.0f), 8.0f);
  EXPECT_EQ(ex2_approx(-3.0f), 0.125f);
  const Ex2Tables& t = default_ex2_tables();
  EXPECT_EQ(bits(ex2_approx(5.5f)), bits(t.tp[1u << 22]) + (5u << 23));
  EXPECT_EQ(bits(ex2_approx(-5.5f)), bits(t.tn[1u << 22]) - (5u << 23));
}

TEST(DeviceMath, BatchedFormsEqualTheScalarCalls) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> act(-30.0f, 30.0f);
  std::vector<float> x(10'007);  // not a multiple of the block
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 3) ? act(rng) : from_bits(static_cast<uint32_t>(rng()));
  using Batched = void (*)(MathModel, std::span<const float>, std::span<float>);
  using Scalar = float (*)(MathModel, float);
  const std::pair<Batched, Scalar> fns[] = {{expf_n, expf}, {sigmoid_n, sigmoid}, {silu_n, silu}, {softplus_n, softplus}};
  for (MathModel m : {MathModel::kLibdevice, MathModel::kCorrectlyRounded}) {
    for (auto [batched, scalar] : fns) {
      std::vector<float> y(x.size());
      batched(m, x, y);
      std::vector<float> in_place = x;
      batched(m, in_place, in_place);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(bits(y[i]), bits(scalar(m, x[i]))) << math_model_name(m) << " x=" << hex(bits(x[i]));
        ASSERT_EQ(bits(in_place[i]), bits(y[i]));
      }
    }
  }
  std::vector<float> short_out(3);
  EXPECT_THROW(expf_n(MathModel::kLibdevice, x, short_out), std::invalid_argument);
}

// --- the cr model is correctly rounded (MPFR oracle) -----------------------------------------------

float mpfr_correctly_rounded(float x, int (*fn)(mpfr_ptr, mpfr_srcptr, mpfr_rnd_t)) {
  mpfr_t v;
  mpfr_init2(v, 24);
  mpfr_set_emin(-148);
  mpfr_set_emax(128);
  mpfr_t in;
  mpfr_init2(in, 24);
  mpfr_set_flt(in, x, MPFR_RNDN);
  const int inex = fn(v, in, MPFR_RNDN);
  mpfr_subnormalize(v, inex, MPFR_RNDN);
  const float out = mpfr_get_flt(v, MPFR_RNDN);
  mpfr_clear(v);
  mpfr_clear(in);
  mpfr_set_emin(mpfr_get_emin_min());
  mpfr_set_emax(mpfr_get_emax_max());
  return std::isnan(out) ? from_bits(kCanonicalNanBits) : out;
}

TEST(DeviceMath, CorrectlyRoundedModelAgreesWithMpfr) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> range(-110.0f, 100.0f);
  int checked = 0;
  for (int i = 0; i < 200'000; ++i) {
    const float x = (i % 2) ? range(rng) : from_bits(static_cast<uint32_t>(rng()));
    ASSERT_EQ(bits(expf(MathModel::kCorrectlyRounded, x)), bits(mpfr_correctly_rounded(x, mpfr_exp))) << hex(bits(x));
    ASSERT_EQ(bits(logf(MathModel::kCorrectlyRounded, x)), bits(mpfr_correctly_rounded(x, mpfr_log))) << hex(bits(x));
    ASSERT_EQ(bits(log1pf(MathModel::kCorrectlyRounded, x)), bits(mpfr_correctly_rounded(x, mpfr_log1p))) << hex(bits(x));
    ++checked;
  }
  EXPECT_EQ(checked, 200'000);
}

// --- powf -------------------------------------------------------------------------------------------

// Both models follow C99 Annex F's pow; libdevice reaches each case by the PTX's own branches
// (libdevice_ptx.md, "__nv_powf"), so each row is also a branch of the emulation.
TEST(DevicePowf, SpecialValuesOfBothModels) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const uint32_t kNan = kCanonicalNanBits;
  struct Case {
    float x, y;
    uint32_t want;
  };
  const Case cases[] = {
      // y = ±0 and x = 1 win over NaN; x = -1 with y = ±Inf is 1.
      {nan, 0.0f, bits(1.0f)}, {nan, -0.0f, bits(1.0f)}, {-kInf, 0.0f, bits(1.0f)},
      {1.0f, nan, bits(1.0f)}, {1.0f, kInf, bits(1.0f)}, {1.0f, -kInf, bits(1.0f)},
      {-1.0f, kInf, bits(1.0f)}, {-1.0f, -kInf, bits(1.0f)},
      // Any other NaN operand gives the canonical NaN.
      {nan, 1.0f, kNan}, {2.0f, nan, kNan}, {-1.0f, nan, kNan}, {from_bits(0xFFC00001u), 2.0f, kNan},
      // A negative base needs an integer exponent; an odd one keeps the sign.
      {-8.0f, 1.0f / 3.0f, kNan}, {-2.0f, 0.5f, kNan}, {-kInf, 0.5f, bits(kInf)},
      {-2.0f, 3.0f, bits(-8.0f)}, {-2.0f, 2.0f, bits(4.0f)}, {-2.0f, -3.0f, bits(-0.125f)},
      {-0.5f, kInf, 0u}, {-2.0f, kInf, bits(kInf)}, {-2.0f, 1e30f, bits(kInf)},
      // ±0: a negative exponent gives Inf, signed for odd integers only.
      {0.0f, -3.0f, bits(kInf)}, {-0.0f, -3.0f, bits(-kInf)}, {-0.0f, -2.0f, bits(kInf)},
      {-0.0f, -0.5f, bits(kInf)}, {-0.0f, -kInf, bits(kInf)}, {-0.0f, 3.0f, 0x80000000u},
      {-0.0f, 2.0f, 0u}, {0.0f, 3.0f, 0u}, {-0.0f, 0.5f, 0u}, {0.0f, kInf, 0u},
      // ±Inf: the reciprocal of the ±0 rows.
      {-kInf, -3.0f, 0x80000000u}, {-kInf, 3.0f, bits(-kInf)}, {-kInf, 2.0f, bits(kInf)},
      {kInf, -1.0f, 0u}, {kInf, 2.0f, bits(kInf)}, {kInf, -kInf, 0u},
      // |y| = Inf with |x| != 1.
      {0.5f, kInf, 0u}, {0.5f, -kInf, bits(kInf)}, {2.0f, kInf, bits(kInf)}, {2.0f, -kInf, 0u},
      // Overflow, gradual underflow (one rounding, ties to even) and a subnormal base.
      {2.0f, 128.0f, bits(kInf)}, {10.0f, 39.0f, bits(kInf)}, {2.0f, 1e30f, bits(kInf)},
      {2.0f, 127.0f, bits(0x1p127f)}, {0.5f, 149.0f, bits(0x1p-149f)}, {2.0f, -149.0f, bits(0x1p-149f)},
      {0.5f, 150.0f, 0u}, {0.5f, 149.5f, bits(0x1p-149f)}, {0.5f, 1e30f, 0u},
      {0x1p-140f, 1.0f, bits(0x1p-140f)}, {-0x1p-140f, 1.0f, bits(-0x1p-140f)},
      {3.0f, 2.0f, bits(9.0f)}, {10.0f, 3.0f, bits(1000.0f)},
  };
  for (MathModel m : {MathModel::kLibdevice, MathModel::kCorrectlyRounded}) {
    SCOPED_TRACE(math_model_name(m));
    for (const Case& c : cases) {
      EXPECT_EQ(hex(bits(powf(m, c.x, c.y))), hex(c.want)) << "pow(" << c.x << ", " << c.y << ")";
    }
  }
}

// torch.pow on fp32 CUDA tensors on an H200 (torch 2.11), where libdevice is 1 ulp off the
// correctly rounded value.
TEST(DevicePowf, ReproducesTheH200WhereItIsNotCorrectlyRounded) {
  struct Case {
    float x, y, gpu, cr;
  };
  const Case cases[] = {{0.9f, 57.0f, 0x1.4318b8p-9f, 0x1.4318b6p-9f},
                        {0.999f, 102.0f, 0x1.ce5400p-1f, 0x1.ce5402p-1f},
                        {0.95f, 6.0f, 0x1.785df4p-1f, 0x1.785df6p-1f}};
  for (const Case& c : cases) {
    EXPECT_EQ(hex(bits(libdevice_powf(c.x, c.y))), hex(bits(c.gpu))) << c.x << "^" << c.y;
    EXPECT_EQ(hex(bits(powf(MathModel::kLibdevice, c.x, c.y))), hex(bits(c.gpu)));
    EXPECT_EQ(hex(bits(powf(MathModel::kCorrectlyRounded, c.x, c.y))), hex(bits(c.cr)));
  }
}

// AdamW's bias corrections 1 - beta^step: beta^t for t = 1..200000, as the H200 computed them
// (torch 2.11), counted against the cr model. The counts of 0.9f and 0.98f also pin the rounding of
// rcp.approx for their mantissas: with the reciprocal rounded the other way they would be 67 and 272.
TEST(DevicePowf, AdamBiasCorrectionStepsMatchTheH200) {
  struct Beta {
    float beta;
    int differing_steps;
    std::vector<int> first_steps;
  };
  const Beta betas[] = {{0.8f, 34, {45, 49, 52}}, {0.9f, 79, {57, 89, 95}}, {0.95f, 121, {6}},
                        {0.98f, 267, {}},          {0.99f, 588, {}},        {0.999f, 5826, {102, 140, 173, 179}},
                        {0.9999f, 12617, {}}};
  constexpr int kSteps = 200'000;
  for (const Beta& b : betas) {
    SCOPED_TRACE("beta " + std::to_string(b.beta));
    std::vector<int> differing;
    int64_t max_ulps = 0;
    for (int t = 1; t <= kSteps; ++t) {
      const float step = static_cast<float>(t);
      const float gpu = libdevice_powf(b.beta, step);
      const float cr = powf(MathModel::kCorrectlyRounded, b.beta, step);
      if (bits(gpu) == bits(cr)) continue;
      differing.push_back(t);
      max_ulps = std::max(max_ulps, std::abs(static_cast<int64_t>(bits(gpu)) - bits(cr)));
    }
    EXPECT_EQ(static_cast<int>(differing.size()), b.differing_steps);
    const size_t shown = std::min(differing.size(), b.first_steps.size());
    EXPECT_EQ(std::vector<int>(differing.begin(), differing.begin() + shown), b.first_steps);
    EXPECT_EQ(max_ulps, 1);
  }
}

// cvt.rni takes n = round(y log2|x|) to the even integer on a tie. 2^-3 to the 24.5/3 lands on
// t = -24.5: n = -24 gives 0x333504EC, rounding half away from zero (n = -25) would give 0x333504EB.
TEST(DevicePowf, HalfwayExponentsTakeTheEvenIntegerAsCvtRniDoes) {
  EXPECT_EQ(hex(bits(libdevice_powf(0.125f, 24.5f / 3.0f))), "0x333504ec");
  EXPECT_EQ(hex(bits(libdevice_powf(0x1p-3f, 104.5f / 3.0f))), "0x0b350512");  // t = -104.5, n = -104
}

// Away from the special cases libdevice stays within 1 ulp of the cr model wherever the result is
// normal, and misses it often enough that the models are told apart.
TEST(DevicePowf, LibdeviceIsWithinOneUlpOfTheCorrectlyRoundedModel) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> base(-4.0f, 4.0f);
  std::uniform_real_distribution<float> exponent(-60.0f, 60.0f);
  int checked = 0, off_by_one = 0, negative_bases = 0;
  for (int i = 0; i < 400'000; ++i) {
    float x = (i % 2) ? base(rng) : from_bits(static_cast<uint32_t>(rng()));
    float y = (i % 2) ? exponent(rng) : from_bits(static_cast<uint32_t>(rng()));
    if (i % 4 == 1) y = std::round(y);  // integer exponents, so negative bases give numbers
    const float cr = powf(MathModel::kCorrectlyRounded, x, y);
    if (!std::isfinite(cr) || std::fabs(cr) < std::numeric_limits<float>::min()) continue;
    const float gpu = libdevice_powf(x, y);
    const int64_t ulps = std::abs(static_cast<int64_t>(bits(gpu)) - bits(cr));
    ASSERT_LE(ulps, 1) << "pow(" << hex(bits(x)) << ", " << hex(bits(y)) << ") = " << hex(bits(gpu))
                       << ", cr " << hex(bits(cr));
    ++checked;
    off_by_one += ulps == 1;
    negative_bases += x < 0.0f;
  }
  std::printf("libdevice powf: %d of %d normal results 1 ulp off the cr model, %d negative bases\n",
              off_by_one, checked, negative_bases);
  EXPECT_GT(checked, 150'000);
  EXPECT_GT(negative_bases, 20'000);
  EXPECT_GT(off_by_one, checked / 100);
}

float mpfr_correctly_rounded_pow(float x, float y) {
  mpfr_set_emin(-148);
  mpfr_set_emax(128);
  mpfr_t v, a, b;
  mpfr_inits2(24, v, a, b, static_cast<mpfr_ptr>(nullptr));
  mpfr_set_flt(a, x, MPFR_RNDN);
  mpfr_set_flt(b, y, MPFR_RNDN);
  const int inex = mpfr_pow(v, a, b, MPFR_RNDN);
  mpfr_subnormalize(v, inex, MPFR_RNDN);
  const float out = mpfr_get_flt(v, MPFR_RNDN);
  mpfr_clears(v, a, b, static_cast<mpfr_ptr>(nullptr));
  mpfr_set_emin(mpfr_get_emin_min());
  mpfr_set_emax(mpfr_get_emax_max());
  return std::isnan(out) ? from_bits(kCanonicalNanBits) : out;
}

TEST(DevicePowf, CorrectlyRoundedModelAgreesWithMpfr) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> base(-4.0f, 4.0f);
  std::uniform_real_distribution<float> exponent(-160.0f, 160.0f);
  for (int i = 0; i < 100'000; ++i) {
    const float x = (i % 2) ? base(rng) : from_bits(static_cast<uint32_t>(rng()));
    const float y = (i % 4 == 1) ? std::round(exponent(rng)) : (i % 2) ? exponent(rng) : from_bits(static_cast<uint32_t>(rng()));
    ASSERT_EQ(hex(bits(powf(MathModel::kCorrectlyRounded, x, y))), hex(bits(mpfr_correctly_rounded_pow(x, y))))
        << "pow(" << hex(bits(x)) << ", " << hex(bits(y)) << ")";
  }
}

// --- replay of the GPU's own results --------------------------------------------------------------

TEST(DeviceSample, EmulationReproducesEveryCapturedGpuResult) {
  const DeviceSample s = load_device_sample_file(kDataDir + "/device_sample_sm90.bin");
  const Ex2Tables& tables = ex2_tables_for_device(s.device.arch);
  const std::vector<uint32_t> inputs = sample_inputs(s.spec);
  ASSERT_GT(inputs.size(), 65536u + 1'000'000u);
  ASSERT_GT(s.spec.boundaries.size(), 500u);
  std::printf("sample of %s (%s, driver %s, captured %s): %zu inputs\n", s.device.gpu_name.c_str(),
              s.device.arch.c_str(), s.device.driver_version.c_str(), s.device.captured_utc.c_str(), inputs.size());
  for (int k = 0; k < kSampleFunctionCount; ++k) {
    const SampleFunction f = kSampleFunctions[k];
    size_t mismatches = 0;
    std::string first;
    std::set<uint32_t> distinct;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const uint32_t want = s.outputs[k][i];
      const uint32_t got = bits(emulate_sample_function(tables, f, from_bits(inputs[i])));
      if (distinct.size() < 100000) distinct.insert(want);
      if (got != want && mismatches++ == 0) {
        first = "x=" + hex(inputs[i]) + " gpu=" + hex(want) + " emulation=" + hex(got);
      }
    }
    std::printf("  %-8s %zu / %zu mismatches\n", sample_function_name(f), mismatches, inputs.size());
    EXPECT_EQ(mismatches, 0u) << sample_function_name(f) << ": first mismatch " << first;
    EXPECT_GT(distinct.size(), 50000u) << sample_function_name(f) << ": the sample is degenerate";
  }
  constexpr int kExpfIndex = 1;
  static_assert(kSampleFunctions[kExpfIndex] == SampleFunction::kExpf);
  // The sample tells the models apart: the cr expf misses the GPU on many of its inputs.
  size_t cr_misses = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    cr_misses += bits(expf(MathModel::kCorrectlyRounded, from_bits(inputs[i]))) != s.outputs[kExpfIndex][i];
  }
  std::printf("  cr expf misses the GPU on %zu of them\n", cr_misses);
  EXPECT_GT(cr_misses, 10000u);
}

TEST(DeviceSample, FormatRoundTripsAndRejectsTruncation) {
  DeviceSample s;
  s.device.arch = "sm_test";
  s.spec.boundaries = {0u, 0x7FC00000u, 0x3F800000u};
  s.spec.random_bits_count = 1000;
  s.spec.random_range_count = 1000;
  const std::vector<uint32_t> inputs = sample_inputs(s.spec);
  std::mt19937 rng(3);
  for (int k = 0; k < kSampleFunctionCount; ++k) {
    for (uint32_t x : inputs) {
      // The prediction, off by 0, ±1 or a large jump: every code and escape path.
      const uint32_t p = sample_predict(kSampleFunctions[k], x);
      const uint32_t r = rng() % 8;
      s.outputs[k].push_back(r < 5 ? p : r == 5 ? p + 1 : r == 6 ? p - 1 : p + 1000 + rng() % 100000);
    }
  }
  const std::vector<unsigned char> bytes = encode_device_sample(s);
  const DeviceSample d = decode_device_sample(bytes);
  EXPECT_EQ(d.device.arch, "sm_test");
  EXPECT_EQ(d.spec.boundaries, s.spec.boundaries);
  for (int k = 0; k < kSampleFunctionCount; ++k) EXPECT_EQ(d.outputs[k], s.outputs[k]) << k;
  std::vector<unsigned char> truncated(bytes.begin(), bytes.end() - 3);
  EXPECT_THROW(decode_device_sample(truncated), SampleError);
}

}  // namespace
}  // namespace bitparity::ref::math
