// Gradients of the routing ops (spec OP-1 .. OP-3).
//
// permute and unpermute are linear maps, so their backwards are the adjoints of their forwards:
// for any g and x, <bwd(g), x> = <g, fwd(x)>. AdjointOfTheForward checks that identity on the
// exact values (the ops' oracles, fp64 roundings of MPFR sums; inner products in fp64 with their
// error bound), and
// ImplementationWithinTheRoundingBound checks every implementation's backward against those exact
// values element-wise within a bound derived from the contract's arithmetic (written at each
// bound below), not a tuned tolerance.
//
// router_topk's backward (megatron_eager) is the chain rule through the given topk_idx:
// DerivativeOfTheExactForward compares d_logits with central differences of the exact forward
// sum_e d_probs[t, e] * probs[t, e] (fp64, the selection held at topk_idx) within a per-element
// bound for the contract's fp32 / bf16 roundings of S, G, D, a, dD (router-backward-order.md §2).
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/case_json.h"
#include "core/dtype.h"
#include "ops/routing_map.h"
#include "ops/tests/gradient_coverage.h"
#include "properties/harness.h"
#include "properties/rows.h"
#include "reference/numerics.h"

namespace bitparity::ops {
namespace {

using namespace props;
namespace rm = routing_map;

// --- rounding constants --------------------------------------------------------------------------

constexpr double kU32 = 0x1p-24, kU64 = 0x1p-53;
constexpr double kEta32 = 0x1p-150;  // largest error of rounding into fp32's subnormal range

// Unit roundoff of a rounding to `d` (0 for fp32 outputs, which no further rounding touches when
// the arithmetic is fp32), and the largest error of rounding into its subnormal range.
double output_roundoff(DType d) { return d == DType::kBF16 ? 0x1p-8 : d == DType::kFP16 ? 0x1p-11 : 0.0; }
double output_underflow(DType d) { return d == DType::kBF16 ? 0x1p-134 : d == DType::kFP16 ? 0x1p-25 : 0.0; }
double max_finite(DType d) {
  return d == DType::kFP16 ? 65504.0 : d == DType::kBF16 ? 0x1.fep127 : double{std::numeric_limits<float>::max()};
}

// Higham's gamma_n = n u / (1 - n u): n roundings of relative error at most u on a path.
double gamma(int64_t n, double u) {
  const double nu = static_cast<double>(std::max<int64_t>(n, 0)) * u;
  return nu / (1 - nu);
}

constexpr int64_t kMaxTokens = 8;  // keeps a case's MPFR inner products and difference quotients cheap

Case small_backward_case(const OpInfo& op) {
  Case c = *op.generate(Direction::kBackward);
  return take_rows(c, 0, std::min(case_rows(c), kMaxTokens));
}

// Finite values |x| in [2^lo, 2^hi] (or +-0) with a random 24-bit mantissa, rounded into the dtype.
Tensor finite_tensor(DType dtype, Shape shape, int lo, int hi) {
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int e = *rc::gen::inRange(lo - 1, hi + 1);
    const double m = std::ldexp(1.0 + *rc::gen::inRange<uint32_t>(0, 1u << 24) / double(1u << 24), e);
    const double v = e < lo ? 0.0 : (*rc::gen::arbitrary<bool>() ? -m : m);
    t.set_bits(i, from_double(dtype, v));
  }
  return t;
}

// --- 1. permute and unpermute: the backward is the adjoint of the forward ------------------------

// An inner product in fp64 with its rounding error bound: n products summed in any order are
// within gamma_n(u64) sum |a_i b_i| of the exact value (Higham 3.1; the values here are fp32-ranged,
// so no product underflows fp64). `abs`, computed in fp64 itself, is charged one more gamma_n.
struct Inner {
  double value = 0, abs = 0;
  int64_t n = 0;
  void add(double a, double b) {
    value += a * b;
    abs += std::fabs(a * b);
    ++n;
  }
  double rounding() const { return gamma(n, kU64) * abs * (1 + gamma(n, kU64)); }
};

bool is_routing_linear(const std::string& op) { return op == "permute" || op == "unpermute"; }

class Adjoint : public testing::TestWithParam<Target> {};

// The non-finite elements of every floating input set to +0, so that inner products are defined.
int make_finite(Case& c) {
  int changed = 0;
  for (auto& [name, t] : c.inputs) {
    if (!is_floating(t.dtype())) continue;
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.f64(i))) t.set_bits(i, 0), ++changed;
  }
  return changed;
}

