// Properties of cross_entropy (spec OP-8) that its contracts fix: (a) the eager dispatch names the
// kernel of cross-entropy-order.md §1 at every boundary, and every kernel's order adds each element
// exactly once (a row of ones sums to V exactly, at every row shift); (b) the gradient agrees with
// central finite differences of the exact loss (extended precision) within a bound derived from the
// fp32 arithmetic, and the loss with the oracle within the same analysis; (c) adding an integer to a
// row of integers leaves every x - max, hence every bit, unchanged; (d) an ignored finite row has loss
// +0 and an all +0 gradient, and a row whose every other exp underflows (S == 1) has loss -0 at its max.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/gen.h"
#include "properties/harness.h"
#include "reference/cross_entropy.h"
#include "reference/math/device_math.h"

namespace bitparity::ops {
namespace {

using namespace props;

bool is_ce(const Target& t) { return t.op == "cross_entropy"; }
bool is_ce_fwd(const Target& t) { return is_ce(t) && t.direction == Direction::kForward; }
bool is_ce_bwd(const Target& t) { return is_ce(t) && t.direction == Direction::kBackward; }

constexpr double kU = 0x1p-24;  // fp32's unit roundoff

Tensor labels_of(const std::vector<int64_t>& v) {
  Tensor t(DType::kI64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.set_bits(static_cast<int64_t>(i), static_cast<uint64_t>(v[i]));
  return t;
}

// --- (a) the dispatch and the orders' coverage --------------------------------------------------

TEST(CrossEntropyDispatch, KernelsAtTheSpecBoundaries) {
  using ref::SoftmaxKernel;
  const struct {
    int64_t V;
    SoftmaxKernel kernel;
    int64_t threads, per_thread;
  } kCases[] = {{1, SoftmaxKernel::kWarp, 1, 1},        {8, SoftmaxKernel::kWarp, 8, 1},
                {100, SoftmaxKernel::kWarp, 32, 4},     {1024, SoftmaxKernel::kWarp, 32, 32},
                {1025, SoftmaxKernel::kWarp, 32, 64},   {2048, SoftmaxKernel::kWarp, 32, 64},
                {2049, SoftmaxKernel::kReg, 1024, 3},   {4096, SoftmaxKernel::kReg, 1024, 4},
                {9216, SoftmaxKernel::kReg, 1024, 9},   {9217, SoftmaxKernel::kIlp, 1024, 10},
                {9220, SoftmaxKernel::kSmem, 1024, 10}, {10240, SoftmaxKernel::kSmem, 1024, 10},
                {12252, SoftmaxKernel::kSmem, 1024, 12}, {12256, SoftmaxKernel::kIlp, 1024, 12},
                {32000, SoftmaxKernel::kIlp, 1024, 32}, {151552, SoftmaxKernel::kIlp, 1024, 148}};
  for (const auto& k : kCases) {
    const ref::EagerForwardPlan p = ref::eager_forward_plan(k.V);
    EXPECT_EQ(p.kernel, k.kernel) << "V = " << k.V << ": " << ref::softmax_kernel_name(p.kernel);
    EXPECT_EQ(p.threads, k.threads) << "V = " << k.V;
    if (k.kernel != SoftmaxKernel::kSmem && k.kernel != SoftmaxKernel::kIlp) {
      EXPECT_EQ(p.per_thread, k.per_thread) << "V = " << k.V;
    }
  }
}

// A row of ones: every partial sum is an integer below 2^24, exact in any order, so S == V exactly
// where each element is added once; an element dropped or added twice shows. Powers of two (2^-j
// for element j mod 20) would be exact too but not order-free; ones are the coverage check.
TEST(CrossEntropyDispatch, EveryOrderAddsEachElementOnce) {
  const int64_t kVs[] = {1, 2, 3, 31, 33, 1000, 1025, 2048, 2049, 9215, 9216, 9217, 9219, 9220, 12252, 12255,
                         12256, 12257, 32000, 32001, 32002, 32003, 151551, 151552, 151553};
  for (const int64_t V : kVs) {
    const std::vector<float> ones(static_cast<size_t>(V), 1.0f);
    for (int64_t row = 0; row < 4; ++row) {
      EXPECT_EQ(ref::eager_row_stats(ones, row).sum, static_cast<float>(V)) << "eager V = " << V << " row " << row;
      EXPECT_EQ(ref::eager_row_stats(ones, row).max, 1.0f);
    }
    EXPECT_EQ(ref::fused_row_stats(ones).sum, static_cast<float>(V)) << "fused V = " << V;
  }
}

// The ILP kernel's order depends on the row only through its misalignment (row * V) mod 4.
TEST(CrossEntropyDispatch, IlpOrderRepeatsEveryFourRows) {
  for (const int64_t V : {9217, 12257, 32001, 32002}) {
    std::vector<float> row(static_cast<size_t>(V));
    for (int64_t j = 0; j < V; ++j) row[static_cast<size_t>(j)] = std::ldexp(1.0f + (j * 7919 % 1024) / 1024.0f, static_cast<int>(j % 9) - 4);
    int distinct = 0;
    for (int64_t r = 0; r < 4; ++r) {
      EXPECT_EQ(std::bit_cast<uint32_t>(ref::eager_row_stats(row, r).sum), std::bit_cast<uint32_t>(ref::eager_row_stats(row, r + 4).sum));
      distinct += std::bit_cast<uint32_t>(ref::eager_row_stats(row, r).sum) != std::bit_cast<uint32_t>(ref::eager_row_stats(row, 0).sum);
    }
    RecordProperty("V" + std::to_string(V) + "_shifts_differing_from_row0", distinct);
  }
}

// Rows whose every term but four is exp(-Inf) = +0, so that the order is the placement of four
// terms: x = [0, -2, -2, -2, -Inf, ...], max 0, terms 1, c, c, c with c = expf(-2) (libdevice).
std::vector<float> four_terms(int64_t V) {
  std::vector<float> row(static_cast<size_t>(V), -std::numeric_limits<float>::infinity());
  row[0] = 0.0f;
  row[1] = row[2] = row[3] = -2.0f;
  return row;
}

float expf_minus_two() { return ref::math::libdevice_expf(ref::math::default_ex2_tables(), -2.0f); }

// The ILP kernel at V = 10241 (11 a thread, V % 4 = 1; cross-entropy-order.md §1), 1024 threads.
// Row 0 is aligned: thread 0's first 4-vector holds the four terms, added in order from +0:
// S0 = ((1 + c) + c) + c. Row 1 starts 1 element past a 16-byte boundary (shift (1 * V) mod 4 = 1):
// the unaligned head gives thread t element t - 1, so threads 1..4 hold 1, c, c, c, and the warp's
// halving tree adds lane 4 to lane 0 (c), lane 2 to 0 (2c) and lane 3 to 1 (1 + c), then lane 1 to
// 0: S1 = 2c + (1 + c). The loss at label 0 is -1 * ((0 - 0) - logf(S)) = logf(S).
TEST(CrossEntropyDispatch, IlpHeadOfAMisalignedRowGoesToThreadsFromOne) {
  constexpr int64_t V = 10241;
  ASSERT_EQ(ref::eager_forward_plan(V).kernel, ref::SoftmaxKernel::kIlp);
  const float c = expf_minus_two();
  const float s0 = ((1.0f + c) + c) + c, s1 = 2 * c + (1.0f + c);
  ASSERT_NE(ref::math::libdevice_logf(s0), ref::math::libdevice_logf(s1)) << "the case no longer tells the orders apart";
  Case k;
  k.op = "cross_entropy";
  k.direction = Direction::kForward;
  Tensor logits(DType::kFP32, {2, V});
  for (int64_t r = 0; r < 2; ++r) {
    const std::vector<float> row = four_terms(V);
    for (int64_t j = 0; j < V; ++j) logits.set_f32(r * V + j, row[static_cast<size_t>(j)]);
  }
  k.inputs["logits"] = logits;
  k.inputs["labels"] = labels_of({0, 0});
  const Outcome o = run({"cross_entropy", Direction::kForward, "ref:megatron_eager"}, k);
  ASSERT_FALSE(o.rejected()) << o.message;
  EXPECT_EQ(o.outputs->at("loss").bits(0), std::bit_cast<uint32_t>(ref::math::libdevice_logf(s0)));
  EXPECT_EQ(o.outputs->at("loss").bits(1), std::bit_cast<uint32_t>(ref::math::libdevice_logf(s1)));
}

// The fused order's segments combine by a halving tree (reference/cross_entropy.h). V = 8192: 8
// segments of 1024; segment s holds one finite logit, at its lane 0: 0 in segment 0, -2 in the
// others, so segment results are (m, s) = (0, 1) and (-2, 1), c = expf(-2). combine(a, b) with b.m < a.m is
// (a.m, fma(b.s, expf(b.m - a.m), a.s)), with b.m == a.m (a.m, fma(b.s, 1, a.s)). Halving:
// v0 = (0, 1 + c), v1 = v2 = v3 = (-2, 2); then v0 = (0, 2c + (1 + c)), v1 = (-2, 4); then
// S = 4c + (2c + (1 + c)), each step one rounding. Left to right it would be ((1 + c) + c) ... + c.
TEST(CrossEntropyFused, SegmentsCombineByAHalvingTree) {
  constexpr int64_t V = 8192;
  const float c = expf_minus_two();
  const float tree = 4 * c + (2 * c + (1.0f + c));
  float left_to_right = 1.0f;
  for (int s = 1; s < 8; ++s) left_to_right = left_to_right + c;
  ASSERT_NE(ref::math::libdevice_logf(tree), ref::math::libdevice_logf(left_to_right)) << "the case no longer tells the orders apart";
  Case k;
  k.op = "cross_entropy";
  k.direction = Direction::kForward;
  Tensor logits(DType::kFP32, {1, V});
  for (int64_t j = 0; j < V; ++j) logits.set_f32(j, -std::numeric_limits<float>::infinity());
  for (int64_t s = 0; s < 8; ++s) logits.set_f32(1024 * s, s == 0 ? 0.0f : -2.0f);
  k.inputs["logits"] = logits;
  k.inputs["labels"] = labels_of({0});
  const Outcome o = run({"cross_entropy", Direction::kForward, "ref:fused"}, k);
  ASSERT_FALSE(o.rejected()) << o.message;
  EXPECT_EQ(o.outputs->at("loss").bits(0), std::bit_cast<uint32_t>(ref::math::libdevice_logf(tree)));
}

// --- (b) gradient check and loss bound ---------------------------------------------------------

using Ext = long double;  // x87 extended: 64-bit significand, so the finite differences' rounding is small

// The exact loss of one row in extended precision: log(sum exp(x_j - m)) - (x_t - m).
Ext row_loss(const std::vector<Ext>& x, int64_t t) {
  Ext m = x[0];
  for (const Ext v : x) m = std::max(m, v);
  Ext s = 0;
  for (const Ext v : x) s += std::exp(v - m);
  return std::log(s) - (x[static_cast<size_t>(t)] - m);
}

// A case of moderate finite logits (|x| <= 16), no ignored rows, labels anywhere.
Case small_case(Direction dir, int64_t V) {
  Case c;
  c.op = "cross_entropy";
  c.direction = dir;
  const int64_t N = *rc::gen::inRange<int64_t>(1, 4);
  Tensor x(DType::kFP32, {N, V});
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int e = *rc::gen::inRange(-6, 4);
    const int m = *rc::gen::inRange(0, 1 << 20);
    x.set_f32(i, std::ldexp(1.0f + m * 0x1p-20f, e) * (*rc::gen::arbitrary<bool>() ? -1.0f : 1.0f));
  }
  std::vector<int64_t> labels(static_cast<size_t>(N));
  for (auto& l : labels) l = *rc::gen::inRange<int64_t>(0, V);
  c.inputs["logits"] = x;
  c.inputs["labels"] = labels_of(labels);
  if (dir == Direction::kBackward) {
    Tensor g(DType::kFP32, {N});
    for (int64_t i = 0; i < N; ++i) g.set_f32(i, std::ldexp(1.0f + *rc::gen::inRange(0, 256) / 256.0f, *rc::gen::inRange(-12, 1)) *
                                                   (*rc::gen::arbitrary<bool>() ? -1.0f : 1.0f));
    c.inputs["g"] = g;
  }
  return c;
}

// The error of a contract's logp_j against the exact log-softmax, from its fp32 steps:
// d_j = x_j - m rounded (u |d_j|); e_j = expf(d_j) within 2 ulps (libdevice; 4u relative) and its
// argument's error (u |d|); S a sum over K terms in any order (γ_K relative, K adds on the longest
// chain) of terms each within 4u + u |d|max; the fused contract also rescales by expf factors, at most
// once per element, each within 4u + u spread: counted as 2V further steps; L = logf(S) within
// 1 ulp (2u |L|) plus S's relative error; logp = d - L rounded (u |logp|).
double logp_error(double d_abs_max, double d_j, double L, double logp_j, int64_t V, bool fused) {
  const double K = static_cast<double>(fused ? 3 * V : V);
  const double term = 4 * kU + kU * d_abs_max;
  const double s_rel = K * kU / (1 - K * kU) + term * (fused ? 2.0 * static_cast<double>(V) : 1.0);
  return kU * std::fabs(d_j) + s_rel * 1.01 + 2 * kU * std::fabs(L) + kU * std::fabs(logp_j);
}

class CrossEntropyGradient : public testing::TestWithParam<Target> {};

TEST_P(CrossEntropyGradient, AgreesWithFiniteDifferencesWithinTheDerivedBound) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const bool fused = target.contract() == "fused";
  check_property([&] {
    const int64_t V = *rc::gen::inRange<int64_t>(1, 65);
    const Case c = small_case(Direction::kBackward, V);
    reproduce_with(c, "oracle_violation");
    const Outcome o = run(target, c);
    RC_ASSERT(!o.rejected());
    const Tensor& x = *c.input("logits");
    const Tensor& d = o.outputs->at("d_logits");
    const int64_t N = x.dim(0);
    constexpr Ext kH = 0x1p-16L;
    for (int64_t i = 0; i < N; ++i) {
      const auto t = static_cast<int64_t>(c.input("labels")->bits(i));
      const double g = c.input("g")->f64(i);
      std::vector<Ext> row(static_cast<size_t>(V));
      double m = -INFINITY;
      for (int64_t j = 0; j < V; ++j) {
        row[static_cast<size_t>(j)] = x.f64(i * V + j);
        m = std::max(m, x.f64(i * V + j));
      }
      double d_abs_max = 0, S = 0;
      for (int64_t j = 0; j < V; ++j) {
        d_abs_max = std::max(d_abs_max, m - x.f64(i * V + j));
        S += std::exp(x.f64(i * V + j) - m);
      }
      const double L = std::log(S);
      const Ext f0 = row_loss(row, t);
      for (int64_t j = 0; j < V; ++j) {
        std::vector<Ext> up = row, down = row;
        up[static_cast<size_t>(j)] += kH;
        down[static_cast<size_t>(j)] -= kH;
        const Ext fd = static_cast<Ext>(g) * (row_loss(up, t) - row_loss(down, t)) / (2 * kH);
        // Finite differences: truncation h^2 / 6 * max|L'''| (|p (1 - p)(1 - 2p)| <= 1 / (6 sqrt 3)),
        // and rounding: each loss within (V + 8) extended ulps of its magnitude, divided by 2h.
        const double fd_err = std::fabs(g) * (static_cast<double>(kH * kH) / 6 * 0.0963 +
                                              static_cast<double>((V + 8) * 0x1p-63L * (std::fabs(f0) + d_abs_max + 1) / kH));
        const double dj = x.f64(i * V + j) - m;
        const double logp = dj - L;
        const double p = std::exp(logp);
        const double dl = logp_error(d_abs_max, dj, L, logp, V, fused);
        // expf(logp) within 2 ulps and logp's error; then one rounding (the fma), plus the smallest
        // subnormal where the product underflows.
        double bound = std::fabs(g) * p * (std::expm1(dl) + 4 * kU) * 1.01 + 0x1p-149;
        bound += kU * std::fabs(g * (p - (j == t ? 1.0 : 0.0)));
        const double got = d.f64(i * V + j);
        const double err = std::fabs(got - static_cast<double>(fd));
        if (!(err <= bound + fd_err))
          RC_FAIL("row " + std::to_string(i) + " column " + std::to_string(j) + " of V = " + std::to_string(V) +
                  ": d_logits " + std::to_string(got) + ", finite difference " + std::to_string(static_cast<double>(fd)) +
                  ", error " + std::to_string(err) + " above the bound " + std::to_string(bound + fd_err));
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(CrossEntropy, CrossEntropyGradient, testing::ValuesIn(targets_where(is_ce_bwd)), target_name);

class CrossEntropyLoss : public testing::TestWithParam<Target> {};

TEST_P(CrossEntropyLoss, WithinTheDerivedBoundOfTheOracle) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const bool fused = target.contract() == "fused";
  check_property([&] {
    const int64_t V = *rc::gen::weightedOneOf<int64_t>({{4, rc::gen::inRange<int64_t>(1, 65)},
                                                        {1, rc::gen::element<int64_t>(2049, 9217, 12252, 32001)}});
    const Case c = small_case(Direction::kForward, V);
    reproduce_with(c, "oracle_violation");
    const Outcome o = run(target, c);
    RC_ASSERT(!o.rejected());
    const std::vector<double> truth = op_info("cross_entropy").oracle(c).at("loss");
    const Tensor& x = *c.input("logits");
    const Tensor& loss = o.outputs->at("loss");
    for (int64_t i = 0; i < x.dim(0); ++i) {
      const auto t = static_cast<int64_t>(c.input("labels")->bits(i));
      double m = -INFINITY, d_abs_max = 0, S = 0;
      for (int64_t j = 0; j < V; ++j) m = std::max(m, x.f64(i * V + j));
      for (int64_t j = 0; j < V; ++j) {
        d_abs_max = std::max(d_abs_max, m - x.f64(i * V + j));
        S += std::exp(x.f64(i * V + j) - m);
      }
      const double dt = x.f64(i * V + t) - m;
      const double bound = logp_error(d_abs_max, dt, std::log(S), truth[static_cast<size_t>(i)], V, fused) + 0x1p-149;
      RC_ASSERT(std::fabs(loss.f64(i) - truth[static_cast<size_t>(i)]) <= bound);
    }
    RC_TAG(ref::softmax_kernel_name(ref::eager_forward_plan(V).kernel));
  });
}

INSTANTIATE_TEST_SUITE_P(CrossEntropy, CrossEntropyLoss, testing::ValuesIn(targets_where(is_ce_fwd)), target_name);

// --- (c) shift invariance on integers ------------------------------------------------------------

class CrossEntropyShift : public testing::TestWithParam<Target> {};

TEST_P(CrossEntropyShift, AddingAnIntegerToIntegerRowsKeepsEveryBit) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    Case c = *op_info("cross_entropy").generate(target.direction);
    const Tensor& x0 = *c.input("logits");
    const int64_t N = x0.dim(0), V = x0.dim(1);
    RC_PRE(N * V <= int64_t{1} << 17);
    Tensor x(DType::kFP32, {N, V});
    for (int64_t k = 0; k < x.numel(); ++k) x.set_f32(k, static_cast<float>(static_cast<int>(x0.bits(k) % 33) - 16));
    c.inputs["logits"] = x;
    Case moved = c;
    const float shift = static_cast<float>(*rc::gen::inRange(-4096, 4097));
    Tensor y(DType::kFP32, {N, V});
    for (int64_t k = 0; k < x.numel(); ++k) y.set_f32(k, x.f32(k) + shift);  // exact: integers below 2^13
    moved.inputs["logits"] = y;
    reproduce_with(c, "invariance_violation");
    const auto diff = difference(run(target, c), run(target, moved), "logits + " + std::to_string(shift));
    if (diff) RC_FAIL(*diff);
    RC_TAG(ref::softmax_kernel_name(ref::eager_forward_plan(V).kernel));
  });
}

INSTANTIATE_TEST_SUITE_P(CrossEntropy, CrossEntropyShift, testing::ValuesIn(targets_where(is_ce)), target_name);

// --- (d) ignored rows and S == 1 ----------------------------------------------------------------

class CrossEntropyEdges : public testing::TestWithParam<Target> {};

TEST_P(CrossEntropyEdges, IgnoredRowsAreZeroAndADominantMaxGivesMinusZero) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const int64_t V = *rc::gen::element<int64_t>(1, 2, 7, 33, 1025, 2049, 9220, 12257, 32001);
    Case c = small_case(target.direction, V);
    const int64_t N = c.input("logits")->dim(0);
    // Row 0: ignored. Row 1 (if any): the label's logit 200 above every other: S == 1, loss -0.
    std::vector<int64_t> labels(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) labels[static_cast<size_t>(i)] = static_cast<int64_t>(c.input("labels")->bits(i));
    labels[0] = -100;
    Tensor& x = c.inputs["logits"];
    if (N > 1) {
      const int64_t t = labels[1];
      x.set_f32(V + t, 200.0f);
    }
    c.inputs["labels"] = labels_of(labels);
    reproduce_with(c, "invariance_violation");
    const Outcome o = run(target, c);
    RC_ASSERT(!o.rejected());
    if (target.direction == Direction::kForward) {
      const Tensor& loss = o.outputs->at("loss");
      RC_ASSERT(loss.bits(0) == 0u);
      if (N > 1) RC_ASSERT(loss.bits(1) == 0x80000000u);
    } else {
      const Tensor& d = o.outputs->at("d_logits");
      for (int64_t j = 0; j < V; ++j) RC_ASSERT(d.bits(j) == 0u);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(CrossEntropy, CrossEntropyEdges, testing::ValuesIn(targets_where(is_ce)), target_name);

// The backward's G is the row sum of gO, +0 plus the label's term (cross-entropy-order.md): at
// V = 1 with g = +0, gO_t = -1 * +0 = -0 and G = +0 + -0 = +0, so d_logits = fma(-exp(logp), +0, -0)
// = -0 + -0 = -0 (0x80000000, as eager PyTorch gives on the H200). Without the +0, G = -0 and
// fma(-1, -0, -0) = +0.
TEST(CrossEntropyEdgesByHand, AOneLogitRowWithZeroGradientGivesMinusZero) {
  for (const char* impl : {"ref:megatron_eager", "ref:fused"}) {
    Case k;
    k.op = "cross_entropy";
    k.direction = Direction::kBackward;
    Tensor logits(DType::kFP32, {1, 1}), g(DType::kFP32, {1});
    logits.set_f32(0, 3.0f);
    k.inputs["logits"] = logits;
    k.inputs["labels"] = labels_of({0});
    k.inputs["g"] = g;  // +0
    const Outcome o = run({"cross_entropy", Direction::kBackward, impl}, k);
    ASSERT_FALSE(o.rejected()) << o.message;
    EXPECT_EQ(o.outputs->at("d_logits").bits(0), 0x80000000u) << impl;
  }
}

}  // namespace
}  // namespace bitparity::ops
