// router_topk's own properties (spec OP-1, rule 9, router-backward-order.md), for every
// implementation of the op in the registry:
// (a) renaming the experts (one permutation of the logits' columns and the bias) renames probs
//     and routing_map the same way, bit for bit, in every row whose selection has no tie at the
//     top-k boundary and whose tied slots hold equal scores;
// (b) probs follow from routing_map and the scores S by the contract's formula, bit for bit, in
//     every row whose slot sum is exact in the contract's accumulation precision (fp64 for the
//     aligned denominator, fp32 for the baseline's), whatever the summation order;
// (c) megatron_eager and baseline select the same experts, and differ in probs (the reason the
//     alignment exists): across generated cases, and on one hand-built row;
// (d) reordering tied slots of topk_idx changes d_logits only in the reordered rows and only at
//     their selected experts (how often it changes them is classified);
// (e) the contract's selection is the oracle's (exact scores) wherever the exact ranking values
//     at the boundary are further apart than the contract's roundings can move them;
// (f) every shape-shrinking candidate of a valid case is valid and strictly smaller (rows, experts
//     or k), with topk_idx still naming its experts in the forward's slot order;
// (g) among ranking values that tie at the top-k boundary the lowest expert index wins (rule 9):
//     routing_map holds, row by row, the first k experts of the ranking by (NaN first, descending
//     R, ascending index). (a) and (e) leave the rows with a boundary tie out; this pins them;
// (h) the bias takes the backward through the gather path, whose scatter_add_ adds each slot's
//     gradient onto +0 (B5): against the same case without a bias, a -0 slot gradient (k = 1, a -0
//     d_probs) gives -0 without the bias and +0 with it, and d_logits differ nowhere else but where
//     an fp32 subnormal slot gradient was flushed to a zero.
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/gen.h"
#include "properties/harness.h"
#include "reference/numerics.h"