std::string adjoint_failure(const std::string& what, double lhs, double rhs, double bound, const Case& c) {
  std::ostringstream os;
  os.precision(17);
  os << what << ": <bwd(g), x> = " << lhs << ", <g, fwd(x)> = " << rhs << ", |difference| "
     << std::fabs(lhs - rhs) << " > bound " << bound << "\ncase: " << case_to_json(c).dump();
  return os.str();
}

TEST_P(Adjoint, OracleBackwardIsTheAdjointOfTheOracleForward) {
  const Target target = GetParam();
  const OpInfo& op = op_info(target.op);
  ASSERT_TRUE(op.oracle) << target.op << " has no oracle";
  check_property([&] {
    Case c = small_backward_case(op);
    RC_CLASSIFY(make_finite(c) > 0, "non-finite inputs set to +0");
    const rm::Routing r = rm::read(target.op, c.input("routing_map"));
    RC_TAG(r.tokens == 0 ? "T = 0" : r.rows() == 0 ? "no routed pairs" : "routed pairs");
    reproduce_with(c, "oracle_not_adjoint");
    Case f;
    f.op = target.op;
    f.direction = Direction::kForward;
    f.inputs["routing_map"] = *c.input("routing_map");
    const auto bwd = op.oracle(c);
    if (target.op == "permute") {
      // fwd: permuted[p] = tokens[token_of_row[p]] (a copy, exact); bwd: d_tokens, the fp64
      // rounding of the exact slot sums, each within u64 |d_tokens| of the sum, so <bwd(g), x> is
      // within u64 sum |d_tokens x| of the exact inner product; <g, fwd(x)> is exact. Both inner
      // products add their fp64 rounding bound.
      const Tensor& g = *c.input("d_permuted");
      const Tensor x = finite_tensor(g.dtype(), {r.tokens, g.dim(1)}, -10, 10);
      f.inputs["tokens"] = x;
      const auto fwd = op.oracle(f);
      Inner lhs, rhs;
      for (int64_t i = 0; i < x.numel(); ++i) lhs.add(bwd.at("d_tokens")[static_cast<size_t>(i)], x.f64(i));
      for (int64_t i = 0; i < g.numel(); ++i) rhs.add(g.f64(i), fwd.at("permuted")[static_cast<size_t>(i)]);
      const double bound = kU64 * lhs.abs + lhs.rounding() + rhs.rounding();
      if (!(std::fabs(lhs.value - rhs.value) <= bound)) RC_FAIL(adjoint_failure("permute", lhs.value, rhs.value, bound, c));
      return;
    }
    // unpermute. In x (the permuted rows): fwd out[t] = sum_j p_j x[pos_j], the fp64 rounding of the
    // exact sum (u64 |out| each); bwd d_permuted[pos_j] = p_j d_out[t], exact in fp64 (24 x 24 bits).
    const Tensor& g = *c.input("d_out");
    const Tensor* probs = c.input("probs");
    const Tensor x = finite_tensor(g.dtype(), {r.rows(), g.dim(1)}, -10, 10);
    f.inputs["permuted"] = x;
    if (probs) f.inputs["probs"] = *probs;
    {
      const auto fwd = op.oracle(f);
      Inner lhs, rhs;
      for (int64_t i = 0; i < x.numel(); ++i) lhs.add(bwd.at("d_permuted")[static_cast<size_t>(i)], x.f64(i));
      for (int64_t i = 0; i < g.numel(); ++i) rhs.add(g.f64(i), fwd.at("out")[static_cast<size_t>(i)]);
      const double bound = kU64 * rhs.abs + lhs.rounding() + rhs.rounding();
      if (!(std::fabs(lhs.value - rhs.value) <= bound))
        RC_FAIL(adjoint_failure("unpermute, in permuted", lhs.value, rhs.value, bound, c));
    }
    RC_TAG(probs ? "with probs" : "without probs");
    if (!probs) return;
    // In the probs (the forward is linear in them too, permuted held): d_probs[t, e] = the fp64
    // rounding of the exact dot product of d_out[t] with permuted[pos(t, e)] (u64 |d_probs| each),
    // +0 off the map, where the forward never reads probs; out as above.
    Case fp = f;
    fp.inputs["permuted"] = *c.input("permuted");
    const Tensor dp = finite_tensor(DType::kFP32, probs->shape(), -10, 10);
    fp.inputs["probs"] = dp;
    const auto fwd = op.oracle(fp);
    Inner lhs, rhs;
    for (int64_t i = 0; i < dp.numel(); ++i) lhs.add(bwd.at("d_probs")[static_cast<size_t>(i)], dp.f64(i));
    for (int64_t i = 0; i < g.numel(); ++i) rhs.add(g.f64(i), fwd.at("out")[static_cast<size_t>(i)]);
    const double bound = kU64 * (lhs.abs + rhs.abs) + lhs.rounding() + rhs.rounding();
    if (!(std::fabs(lhs.value - rhs.value) <= bound))
      RC_FAIL(adjoint_failure("unpermute, in probs", lhs.value, rhs.value, bound, c));
  });
}

