// Properties of adamw_step (spec OP-12) that AdamW's arithmetic fixes exactly, whatever the
// rounding details: (a) the moments do not depend on lr, eps, weight_decay or step; (b) maximize
// with the gradient negated is the same step bit for bit; (c) lr = 0 leaves the parameter as it
// was (a zero's sign aside, which the spec's order fixes) wherever the update term is finite; (d) once
// beta1^t and beta2^t underflow in fp32 the bias corrections are exactly 1, so later steps give
// the same bits.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/dtype.h"
#include "properties/harness.h"

namespace bitparity::ops {
namespace {

using namespace props;

bool is_adamw(const Target& t) { return t.op == "adamw_step"; }

Case generated() {
  Case c = *op_info("adamw_step").generate(Direction::kForward);
  c.attrs["step"] = c.attrs.count("step") ? c.attrs["step"] : AttrValue{int64_t{1}};
  return c;
}

void expect_same(const Outcome& a, const Outcome& b, const char* output, const std::string& why) {
  RC_ASSERT(!a.rejected() && !b.rejected());
  if (!bit_identical(a.outputs->at(output), b.outputs->at(output))) RC_FAIL(std::string(output) + " differs: " + why);
}

class AdamwMoments : public testing::TestWithParam<Target> {};

TEST_P(AdamwMoments, MomentsIgnoreLrEpsDecayAndStep) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = generated();
    reproduce_with(c, "invariance_violation");
    Case d = c;
    d.attrs["lr"] = *rc::gen::element(0.0, 0.5, 1e-5);
    d.attrs["eps"] = *rc::gen::element(0.0, 1e-3);
    d.attrs["weight_decay"] = *rc::gen::element(0.0, 0.3);
    d.attrs["step"] = *rc::gen::element<int64_t>(1, 7, 100000);
    const Outcome a = run(target, c), b = run(target, d);
    expect_same(a, b, "exp_avg", "lr, eps, weight_decay and step changed");
    expect_same(a, b, "exp_avg_sq", "lr, eps, weight_decay and step changed");
  });
}

INSTANTIATE_TEST_SUITE_P(Adamw, AdamwMoments, testing::ValuesIn(targets_where(is_adamw)), target_name);

class AdamwMaximize : public testing::TestWithParam<Target> {};

TEST_P(AdamwMaximize, MaximizeIsTheStepOfTheNegatedGradient) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    Case c = generated();
    c.attrs["maximize"] = true;
    reproduce_with(c, "invariance_violation");
    Case d = c;
    d.attrs["maximize"] = false;
    Tensor& g = d.inputs["grad"];
    const uint64_t sign = uint64_t{1} << (8 * dtype_size(g.dtype()) - 1);
    for (int64_t i = 0; i < g.numel(); ++i) g.set_bits(i, g.bits(i) ^ sign);
    const Outcome a = run(target, c), b = run(target, d);
    for (const char* output : {"param", "exp_avg", "exp_avg_sq"}) expect_same(a, b, output, "maximize against -grad");
  });
}

INSTANTIATE_TEST_SUITE_P(Adamw, AdamwMaximize, testing::ValuesIn(targets_where(is_adamw)), target_name);

class AdamwZeroLr : public testing::TestWithParam<Target> {};

TEST_P(AdamwZeroLr, ZeroLearningRateKeepsTheParameter) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    Case c = generated();
    c.attrs["lr"] = 0.0;
    reproduce_with(c, "invariance_violation");
    const Outcome o = run(target, c);
    RC_ASSERT(!o.rejected());
    const Tensor& p = *c.input("param");
    const Tensor& p1 = o.outputs->at("param");
    const Tensor& m1 = o.outputs->at("exp_avg");
    const Tensor& v1 = o.outputs->at("exp_avg_sq");
    const auto eps = static_cast<float>(c.float_attr("eps").value_or(1e-8));
    int kept = 0;
    for (int64_t i = 0; i < p.numel(); ++i) {
      // 0 * m / den is +-0 only where m is finite and den = sqrt(v1) / sqrt(bc2) + eps is not 0 or NaN.
      const float den_floor = std::sqrt(v1.f32(i)) + eps;
      if (!std::isfinite(p.f32(i)) || !std::isfinite(m1.f32(i)) || !(den_floor > 0)) continue;
      const bool decayed = static_cast<float>(c.float_attr("weight_decay").value_or(1e-2)) != 0.0f;
      if (p.f32(i) == 0) {
        // The decay's fma(-0, p, p) gives +0; then p - (+0 m / den), a zero of m's sign: -0 - (-0) = +0.
        const bool negative = !decayed && std::signbit(p.f32(i)) && !std::signbit(m1.f32(i));
        RC_ASSERT(p1.f32(i) == 0 && std::signbit(p1.f32(i)) == negative);
      } else {
        RC_ASSERT(p1.bits(i) == p.bits(i));
      }
      ++kept;
    }
    RC_CLASSIFY(kept > 0, "some elements checked");
  });
}

INSTANTIATE_TEST_SUITE_P(Adamw, AdamwZeroLr, testing::ValuesIn(targets_where(is_adamw)), target_name);

class AdamwLateSteps : public testing::TestWithParam<Target> {};

