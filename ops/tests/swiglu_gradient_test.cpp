// Gradients: every backward of the SwiGLU family agrees with central finite differences of the
// exact forward (fp64, the true function silu(a_c) * b_c * s under the contract's clamp gate),
// within a bound derived from the rounding steps of the contract's backward formula (spec OP-4 ..
// OP-6), not a tuned tolerance. With loss = sum(g * out), d_y and d_scale are the loss's partial
// derivatives, so each element has its own one-dimensional difference quotient. All four
// contracts' backwards are, by design, derivatives of their forwards up to rounding (the masks
// zero the derivative where the clamp is flat), so one bound serves them all.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/gen.h"
#include "properties/harness.h"
#include "properties/rows.h"
#include "ops/tests/gradient_coverage.h"
#include "ops/tests/swiglu_model.h"

namespace bitparity::ops {
namespace {

using namespace props;

// --- rounding error model ----------------------------------------------------------------------

// Unit roundoff u (half an ulp at 1) and the largest absolute error of rounding a value into the
// subnormal range (half the smallest subnormal).
double unit_roundoff(DType d) {
  return d == DType::kBF16 ? 0x1p-8 : d == DType::kFP16 ? 0x1p-11 : 0x1p-24;
}
double underflow_error(DType d) {
  return d == DType::kBF16 ? 0x1p-134 : d == DType::kFP16 ? 0x1p-25 : 0x1p-150;
}

// The roundings along one path of a formula, as the dtypes they round to.
struct Roundings {
  std::vector<DType> steps;
  Roundings& add(DType d, int n = 1) {
    steps.insert(steps.end(), static_cast<size_t>(n), d);
    return *this;
  }
  // gamma = sum(u) / (1 - sum(u)) bounds the relative error of a product of rounded factors
  // (Higham, Lemma 3.1, with mixed unit roundoffs).
  double gamma() const {
    double sum = 0;
    for (DType d : steps) sum += unit_roundoff(d);
    return sum / (1 - sum);
  }
  double underflow() const {
    double sum = 0;
    for (DType d : steps) sum += underflow_error(d);
    return sum;
  }
};

// Rule 4 / 12: CUDA's expf is within 2 ulp of the correctly rounded exp, so within 2.5 ulp = 5u
// of the true value; sigmoid = 1 / (1 + expf(-x)) and silu = x / (1 + expf(-x)) add two fp32
// roundings. Counted as fp32 roundings.
constexpr int kExpfRoundings = 5;
constexpr int kSigmoidRoundings = kExpfRoundings + 2;

// The rounding paths of a contract's backward for one element, from the spec's formulas. `act` is
// y's dtype, `w` the scale's (act when there is none), `chain` their eager promotion.
struct FormulaRoundings {
  Roundings da, db, d_scale_term, d_scale_result;
};

DType promote(DType a, DType b) { return a == b ? a : DType::kFP32; }  // rule 1, mixed dtypes

std::optional<FormulaRoundings> formula_roundings(const std::string& contract, bool clamp_on, bool scaled,
                                                  DType act, DType w) {
  const DType f32 = DType::kFP32, chain = promote(act, w);
  FormulaRoundings r;
  if (contract == "megatron_eager" || contract == "megatron_unfused") {
    if (scaled) r.da.add(chain), r.db.add(chain);  // g' = g * w (OP-5)
    if (!clamp_on) {
      // OP-4: s = bf(sigma(a)); t4 = bf(1 + bf(a * bf(1 - s))); da = bf(bf(bf(g*s) * t4) * b);
      // db = bf(g * bf(silu(a))), each product in `chain` once g' is.
      r.da.add(f32, kSigmoidRoundings).add(act).add(act, 3).add(chain, 3).add(act);
      r.db.add(f32, kSigmoidRoundings).add(act).add(chain).add(act);
      r.d_scale_term.add(f32, kSigmoidRoundings).add(act).add(f32).add(act);  // swiglu_bf16 = bf(bf(silu) * b)
    } else {
      // OP-6 clamped: fp32 throughout, one rounding at the end:
      // da = (((g*sigma) * (1 + a*(1 - sigma))) * b) * mask; db = (g * silu(a)) * mask.
      r.da.add(f32, kSigmoidRoundings).add(f32, 6).add(act);
      r.db.add(f32, kSigmoidRoundings).add(f32).add(act);
      r.d_scale_term.add(f32, kSigmoidRoundings).add(f32).add(act);  // bf(silu(a_c) * b_c)
    }
    // OP-5: dW = rowsum(f32(swiglu) * f32(g.to(w))) in chain, then .to(w).
    r.d_scale_term.add(w).add(chain);
    r.d_scale_result.add(chain).add(w);
    return r;
  }
  if (contract == "paddle_fused" || contract == "paddle_fused_shipped") {
    // OP-6 kernel, fp32 with the x*sigma silu: d_u = dout * s; dv = (d_u * silu) * mask;
    // dg = (((d_u * sigma) * fma(g, 1 - sigma, 1)) * v) * mask (or ((d_u * v) * sigma) * bracket).
    r.db.add(f32).add(f32, kSigmoidRoundings).add(f32).add(f32).add(act);
    r.da.add(f32).add(f32, kSigmoidRoundings).add(f32, 5).add(act);
    // d_scale terms dout * swiglu: swiglu = (g * sigma) * v in fp32, then with the clamp kernel
    // bf(bf(swiglu) * dout) (bf16 X and Scale) or bf(swiglu) * dout; the product's rounding.
    r.d_scale_term.add(f32, kSigmoidRoundings).add(f32, 2).add(f32);
    if (clamp_on) r.d_scale_term.add(act, 2);
    r.d_scale_result.add(w);
    return r;
  }
  return std::nullopt;
}

// --- the exact forward and its difference quotients --------------------------------------------

// Step of the central difference at x, and how close to a clamp kink an element may lie before
// its difference quotient would straddle the kink.
double fd_step(double x) { return 0x1p-20 * std::max(1.0, std::fabs(x)); }
constexpr double kKinkMargin = 4;                 // in steps
constexpr double kF64EvalError = 16 * 0x1p-53;    // relative error of one fp64 forward evaluation

// The derivative of f at x by central differences, with an error estimate: Richardson's
// |D(h) - D(h/2)| bounds the truncation error of D(h/2) (it is 3x that error to leading order),
// plus the fp64 evaluation noise magnified by 1/h. `magnitude` bounds |f| near x.
struct Derivative {
  double value, error;
};
template <typename F>
Derivative central_difference(F f, double x, double magnitude) {
  const double h = fd_step(x);
  auto quotient = [&](double step) { return (f(x + step) - f(x - step)) / (2 * step); };
  const double d1 = quotient(h), d2 = quotient(h / 2);
  return {d2, std::fabs(d1 - d2) + 2 * kF64EvalError * magnitude / (h / 2)};
}

bool near_kink(double x, std::optional<float> limit, bool value_half) {
  if (!limit || !std::isfinite(*limit)) return false;
  const double c = *limit, margin = kKinkMargin * fd_step(x);
  if (!value_half) return std::fabs(x - c) <= margin;                       // a <= c
  return c >= 0 && (std::fabs(x - c) <= margin || std::fabs(x + c) <= margin);  // -c <= b <= c
}

// --- the bound -----------------------------------------------------------------------------------

// backward_error_bound: the largest |computed - exact| of a backward element whose formula is a
// product of factors f_1 ... f_k (with sums inside, such as 1 + a(1 - s)), evaluated with the
// roundings R. Each rounding multiplies its node by (1 + d), |d| <= u, and adds at most eta when
// the node is subnormal. To first order the error is sum over nodes of u * |node| * |d out / d
// node|, and for a product of factors |node| * |d out / d node| is at most the product evaluated
// with every value replaced by its absolute value and every subtraction by an addition
// (`abs_product`: g s (1 + |a| (1 + s)) |b| for da, where the 1 - s carries s's error). With
// Higham's gamma for the higher orders, and each underflow eta scaled by the largest downstream
// factor (`factor_bound`, the product of max(1, |f_i|)):
//     |computed - exact| <= gamma(R) * abs_product + eta(R) * factor_bound.
double backward_error_bound(const Roundings& r, double abs_product, double factor_bound) {
  return r.gamma() * abs_product + r.underflow() * factor_bound;
}

// For d_scale = sum_j t_j, each term is such a product, and the fp32 sum in any order (rule 7's
// tree, PaddleFleet's per-thread chains and halving tree) has at most F - 1 roundings on any
// term's path (Higham 4.2: error <= (F - 1) u sum |t_j|, first order). The result is rounded by
// `result` steps: u * |result|.
double d_scale_error_bound(const FormulaRoundings& r, int64_t F, double exact, double abs_terms,
                           double factor_bound) {
  const double terms = backward_error_bound(r.d_scale_term, abs_terms, factor_bound * static_cast<double>(F));
  const double sum = static_cast<double>(std::max<int64_t>(F - 1, 0)) * unit_roundoff(DType::kFP32) * (abs_terms + terms);
  const double before_result = terms + sum;
  return before_result + backward_error_bound(r.d_scale_result, std::fabs(exact) + before_result, 1);
}

// --- cases ---------------------------------------------------------------------------------------

// Finite values of moderate size, so that the error model's assumptions hold: |x| in [2^lo, 2^hi]
// with a random 24-bit mantissa, rounded once into the dtype. (fp16 products of three such
// factors stay below its largest value, 65504.)
rc::Gen<Tensor> moderate_tensor(DType dtype, Shape shape, int lo, int hi) {
  const auto element = rc::gen::map(
      rc::gen::tuple(rc::gen::inRange(lo, hi), rc::gen::inRange<uint32_t>(0, 1u << 24), rc::gen::arbitrary<bool>()),
      [dtype](const std::tuple<int, uint32_t, bool>& t) {
        const double m = std::ldexp(1.0 + std::get<1>(t) / double(1u << 24), std::get<0>(t));
        return from_double(dtype, std::get<2>(t) ? -m : m);
      });
  return rc::gen::map(rc::gen::container<std::vector<uint64_t>>(static_cast<size_t>(shape_numel(shape)), element),
                      [dtype, shape](const std::vector<uint64_t>& bits) {
                        Tensor t(dtype, shape);
                        for (size_t i = 0; i < bits.size(); ++i) t.set_bits(static_cast<int64_t>(i), bits[i]);
                        return t;
                      });
}

constexpr int64_t kMaxRows = 8;             // keeps a case's difference quotients cheap
constexpr int kValueExp[2] = {-2, 2};       // y and g: |x| in [1/4, 4]
constexpr int kScaleExp[2] = {-1, 1};       // scale: |s| in [1/2, 2]

// A generated backward case (its shapes, dtypes, clamp) with moderate finite values.
Case moderate_case(const OpInfo& op) {
  Case c = *op.generate(Direction::kBackward);
  c = take_rows(c, 0, std::min(case_rows(c), kMaxRows));
  for (auto& [name, t] : c.inputs) {
    const int* exp = name == "scale" ? kScaleExp : kValueExp;
    t = *moderate_tensor(t.dtype(), t.shape(), exp[0], exp[1]);
  }
  return c;
}

// --- the property --------------------------------------------------------------------------------

struct Mismatch {
  std::string where;
  double got, fd, fd_error, bound;
};
std::string describe(const Mismatch& m) {
  std::ostringstream os;
  os.precision(9);
  os << m.where << ": backward " << m.got << ", finite difference " << m.fd << " (+- " << m.fd_error
     << "), |difference| " << std::fabs(m.got - m.fd) << " > bound " << m.bound << " + " << m.fd_error;
  return os.str();
}

class Gradient : public testing::TestWithParam<Target> {};

bool swiglu_backward(const Target& t) {
  return swiglu_model::is_swiglu_family(t.op) && t.direction == Direction::kBackward;
}

TEST_P(Gradient, BackwardIsTheDerivativeOfTheExactForwardWithinTheRoundingBound) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const OpInfo& op = op_info(target.op);
  const ClampGate gate = target.contract_info().clamp_gate;
  ASSERT_NE(gate, ClampGate::kNone) << target.contract() << " has no clamp gate";
  check_property([&] {
    const Case c = moderate_case(op);
    const std::optional<double> clamp = c.float_attr("clamp");
    const std::optional<float> limit = swiglu_model::active_limit(clamp, gate);
    RC_TAG(gen::clamp_class(clamp), limit ? "clamp on" : "clamp off");
    if (limit && std::isnan(*limit)) {
      RC_TAG("NaN clamp: the forward is NaN, nothing to differentiate");
      return;
    }
    reproduce_with(c, "ulp_over_budget");
    const Outcome outcome = run(target, c);
    if (outcome.rejected()) {
      RC_TAG("rejected (" + outcome.reject_class + ")");
      return;
    }

    const Tensor& y = *c.input("y");
    const Tensor& g = *c.input("g");
    const Tensor* scale = c.input("scale");
    const Tensor* bias = c.input("bias");
    const int64_t rows = y.dim(0), F = y.dim(1) / 2;
    const DType act = y.dtype(), w = scale ? scale->dtype() : act;
    const auto roundings = formula_roundings(target.contract(), limit.has_value(), scale != nullptr, act, w);
    RC_ASSERT(roundings.has_value());  // a contract without a rounding model in this file
    // OP-4 bias variant: the backward is taken at y + bias rounded to y's dtype.
    auto input = [&](int64_t r, int64_t col) {
      const float v = y.f32(r * 2 * F + col);
      return bias ? double{round_to(act, v + bias->f32(col))} : double{v};
    };
    const Tensor& d_y = outcome.outputs->at("d_y");
    int skipped = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double s = scale ? scale->f64(r) : 1.0;
      double exact_d_scale = 0, abs_terms = 0, factor_bound = 0;
      for (int64_t j = 0; j < F; ++j) {
        const double a = input(r, j), b = input(r, F + j), gj = g.f64(r * F + j);
        const swiglu_model::Clamped cl = swiglu_model::clamp_halves(a, b, limit);
        const double sig = 1 / (1 + std::exp(-cl.a));
        const double silu_abs = std::fabs(cl.a) * sig;
        exact_d_scale += gj * swiglu_model::exact_swiglu(a, b, limit);
        abs_terms += std::fabs(gj) * silu_abs * std::fabs(cl.b);
        factor_bound = std::max(factor_bound, std::max(1.0, std::fabs(gj)) * std::max(1.0, std::fabs(cl.b)) *
                                                  std::max(1.0, silu_abs));
        // The two halves' elements of d_y: d loss / d a and d loss / d b.
        const double gs = std::fabs(gj * s);
        const double abs_da = gs * sig * (1 + std::fabs(cl.a) * (1 + sig)) * std::fabs(cl.b);
        const double abs_db = gs * silu_abs;
        const double factors = std::max(1.0, std::fabs(gj)) * std::max(1.0, std::fabs(s)) *
                               (1 + std::fabs(cl.a) * (1 + sig)) * std::max(1.0, std::fabs(cl.b));
        struct Half {
          bool value_half;
          int64_t col;
          double x, abs_product;
          const Roundings& r;
        };
        for (const Half& h : {Half{false, j, a, abs_da, roundings->da}, Half{true, F + j, b, abs_db, roundings->db}}) {
          if (near_kink(h.x, limit, h.value_half)) {
            ++skipped;
            continue;
          }
          auto loss = [&](double x) {
            return gj * s * (h.value_half ? swiglu_model::exact_swiglu(a, x, limit) : swiglu_model::exact_swiglu(x, b, limit));
          };
          const Derivative fd = central_difference(loss, h.x, std::fabs(gj * s) * (std::fabs(a) + 1) * (std::fabs(b) + 1));
          const double bound = backward_error_bound(h.r, h.abs_product, factors);
          const double got = d_y.f64(r * 2 * F + h.col);
          if (!(std::fabs(got - fd.value) <= bound + fd.error)) {
            std::ostringstream where;
            where << "d_y[" << r << ", " << h.col << "]";
            RC_FAIL(describe({where.str(), got, fd.value, fd.error, bound}) + "\ncase: " + case_to_json(c).dump());
          }
        }
      }
      if (!scale) continue;
      // d loss / d s_r: the loss is linear in s, so the difference quotient is exact up to fp64.
      auto loss = [&](double sv) { return sv * exact_d_scale; };
      const Derivative fd = central_difference(loss, s, std::fabs(s) * abs_terms * static_cast<double>(F + 1));
      const double bound = d_scale_error_bound(*roundings, F, exact_d_scale, abs_terms, factor_bound);
      const double got = outcome.outputs->at("d_scale").f64(r);
      if (!(std::fabs(got - fd.value) <= bound + fd.error))
        RC_FAIL(describe({"d_scale[" + std::to_string(r) + "]", got, fd.value, fd.error, bound}) +
                "\ncase: " + case_to_json(c).dump());
    }
    RC_CLASSIFY(skipped > 0, "elements beside a clamp kink skipped");
  });
}

INSTANTIATE_TEST_SUITE_P(Gradients, Gradient, testing::ValuesIn(targets_where(swiglu_backward)), target_name);

// A backward the registry has but this file cannot check is shown, not passed silently.
TEST(GradientCoverage, EveryBackwardHasAnExactForward) {
  std::string missing;
  for (const OpInfo& op : harness_registry().ops())
    if (op.inputs.count(Direction::kBackward) && !swiglu_model::is_swiglu_family(op.name) &&
        !gradient_coverage::routing_gradient_covers(op.name))
      missing += " " + op.name;
  if (!missing.empty()) GTEST_SKIP() << "no exact forward for the backward of:" << missing;
}

}  // namespace
}  // namespace bitparity::ops