// The op x direction targets: the property is about the oracles, not an implementation.
std::vector<Target> linear_backwards() {
  std::vector<Target> out;
  for (const Target& t : op_directions())
    if (is_routing_linear(t.op) && t.direction == Direction::kBackward) out.push_back(t);
  return out;
}
INSTANTIATE_TEST_SUITE_P(RoutingGradients, Adjoint, testing::ValuesIn(linear_backwards()), target_name);

// --- 1b. every implementation's backward against the exact values ---------------------------------

class Implementation : public testing::TestWithParam<Target> {};

std::string element_failure(const std::string& where, double got, double exact, double bound, const Case& c) {
  std::ostringstream os;
  os.precision(17);
  os << where << ": got " << got << ", exact " << exact << ", |difference| " << std::fabs(got - exact) << " > bound "
     << bound << "\ncase: " << case_to_json(c).dump();
  return os.str();
}

TEST_P(Implementation, BackwardWithinTheRoundingBoundOfTheExactValues) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const OpInfo& op = op_info(target.op);
  const bool order_of_arrival = target.contract_info().order_of_arrival;
  check_property([&] {
    const Case c = small_backward_case(op);
    reproduce_with(c, "ulp_over_budget");
    const Outcome outcome = run(target, c);
    if (outcome.rejected()) {
      RC_TAG("rejected (" + outcome.reject_class + ")");
      return;
    }
    const rm::Routing r = rm::read(target.op, c.input("routing_map"));
    const auto truth = op.oracle(c);
    int non_finite = 0, near_overflow = 0, checked = 0;
    auto check = [&](const std::string& where, double got, double exact, double bound, double magnitude, DType dt) {
      if (magnitude + bound > max_finite(dt)) return void(++near_overflow);
      ++checked;
      if (!(std::fabs(got - exact) <= bound)) RC_FAIL(element_failure(where, got, exact, bound, c));
    };
    if (target.op == "permute") {
      const Tensor& dp = *c.input("d_permuted");
      const Tensor& got = outcome.outputs->at("d_tokens");
      const DType dt = dp.dtype();
      const int64_t H = dp.dim(1);
      // d_tokens[t] sums the k = slot_count(t) values x_j = f32(d_permuted[pos_j]) (exact in fp32).
      //  aligned (rule 7: four accumulators then ((a0+a1)+a2)+a3, or the H = 1 row sum): some
      //    order of k - 1 fp32 additions (no underflow error: a sum of fp32 values that lands in
      //    the subnormal range is exact), then one rounding to the dtype:
      //      |got - exact| <= gamma_{k-1}(u32) S + u_dt (|exact| + gamma_{k-1}(u32) S),  S = sum |x_j|;
      //  order of arrival (every addition rounded to fp32 then to the dtype, in any order):
      //    each addition's relative error is at most u' = u32 + u_dt + u32 u_dt, so
      //      |got - exact| <= gamma_{k-1}(u') S;
      //    in fp32 the atomic add also flushes a subnormal addend and a subnormal result (each
      //    under 2^-126): 2 k 2^-126 more.
      const double udt = output_roundoff(dt);
      for (int64_t t = 0; t < r.tokens; ++t) {
        const auto pos = r.positions(t);
        const int64_t k = static_cast<int64_t>(pos.size());
        for (int64_t h = 0; h < H; ++h) {
          double S = 0;
          bool finite = true;
          for (const int64_t p : pos) {
            finite = finite && std::isfinite(dp.f64(p * H + h));
            S += std::fabs(dp.f64(p * H + h));
          }
          if (!finite) {
            ++non_finite;
            continue;
          }
          const double exact = truth.at("d_tokens")[static_cast<size_t>(t * H + h)];
          const double flush = dt == DType::kFP32 ? 2.0 * static_cast<double>(k) * 0x1p-126 : 0.0;
          const double bound = order_of_arrival ? gamma(k - 1, kU32 + udt + kU32 * udt) * S + flush
                                                : gamma(k - 1, kU32) * S + udt * (std::fabs(exact) + gamma(k - 1, kU32) * S);
          check("d_tokens[" + std::to_string(t) + ", " + std::to_string(h) + "]", got.f64(t * H + h), exact, bound, S, dt);
        }
      }
    } else {
      const Tensor& d_out = *c.input("d_out");
      const Tensor* probs = c.input("probs");
      const DType dt = d_out.dtype();
      const int64_t H = d_out.dim(1);
      const double udt = output_roundoff(dt);
      // d_permuted[pos(t, e)] = dt(f32(d_out[t]) * p) (fp32 product then the dtype), or a copy:
      //   |got - exact| <= (u32 + u_dt + u32 u_dt) |exact| + eta32 (1 + u_dt) + eta_dt; 0 for a copy.
      const Tensor& got = outcome.outputs->at("d_permuted");
      for (int64_t t = 0; t < r.tokens; ++t)
        for (size_t j = 0; j < r.slots(t).size(); ++j) {
          const int64_t p = r.positions(t)[j], e = r.slots(t)[j];
          const bool finite_p = !probs || std::isfinite(probs->f64(t * r.experts + e));
          for (int64_t h = 0; h < H; ++h) {
            if (!finite_p || !std::isfinite(d_out.f64(t * H + h))) {
              ++non_finite;
              continue;
            }
            const double exact = truth.at("d_permuted")[static_cast<size_t>(p * H + h)];
            const double bound = probs ? (kU32 + udt + kU32 * udt) * std::fabs(exact) + kEta32 * (1 + udt) +
                                             output_underflow(dt)
                                       : 0.0;
            check("d_permuted[" + std::to_string(p) + ", " + std::to_string(h) + "]", got.f64(p * H + h), exact, bound,
                  std::fabs(exact), dt);
          }
        }
      RC_TAG(probs ? "with probs" : "without probs");
      if (probs) {
        // d_probs[t, e] = sum over h of the fp32 products q_h = f32(d_out[t, h]) * f32(permuted[pos, h])
        // (rule 7's last-dim sum; H = 1: the product itself). Each product is within u32 |q_h| +
        // eta32 of the true one, and any order of H - 1 fp32 additions adds gamma_{H-1}(u32) sum |q^_h|:
        //   |got - exact| <= u32 Q + H eta32 + gamma_{H-1}(u32) ((1 + u32) Q + H eta32),  Q = sum |q_h|.
        // Off the map d_probs is +0 exactly (checked bitwise).
        const Tensor& permuted = *c.input("permuted");
        const Tensor& d_probs = outcome.outputs->at("d_probs");
        for (int64_t t = 0; t < r.tokens; ++t)
          for (int64_t e = 0; e < r.experts; ++e) {
            const int64_t p = r.position(t, e);
            const std::string where = "d_probs[" + std::to_string(t) + ", " + std::to_string(e) + "]";
            if (p < 0) {
              if (d_probs.bits(t * r.experts + e) != 0)
                RC_FAIL(where + ": off the map, not +0: " + describe_bits(DType::kFP32, d_probs.bits(t * r.experts + e)) +
                        "\ncase: " + case_to_json(c).dump());
              continue;
            }
            double Q = 0;
            bool finite = true;
            for (int64_t h = 0; h < H; ++h) {
              const double q = d_out.f64(t * H + h) * permuted.f64(p * H + h);
              finite = finite && std::isfinite(q);
              Q += std::fabs(q);
            }
            if (!finite) {
              ++non_finite;
              continue;
            }
            const double Hd = static_cast<double>(H);
            const double bound = kU32 * Q + Hd * kEta32 + gamma(H - 1, kU32) * ((1 + kU32) * Q + Hd * kEta32);
            check(where, d_probs.f64(t * r.experts + e), truth.at("d_probs")[static_cast<size_t>(t * r.experts + e)],
                  bound, Q, DType::kFP32);
          }
      }
    }
    RC_CLASSIFY(non_finite > 0, "non-finite elements skipped");
    RC_CLASSIFY(near_overflow > 0, "elements near the dtype's overflow skipped");
    RC_CLASSIFY(checked > 0, "elements checked");
  });
}

