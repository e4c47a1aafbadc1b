// Properties of expert_mlp (spec OP-10) that its contracts fix, for every implementation:
//   - the padding rule: an expert of 0 < M < 17 tokens gives, in rows 0..M-1 (and in the weight
//     gradients), the bits of a run on the same tokens padded with zero rows to 32 by the caller;
//   - a token whose prob is 0 gives a zero row of out and of d_x;
//   - the forward is within the bound its rounding chain implies of the unrounded fp64 MLP (the
//     op's Eigen oracle): each GEMM within gemm_element_bound, the activation's bf16 roundings, and
//     the propagation of fc1's error through SwiGLU (|silu'| < 1.1); a swapped gate and value, a
//     lost prob or a transposed weight is far outside it.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/compare.h"
#include "core/rows.h"
#include "ops/expert_mlp.h"
#include "ops/gemm.h"
#include "properties/harness.h"

namespace bitparity::ops {
namespace {

using namespace props;

std::vector<Target> expert_mlp_impls_here() {
  return targets_where([](const Target& t) { return t.op == "expert_mlp"; });
}

// Every input finite and at most 2^16 in magnitude: no fc1 sum overflows (an infinite h times a
// zero prob is NaN, as in PyTorch), and the properties below are about finite arithmetic.
bool moderate_inputs(const Case& c) {
  for (const auto& [name, t] : c.inputs)
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!(std::fabs(t.f64(i)) <= 65536.0)) return false;
  return true;
}

class ExpertMlp : public testing::TestWithParam<Target> {};

TEST_P(ExpertMlp, PaddingGivesTheBitsOfARunOnTokensPaddedTo32) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const OpInfo& op = op_info("expert_mlp");
  int64_t compared = 0;
  check_property([&] {
    const Case c = *op.generate(target.direction);
    const int64_t M = c.input("x")->dim(0);
    RC_PRE(M > 0 && M < kExpertPadBelow);
    reproduce_with(c, "bit_mismatch");
    Case padded = c;
    for (const char* name : {"x", "probs", "d_out"})
      if (const Tensor* t = c.input(name)) padded.inputs[name] = zero_padded_rows(*t, kExpertPadRows);
    const Outcome small = run(target, c), big = run(target, padded);
    RC_ASSERT(small.rejected() == big.rejected());
    if (small.rejected()) return;
    ++compared;
    RC_TAG(M);
    // The token outputs in their first M rows, the weight gradients whole.
    for (const auto& [name, got] : *small.outputs) {
      const Tensor& whole = big.outputs->at(name);
      const bool token_rows = got.dim(0) == M && whole.dim(0) == kExpertPadRows;
      if (!bit_identical(got, token_rows ? tensor_rows(whole, 0, M) : whole))
        RC_FAIL(name + " differs from the padded run's");
    }
  });
  EXPECT_GT(compared, 0);
}

TEST_P(ExpertMlp, AZeroProbGivesAZeroRow) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const OpInfo& op = op_info("expert_mlp");
  const std::string row_output = target.direction == Direction::kForward ? "out" : "d_x";
  int64_t zero_rows = 0;
  check_property([&] {
    const Case c = *op.generate(target.direction);
    const Tensor* probs = c.input("probs");
    const bool weighted_and_moderate = probs != nullptr && moderate_inputs(c);
    RC_PRE(weighted_and_moderate);
    reproduce_with(c, "bit_mismatch");
    const Outcome got = run(target, c);
    RC_ASSERT(!got.rejected());
    const Tensor& out = got.outputs->at(row_output);
    const int64_t H = out.dim(1);
    for (int64_t r = 0; r < probs->numel(); ++r) {
      if (probs->f32(r) != 0) continue;
      ++zero_rows;
      for (int64_t j = 0; j < H; ++j)
        if (out.f64(r * H + j) != 0)
          RC_FAIL(row_output + "[" + std::to_string(r) + ", " + std::to_string(j) + "] = " +
                  std::to_string(out.f64(r * H + j)) + " for a token whose prob is 0");
    }
  });
  EXPECT_GT(zero_rows, 0) << "no generated token had a zero prob";
}

