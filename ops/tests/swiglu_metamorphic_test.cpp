// Metamorphic properties of the SwiGLU family: transformations of a case whose effect on the
// outputs the spec fixes exactly. (a) A clamp <= 0 or NaN behind the `> 0` gate is no clamp, and
// the unfused gate is not (the gate is the contract's ContractInfo::clamp_gate). (b) scale [rows]
// and [rows, 1] give the same bits, d_scale's shape following scale's. (Zero rows are the generic
// properties/zero_rows_test.)
#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/gen.h"
#include "properties/harness.h"
#include "ops/tests/swiglu_model.h"

namespace bitparity::ops {
namespace {

using namespace props;

bool has_clamp(const Target& t) { return op_info(t.op).attr("clamp") != nullptr; }
bool positive_gate(const Target& t) { return has_clamp(t) && t.contract_info().clamp_gate == ClampGate::kPositive; }
bool present_gate(const Target& t) { return has_clamp(t) && t.contract_info().clamp_gate == ClampGate::kPresent; }
bool present_gate_forward(const Target& t) { return present_gate(t) && t.direction == Direction::kForward; }
bool has_scale(const Target& t) {
  for (const TensorSpec& spec : op_info(t.op).inputs.at(t.direction))
    if (spec.name == "scale") return true;
  return false;
}

// Clamp values the `> 0` gate closes on: 0, -0, negative, NaN.
rc::Gen<double> closed_gate_clamp() {
  return rc::gen::oneOf(rc::gen::element(0.0, -0.0, std::numeric_limits<double>::quiet_NaN()),
                        rc::gen::map(rc::gen::inRange(1, 64), [](int v) { return -v / 8.0; }));
}

Case with_clamp(Case c, std::optional<double> clamp) {
  c.attrs.erase("clamp");
  if (clamp) c.attrs["clamp"] = *clamp;
  return c;
}

// Every clamp-taking contract must say which gate it applies, or (a) would skip it silently.
TEST(ClampGate, EveryContractOfAClampedOpHasAGate) {
  int clamped_ops = 0;
  for (const OpInfo& op : harness_registry().ops()) {
    if (!op.attr("clamp")) continue;
    ++clamped_ops;
    for (const ContractInfo& contract : op.contracts)
      EXPECT_NE(contract.clamp_gate, ClampGate::kNone) << op.name << " contract " << contract.name << " has no clamp gate";
  }
  EXPECT_GT(clamped_ops, 0);
}

// --- (a) clamp <= 0 --------------------------------------------------------------------------

class PositiveGate : public testing::TestWithParam<Target> {};

// OP-6: `clamp_value is not None and clamp_value > 0`: 0, -0.0, a negative value and NaN all
// leave the gate closed, so the outputs are those of the case without the attribute, bit for bit.
TEST_P(PositiveGate, ClampAtMostZeroOrNaNEqualsNoClamp) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = with_clamp(*op_info(target.op).generate(target.direction), *closed_gate_clamp());
    reproduce_with(c, "invariance_violation");
    RC_TAG(gen::clamp_class(c.float_attr("clamp")));
    const auto diff = difference(run(target, c), run(target, with_clamp(c, std::nullopt)),
                                 target.name() + " clamp " + gen::clamp_class(c.float_attr("clamp")) + " vs none");
    if (diff) RC_FAIL(*diff);
  });
}

INSTANTIATE_TEST_SUITE_P(Metamorphic, PositiveGate, testing::ValuesIn(targets_where(positive_gate)), target_name);

class PresentGateForward : public testing::TestWithParam<Target> {};

// OP-6: the unfused glu() clamps whenever the value is present; with c = ±0 the value half is
// clamped to [-0, 0] (min > max returns max), so every forward output is a zero (or NaN where a
// NaN or -inf gate makes silu NaN), and differs from the unclamped output wherever that is
// finite and nonzero.
TEST_P(PresentGateForward, ClampZeroPinsTheForwardToZero) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = with_clamp(*op_info(target.op).generate(target.direction), *rc::gen::element(0.0, -0.0));
    reproduce_with(c, "invariance_violation");
    const Outcome clamped = run(target, c);
    const Outcome unclamped = run(target, with_clamp(c, std::nullopt));
    RC_ASSERT(clamped.rejected() == unclamped.rejected());
    if (clamped.rejected()) return;
    const Tensor& out = clamped.outputs->at("out");
    const Tensor& free = unclamped.outputs->at("out");
    bool differs = false;
    for (int64_t i = 0; i < out.numel(); ++i) {
      const double v = out.f64(i), u = free.f64(i);
      RC_ASSERT(v == 0 || std::isnan(v));
      if (std::isfinite(u) && u != 0) {
        RC_ASSERT(out.bits(i) != free.bits(i));
        differs = true;
      }
    }
    RC_CLASSIFY(differs, "differs from no clamp");
  });
}