namespace bitparity::ops {
namespace {

using namespace props;

constexpr const char* kOp = "router_topk";
constexpr float kEpsilon = 1e-20f;  // Megatron's `+ 1e-20`, as fp32

bool router_impl(const Target& t, Direction d) { return t.op == kOp && t.direction == d; }
bool forward_impl(const Target& t) { return router_impl(t, Direction::kForward); }
bool megatron_backward(const Target& t) { return router_impl(t, Direction::kBackward) && t.contract() == "megatron_eager"; }

// --- the case's scores, as spec OP-1 defines them ------------------------------------------------

struct Router {
  int64_t T = 0, E = 0, k = 0;
  DType dl = DType::kBF16;
  bool sqrt_softplus = false;
  std::optional<float> scale;  // f32(scaling) when `if scale:` holds
  std::vector<float> S, R;     // [T, E]: S = dL(score(f32 L)), R = S + bias (or S)
};

Router router(const Case& c) {
  Router r;
  const Tensor& logits = *c.input("logits");
  r.T = logits.dim(0);
  r.E = logits.dim(1);
  r.k = std::get<int64_t>(c.attrs.at("k"));
  r.dl = logits.dtype();
  const auto score = c.attrs.find("score");
  const bool sqrt_softplus = score != c.attrs.end() && std::get<std::string>(score->second) == "sqrt_softplus";
  r.sqrt_softplus = sqrt_softplus;
  if (const auto s = c.float_attr("scaling"); s && *s != 0) r.scale = static_cast<float>(*s);
  const Tensor* bias = c.input("bias");
  for (int64_t i = 0; i < logits.numel(); ++i) {
    const float x = logits.f32(i);
    const float s = round_to(r.dl, sqrt_softplus ? std::sqrt(ref::softplus_f32(x)) : ref::sigmoid_f32(x));
    r.S.push_back(s);
    r.R.push_back(bias ? s + bias->f32(i % r.E) : s);
  }
  return r;
}

bool same_rank(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Row t's experts in rule 9's order: NaN first, descending R, ties by index.
std::vector<int64_t> ranking(const Router& r, int64_t t) {
  std::vector<int64_t> order(static_cast<size_t>(r.E));
  std::iota(order.begin(), order.end(), int64_t{0});
  const float* R = r.R.data() + t * r.E;
  std::sort(order.begin(), order.end(), [R](int64_t a, int64_t b) {
    if (std::isnan(R[a]) != std::isnan(R[b])) return std::isnan(R[a]);
    if (!std::isnan(R[a]) && R[a] != R[b]) return R[a] > R[b];
    return a < b;
  });
  return order;
}

// No tie at the boundary, and every run of tied slots holds one S bit pattern: renaming the
// experts can then change neither the set nor the sequence of slot values.
bool renaming_safe(const Router& r, int64_t t) {
  const std::vector<int64_t> order = ranking(r, t);
  auto R = [&](int64_t j) { return r.R[static_cast<size_t>(t * r.E + order[static_cast<size_t>(j)])]; };
  auto S = [&](int64_t j) { return std::bit_cast<uint32_t>(r.S[static_cast<size_t>(t * r.E + order[static_cast<size_t>(j)])]); };
  if (r.k < r.E && same_rank(R(r.k - 1), R(r.k))) return false;
  for (int64_t j = 1; j < r.k; ++j)
    if (same_rank(R(j - 1), R(j)) && S(j - 1) != S(j)) return false;
  return true;
}

uint32_t bits32(float v) { return std::bit_cast<uint32_t>(v); }

// --- (a) renaming the experts --------------------------------------------------------------------

Case renamed(const Case& c, const std::vector<int64_t>& to) {
  Case out = c;
  const Tensor& logits = *c.input("logits");
  const int64_t T = logits.dim(0), E = logits.dim(1);
  Tensor l(logits.dtype(), logits.shape());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e) l.set_bits(t * E + to[static_cast<size_t>(e)], logits.bits(t * E + e));
  out.inputs["logits"] = l;
  if (const Tensor* bias = c.input("bias")) {
    Tensor b(bias->dtype(), bias->shape());
    for (int64_t e = 0; e < E; ++e) b.set_bits(to[static_cast<size_t>(e)], bias->bits(e));
    out.inputs["bias"] = b;
  }
  return out;
}

class ExpertRenaming : public testing::TestWithParam<Target> {};

TEST_P(ExpertRenaming, RenamesProbsAndRoutingMapWhereTheSelectionHasNoBoundaryTie) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = *op_info(kOp).generate(target.direction);
    const Router r = router(c);
    std::vector<int64_t> to(static_cast<size_t>(r.E));
    std::iota(to.begin(), to.end(), int64_t{0});
    std::mt19937_64 shuffle_rng(*rc::gen::arbitrary<uint64_t>());
    std::shuffle(to.begin(), to.end(), shuffle_rng);
    const Case other = renamed(c, to);
    reproduce_with(c, "invariance_violation");
    const Outcome a = run(target, c), b = run(target, other);
    RC_ASSERT(a.rejected() == b.rejected());
    if (a.rejected()) return;
    int64_t checked = 0, skipped = 0;
    for (int64_t t = 0; t < r.T; ++t) {
      if (!renaming_safe(r, t)) {
        ++skipped;
        continue;
      }
      ++checked;
      for (const char* name : {"probs", "routing_map"}) {
        const Tensor& x = a.outputs->at(name);
        const Tensor& y = b.outputs->at(name);
        for (int64_t e = 0; e < r.E; ++e)
          if (x.bits(t * r.E + e) != y.bits(t * r.E + to[static_cast<size_t>(e)]))
            RC_FAIL(target.name() + ": " + name + "[" + std::to_string(t) + ", " + std::to_string(e) +
                    "] is not renamed to column " + std::to_string(to[static_cast<size_t>(e)]));
      }
    }
    RC_CLASSIFY(checked > 0, "rows checked");
    RC_CLASSIFY(skipped > 0, "rows with a boundary tie (or tied slots of unequal S) skipped");
  });
}

INSTANTIATE_TEST_SUITE_P(RouterTopk, ExpertRenaming, testing::ValuesIn(targets_where(forward_impl)), target_name);

// --- (b) probs from routing_map and S, exactly ----------------------------------------------------

// The lowest set bit's exponent of a positive finite float.
int lowest_bit(float g) {
  int exponent = 0;
  const float m = std::frexp(g, &exponent);  // g = m 2^exponent, m in [0.5, 1)
  const auto n = static_cast<uint32_t>(std::ldexp(m, 24));
  return exponent - 24 + std::countr_zero(n);
}

// The exact sum of the positive finite values, when every partial sum in any order is exact in
// a format of `precision` significand bits (then every summation order gives it).
std::optional<long double> order_free_sum(const std::vector<float>& g, int precision) {
  long double sum = 0;
  int low = std::numeric_limits<int>::max();
  for (const float v : g) {
    if (!std::isfinite(v)) return std::nullopt;
    if (v == 0) continue;
    low = std::min(low, lowest_bit(v));
    sum += v;
  }
  if (sum == 0) return sum;
  int high = 0;
  std::frexp(sum, &high);  // sum < 2^high
  if (high - low > precision) return std::nullopt;
  return sum;
}

