// The bound an order-of-arrival contract's sums keep in every order (core/sum_bound.h,
// ContractInfo::arrival_order_bound), by which a campaign tells a wrong sum of several addends from
// another order of the same additions:
// - every order of the additions, simulated here with each contract's roundings (fp32 with flushed
//   subnormals, bf16 and fp16 additions, fp32 products, one more rounding to the output), stays
//   within it, near overflow, in the subnormal range and under cancellation too;
// - it is tight enough to matter: a sum that drops one addend is outside it;
// - every implementation of every order-of-arrival contract (the CUDA kernels on the GPU machine,
//   in whatever order their atomics arrive) keeps its outputs within it on generated cases.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/compare.h"
#include "core/dtype.h"
#include "core/sum_bound.h"
#include "properties/harness.h"

namespace bitparity {
namespace {

using namespace props;

// One contract's arithmetic and the dtype its data addends have.
struct Arithmetic {
  const char* name;
  AnyOrderSum sum;
  DType data;  // the addends' dtype (with products: the data factor's; the other factor is fp32)
};

const std::vector<Arithmetic>& arithmetics() {
  static const std::vector<Arithmetic> all = {
      {"fp32 atomics, fp32 out", {false, DType::kFP32, DType::kFP32}, DType::kFP32},
      {"fp32 atomics, bf16 out", {false, DType::kFP32, DType::kBF16}, DType::kBF16},
      {"fp32 atomics, fp16 out", {false, DType::kFP32, DType::kFP16}, DType::kFP16},
      {"bf16 atomics", {false, DType::kBF16, DType::kBF16}, DType::kBF16},
      {"fp16 atomics", {false, DType::kFP16, DType::kFP16}, DType::kFP16},
      {"fp32 products, bf16 out", {true, DType::kFP32, DType::kBF16}, DType::kBF16},
      {"fp32 products, fp16 out", {true, DType::kFP32, DType::kFP16}, DType::kFP16},
      {"fp32 products, fp32 out", {true, DType::kFP32, DType::kFP32}, DType::kFP32},
  };
  return all;
}

float flushed(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }

// The additions of `addends` (exact values) in `order`, as an atomic sum of the arithmetic does them:
// each addend rounded to fp32 where it is a product, every addition from +0 rounded to the step's dtype
// (fp32 flushing a subnormal addend and result; bf16 and fp16 through fp32, or in one rounding), and
// the result rounded once more to the output dtype.
float sum_in_order(const AnyOrderSum& a, const std::vector<double>& addends, const std::vector<size_t>& order,
                   bool single_rounding) {
  float acc = 0.0f;
  for (const size_t j : order) {
    float x = static_cast<float>(addends[j]);  // exact, or the product's RNE rounding to fp32
    if (a.rounded_addends) x = flushed(x);
    if (a.step == DType::kFP32) {
      acc = flushed(acc + flushed(x));
    } else if (single_rounding) {
      acc = static_cast<float>(to_double(a.step, from_double(a.step, static_cast<double>(acc) + x)));
    } else {
      acc = round_to(a.step, acc + x);
    }
  }
  return a.out == a.step ? acc : round_to(a.out, acc);
}

// The largest finite exponent and the smallest normal one of a dtype's range.
int top_exponent(DType d) { return d == DType::kFP16 ? 15 : 127; }
int bottom_exponent(DType d) { return d == DType::kFP16 ? -14 : -126; }

struct Sum {
  const Arithmetic* arithmetic = nullptr;
  std::vector<double> addends;  // exact
  bool cancelling = false;
  std::string range;
};

// n addends of the arithmetic's data dtype (times an fp32 factor where it sums products): binades
// spread by up to 30 around a base in the normal range, near the subnormal range or near overflow;
// half of the time in cancelling pairs; now and then an infinity or a NaN.
rc::Gen<Sum> sums(int64_t max_n) {
  return rc::gen::exec([max_n] {
    Sum s;
    s.arithmetic = &arithmetics()[*rc::gen::inRange<size_t>(0, arithmetics().size())];
    const Arithmetic& a = *s.arithmetic;
    const auto n = *rc::gen::inRange<int64_t>(1, max_n + 1);
    const int range = *rc::gen::inRange(0, 3);
    const int top = std::min(top_exponent(a.sum.step), top_exponent(a.data)), bottom = bottom_exponent(a.data);
    const int base = range == 0 ? *rc::gen::inRange(-12, 12)
                   : range == 1 ? *rc::gen::inRange(bottom - 10, bottom + 12)
                                : *rc::gen::inRange(top - 12, top + 1);
    s.range = range == 0 ? "normal" : range == 1 ? "near subnormal" : "near overflow";
    const int spread = *rc::gen::inRange(0, 31);
    s.cancelling = *rc::gen::inRange(0, 2) == 1;
    auto value = [&](int exponent) {
      const double m = 1.0 + static_cast<double>(*rc::gen::inRange(0, 1 << 20)) / (1 << 20);
      const double sign = *rc::gen::inRange(0, 2) ? -1.0 : 1.0;
      double x = to_double(a.data, from_double(a.data, sign * std::ldexp(m, exponent)));
      if (a.sum.rounded_addends) {
        const double w = std::ldexp(1.0 + static_cast<double>(*rc::gen::inRange(0, 1 << 23)) / (1 << 23),
                                    *rc::gen::inRange(-3, 1));
        x *= static_cast<double>(static_cast<float>(w));  // exact in fp64: at most 24 x 24 bits
      }
      return x;
    };
    for (int64_t j = 0; j < n; ++j) {
      if (s.cancelling && j % 2 == 1) {
        const double prev = s.addends.back();
        const int e = std::ilogb(prev) - *rc::gen::inRange(0, 12);
        s.addends.push_back(-prev + (std::isfinite(prev) && prev != 0 ? value(e) / 4 : 0.0));
        if (!a.sum.rounded_addends) s.addends.back() = to_double(a.data, from_double(a.data, s.addends.back()));
        continue;
      }
      s.addends.push_back(value(base - *rc::gen::inRange(0, spread + 1)));
    }
    const int special = *rc::gen::inRange(0, 40);
    if (special == 0) s.addends[0] = INFINITY;
    if (special == 1) s.addends[0] = NAN;
    return s;
  });
}

// The bound of a sum, with the truth and S as the contracts' bound functions compute them.
ElementBounds bound_of(const Sum& s, int64_t n) {
  double truth = 0, S = 0;
  for (int64_t j = 0; j < n; ++j) {
    truth += s.addends[static_cast<size_t>(j)];
    if (std::isfinite(s.addends[static_cast<size_t>(j)])) S += std::fabs(s.addends[static_cast<size_t>(j)]);
  }
  return {{truth}, {any_order_bound(s.arithmetic->sum, n, S, truth)}};
}

bool within(DType out, float value, const ElementBounds& b) {
  Tensor t(out, {1});
  t.set_bits(0, from_double(out, value));  // exact: the value is of that dtype
  return check_bound(t, b).outside == 0;
}

std::string number(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string show(const Sum& s, float got, const ElementBounds& b) {
  std::string text = std::string(s.arithmetic->name) + ": got " + number(got) + ", truth " + number(b.truth[0]) +
                     ", bound " + number(b.bound[0]) + "; addends";
  char buf[40];
  for (const double x : s.addends) {
    std::snprintf(buf, sizeof buf, " %a", x);
    text += buf;
  }
  return text;
}

// Four random orders of the sum's additions, each within its bound.
void check_orders(const Sum& s, std::map<std::string, int>& seen) {
  const auto n = static_cast<int64_t>(s.addends.size());
  const ElementBounds b = bound_of(s, n);
  ++seen[s.arithmetic->name];
  ++seen[s.range];
  seen["cancelling pairs"] += s.cancelling;
  seen["unbounded"] += std::isinf(b.bound[0]);
  seen["NaN or infinite truth"] += !std::isfinite(b.truth[0]);
  std::vector<size_t> order(s.addends.size());
  std::iota(order.begin(), order.end(), size_t{0});
  for (int k = 0; k < 4; ++k) {
    std::shuffle(order.begin(), order.end(), std::mt19937_64(*rc::gen::arbitrary<uint64_t>()));
    const bool single = k % 2 == 1;
    const float got = sum_in_order(s.arithmetic->sum, s.addends, order, single);
    if (!within(s.arithmetic->sum.out, got, b)) RC_FAIL("outside the bound: " + show(s, got, b));
  }
}

TEST(AnyOrderSum, EveryOrderOfTheAdditionsStaysWithinTheBound) {
  std::map<std::string, int> seen;
  check_property([&] {
    for (int draw = 0; draw < 20; ++draw) check_orders(*sums(48), seen);
  });
  for (const Arithmetic& a : arithmetics()) EXPECT_GT(seen[a.name], 0) << a.name << " never drawn";
  for (const char* c : {"normal", "near subnormal", "near overflow", "cancelling pairs", "unbounded", "NaN or infinite truth"})
    EXPECT_GT(seen[c], 0) << "the class " << c << " never drawn";
}

// Tight enough to matter: with n addends, n^2 u <= 1/16 for the additions' unit roundoff u (n <= 4
// in bf16, 8 otherwise), the largest at least 2^10 times the output's smallest normal value, no
// overflow and no NaN, the bound is below a quarter of the largest addend's magnitude (at least
// S / n), and a sum that leaves one addend out is outside it.
TEST(AnyOrderSum, ASumThatDropsAnAddendIsOutsideTheBound) {
  int tight = 0;
  check_property([&] {
    for (int draw = 0; draw < 20; ++draw) {
      const Sum s = *sums(8);
      const auto n = static_cast<int64_t>(s.addends.size());
      const double u = s.arithmetic->sum.step == DType::kBF16 ? 0x1p-8 : 0x1p-11;
      if (n < 2 || s.range != "normal" || static_cast<double>(n * n) * u > 1.0 / 16) continue;
      const ElementBounds b = bound_of(s, n);
      if (!std::isfinite(b.truth[0]) || !std::isfinite(b.bound[0])) continue;
      const auto largest = static_cast<size_t>(
          std::max_element(s.addends.begin(), s.addends.end(),
                           [](double x, double y) { return std::fabs(x) < std::fabs(y); }) -
          s.addends.begin());
      // Far above the subnormal range, where each addition's absolute underflow term is negligible.
      if (std::fabs(s.addends[largest]) < std::ldexp(1.0, bottom_exponent(s.arithmetic->sum.out) + 10)) continue;
      if (!(b.bound[0] < std::fabs(s.addends[largest]) / 4))
        RC_FAIL("a bound of a quarter of the largest addend or more: " + show(s, 0, b));
      // And within half again of its first-order terms: n - 1 roundings of the additions, the
      // products' and the output's roundings, the last with its absolute term eta_o as the bound
      // always adds it (it dominates where cancellation leaves the truth near the output's subnormal
      // range) (so a bound grown tenfold fails here).
      const AnyOrderSum& a = s.arithmetic->sum;
      double S = 0;
      for (const double x : s.addends) S += std::fabs(x);
      const auto unit = [](DType d) { return d == DType::kBF16 ? 0x1p-8 : d == DType::kFP16 ? 0x1p-11 : 0x1p-24; };
      const double step = static_cast<double>(n - 1) * (unit(a.step) + (a.step == DType::kFP32 ? 0 : 0x1p-23)) * S;
      const double first_order = step + (a.rounded_addends ? 0x1p-24 * S : 0) +
                                 (a.out == a.step ? 0
                                                  : unit(a.out) * (std::fabs(b.truth[0]) + step) +
                                                        (a.out == DType::kFP16 ? 0x1p-25 : 0x1p-125));
      if (!(b.bound[0] <= 1.5 * first_order + static_cast<double>(n) * 0x1p-20 * std::ldexp(1.0, bottom_exponent(a.out))))
        RC_FAIL("a bound far above its first-order terms (" + number(first_order) + "): " + show(s, 0, b));
      std::vector<size_t> order;
      for (size_t j = 0; j < s.addends.size(); ++j)
        if (j != largest) order.push_back(j);
      const float got = sum_in_order(s.arithmetic->sum, s.addends, order, false);
      if (within(s.arithmetic->sum.out, got, b)) RC_FAIL("an addend dropped, yet within the bound: " + show(s, got, b));
      ++tight;
    }
  });
  EXPECT_GT(tight, 0) << "no generated sum was in the tight class";
}

// --- the contracts' bounds ------------------------------------------------------------------------

std::vector<Target> bounded_targets() {
  return targets_where([](const Target& t) {
    return !t.impl.empty() && t.contract_info().order_of_arrival && t.contract_info().arrival_order_bound;
  });
}

TEST(ArrivalOrderBound, EveryOrderOfArrivalContractHasOneCoveringItsSummedOutputs) {
  int contracts = 0;
  for (const Target& t : op_direction_impls()) {
    if (!t.contract_info().order_of_arrival) continue;
    ++contracts;
    EXPECT_TRUE(t.contract_info().arrival_order_bound) << t.name() << ": an order-of-arrival contract without a bound";
    EXPECT_FALSE(t.contract_info().bound_doc.empty()) << t.name() << ": the bound's derivation is not stated";
  }
  EXPECT_GT(contracts, 0);
  EXPECT_FALSE(bounded_targets().empty());
}

class WithinArrivalBound : public testing::TestWithParam<Target> {};

// Every implementation (the reference's ascending order, a kernel's order of arrival) keeps every
// covered element within the bound, on cases whose order matters and on the others; the bound
// covers every output that the contract's elements of one addend name.
TEST_P(WithinArrivalBound, EveryCoveredElementIsWithinTheBound) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const OpInfo& op = op_info(target.op);
  const ContractInfo& contract = target.contract_info();
  int64_t several = 0, decided = 0;
  check_property([&] {
    const Case c = *op.generate(target.direction);
    reproduce_with(c, "ulp_over_budget");
    const Outcome o = run(target, c);
    if (o.rejected()) {
      RC_TAG("rejected (" + o.reject_class + ")");
      return;
    }
    const std::map<std::string, ElementBounds> bounds = contract.arrival_order_bound(c);
    const bool matters = arrival_order_matters(contract, c);
    RC_CLASSIFY(matters, "the order of arrival decides some bits");
    decided += matters;
    if (contract.arrival_order_fixed && matters)
      for (const auto& fixed : contract.arrival_order_fixed(c)) RC_ASSERT(bounds.contains(fixed.first));
    for (const auto& [name, b] : bounds) {
      const auto out = o.outputs->find(name);
      RC_ASSERT(out != o.outputs->end());
      const BoundCheck check = check_bound(out->second, b);
      if (check.outside)
        RC_FAIL(target.name() + ": " + name + position_string(check.position) + " = " + number(check.value) +
                ", true value " + number(check.truth) + ", outside the bound " + number(check.bound) +
                " (" + std::to_string(check.outside) + " elements outside)");
    }
    // The elements of several addends: where the order matters, those arrival_order_fixed leaves out.
    if (contract.arrival_order_fixed && matters)
      for (const auto& [name, one] : contract.arrival_order_fixed(c))
        for (size_t i = 0; i < one.size(); ++i) several += !one[i] && std::isfinite(bounds.at(name).bound[i]);
  });
  // A direction that sums nothing (a copy) has no case whose order matters; one that sums must
  // reach elements of several addends that the bound holds.
  if (decided) {
    EXPECT_GT(several, 0) << "no element of several addends with a finite bound was generated";
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, WithinArrivalBound, testing::ValuesIn(bounded_targets()), target_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(WithinArrivalBound);

}  // namespace
}  // namespace bitparity