INSTANTIATE_TEST_SUITE_P(Metamorphic, PresentGateForward, testing::ValuesIn(targets_where(present_gate_forward)),
                         target_name);

// The smallest witness: y = [1 | 1] (and scale 1 where the op has one) with clamp 0 differs from
// no clamp under the unfused gate, in both directions.
Case ones_case(const Target& target) {
  Case c;
  c.op = target.op;
  c.direction = target.direction;
  auto ones = [](Shape shape) {
    Tensor t(DType::kBF16, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f32(i, 1.0f);
    return t;
  };
  c.inputs["y"] = ones({1, 2});
  if (has_scale(target)) c.inputs["scale"] = ones({1});
  if (target.direction == Direction::kBackward) c.inputs["g"] = ones({1, 1});
  return c;
}

class PresentGate : public testing::TestWithParam<Target> {};

TEST_P(PresentGate, ClampZeroDiffersFromNoClampOnOnes) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const Case c = ones_case(target);
  EXPECT_TRUE(difference(run(target, with_clamp(c, 0.0)), run(target, c), "clamp 0 vs none"))
      << target.name() << ": clamp 0 under the unfused gate should clamp";
}

INSTANTIATE_TEST_SUITE_P(Metamorphic, PresentGate, testing::ValuesIn(targets_where(present_gate)), target_name);

// --- (b) scale rank --------------------------------------------------------------------------

class ScaleRank : public testing::TestWithParam<Target> {};

Tensor other_rank(const Tensor& scale) {
  return scale.rank() == 1 ? scale.reshaped({scale.dim(0), 1}) : scale.reshaped({scale.dim(0)});
}

// scale [rows] and [rows, 1] hold the same values: every output is bit-identical, d_scale's
// bits too, and d_scale's shape is scale's (paddle_fused_shipped's clamp kernel: [rows, 1]).
TEST_P(ScaleRank, OneAndTwoDimensionalScaleAgreeButForDScaleShape) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = *op_info(target.op).generate(target.direction);
    reproduce_with(c, "invariance_violation");
    Case flipped = c;
    flipped.inputs["scale"] = other_rank(*c.input("scale"));
    RC_TAG(c.input("scale")->rank() == 1 ? "scale=1d" : "scale=2d",
           swiglu_model::paddle_clamp_kernel(c.float_attr("clamp")) ? "clamp kernel" : "no clamp kernel");
    const Outcome a = run(target, c), b = run(target, flipped);
    RC_ASSERT(a.rejected() == b.rejected());
    if (a.rejected()) {
      RC_ASSERT(a.reject_class == b.reject_class);
      return;
    }
    // The shapes are the spec's (swiglu_model.h) and those validate declares (ops/).
    const Metas metas_a = output_metas(target, c), metas_b = output_metas(target, flipped);
    RC_ASSERT(metas_a.metas && metas_b.metas);
    for (const auto& [name, tensor] : *a.outputs) {
      const Tensor& other = b.outputs->at(name);
      RC_ASSERT(tensor.shape() == swiglu_model::expected_output(c, target.contract(), name).shape);
      RC_ASSERT(other.shape() == swiglu_model::expected_output(flipped, target.contract(), name).shape);
      RC_ASSERT(tensor.shape() == metas_a.metas->at(name).shape);
      RC_ASSERT(other.shape() == metas_b.metas->at(name).shape);
      RC_ASSERT(bit_identical(tensor, other.reshaped(tensor.shape())));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Metamorphic, ScaleRank, testing::ValuesIn(targets_where(has_scale)), target_name);

}  // namespace
}  // namespace bitparity::ops