constexpr int kFp64Bits = 53, kFp32Bits = 24;

// The probs of a row's selected slot values under the contract, from their order-free sum.
std::optional<std::vector<float>> expected_probs(const Router& r, const std::string& contract,
                                                 const std::vector<float>& G) {
  std::vector<float> P = G;
  if (r.k == 1) {
    if (r.scale) P[0] = round_to(r.dl, G[0] * *r.scale);
    return P;
  }
  if (contract == "megatron_eager") {
    const auto sum = order_free_sum(G, kFp64Bits);
    if (!sum) return std::nullopt;
    const float D = static_cast<float>(static_cast<double>(*sum)) + kEpsilon;
    for (float& p : P) p = r.scale ? (p / D) * *r.scale : p / D;
    return P;
  }
  const auto sum = order_free_sum(G, kFp32Bits);  // baseline: the fp32 sum of the slots
  if (!sum) return std::nullopt;
  const float den = round_to(r.dl, round_to(r.dl, static_cast<float>(*sum)) + kEpsilon);
  for (float& p : P) {
    p = round_to(r.dl, p / den);
    if (r.scale) p = round_to(r.dl, p * *r.scale);
  }
  return P;
}

class ExactProbs : public testing::TestWithParam<Target> {};

TEST_P(ExactProbs, ProbsAreTheContractsFormulaOfTheSelectedScores) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = *op_info(kOp).generate(target.direction);
    reproduce_with(c, "bit_mismatch");
    const Outcome out = run(target, c);
    if (out.rejected()) return;
    const Router r = router(c);
    const Tensor& probs = out.outputs->at("probs");
    const Tensor& map = out.outputs->at("routing_map");
    int64_t checked = 0, skipped = 0;
    for (int64_t t = 0; t < r.T; ++t) {
      std::vector<int64_t> selected;
      for (int64_t e = 0; e < r.E; ++e)
        if (map.bits(t * r.E + e)) selected.push_back(e);
      RC_ASSERT(static_cast<int64_t>(selected.size()) == r.k);
      for (int64_t e = 0; e < r.E; ++e)
        if (!map.bits(t * r.E + e)) RC_ASSERT(probs.bits(t * r.E + e) == 0u);  // +0 off the selection
      std::vector<float> G;
      for (const int64_t e : selected) G.push_back(r.S[static_cast<size_t>(t * r.E + e)]);
      const auto want = expected_probs(r, target.contract(), G);
      if (!want || (r.scale && std::isnan(*r.scale))) {
        ++skipped;
        continue;
      }
      ++checked;
      for (size_t j = 0; j < selected.size(); ++j) {
        const float got = probs.f32(t * r.E + selected[j]);
        if (bits32(got) != bits32((*want)[j]) && !(std::isnan(got) && std::isnan((*want)[j])))
          RC_FAIL(target.name() + ": probs[" + std::to_string(t) + ", " + std::to_string(selected[j]) + "] = " +
                  describe_bits(probs.dtype(), probs.bits(t * r.E + selected[j])) + ", the formula gives " +
                  describe_bits(DType::kFP32, bits32((*want)[j])));
      }
    }
    RC_CLASSIFY(checked > 0, "rows checked");
    RC_CLASSIFY(skipped > 0, "rows whose slot sum rounds (or holds NaN/Inf) skipped");
  });
}

INSTANTIATE_TEST_SUITE_P(RouterTopk, ExactProbs, testing::ValuesIn(targets_where(forward_impl)), target_name);

// --- (c) megatron_eager vs baseline ---------------------------------------------------------------

const Target kMegatron{kOp, Direction::kForward, "ref:megatron_eager"};
const Target kBaseline{kOp, Direction::kForward, "ref:baseline"};

// Whether bf(megatron's probs) differs from baseline's bf16 probs anywhere (the comparison that
// spec OP-1 quotes: 96,987 of 524,288 values on the GPU).
bool probs_differ_in_bf16(const Outcome& megatron, const Outcome& baseline) {
  const Tensor& a = megatron.outputs->at("probs");
  const Tensor& b = baseline.outputs->at("probs");
  for (int64_t i = 0; i < a.numel(); ++i)
    if (bf16_from_f32(a.f32(i)) != b.bits(i) && !(std::isnan(a.f32(i)) && std::isnan(b.f32(i)))) return true;
  return false;
}

bool bf16_normalized(const Case& c) {
  return c.input("logits")->dtype() == DType::kBF16 && std::get<int64_t>(c.attrs.at("k")) > 1;
}