INSTANTIATE_TEST_SUITE_P(RoutingGradients, Implementation, testing::ValuesIn(targets_where([](const Target& t) {
                           return is_routing_linear(t.op) && t.direction == Direction::kBackward && !t.impl.empty();
                         })),
                         target_name);

// --- 2. router_topk: the chain rule through topk_idx -----------------------------------------------

// The exact forward of one row with the selection held at `slots`: the loss
//   l(x) = sum_j d_probs[t, e_j] * scale * P_j(x),  P_j = S(x_{e_j}) / (sum_i S(x_{e_i}) + 1e-20)
// (k == 1: P = S), S = sigmoid or sqrt(softplus) with PyTorch's threshold 20.
double exact_score(bool sigmoid, double x) {
  if (sigmoid) return 1.0 / (1.0 + std::exp(-x));
  return std::sqrt(x > 20.0 ? x : std::log1p(std::exp(x)));
}

constexpr double kRouterEpsilon = 1e-20;
constexpr double kF64EvalError = 64 * kU64;  // relative error of one fp64 evaluation of a row's loss

struct Derivative {
  double value, error;
};
double fd_step(double x) { return 0x1p-20 * std::max(1.0, std::fabs(x)); }
// Central differences with Richardson's |D(h) - D(h/2)| as the truncation error estimate, plus the
// fp64 evaluation noise magnified by 1/h (as the SwiGLU gradient test).
template <typename F>
Derivative central_difference(F f, double x, double magnitude) {
  const double h = fd_step(x);
  auto quotient = [&](double step) { return (f(x + step) - f(x - step)) / (2 * step); };
  const double d1 = quotient(h), d2 = quotient(h / 2);
  return {d2, std::fabs(d1 - d2) + 2 * kF64EvalError * magnitude / (h / 2)};
}

