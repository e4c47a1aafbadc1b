// The kernels' element formulas (gpu/swiglu_elements.cuh, gpu/common/sigmoid_silu.cuh), compiled
// for the host, against the reference's (reference/swiglu_common.h) on every clamp class,
// activation and scale dtype. Runs
// without a GPU, so that a change on either side shows in CI before anyone has device time: the
// clamp model of the reference changed once during issue 4, and this is what would have caught it.
// Both sides run libdevice's expf (the device side through the reference's ex2 tables here), so
// they must agree bit for bit.
#include "gpu/tests/host_intrinsics.h"  // first: the intrinsics the device header calls
#include "gpu/swiglu_elements.cuh"

#include <bit>
#include <cmath>
#include <optional>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/error.h"
#include "gpu/common/row_sum.h"
#include "reference/numerics.h"
#include "reference/swiglu_common.h"

namespace bitparity::gpu {
namespace {

constexpr int kSamplesPerConfig = 20000;

// Limits of every clamp class the generator draws (core/gen.h): zero, -0, negative, NaN, +Inf,
// tiny (rounding to +0 or to a subnormal in fp32), normal.
const double kClamps[] = {0.0, -0.0, -1.0, -0.125, NAN, INFINITY, 1e-300, 1e-45, 1e-40, 0.5, 7.0};

float draw(std::mt19937& rng, DType dtype) {
  static const float specials[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-40f, -1e-40f, 7.0f, -7.0f, 0.5f};
  float v;
  if (rng() % 4 == 0) {
    v = specials[rng() % std::size(specials)];
  } else {
    const int exponent = static_cast<int>(rng() % 13) - 6;
    v = std::ldexp(1.0f + static_cast<float>(rng() % (1u << 23)) / static_cast<float>(1u << 23), exponent);
    if (rng() & 1) v = -v;
  }
  return round_to(dtype, v);
}

bool same_bits(float a, float b) { return (std::isnan(a) && std::isnan(b)) || f32_bits(a) == f32_bits(b); }

MegatronClamp device_clamp(std::optional<double> c) {
  MegatronClamp m;
  if (!c) return m;
  m.on = true;
  m.nan_limit = std::isnan(*c);
  m.hi = static_cast<float>(*c);
  m.lo = static_cast<float>(-*c);
  return m;
}

template <class Act>
void check_megatron(DType w) {
  const DType act = Act::kDType, chain = ref::swiglu::promote(act, w);
  std::mt19937 rng(static_cast<unsigned>(act) * 7 + static_cast<unsigned>(w));
  int mismatches = 0;
  for (int on = 0; on < 2; ++on)
    for (double limit : kClamps) {
      const std::optional<double> clamp = on ? std::optional<double>(limit) : std::nullopt;
      const MegatronClamp m = device_clamp(clamp);
      for (int i = 0; i < kSamplesPerConfig; ++i) {
        const float a = draw(rng, act), b = draw(rng, act), g = draw(rng, act), s = draw(rng, w);
        const float ref_out = ref::swiglu::megatron_swiglu(act, a, b, clamp);
        const float dev_out = device::megatron_swiglu<Act>(a, b, m);
        const float g_scaled = round_to(chain, g * s);
        const auto ref_grad = ref::swiglu::megatron_swiglu_back(act, chain, g_scaled, a, b, clamp);
        const auto dev_grad = device::megatron_swiglu_back<Act>(chain == act, g_scaled, a, b, m);
        const bool ok = same_bits(ref_out, dev_out) && same_bits(ref_out, dev_grad.swiglu) &&
                        same_bits(ref_grad.da, dev_grad.da) && same_bits(ref_grad.db, dev_grad.db);
        if (!ok && ++mismatches <= 5)
          ADD_FAILURE() << dtype_name(act) << " act, " << dtype_name(w) << " scale, clamp "
                        << (clamp ? std::to_string(*clamp) : "none") << ": a=" << a << " b=" << b << " g'=" << g_scaled
                        << "; swiglu ref " << ref_out << " kernel " << dev_out << "; da ref " << ref_grad.da
                        << " kernel " << dev_grad.da << "; db ref " << ref_grad.db << " kernel " << dev_grad.db;
      }
    }
  EXPECT_EQ(mismatches, 0);
}

TEST(DeviceFormulas, MegatronElementsEqualTheReference) {
  for (DType w : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    check_megatron<device::BF16>(w);
    check_megatron<device::FP16>(w);
    check_megatron<device::FP32>(w);
  }
}

// The kernels' sigmoid and silu (an explicit __nv_expf with the contracted denominator) against
// the reference's libdevice model, on inputs across the range where exp neither overflows nor
// flushes, and on the specials.
TEST(DeviceFormulas, SigmoidAndSiluEqualTheLibdeviceModel) {
  std::mt19937 rng(5);
  int mismatches = 0;
  for (int i = 0; i < 20 * kSamplesPerConfig; ++i) {
    const float x = i % 16 == 0 ? draw(rng, DType::kFP32)
                                : std::bit_cast<float>(static_cast<uint32_t>(rng()));  // any pattern
    const device::SigmoidSilu got = device::sigmoid_silu(x);
    if (!same_bits(got.sigmoid, ref::sigmoid_f32(x)) || !same_bits(got.silu, ref::silu_f32(x)))
      if (++mismatches <= 5)
        ADD_FAILURE() << "x = " << x << " (0x" << std::hex << f32_bits(x) << std::dec << "): sigmoid kernel "
                      << got.sigmoid << " ref " << ref::sigmoid_f32(x) << ", silu kernel " << got.silu << " ref "
                      << ref::silu_f32(x);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(DeviceFormulas, PaddleClampEqualsTheReference) {
  std::mt19937 rng(3);
  for (double limit : kClamps) {
    if (!(limit > 0) || !std::isfinite(limit)) continue;  // Paddle's kernel rejects the others
    const PaddleClamp dev{true, static_cast<float>(limit)};
    const ref::swiglu::PaddleClamp ref{true, static_cast<float>(limit)};
    for (int i = 0; i < kSamplesPerConfig; ++i) {
      const float g = draw(rng, DType::kFP32), v = draw(rng, DType::kFP32);
      ASSERT_TRUE(same_bits(device::paddle_gate(g, dev), ref::swiglu::paddle_gate(g, ref))) << limit << " " << g;
      ASSERT_TRUE(same_bits(device::paddle_value(v, dev), ref::swiglu::paddle_value(v, ref))) << limit << " " << v;
    }
  }
}

// The CUDA side's rule-7 plan (gpu/common/row_sum.h) and the reference's are written apart, from the
// spec; they must agree on every width the rule models, at every row count, and reject the same
// layouts as unmodelled.
TEST(DeviceFormulas, Rule7PlanEqualsTheReferences) {
  int compared = 0, rejected = 0, wide_vectors = 0;
  for (int element_bytes : {4, 2})
    for (int64_t rows : {0, 1, 2, 3, 7, 16, 17, 64, 100, 511, 512, 513, 4096, 16384, 65536})
      for (int64_t width = 1; width <= kRuleMaxRowWidth + 8; ++width) {
        const std::string where = "width " + std::to_string(width) + ", rows " + std::to_string(rows) + ", " +
                                  std::to_string(element_bytes) + "-byte elements";
        std::optional<RowSumPlan> gpu_plan;
        std::optional<ref::RowSumPlan> ref_plan;
        std::string gpu_class, ref_class;
        try {
          gpu_plan = rule7_row_sum_plan(width, rows, element_bytes);
        } catch (const RejectError& e) {
          gpu_class = e.error_class();
        }
        try {
          ref_plan = ref::torch_row_sum_plan(width, rows, element_bytes);
        } catch (const RejectError& e) {
          ref_class = e.error_class();
        }
        ASSERT_EQ(gpu_plan.has_value(), ref_plan.has_value()) << where;
        if (!gpu_plan) {
          ASSERT_EQ(gpu_class, "unmodelled") << where;
          ASSERT_EQ(ref_class, "unmodelled") << where;
          ++rejected;
          continue;
        }
        ASSERT_EQ(gpu_plan->vectorized, ref_plan->vectorized) << where;
        ASSERT_EQ(gpu_plan->lanes, ref_plan->lanes) << where;
        ASSERT_EQ(gpu_plan->vector, ref_plan->vector) << where;
        wide_vectors += gpu_plan->vectorized && gpu_plan->vector == kRuleVector16;
        ++compared;
      }
  EXPECT_GT(compared, 0);
  EXPECT_GT(wide_vectors, 0);  // 16-bit rows plan 8-element vectors
  EXPECT_GT(rejected, 0);  // both rejection classes (not a multiple of the vector, too wide) are reached
}

}  // namespace
}  // namespace bitparity::gpu