TEST(RouterTopkContracts, SelectTheSameExpertsAndDifferInProbs) {
  BITPARITY_SKIP_IF_UNAVAILABLE(kMegatron);
  check_property([] {
    const Case c = *op_info(kOp).generate(Direction::kForward);
    reproduce_with(c, "bit_mismatch", corpus::BackendPair{kMegatron.impl, kBaseline.impl});
    const Outcome a = run(kMegatron, c), b = run(kBaseline, c);
    RC_ASSERT(a.rejected() == b.rejected());
    if (a.rejected()) return;
    RC_ASSERT(bit_identical(a.outputs->at("routing_map"), b.outputs->at("routing_map")));
    if (bf16_normalized(c)) RC_CLASSIFY(probs_differ_in_bf16(a, b), "bf16, k > 1: probs differ");
  });
}

// Across a fixed stream of generated cases, some bf16 case with k > 1 shows the difference.
TEST(RouterTopkContracts, GeneratedBf16CasesShowTheDenominatorDifference) {
  constexpr int kCases = 300;
  constexpr uint64_t kSeed = 0x70b1;
  rc::Random random(kSeed);
  const rc::Gen<Case> generator = op_info(kOp).generate(Direction::kForward);
  int normalized = 0, differing = 0;
  for (int i = 0; i < kCases; ++i) {
    const Case c = generator(random.split(), i % 101).value();
    if (!bf16_normalized(c) || c.input("logits")->dim(0) == 0) continue;
    ++normalized;
    const Outcome a = run(kMegatron, c), b = run(kBaseline, c);
    ASSERT_FALSE(a.rejected() || b.rejected()) << a.message << b.message;
    differing += probs_differ_in_bf16(a, b);
  }
  std::cout << "bf16 cases with k > 1: " << normalized << ", probs differ in " << differing << "\n";
  EXPECT_GT(normalized, 0);
  EXPECT_GT(differing, 0);
}

// One row by hand: bf16 logits [30, -1], k = 2, no bias, sigmoid.
//   S = bf(σ(30)) = 1.0 (σ = 1 - 9e-14 rounds to 1 in fp32); σ(-1) = 0.268941 = 137.70 · 2^-9,
//   and bf16 steps by 2^-9 on [0.25, 0.5), so bf(σ(-1)) = 138 · 2^-9 = 0.26953125 (0x3E8A), far
//   from a rounding boundary.
// megatron_eager: D = f32(1 + 0.26953125) + 1e-20 = 1.26953125 (exact), P1 = 0.26953125 ⊘
//   1.26953125 = 0.2123077 (fp32), whose bf16 is 0.2123077 / 2^-10 = 217.4 → 217 · 2^-10 = 0x3E59.
// baseline: Σ = 1.26953125 = 162.5 · 2^-7 is a bf16 tie, RNE to the even 162 · 2^-7 = 1.265625;
//   den = bf(1.265625 + 1e-20) = 1.265625; P1 = bf(0.26953125 / 1.265625) = bf(0.2129630) =
//   bf(218.07 · 2^-10) = 218 · 2^-10 = 0x3E5A. One bf16 ulp apart. (P0: 0.787692 and bf(0.790123)
//   both round to 0x3F4A.)
TEST(RouterTopkContracts, HandBuiltRowShowsTheBf16Denominator) {
  Case c;
  c.op = kOp;
  c.direction = Direction::kForward;
  c.attrs["k"] = int64_t{2};
  Tensor logits(DType::kBF16, {1, 2});
  logits.set_bits(0, 0x41F0);  // 30
  logits.set_bits(1, 0xBF80);  // -1
  c.inputs["logits"] = logits;
  const Outcome a = run(kMegatron, c), b = run(kBaseline, c);
  ASSERT_FALSE(a.rejected()) << a.message;
  ASSERT_FALSE(b.rejected()) << b.message;
  const Tensor& pm = a.outputs->at("probs");
  const Tensor& pb = b.outputs->at("probs");
  ASSERT_EQ(pm.dtype(), DType::kFP32);
  ASSERT_EQ(pb.dtype(), DType::kBF16);
  EXPECT_EQ(pm.bits(1), bits32(0.26953125f / 1.26953125f));
  EXPECT_EQ(pm.bits(0), bits32(1.0f / 1.26953125f));
  EXPECT_EQ(bf16_from_f32(pm.f32(1)), 0x3E59u);
  EXPECT_EQ(pb.bits(1), 0x3E5Au);
  EXPECT_EQ(pb.bits(0), 0x3F4Au);
  EXPECT_EQ(bf16_from_f32(pm.f32(0)), 0x3F4Au);
}