// The forward's bound against the oracle (see the header comment), element by element.
ElementBounds forward_bound(const Case& c) {
  const Tensor& x = *c.input("x");
  const Tensor& w1 = *c.input("w1");
  const Tensor& w2 = *c.input("w2");
  const Tensor* probs = c.input("probs");
  const int64_t M = x.dim(0), H = x.dim(1), F = w1.dim(1) / 2;
  // fc1's error: each h within the GEMM bound of its exact sum (gemm's cublas contract states it).
  Case fc1;
  fc1.op = "gemm";
  fc1.inputs["a"] = x;
  fc1.inputs["b"] = w1;
  const ElementBounds fc1_bounds = op_info("gemm").contract("cublas")->error_bound(fc1).at("out");
  const std::vector<double>& h = fc1_bounds.truth;
  const std::vector<double>& dh = fc1_bounds.bound;
  const std::optional<double> attr = c.float_attr("clamp");
  const bool clamped = attr && *attr > 0;
  const double limit = clamped ? *attr : 0.0;
  // The activation: |d(silu(a) b)| <= 1.1 da (|b| + db) + (|silu(a)| + 1.1 da) db, times p; then
  // Megatron's chain (silu to bf16, times b to bf16, an fp32 product with p, to bf16): relative
  // 5 * 2^-8 covers its three bf16 roundings, the fp32 product and expf; 4 * 2^-133 the bf16
  // subnormal spacing of each rounding.
  std::vector<double> act(static_cast<size_t>(M * F)), dact(act.size());
  for (int64_t r = 0; r < M; ++r) {
    const double p = probs ? probs->f64(r) : 1.0;
    for (int64_t j = 0; j < F; ++j) {
      double a = h[static_cast<size_t>(r * 2 * F + j)], b = h[static_cast<size_t>(r * 2 * F + F + j)];
      const double da = dh[static_cast<size_t>(r * 2 * F + j)], db = dh[static_cast<size_t>(r * 2 * F + F + j)];
      if (clamped) {
        a = std::min(a, limit);
        b = std::clamp(b, -limit, limit);
      }
      const double silu = a / (1 + std::exp(-a));
      const auto i = static_cast<size_t>(r * F + j);
      act[i] = silu * b * p;
      const double propagated = p * (1.1 * da * (std::fabs(b) + db) + (std::fabs(silu) + 1.1 * da) * db);
      dact[i] = propagated + 5 * std::ldexp(std::fabs(act[i]) + propagated, -8) + 4 * std::ldexp(1.0, -133);
    }
  }
  // fc2 on the computed activations: its GEMM bound around sum(act' w2), which is within
  // sum(dact |w2|) of the oracle.
  ElementBounds out;
  for (int64_t r = 0; r < M; ++r)
    for (int64_t n = 0; n < H; ++n) {
      double truth = 0, S = 0, carried = 0;
      for (int64_t k = 0; k < F; ++k) {
        const double w = w2.f64(k * H + n), ak = act[static_cast<size_t>(r * F + k)], dk = dact[static_cast<size_t>(r * F + k)];
        truth += ak * w;
        S += (std::fabs(ak) + dk) * std::fabs(w);
        carried += dk * std::fabs(w);
      }
      out.truth.push_back(truth);
      out.bound.push_back(carried + gemm_element_bound(F, S, std::fabs(truth) + carried));
    }
  return out;
}

TEST_P(ExpertMlp, ForwardIsWithinItsChainsBoundOfTheOracle) {
  const Target target = GetParam();
  if (target.direction != Direction::kForward) GTEST_SKIP() << "the bound is derived for the forward";
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const OpInfo& op = op_info("expert_mlp");
  int64_t compared = 0;
  check_property([&] {
    const Case c = *op.generate(target.direction);
    const bool moderate = moderate_inputs(c);
    RC_PRE(moderate);
    reproduce_with(c, "ulp_over_budget");
    const Outcome got = run(target, c);
    RC_ASSERT(!got.rejected());
    ElementBounds bounds = forward_bound(c);
    // The truth judged against is the op's oracle (Eigen's products, not this file's sums).
    bounds.truth = op.oracle(c).at("out");
    RC_ASSERT(bounds.truth.size() == bounds.bound.size());
    const BoundCheck check = check_bound(got.outputs->at("out"), bounds);
    ++compared;
    RC_CLASSIFY(check.worst_ratio > 0.25, "an output past a quarter of its bound");
    if (check.outside)
      RC_FAIL(target.impl + ": " + std::to_string(check.outside) + " outputs outside the chain's bound; first " +
              std::to_string(*check.first) + ": " + std::to_string(check.value) + ", truth " +
              std::to_string(check.truth) + ", bound " + std::to_string(check.bound));
  });
  EXPECT_GT(compared, 0);
}

INSTANTIATE_TEST_SUITE_P(Impls, ExpertMlp, testing::ValuesIn(expert_mlp_impls_here()), target_name);

}  // namespace
}  // namespace bitparity::ops
