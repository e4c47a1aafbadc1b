// Properties of gemm (spec OP-10) that its contracts fix: the cublas contract's error bound
// (ops/gemm.cpp, ContractInfo::error_bound) holds for every implementation of the op, whose
// arithmetic is fp32 accumulation in some order (the tensor core's fused steps in fixed_order, the
// exact sum rounded once in ref:cublas, NVIDIA's order in cuda:cublas); and it is tight enough to
// matter: one bf16 ulp off at K = 1 is outside it, and so is a bf16 accumulator.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/compare.h"
#include "core/dtype.h"
#include "ops/gemm.h"
#include "properties/harness.h"

namespace bitparity::ops {
namespace {

using namespace props;

const ContractInfo& cublas_contract() {
  const ContractInfo* c = op_info("gemm").contract("cublas");
  if (!c || !c->error_bound) throw std::logic_error("gemm has no bounded cublas contract");
  return *c;
}

Tensor bf16_row(const std::vector<float>& values, bool column = false) {
  const auto n = static_cast<int64_t>(values.size());
  Tensor t(DType::kBF16, column ? Shape{n, 1} : Shape{1, n});
  for (int64_t i = 0; i < n; ++i) t.set_f32(i, values[static_cast<size_t>(i)]);
  return t;
}

// a [1, K] @ b [K, 1].
Case dot_case(const std::vector<float>& a, const std::vector<float>& b) {
  Case c;
  c.op = "gemm";
  c.direction = Direction::kForward;
  c.inputs["a"] = bf16_row(a);
  c.inputs["b"] = bf16_row(b, true);
  return c;
}

// The bound's verdict on one bf16 value standing for the case's single output.
bool inside(const Case& c, uint16_t bits) {
  Tensor out(DType::kBF16, {1, 1});
  out.set_bits(0, bits);
  return check_bound(out, cublas_contract().error_bound(c).at("out")).outside == 0;
}

class GemmWithinCublasBound : public testing::TestWithParam<Target> {};

TEST_P(GemmWithinCublasBound, EveryOutputIsWithinTheBound) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = *op_info("gemm").generate(Direction::kForward);
    reproduce_with(c, "ulp_over_budget");
    const Outcome outcome = run(target, c);
    RC_ASSERT(!outcome.rejected());
    const ElementBounds bounds = cublas_contract().error_bound(c).at("out");
    const BoundCheck check = check_bound(outcome.outputs->at("out"), bounds);
    int64_t unbounded = 0, non_finite = 0;
    for (size_t i = 0; i < bounds.bound.size(); ++i) {
      unbounded += std::isinf(bounds.bound[i]);
      non_finite += !std::isfinite(bounds.truth[i]);
    }
    RC_CLASSIFY(unbounded > 0, "an output that may overflow fp32 (unbounded)");
    RC_CLASSIFY(non_finite > 0, "an output whose truth is NaN or infinite");
    RC_CLASSIFY(check.worst_ratio > 0.5, "an output past half its bound");
    if (check.outside)
      RC_FAIL(target.impl + ": " + std::to_string(check.outside) + " outputs outside the cublas bound; first " +
              std::to_string(*check.first) + ": " + std::to_string(check.value) + ", truth " +
              std::to_string(check.truth) + ", bound " + std::to_string(check.bound));
  });
}

INSTANTIATE_TEST_SUITE_P(Impls, GemmWithinCublasBound,
                         testing::ValuesIn(targets_where([](const Target& t) { return t.op == "gemm"; })), target_name);

TEST(GemmCublasBound, OneUlpOffIsOutsideAtKOne) {
  // 1 * (1 + 2^-7) = 1.0078125 is a bf16 (0x3F81): K = 1 leaves it exact, so the bound is the
  // rounding's half ulp (2^-8) and a few fp32 ulps, and the neighbours 0x3F80 and 0x3F82 are out.
  const Case c = dot_case({1.0f}, {1.0078125f});
  EXPECT_TRUE(inside(c, 0x3F81));
  EXPECT_FALSE(inside(c, 0x3F80));
  EXPECT_FALSE(inside(c, 0x3F82));
  // K = 0: zeros, up to the flush allowance (K + 1) 2^-126: 2^-125 (0x0100) and 1 are out.
  Case empty = dot_case({}, {});
  empty.inputs["a"] = Tensor(DType::kBF16, {1, 0});
  empty.inputs["b"] = Tensor(DType::kBF16, {0, 1});
  EXPECT_TRUE(inside(empty, 0x0000));
  EXPECT_TRUE(inside(empty, 0x8000));
  EXPECT_FALSE(inside(empty, 0x0100));
  EXPECT_FALSE(inside(empty, 0x3F80));
}

TEST(GemmCublasBound, SplitKPartialsInBf16AreInside) {
  // cuBLASLt 13.1 on an H200 (algorithm 23, reduction scheme OUTPUT_TYPE, which PyTorch's default
  // allows) returned 0x3B92 for this sum of 20 products, whose exact value 1163 * 2^-18 rounds once
  // to 0x3B91: the bf16 partials are inside the bound, one further ulp on either side is not.
  std::vector<float> a(20, std::ldexp(1.0f, -6)), b(20, 58.0f / 4096);
  b[19] = 61.0f / 4096;
  const Case c = dot_case(a, b);
  EXPECT_TRUE(inside(c, 0x3B91));
  EXPECT_TRUE(inside(c, 0x3B92));
  EXPECT_FALSE(inside(c, 0x3B90));
  EXPECT_FALSE(inside(c, 0x3B93));
}