// The backward's bf16 slot gradient by hand (router-backward-order.md B4, megatron_eager): bf16
// logits [0, 0], k = 2, no bias, sigmoid, topk_idx [0, 1], d_probs (fp32) [1 + 17 · 2^-12, 2^-7].
//   y = σ(0) = 0.5 exactly, S = G = [0.5, 0.5], D = f32(1.0) + 1e-20 = 1.0.
//   a = dP / D = dP; m = -dP · ((0.5 / 1) / 1) = -dP / 2 (exact); dD = m0 + m1 =
//   -(0.5 + 17 · 2^-13 + 2^-8) = -0.505981445 (exact in fp32).
//   B4d, three bf16 roundings: bf(a0) = 1 + 2^-7 (17 · 2^-12 is past half of bf16's 2^-7 step),
//   bf(dD) = -(0.5 + 2 · 2^-8) (0.00598 from 0.5 is nearer 2 · 2^-8 than 2^-8), so
//   dG0 = bf(1.0078125 - 0.5078125) = 0.5 and dG1 = bf(2^-7 - 0.5078125) = -0.5.
//   (One rounding of a + dD would give bf(0.498169) = 0.498046875 and -0.498046875.)
//   B7: d_logits = bf((dG · (1 - 0.5)) · 0.5) = dG / 4: [0.125, -0.125] = [0x3E00, 0xBE00].
TEST(RouterTopkContracts, HandBuiltRowShowsTheBackwardsThreeBf16Roundings) {
  Case c;
  c.op = kOp;
  c.direction = Direction::kBackward;
  c.attrs["k"] = int64_t{2};
  c.inputs["logits"] = Tensor(DType::kBF16, {1, 2});  // +0, +0
  Tensor idx(DType::kI64, {1, 2});
  idx.set_bits(1, 1);
  c.inputs["topk_idx"] = idx;
  Tensor d_probs(DType::kFP32, {1, 2});
  d_probs.set_f32(0, 1.0f + 17 * std::ldexp(1.0f, -12));
  d_probs.set_f32(1, std::ldexp(1.0f, -7));
  c.inputs["d_probs"] = d_probs;
  const Outcome out = run(Target{kOp, Direction::kBackward, "ref:megatron_eager"}, c);
  ASSERT_FALSE(out.rejected()) << out.message;
  const Tensor& d = out.outputs->at("d_logits");
  ASSERT_EQ(d.dtype(), DType::kBF16);
  EXPECT_EQ(d.bits(0), 0x3E00u) << describe_bits(DType::kBF16, d.bits(0));
  EXPECT_EQ(d.bits(1), 0xBE00u) << describe_bits(DType::kBF16, d.bits(1));
}

// --- (d) tied slots reordered in the backward ----------------------------------------------------

// topk_idx with every run of tied R (in the given slot order) reversed.
Tensor ties_reversed(const Tensor& idx, const Router& r) {
  Tensor out = idx;
  for (int64_t t = 0; t < r.T; ++t) {
    auto R = [&](int64_t j) { return r.R[static_cast<size_t>(t * r.E + static_cast<int64_t>(idx.bits(t * r.k + j)))]; };
    for (int64_t j = 0; j < r.k;) {
      int64_t end = j + 1;
      while (end < r.k && same_rank(R(end), R(j))) ++end;
      for (int64_t a = j, b = end - 1; a < b; ++a, --b) {
        out.set_bits(t * r.k + a, idx.bits(t * r.k + b));
        out.set_bits(t * r.k + b, idx.bits(t * r.k + a));
      }
      j = end;
    }
  }
  return out;
}

class TiedSlots : public testing::TestWithParam<Target> {};

