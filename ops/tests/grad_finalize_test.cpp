// Properties of grad_finalize (spec OP-12) that its contracts fix exactly: (a) the aligned contract
// with dp_size = 2^k multiplies by 2^-k, exact wherever the result is normal; (b) it returns the
// expert bias and the counts untouched, and with dp_size = 1 main_grad's bits as they were; (c)
// r0.13 moves each bias by exactly +rate, -rate or nothing, nothing where an expert's count equals
// its layer's mean (all counts equal), and zeroes the counts.
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/dtype.h"
#include "core/gen.h"
#include "properties/harness.h"

namespace bitparity::ops {
namespace {

using namespace props;

bool is_contract(const Target& t, const char* contract) { return t.op == "grad_finalize" && t.contract() == contract; }
bool aligned(const Target& t) { return is_contract(t, "megatron_aligned"); }
bool r013(const Target& t) { return is_contract(t, "megatron_r013"); }

Case generated() { return *op_info("grad_finalize").generate(Direction::kForward); }

class AlignedScaling : public testing::TestWithParam<Target> {};

TEST_P(AlignedScaling, PowerOfTwoRanksScaleExactlyAndTheBiasStays) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    Case c = generated();
    const int k = *rc::gen::inRange(0, 7);
    c.attrs["dp_size"] = int64_t{1} << k;
    reproduce_with(c, "invariance_violation");
    const Outcome o = run(target, c);
    RC_ASSERT(!o.rejected());
    const Tensor& g = *c.input("main_grad");
    const Tensor& out = o.outputs->at("main_grad");
    for (int64_t i = 0; i < g.numel(); ++i) {
      if (k == 0) {
        RC_ASSERT(out.bits(i) == g.bits(i));  // no multiplication at all: NaN payloads kept
        continue;
      }
      const double want = std::ldexp(g.f64(i), -k);
      if (std::isnan(want)) RC_ASSERT(out.bits(i) == 0x7FFFFFFFu);
      else if (std::fabs(want) >= 0x1p-126 || want == 0 || std::isinf(want))
        RC_ASSERT(out.f64(i) == want && std::signbit(out.f64(i)) == std::signbit(want));
    }
    for (const char* name : {"tokens_per_expert", "expert_bias"})
      if (const Tensor* in = c.input(name)) RC_ASSERT(bit_identical(o.outputs->at(name), *in));
    RC_TAG(k == 0 ? "dp=1" : "dp=2^k");
  });
}

INSTANTIATE_TEST_SUITE_P(GradFinalize, AlignedScaling, testing::ValuesIn(targets_where(aligned)), target_name);

class R013Bias : public testing::TestWithParam<Target> {};

TEST_P(R013Bias, TheBiasMovesByTheRateOrStaysAtTheMean) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    Case c = generated();
    if (!c.input("tokens_per_expert")) {  // a layer of 8 experts, drawn counts and biases
      Tensor counts(DType::kFP32, {1, 8});
      for (int64_t e = 0; e < 8; ++e) counts.set_f32(e, static_cast<float>(*rc::gen::inRange(0, 50)));
      c.inputs["tokens_per_expert"] = counts;
      c.inputs["expert_bias"] = *gen::tensor(DType::kFP32, {1, 8}, gen::ValueFamily::kMixed);
    }
    const bool all_equal = *rc::gen::arbitrary<bool>();
    if (all_equal) {
      Tensor& counts = c.inputs["tokens_per_expert"];
      for (int64_t i = 0; i < counts.numel(); ++i) counts.set_f32(i, 37.0f);
    }
    reproduce_with(c, "invariance_violation");
    const Outcome o = run(target, c);
    RC_ASSERT(!o.rejected());
    const Tensor& bias = *c.input("expert_bias");
    const Tensor& moved = o.outputs->at("expert_bias");
    const float rate = static_cast<float>(c.float_attr("bias_update_rate").value_or(1e-3));
    for (int64_t i = 0; i < bias.numel(); ++i) {
      const float b = bias.f32(i), m = moved.f32(i);
      if (std::isnan(b)) {
        RC_ASSERT(moved.bits(i) == 0x7FFFFFFFu);
        continue;
      }
      // The three fp32 sums b + rate, b - rate, b + 0 (a zero of the rate's sign when the step is 0).
      const float up = b + rate, down = b - rate, stay = b + 0.0f * rate;
      RC_ASSERT(m == up || m == down || m == stay);
      if (all_equal) RC_ASSERT(moved.bits(i) == std::bit_cast<uint32_t>(stay));
    }
    const Tensor& counts = o.outputs->at("tokens_per_expert");
    for (int64_t i = 0; i < counts.numel(); ++i) RC_ASSERT(counts.bits(i) == 0u);
    RC_TAG(all_equal ? "all counts equal" : "counts drawn");
  });
}

INSTANTIATE_TEST_SUITE_P(GradFinalize, R013Bias, testing::ValuesIn(targets_where(r013)), target_name);

}  // namespace
}  // namespace bitparity::ops