// beta <= 0.9999 in fp32: beta^t underflows to +0 well before t = 2^20 (0.9999^t < 2^-150 for t >
// 1.04e6), so 1 - powf(beta, t) = 1 at both steps below.
TEST_P(AdamwLateSteps, StepsPastTheUnderflowAreAlike) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    Case c = generated();
    c.attrs["step"] = int64_t{2'000'000};
    reproduce_with(c, "invariance_violation");
    Case d = c;
    d.attrs["step"] = int64_t{9'000'000};
    const Outcome a = run(target, c), b = run(target, d);
    for (const char* output : {"param", "exp_avg", "exp_avg_sq"}) expect_same(a, b, output, "step 2e6 against 9e6");
  });
}

INSTANTIATE_TEST_SUITE_P(Adamw, AdamwLateSteps, testing::ValuesIn(targets_where(is_adamw)), target_name);

// The denominator as fused_adam_utils.cuh writes it: sqrt(v) / sqrt(bc2) + eps, two roundings
// before the eps (not sqrt(v / bc2)). By hand, one fp32 element: lr 1, beta1 = beta2 = 0.5, eps 0,
// no decay, step 1; param +0, exp_avg = exp_avg_sq = +0, grad g = 0x1.001c8p+0.
//   bc1 = bc2 = 1 - 0.5 = 0.5 (powf(0.5, 1) is 0.5); step_size = 1 / 0.5 = 2.
//   exp_avg = fma(0.5, 0, fma(-0.5, g, g)) = g / 2, exp_avg_sq = (g * g) / 2, both exact halvings.
//   denom = sqrtf(exp_avg_sq) / sqrtf(0.5) = 1.00043499... (sqrtf(exp_avg_sq) over
//   0x1.6a09e6p-1, each rounded), one ulp above g; param = 0 - (2 * (g / 2)) / denom = -(g / denom)
//   = -(1 - 2^-23) = 0xbf7ffffe. (sqrt(exp_avg_sq / 0.5) = sqrtf(g * g) = g would give -1.)
TEST(AdamwByHand, TheDenominatorDividesSquareRoots) {
  Case c;
  c.op = "adamw_step";
  c.direction = Direction::kForward;
  c.attrs["lr"] = 1.0;
  c.attrs["beta1"] = 0.5;
  c.attrs["beta2"] = 0.5;
  c.attrs["eps"] = 0.0;
  c.attrs["weight_decay"] = 0.0;
  c.attrs["step"] = int64_t{1};
  Tensor grad(DType::kFP32, {1});
  grad.set_f32(0, 0x1.001c8p+0f);
  c.inputs["param"] = Tensor(DType::kFP32, {1});
  c.inputs["grad"] = grad;
  c.inputs["exp_avg"] = Tensor(DType::kFP32, {1});
  c.inputs["exp_avg_sq"] = Tensor(DType::kFP32, {1});
  const Outcome o = run({"adamw_step", Direction::kForward, "ref:megatron_eager"}, c);
  ASSERT_FALSE(o.rejected()) << o.message;
  EXPECT_EQ(o.outputs->at("param").bits(0), 0xbf7ffffeu);
  const float g = 0x1.001c8p+0f;
  EXPECT_EQ(o.outputs->at("exp_avg").f32(0), g / 2);
  EXPECT_EQ(o.outputs->at("exp_avg_sq").f32(0), (g * g) / 2);
}

// The shrinker keeps a case's rank while it cuts rows (a finding of class rank=2 keeps its class),
// each row's elements as they were; a case whose states differ in shape (rejected inputs) gets no
// cut, rather than one that reads a smaller state at param's indices.
TEST(AdamwShrink, RowsOfARank2CaseKeepTheRank) {
  Case c;
  c.op = "adamw_step";
  c.direction = Direction::kForward;
  for (const char* name : {"param", "grad", "exp_avg", "exp_avg_sq"}) {
    Tensor t(DType::kFP32, {3, 4});
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f32(i, static_cast<float>(i + 1) + (name[0] == 'g' ? 0.5f : 0.0f));
    c.inputs[name] = t;
  }
  const std::vector<Case> candidates = op_info("adamw_step").shrink_shape(c);
  std::set<int64_t> rows_alone;
  for (const Case& k : candidates) {
    const Tensor& p = *k.input("param");
    if (p.shape() != Shape{1, 4}) continue;
    for (const char* name : {"param", "grad", "exp_avg", "exp_avg_sq"}) ASSERT_EQ(k.input(name)->shape(), (Shape{1, 4})) << name;
    const float first = p.f32(0);  // row r starts at element 4r + 1
    const int64_t r = static_cast<int64_t>(first - 1) / 4;
    rows_alone.insert(r);
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(p.f32(j), c.input("param")->f32(4 * r + j));
    EXPECT_EQ(k.input("grad")->f32(0), c.input("grad")->f32(4 * r));
  }
  EXPECT_EQ(rows_alone, (std::set<int64_t>{0, 1, 2})) << "each of the three rows alone";
  c.inputs["grad"] = Tensor(DType::kFP32, {2, 4});
  EXPECT_TRUE(op_info("adamw_step").shrink_shape(c).empty());
}

}  // namespace
}  // namespace bitparity::ops