TEST_P(TiedSlots, ReorderingTiedSlotsChangesOnlyTheirRowsSelectedGradients) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = *op_info(kOp).generate(Direction::kBackward);
    const Router r = router(c);
    Case other = c;
    other.inputs["topk_idx"] = ties_reversed(*c.input("topk_idx"), r);
    reproduce_with(c, "invariance_violation");
    const Outcome a = run(target, c), b = run(target, other);
    RC_ASSERT(a.rejected() == b.rejected());
    if (a.rejected()) return;
    const Tensor& idx = *c.input("topk_idx");
    const Tensor& ia = a.outputs->at("d_logits");
    const Tensor& ib = b.outputs->at("d_logits");
    int64_t reordered = 0, changed_rows = 0;
    for (int64_t t = 0; t < r.T; ++t) {
      std::vector<char> selected(static_cast<size_t>(r.E));
      bool moved = false;
      for (int64_t j = 0; j < r.k; ++j) {
        selected[static_cast<size_t>(idx.bits(t * r.k + j))] = 1;
        moved = moved || idx.bits(t * r.k + j) != other.inputs["topk_idx"].bits(t * r.k + j);
      }
      bool changed = false;
      for (int64_t e = 0; e < r.E; ++e) {
        const bool same = ia.bits(t * r.E + e) == ib.bits(t * r.E + e);
        if (!moved || !selected[static_cast<size_t>(e)]) RC_ASSERT(same);
        changed = changed || !same;
      }
      reordered += moved;
      changed_rows += changed;
    }
    RC_CLASSIFY(reordered == 0, "no tied slots");
    RC_CLASSIFY(reordered > 0 && changed_rows == 0, "tied slots reordered, d_logits unchanged");
    RC_CLASSIFY(changed_rows > 0, "tied slots reordered, d_logits changed");
  });
}

INSTANTIATE_TEST_SUITE_P(RouterTopk, TiedSlots, testing::ValuesIn(targets_where(megatron_backward)), target_name);

// --- (e) the oracle's selection -------------------------------------------------------------------

double ulp32(double v) {
  const float f = static_cast<float>(std::fabs(v));
  return static_cast<double>(std::nextafter(f, INFINITY)) - f;
}

// How far the contract's R of one expert can lie from its exact value: S rounds to dL (half an
// ulp of dL), after libdevice's fp32 score (within a few fp32 ulps: 4 taken); R = S ⊕ bias rounds
// once more (half an fp32 ulp of R). Whole ulps are taken, so the bound is generous. Below fp32's
// normal range the score has no relative accuracy, only an absolute one: sigmoid's result, or
// sqrt_softplus's softplus (S squared), underflows gradually (within a few 2^-149 of the exact
// value) and is 0 below x = -88.72 (sigmoid) or -103.97 (softplus), where the exact value is under
// 2^-128 or 2^-150. So S lies within 2^-126 of the exact score where that is below 2^-126
// (sigmoid), and within sqrt(2^-149) < 2^-73 where it is below 2^-63 (sqrt_softplus): two logits
// below -104 tie at 0 and the lower index wins, whatever their exact order.
double r_error(DType dl, bool sqrt_softplus, double s_exact, double r_exact) {
  const double u = ulp32(s_exact);
  const double below = sqrt_softplus ? 0x1p-63 : 0x1p-126, floor = sqrt_softplus ? 0x1p-73 : 0x1p-126;
  return (dl == DType::kBF16 ? std::ldexp(u, 16) : u) + 4 * u + ulp32(r_exact) + (s_exact < below ? floor : 0.0);
}

class OracleSelection : public testing::TestWithParam<Target> {};

TEST_P(OracleSelection, RoutingMapIsTheOraclesWhereTheBoundaryIsNotNearATie) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const OpInfo& op = op_info(kOp);
  check_property([&] {
    const Case c = *op.generate(Direction::kForward);
    reproduce_with(c, "bit_mismatch");
    const Outcome out = run(target, c);
    if (out.rejected()) return;
    const auto truth = op.oracle(c);
    const Router r = router(c);
    const Tensor& logits = *c.input("logits");
    const Tensor* bias = c.input("bias");
    const bool sqrt_softplus = r.sqrt_softplus;
    int64_t checked = 0, near = 0;
    for (int64_t t = 0; t < r.T; ++t) {
      // Exact S and R, ranked; the row is checked when the k-th and (k+1)-th are finite and apart.
      std::vector<double> S(static_cast<size_t>(r.E)), R(static_cast<size_t>(r.E));
      for (int64_t e = 0; e < r.E; ++e) {
        const double x = logits.f64(t * r.E + e);
        const double sigma = 1.0 / (1.0 + std::exp(-x));
        S[static_cast<size_t>(e)] = sqrt_softplus ? std::sqrt(x > 20 ? x : std::log1p(std::exp(x))) : sigma;
        R[static_cast<size_t>(e)] = S[static_cast<size_t>(e)] + (bias ? bias->f64(e) : 0.0);
      }
      std::vector<int64_t> order(static_cast<size_t>(r.E));
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return R[a] > R[b]; });
      bool finite = true;
      for (const double v : R) finite = finite && std::isfinite(v);
      bool apart = finite;
      if (finite && r.k < r.E) {
        const int64_t a = order[static_cast<size_t>(r.k - 1)], b = order[static_cast<size_t>(r.k)];
        apart = R[a] - R[b] > r_error(r.dl, sqrt_softplus, S[a], R[a]) + r_error(r.dl, sqrt_softplus, S[b], R[b]);
      }
      if (!apart) {
        ++near;
        continue;
      }
      ++checked;
      const Tensor& map = out.outputs->at("routing_map");
      for (int64_t e = 0; e < r.E; ++e)
        if (static_cast<double>(map.bits(t * r.E + e)) != truth.at("routing_map")[static_cast<size_t>(t * r.E + e)])
          RC_FAIL(target.name() + ": routing_map[" + std::to_string(t) + ", " + std::to_string(e) +
                  "] differs from the oracle's selection, though the boundary is not near a tie");
    }
    RC_CLASSIFY(checked > 0, "rows checked");
    RC_CLASSIFY(near > 0, "rows near a tie (or non-finite) skipped");
  });
}

