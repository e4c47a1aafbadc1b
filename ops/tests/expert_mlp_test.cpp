// Properties of expert_mlp (spec OP-10) that its contracts fix, for every implementation:
//   - the padding rule: an expert of 0 < M < 17 tokens gives, in rows 0..M-1 (and in the weight
//     gradients), the bits of a run on the same tokens padded with zero rows to 32 by the caller;
//   - a token whose prob is 0 gives a zero row of out and of d_x;
//   - every output is within the chain bound (expert_mlp_chain_bound) of the unrounded fp64 MLP
//     (the op's Eigen oracle), forward and backward.
#include <cmath>
#include <cstdint>
#include <map>
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

// Megatron's rule as the spec states it (OP-10), in literal numbers: the properties below are
// written in kExpertPadBelow and kExpertPadRows and would follow a wrong constant, and in the
// reference the zero rows change no exact sum, so no output shows a wrong threshold on the CPU
// (cuBLAS's choice of algorithm for the megatron_eager GEMMs does).
TEST(ExpertMlpPadding, OneToSixteenTokensArePaddedTo32AndNoOtherCount) {
  EXPECT_EQ(expert_padded_rows(0), 0);
  for (int64_t M = 1; M <= 16; ++M) EXPECT_EQ(expert_padded_rows(M), 32) << M;
  for (const int64_t M : {17, 31, 32, 33, 4096}) EXPECT_EQ(expert_padded_rows(M), M) << M;
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

// Every contract's outputs lie within the chain bound (expert_mlp_chain_bound: megatron_eager's error
// bound, which any fp32 order of the GEMMs satisfies, fixed_order's included) of the unrounded MLP,
// forward and backward; and the bound's truths are the op's oracle's (Eigen's products, not the
// bound's own sums). A swapped gate and value, a lost prob or a transposed weight is far outside it.
TEST_P(ExpertMlp, WithinTheChainBoundOfTheOracle) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const OpInfo& op = op_info("expert_mlp");
  int64_t judged = 0;
  check_property([&] {
    const Case c = *op.generate(target.direction);
    reproduce_with(c, "ulp_over_budget");
    const Outcome got = run(target, c);
    RC_ASSERT(!got.rejected());
    const std::map<std::string, ElementBounds> bounds = expert_mlp_chain_bound(c);
    const std::map<std::string, std::vector<double>> oracle = op.oracle(c);
    RC_ASSERT(bounds.size() == got.outputs->size());
    bool any_judged = false;
    for (const auto& [name, b] : bounds) {
      const std::vector<double>& truth = oracle.at(name);
      RC_ASSERT(truth.size() == b.truth.size());
      for (size_t i = 0; i < truth.size(); ++i) {
        if (std::isinf(b.bound[i])) continue;
        any_judged = true;
        if (!(std::fabs(truth[i] - b.truth[i]) <= b.bound[i]))
          RC_FAIL(name + "[" + std::to_string(i) + "]: the bound's truth " + std::to_string(b.truth[i]) +
                  " is not the oracle's " + std::to_string(truth[i]));
      }
      const BoundCheck check = check_bound(got.outputs->at(name), b);
      RC_CLASSIFY(check.worst_ratio > 0.25, "an output past a quarter of its bound");
      if (check.outside)
        RC_FAIL(target.impl + ": " + std::to_string(check.outside) + " elements of " + name +
                " outside the chain's bound; first " + std::to_string(*check.first) + ": " +
                std::to_string(check.value) + ", truth " + std::to_string(check.truth) + ", bound " +
                std::to_string(check.bound));
    }
    RC_CLASSIFY(!any_judged, "no output judged (non-finite values reach every output)");
    if (any_judged) ++judged;
  });
  EXPECT_GT(judged, 0);
}

INSTANTIATE_TEST_SUITE_P(Impls, ExpertMlp, testing::ValuesIn(expert_mlp_impls_here()), target_name);

}  // namespace
}  // namespace bitparity::ops