bool is_sigmoid(const Case& c) {
  const auto score = c.attrs.find("score");
  return score == c.attrs.end() || std::get<std::string>(score->second) == "sigmoid";
}

// Experts of row t ranked by the exact R = S + bias: descending, NaN first, ties by index (rule 9).
std::vector<int64_t> exact_ranking(const Case& c, int64_t t) {
  const Tensor& logits = *c.input("logits");
  const Tensor* bias = c.input("bias");
  const int64_t E = logits.dim(1);
  std::vector<double> R(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e)
    R[static_cast<size_t>(e)] = exact_score(is_sigmoid(c), logits.f64(t * E + e)) + (bias ? bias->f64(e) : 0.0);
  std::vector<int64_t> order(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = e;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const double ra = R[static_cast<size_t>(a)], rb = R[static_cast<size_t>(b)];
    if (std::isnan(ra) != std::isnan(rb)) return std::isnan(ra);
    return !std::isnan(ra) && ra > rb;
  });
  return order;
}

void moderate_router_values(Case& c) {
  Tensor& logits = c.inputs.at("logits");
  Tensor& d_probs = c.inputs.at("d_probs");
  Tensor& idx = c.inputs.at("topk_idx");
  logits = finite_tensor(logits.dtype(), logits.shape(), -4, 3);
  d_probs = finite_tensor(d_probs.dtype(), d_probs.shape(), -2, 2);
  const int64_t T = idx.dim(0), k = idx.dim(1);
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<int64_t> order = exact_ranking(c, t);
    for (int64_t j = 0; j < k; ++j) idx.set_bits(t * k + j, static_cast<uint64_t>(order[static_cast<size_t>(j)]));
  }
}

class RouterGradient : public testing::TestWithParam<Target> {};