INSTANTIATE_TEST_SUITE_P(RouterTopk, OracleSelection, testing::ValuesIn(targets_where(forward_impl)), target_name);

// --- (g) ties at the boundary: the lowest index wins ----------------------------------------------

class TieBreak : public testing::TestWithParam<Target> {};

TEST_P(TieBreak, RoutingMapHoldsTheLowestIndicesAmongTiedRankingValues) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const OpInfo& op = op_info(kOp);
  check_property([&] {
    const Case c = *op.generate(Direction::kForward);
    reproduce_with(c, "bit_mismatch");
    const Outcome out = run(target, c);
    if (out.rejected()) return;
    const Router r = router(c);
    const Tensor& map = out.outputs->at("routing_map");
    int64_t boundary_ties = 0;
    for (int64_t t = 0; t < r.T; ++t) {
      const std::vector<int64_t> order = ranking(r, t);
      std::vector<uint64_t> want(static_cast<size_t>(r.E), 0);
      for (int64_t j = 0; j < r.k; ++j) want[static_cast<size_t>(order[static_cast<size_t>(j)])] = 1;
      const float* R = r.R.data() + t * r.E;
      const bool tie = r.k < r.E && same_rank(R[order[static_cast<size_t>(r.k - 1)]], R[order[static_cast<size_t>(r.k)]]);
      boundary_ties += tie;
      for (int64_t e = 0; e < r.E; ++e)
        if (map.bits(t * r.E + e) != want[static_cast<size_t>(e)])
          RC_FAIL(target.name() + ": routing_map[" + std::to_string(t) + ", " + std::to_string(e) + "] is " +
                  std::to_string(map.bits(t * r.E + e)) + ", the ranking (NaN first, descending R, lowest index " +
                  "among ties) gives " + std::to_string(want[static_cast<size_t>(e)]) +
                  (tie ? " (the row ties at the top-k boundary)" : ""));
    }
    RC_CLASSIFY(boundary_ties > 0, "rows tied at the boundary");
    RC_CLASSIFY(boundary_ties == 0 && r.T > 0, "no boundary tie");
  });
}

INSTANTIATE_TEST_SUITE_P(RouterTopk, TieBreak, testing::ValuesIn(targets_where(forward_impl)), target_name);

// --- (h) the gather path's scatter onto +0 -----------------------------------------------------------

class GatherPath : public testing::TestWithParam<Target> {};