TEST(GemmCublasBound, ABf16AccumulatorIsOutside) {
  // 1 + 255 * 2^-9: a bf16 accumulator stays at 1 (each 1 + 2^-9 is a tie, to even); fp32 gets
  // 1.498046875, which rounds to bf16 1.5 (0x3FC0).
  std::vector<float> a(256, std::ldexp(1.0f, -9)), b(256, 1.0f);
  a[0] = 1.0f;
  const Case c = dot_case(a, b);
  EXPECT_TRUE(inside(c, 0x3FC0));
  EXPECT_FALSE(inside(c, 0x3F80));
}

TEST(GemmCublasBound, NonFiniteTruthsAndOverflow) {
  // A NaN input asks for a NaN.
  const Case nan = dot_case({NAN, 1.0f}, {1.0f, 1.0f});
  EXPECT_TRUE(inside(nan, 0x7FC0));
  EXPECT_FALSE(inside(nan, 0x3F80));
  // +Inf * 1 + 1: +Inf and nothing else.
  const Case inf = dot_case({INFINITY, 1.0f}, {1.0f, 1.0f});
  EXPECT_TRUE(inside(inf, 0x7F80));
  EXPECT_FALSE(inside(inf, 0xFF80));
  EXPECT_FALSE(inside(inf, 0x7FC0));
  // 2^100 * 2^100 - 2^100 * 2^100 + 1: exactly 1, but a partial sum may overflow fp32 in some
  // order (an fp32 product is already Inf): unbounded, anything goes.
  const float big = std::ldexp(1.0f, 100);
  const Case overflow = dot_case({big, -big, 1.0f}, {big, big, 1.0f});
  EXPECT_TRUE(std::isinf(cublas_contract().error_bound(overflow).at("out").bound[0]));
  EXPECT_TRUE(inside(overflow, 0x7FC0));
  // A finite sum past bf16's largest value (0x7F7F) by more than half its ulp, within fp32's range:
  // +Inf is a rounding of it, -Inf is not.
  const float bf16_max = std::ldexp(255.0f, 120), past = std::ldexp(1.5f, 119);
  const Case large = dot_case({bf16_max, past}, {1.0f, 1.0f});
  EXPECT_TRUE(inside(large, 0x7F80));
  EXPECT_FALSE(inside(large, 0xFF80));
}

// gemm_exact_sums (the truth of the bound and ref:cublas's output) stops an output's sum where one
// side's trailing zeros begin when the other side is finite there. Against the whole sequential
// sum, output by output, on operands with zero rows, zero columns, zero tails of K on either side
// and Inf or NaN in the tail that must not be cut off.
TEST(GemmExactSums, TrailingZerosAreSkippedOnlyAgainstFiniteValues) {
  std::mt19937 rng(7);
  int cut = 0, kept_for_special = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t M = 1 + static_cast<int64_t>(rng() % 5), K = static_cast<int64_t>(rng() % 40),
                  N = 1 + static_cast<int64_t>(rng() % 5);
    Tensor a(DType::kBF16, {M, K}), b(DType::kBF16, {K, N});
    auto value = [&]() -> uint16_t {
      switch (rng() % 24) {
        case 0: return 0x7F80;  // +Inf
        case 1: return 0xFF80;  // -Inf
        case 2: return 0x7FC0;  // NaN
        case 3: return 0x8000;  // -0
        default: return static_cast<uint16_t>(((rng() % 2) << 15) | ((120 + rng() % 14) << 7) | (rng() % 128));
      }
    };
    for (int64_t m = 0; m < M; ++m) {
      const int64_t zeros_from = K == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(K + 1));
      for (int64_t k = 0; k < K; ++k) a.set_bits(m * K + k, k >= zeros_from ? (rng() % 2 ? 0x0000 : 0x8000) : value());
    }
    for (int64_t n = 0; n < N; ++n) {
      const int64_t zeros_from = K == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(K + 1));
      for (int64_t k = 0; k < K; ++k) b.set_bits(k * N + n, k >= zeros_from ? 0x0000 : value());
    }
    const std::vector<double> sums = gemm_exact_sums(a, b);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        bool special_against_zero = false, zero_product_at_end = false;
        for (int64_t k = 0; k < K; ++k) {
          const double x = a.f64(m * K + k), y = b.f64(k * N + n);
          s += x * y;
          special_against_zero |= (x == 0 && !std::isfinite(y)) || (y == 0 && !std::isfinite(x));
          zero_product_at_end = x * y == 0;
        }
        const double got = sums[static_cast<size_t>(m * N + n)];
        if (std::isnan(s)) {
          EXPECT_TRUE(std::isnan(got)) << trial << " [" << m << ", " << n << "]";
        } else {
          EXPECT_EQ(f64_bits(got), f64_bits(s)) << trial << " [" << m << ", " << n << "] K " << K;
        }
        cut += zero_product_at_end;
        kept_for_special += special_against_zero;
      }
  }
  EXPECT_GT(cut, 100);
  EXPECT_GT(kept_for_special, 50);
}

}  // namespace
}  // namespace bitparity::ops