TEST_P(RouterGradient, DerivativeOfTheExactForwardWithinTheRoundingBound) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const OpInfo& op = op_info(target.op);
  check_property([&] {
    Case c = small_backward_case(op);
    // Half the cases keep the generated values (every edge class, the skips below classify them);
    // the other half have moderate finite logits (|x| in [1/16, 8]) and d_probs (|v| in [1/4, 4]),
    // with topk_idx the exact forward's selection (rule 9's order on S + bias), so that most
    // elements are checked.
    const bool moderate = *rc::gen::arbitrary<bool>();
    RC_TAG(moderate ? "moderate values" : "generated values");
    if (moderate) moderate_router_values(c);
    reproduce_with(c, "ulp_over_budget");
    const Outcome outcome = run(target, c);
    if (outcome.rejected()) {
      RC_TAG("rejected (" + outcome.reject_class + ")");
      return;
    }
    const Tensor& logits = *c.input("logits");
    const Tensor& idx = *c.input("topk_idx");
    const Tensor& d_probs = *c.input("d_probs");
    const Tensor* bias = c.input("bias");
    const int64_t T = logits.dim(0), E = logits.dim(1), k = idx.dim(1);
    const bool sigmoid = is_sigmoid(c);
    const std::optional<double> scaling = c.float_attr("scaling");
    const bool scaled = scaling && *scaling != 0;
    const double scale = scaled ? *scaling : 1.0;
    const DType dl = logits.dtype();
    const Tensor& got = outcome.outputs->at("d_logits");
    RC_TAG(sigmoid ? "sigmoid" : "sqrt_softplus", k == 1 ? "k = 1" : "k > 1", dl == DType::kBF16 ? "bf16" : "fp32");
    RC_CLASSIFY(T == 0, "T = 0");

    // Relative errors of the contract's inputs to the chain rule (first order), from the spec's steps:
    //  y = sigmoid_f32 (expf within 2 ulp = 5 u32 of exp, then + and /): |y^ - y| <= eY y, eY = 7 u32;
    //  s = sqrt(softplus_f32) (expf, log1pf within 2 ulp each, sqrt halves it and rounds): eS = 8 u32;
    //  z = expf: 5 u32. G_j = dL(score): dG = e_score + u_dL.
    const double udl = dl == DType::kBF16 ? 0x1p-8 : kU32;
    const double e_score = sigmoid ? 7 * kU32 : 8 * kU32;
    const double dGrel = e_score + (dl == DType::kBF16 ? udl : 0.0);
    // D = f32(fp64 sum of G) + f32(1e-20): G's error, the fp32 rounding of the sum, the addition.
    const double dDrel = dGrel + 2 * kU32;
    // dP_j = d_probs * f32(scale) in fp32 (k == 1 with bf16 logits: then rounded to bf16).
    const double dPrel = scaled ? 2 * kU32 + (k == 1 && dl == DType::kBF16 ? udl : 0.0) : 0.0;
    const double fd_magnitude_rel = 1.0;
    int skipped_boundary = 0, skipped_saturated = 0, skipped_zero_softplus = 0, skipped_overflow = 0, skipped_non_finite = 0, checked = 0,
        checked_subnormal_softplus = 0;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int64_t> e(static_cast<size_t>(k));
      std::vector<double> x(static_cast<size_t>(k)), dP(static_cast<size_t>(k));
      bool finite = true;
      for (int64_t j = 0; j < k; ++j) {
        e[static_cast<size_t>(j)] = static_cast<int64_t>(idx.bits(t * k + j));
        x[static_cast<size_t>(j)] = logits.f64(t * E + e[static_cast<size_t>(j)]);
        dP[static_cast<size_t>(j)] = d_probs.f64(t * E + e[static_cast<size_t>(j)]) * scale;
        finite = finite && std::isfinite(x[static_cast<size_t>(j)]) && std::isfinite(dP[static_cast<size_t>(j)]);
      }
      for (int64_t col = 0; col < E; ++col) finite = finite && std::isfinite(logits.f64(t * E + col));
      if (!finite) {
        ++skipped_non_finite;
        continue;
      }
      // Saturated or underflowed rows, where the error model's first-order terms do not hold: a slot
      // value below fp32's normal range or a score derivative that underflows (sigmoid within
      // 2^-24 of 0 or 1), or a sum of G that the 1e-20 epsilon dominates.
      double sumG = 0;
      bool saturated = false;
      for (int64_t j = 0; j < k; ++j) {
        const double xs = x[static_cast<size_t>(j)], S = exact_score(sigmoid, xs);
        const double sig = 1 / (1 + std::exp(-xs));
        sumG += S;
        saturated = saturated || S < 0x1p-126 || sig < 0x1p-24 || 1 - sig < 0x1p-24;
        saturated = saturated || (!sigmoid && std::fabs(xs - 20.0) <= 4 * fd_step(xs));  // the softplus threshold
      }
      saturated = saturated || (k > 1 && sumG < 0x1p-40);
      if (saturated) {
        ++skipped_saturated;
        continue;
      }
      // Elements whose difference quotient could move them across the selection boundary (within
      // the quotient's reach in R = S + bias of an expert outside topk_idx's selection) are skipped:
      // there a forward that selects would not be differentiable.
      std::vector<double> R(static_cast<size_t>(E));
      for (int64_t col = 0; col < E; ++col)
        R[static_cast<size_t>(col)] = exact_score(sigmoid, logits.f64(t * E + col)) + (bias ? bias->f64(col) : 0.0);
      auto beside_boundary = [&](int64_t c0, double dR) {
        for (int64_t col = 0; col < E; ++col)
          if (std::find(e.begin(), e.end(), col) == e.end() &&
              !(std::fabs(R[static_cast<size_t>(col)] - R[static_cast<size_t>(c0)]) > dR))
            return true;
        return false;
      };

      auto row_loss = [&](int64_t jv, double xv) {
        double sum = 0, dot = 0;
        for (int64_t j = 0; j < k; ++j) {
          const double S = exact_score(sigmoid, j == jv ? xv : x[static_cast<size_t>(j)]);
          sum += S;
          dot += dP[static_cast<size_t>(j)] * S;
        }
        return k == 1 ? dot : dot / (sum + kRouterEpsilon);
      };
      // The contract's quantities' magnitudes (exact values): a_j = dP_j / D, m_i = -dP_i G_i / D^2.
      double D = sumG + kRouterEpsilon, sum_abs_m = 0, sum_abs_dP = 0;
      for (int64_t j = 0; j < k; ++j) {
        sum_abs_m += std::fabs(dP[static_cast<size_t>(j)]) * exact_score(sigmoid, x[static_cast<size_t>(j)]) / (D * D);
        sum_abs_dP += std::fabs(dP[static_cast<size_t>(j)]);
      }
      for (int64_t j = 0; j < k; ++j) {
        const int64_t col = e[static_cast<size_t>(j)];
        const double xs = x[static_cast<size_t>(j)];
        const double dR = std::fabs(exact_score(sigmoid, xs + 4 * fd_step(xs)) -
                                                                     exact_score(sigmoid, xs - 4 * fd_step(xs)));
        if (beside_boundary(col, dR)) {
          ++skipped_boundary;
          continue;
        }
        // dG_j's error. k == 1: dG = dP (copied, or scaled: dPrel). k > 1:
        //   a_j = dP_j / D:                |da| <= |a_j| (dPrel + dDrel + u32)
        //   m_i = (-dP_i) ((G_i / D) / D): |dm| <= |m_i| (3 u32 + dPrel + dGrel + 2 dDrel)
        //   dD = rule-7 sum of the k m_i:  + gamma_{k-1}(u32) sum |m_i|
        //   dG = a + dD (fp32: u32 |a + dD|); bf16: bf(bf(a) + bf(dD)), u_bf |a| + u_bf |dD| + u_bf |a + dD|.
        // Below the normal range a rounding's error is absolute, half the format's least subnormal
        // (fp32 2^-150, bf16 2^-134), not relative: k == 1, the scaled dP's fp32 product and (bf16
        // logits) its bf16 rounding (a d_probs of one bf16 subnormal unit times 2.5 gives 2 units);
        // k > 1, the fp32 roundings of a's dP and quotient (2), each m_i's dP, quotients and product
        // (4 k), dD's sum (k - 1) and a + dD (1), and bf16's three.
        const double eta_dl = dl == DType::kBF16 ? 0x1p-134 : 0.0;
        double abs_dG, err_dG;
        if (k == 1) {
          abs_dG = std::fabs(dP[0]);
          err_dG = dPrel * abs_dG + (scaled ? kEta32 + eta_dl : 0.0);
        } else {
          const double a = std::fabs(dP[static_cast<size_t>(j)]) / D;
          const double sum_err = gamma(k - 1, kU32) * sum_abs_m;
          const double dD_err = sum_abs_m * (3 * kU32 + dPrel + dGrel + 2 * dDrel) + sum_err;
          abs_dG = a + sum_abs_m;
          err_dG = a * (dPrel + dDrel + kU32) + dD_err + (dl == DType::kBF16 ? 2 * udl : kU32) * (abs_dG + dD_err) +
                   static_cast<double>(5 * k + 2) * kEta32 + 3 * eta_dl;
        }
        // d_logits = dG S'(x). sigmoid: (dS (1 - y)) y with the fp32 y: S' = y (1 - y), and
        //   |dS'| <= eY y (1 - y) + eY y^2 + 3 u32 y (1 - y) (y's error through both factors, 1 - y's
        //   rounding, the two products). sqrt_softplus: g = dS / (2 s), (g z) / (z + 1): relative
        //   eS + 4 u32 + 2 * 5 u32, plus PyTorch's threshold (x > 20: sigma taken as 1, relative e^-x).
        const double sig = 1 / (1 + std::exp(-xs));
        double Sp, err_Sp;
        if (sigmoid) {
          Sp = sig * (1 - sig);
          err_Sp = e_score * Sp + e_score * sig * sig + 3 * kU32 * Sp;
        } else {
          Sp = sig / (2 * exact_score(false, xs));
          err_Sp = Sp * (e_score + 14 * kU32 + (xs > 20 ? std::exp(-xs) : 0.0));
        }
        // Overflow: an intermediate (dP, dG, sqrt_softplus's dS / (2 s) and its product with z)
        // beyond the largest bf16 / fp32 value makes the contract's result Inf or NaN; classified.
        double peak = std::max(sum_abs_dP, abs_dG + err_dG);
        if (!sigmoid) {
          const double g_mag = peak / (2 * exact_score(false, xs));
          peak = std::max(peak, xs > 20 ? g_mag : g_mag * std::max(1.0, std::exp(xs)));
        }
        if (peak * (1 + 0x1p-6) > max_finite(DType::kBF16)) {
          ++skipped_overflow;
          continue;
        }
        const double before = err_dG * (Sp + err_Sp) + abs_dG * err_Sp;
        // fp32 logits on the gather path (a bias): the scatter onto zeros (B5, RED.ADD.F32.FTZ)
        // flushes a subnormal dG to zero, which loses all of it. abs_dG bounds |dG| from above (k > 1:
        // a + sum |m_i|, where a and dD may cancel), so the exact signed dG decides: wherever the
        // contract's dG may lie below 2^-126, the whole product may be lost.
        double dG_exact = dP[0];
        if (k > 1) {
          double dD = 0;
          for (int64_t i = 0; i < k; ++i)
            dD -= dP[static_cast<size_t>(i)] * exact_score(sigmoid, x[static_cast<size_t>(i)]) / (D * D);
          dG_exact = dP[static_cast<size_t>(j)] / D + dD;
        }
        const double flushed = dl == DType::kFP32 && bias && std::fabs(dG_exact) - err_dG < 0x1p-126
                                   ? std::min(std::fabs(dG_exact) + err_dG, 0x1p-126) * (Sp + err_Sp)
                                   : 0.0;
        const double bound = before + (dl == DType::kBF16 ? udl : 0.0) * (abs_dG * Sp + before) +
                             (dl == DType::kBF16 ? 0x1p-134 : 0.0) + 4 * kEta32 + flushed;
        const double mag = k == 1 ? sum_abs_dP * (1 + exact_score(sigmoid, xs)) : sum_abs_dP;
        const Derivative fd = central_difference([&](double xv) { return row_loss(j, xv); }, xs, mag * fd_magnitude_rel);
        const double g = got.f64(t * E + col);
        if (!std::isfinite(fd.value)) {
          ++skipped_non_finite;
          continue;
        }
        ++checked;
        if (!(std::fabs(g - fd.value) <= bound + fd.error)) {
          std::ostringstream os;
          os.precision(12);
          os << "d_logits[" << t << ", " << col << "] (slot " << j << ", x = " << xs << "): backward " << g
             << ", finite difference " << fd.value << " (+- " << fd.error << "), |difference| " << std::fabs(g - fd.value)
             << " > bound " << bound << " + " << fd.error << "\ncase: " << case_to_json(c).dump();
          RC_FAIL(os.str());
        }
      }
      // Off the selection the forward does not depend on the logit: d_logits must be zero. Except
      // where sqrt_softplus's fp32 softplus is 0 (logits below about -104; between there and -87.3
      // it is subnormal, its square root normal, and dS / (2 s) is 0 / s = 0): SqrtBackward's
      // dS / (2 s) is 0 / 0, NaN, in the contract as in PyTorch.
      for (int64_t col = 0; col < E; ++col) {
        if (std::find(e.begin(), e.end(), col) != e.end()) continue;
        const float softplus = ref::softplus_f32(static_cast<float>(logits.f64(t * E + col)));
        if (!sigmoid && softplus == 0.0f) {
          ++skipped_zero_softplus;
          continue;
        }
        if (!sigmoid && softplus < 0x1p-126f) ++checked_subnormal_softplus;
        if (got.f64(t * E + col) != 0)
          RC_FAIL("d_logits[" + std::to_string(t) + ", " + std::to_string(col) + "] off the selection is " +
                  std::to_string(got.f64(t * E + col)) + ", not 0\ncase: " + case_to_json(c).dump());
      }
    }
    RC_CLASSIFY(skipped_boundary > 0, "elements beside a selection boundary skipped");
    RC_CLASSIFY(skipped_saturated > 0, "saturated or underflowed rows skipped");
    RC_CLASSIFY(skipped_non_finite > 0, "non-finite rows skipped");
    RC_CLASSIFY(skipped_overflow > 0, "elements near overflow skipped");
    RC_CLASSIFY(skipped_zero_softplus > 0, "off-selection elements with softplus underflowed skipped");
    RC_CLASSIFY(checked_subnormal_softplus > 0, "off-selection elements with a subnormal softplus checked");
    RC_CLASSIFY(checked > 0, "elements checked");
  });
}

INSTANTIATE_TEST_SUITE_P(RoutingGradients, RouterGradient, testing::ValuesIn(targets_where([](const Target& t) {
                           return t.op == "router_topk" && t.direction == Direction::kBackward && !t.impl.empty();
                         })),
                         target_name);

// Every routing op this file claims (gradient_coverage.h) is a registry op with a backward, and
// has targets above: the coverage list cannot name an op this file does not check.
TEST(RoutingGradientCoverage, ClaimedOpsHaveBackwardTargets) {
  for (const std::string op : {"permute", "unpermute", "router_topk"}) {
    EXPECT_TRUE(gradient_coverage::routing_gradient_covers(op)) << op;
    EXPECT_TRUE(op_info(op).inputs.count(Direction::kBackward)) << op << " has no backward";
    EXPECT_FALSE(targets_where([&](const Target& t) {
                   return t.op == op && t.direction == Direction::kBackward && !t.impl.empty();
                 }).empty())
        << op << " has no backward implementations";
  }
}

}  // namespace
}  // namespace bitparity::ops