TEST_P(GatherPath, ScatterOntoZeroTurnsMinusZeroPositiveAndChangesNothingElse) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = *op_info(kOp).generate(Direction::kBackward);
    // The twin: the topk path (no bias) and the gather path (a zero bias). The backward reads the
    // selection from topk_idx, so the bias changes only the path.
    Case topk = c, gather = c;
    topk.inputs.erase("bias");
    const int64_t E = c.input("logits")->dim(1);
    gather.inputs["bias"] = Tensor(DType::kFP32, {E});
    reproduce_with(gather, "bit_mismatch");
    const Outcome a = run(target, topk), b = run(target, gather);
    RC_ASSERT(a.rejected() == b.rejected());
    if (a.rejected()) return;
    const Tensor& dt = a.outputs->at("d_logits");
    const Tensor& dg = b.outputs->at("d_logits");
    auto is_minus_zero = [](float v) { return v == 0 && std::signbit(v); };
    // Where the contract's slot gradient is -0 for certain: k = 1 (dG = dP, times a positive
    // scaling), d_probs -0 at the selected expert of a finite logit. The topk path then gives -0,
    // the gather path +0. Except where sqrt_softplus's fp32 softplus underflows to 0 (logits below
    // about -104): there SqrtBackward's dS / (2 s) is 0 / 0, NaN on both paths, as in PyTorch.
    const Router r = router(c);
    const Tensor& idx = *c.input("topk_idx");
    const Tensor& d_probs = *c.input("d_probs");
    int64_t pinned = 0, differ = 0;
    if (r.k == 1 && (!r.scale || *r.scale > 0))
      for (int64_t t = 0; t < r.T; ++t) {
        const int64_t i = t * r.E + static_cast<int64_t>(idx.bits(t));
        const float x = c.input("logits")->f32(i);
        if (!is_minus_zero(d_probs.f32(i)) || !std::isfinite(x)) continue;
        if (r.sqrt_softplus && ref::softplus_f32(x) == 0.0f) continue;
        ++pinned;
        if (!is_minus_zero(dt.f32(i)) || dg.bits(i) != 0)
          RC_FAIL(target.name() + ": d_logits[" + std::to_string(t) + ", selected] from a -0 d_probs at k = 1 is " +
                  describe_bits(dt.dtype(), dt.bits(i)) + " without a bias and " + describe_bits(dg.dtype(), dg.bits(i)) +
                  " with one; B5 gives -0 and +0 (scatter_add_ onto +0)");
      }
    // Elsewhere the two paths may differ only where the gather path's add onto +0 changed the slot
    // gradient: a -0 (giving +0), or an fp32 subnormal flushed to a zero of its sign.
    for (int64_t i = 0; i < dt.numel(); ++i) {
      if (dt.bits(i) == dg.bits(i)) continue;
      ++differ;
      const float x = dt.f32(i), y = dg.f32(i);
      const bool allowed = is_minus_zero(x) ? y == 0 && !std::signbit(y) : dt.dtype() == DType::kFP32 && y == 0;
      if (!allowed)
        RC_FAIL(target.name() + ": d_logits element " + std::to_string(i) + " is " + describe_bits(dt.dtype(), dt.bits(i)) +
                " without a bias and " + describe_bits(dg.dtype(), dg.bits(i)) +
                " with one; the paths may differ only by a -0 made +0 or an fp32 subnormal slot gradient flushed");
    }
    RC_CLASSIFY(pinned > 0, "a -0 slot gradient pinned");
    RC_CLASSIFY(differ > 0, "the paths differ");
  });
}

INSTANTIATE_TEST_SUITE_P(RouterTopk, GatherPath, testing::ValuesIn(targets_where(megatron_backward)), target_name);

// --- (f) the shape shrinker ------------------------------------------------------------------------

class ShrinkShape : public testing::TestWithParam<Target> {};

TEST_P(ShrinkShape, CandidatesAreValidAndSmaller) {
  const Target target = GetParam();
  const OpInfo& op = op_info(kOp);
  check_property([&] {
    const Case c = *op.generate(target.direction);
    reproduce_with(c, "shape_mismatch");
    const ContractInfo& megatron = *op.contract("megatron_eager");
    const OutputMetas metas = op.validate(c, megatron);
    const Tensor& logits = *c.input("logits");
    const int64_t T = logits.dim(0), E = logits.dim(1), k = std::get<int64_t>(c.attrs.at("k"));
    const std::vector<Case> candidates = op.shrink_shape(c);
    for (const Case& s : candidates) {
      RC_ASSERT(!op.validate(s, megatron).empty());  // throws (a failure) when a candidate is invalid
      const Tensor& l = *s.input("logits");
      const int64_t sk = std::get<int64_t>(s.attrs.at("k"));
      RC_ASSERT(l.dim(0) <= T && l.dim(1) <= E && sk <= k);
      RC_ASSERT(l.dim(0) < T || l.dim(1) < E || sk < k || (c.input("bias") && !s.input("bias")));
      if (const Tensor* idx = s.input("topk_idx"))  // a kept row keeps its slots' experts in order
        if (l.dim(1) == E && l.dim(0) == T)
          for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < sk; ++j) RC_ASSERT(idx->bits(t * sk + j) == c.input("topk_idx")->bits(t * k + j));
    }
    RC_CLASSIFY(candidates.empty(), "nothing to shrink");
  });
}

std::vector<Target> router_directions() {
  std::vector<Target> out;
  for (const Target& t : op_directions())
    if (t.op == kOp) out.push_back(t);
  return out;
}

INSTANTIATE_TEST_SUITE_P(RouterTopk, ShrinkShape, testing::ValuesIn(router_directions()), target_name);

}  // namespace
}  // namespace bitparity::ops
