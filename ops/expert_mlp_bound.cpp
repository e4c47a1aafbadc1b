// expert_mlp's chain bound (kExpertChainBoundDoc): how far any implementation of Megatron's expert
// whose GEMMs accumulate in fp32 in some order (gemm's cublas bound) may lie from the unrounded MLP,
// output by output. Each intermediate tensor is carried as its truth (fp64, no rounding), a bound on
// the computed value's distance from it, and whether a non-finite value or a possible overflow
// reaches it ("wild": the outputs it reaches are not judged).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/expert_mlp.h"
#include "ops/gemm.h"

namespace bitparity::ops {
namespace {

// A computed value: within `err` of `truth`; `wild` where no bound is claimed.
struct Bounded {
  double truth = 0, err = 0;
  bool wild = false;
};

struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<Bounded> v;
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), v(static_cast<size_t>(r * c)) {}
  Bounded& at(int64_t r, int64_t c) { return v[static_cast<size_t>(r * cols + c)]; }
  const Bounded& at(int64_t r, int64_t c) const { return v[static_cast<size_t>(r * cols + c)]; }
};

// An input: exact, wild where not finite.
Matrix exact(const Tensor& t, int64_t rows, int64_t cols) {
  Matrix m(rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double x = t.f64(i);
    m.v[static_cast<size_t>(i)] = {x, 0, !std::isfinite(x)};
  }
  return m;
}

Matrix transpose(const Matrix& m) {
  Matrix t(m.cols, m.rows);
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c) t.at(c, r) = m.at(r, c);
  return t;
}

// Past this magnitude a value may round to an infinity (bf16's largest finite value plus half its
// spacing; fp32's is larger): an interval that reaches it is wild.
constexpr double kBf16Overflow = 0x1.fep127;
bool may_overflow(double truth, double err) { return !(std::fabs(truth) + err < kBf16Overflow); }

// The fp64 truths below are not exact (Eigen's sums and std::exp in the oracle, these sequential
// sums here): a relative 2^-40 of each sum's magnitudes covers both many times over.
constexpr double kTruthSlack = 0x1p-40;

// a [M, K] @ b [K, N] computed in bf16 with fp32 accumulation over `steps` >= K products (the padded
// row count for a weight gradient, whose extra rows are exact zeros): the carried error
// sum |a'b' - ab| <= sum (ea |b| + |a| eb + ea eb), plus gemm's bound for the computed operands,
// whose magnitudes sum to at most S = sum (|a| + ea)(|b| + eb).
Matrix gemm(const Matrix& a, const Matrix& b, int64_t steps) {
  Matrix out(a.rows, b.cols);
  for (int64_t m = 0; m < a.rows; ++m)
    for (int64_t n = 0; n < b.cols; ++n) {
      double truth = 0, carried = 0, S = 0;
      bool wild = false;
      for (int64_t k = 0; k < a.cols; ++k) {
        const Bounded& x = a.at(m, k);
        const Bounded& y = b.at(k, n);
        if (x.wild || y.wild) {
          wild = true;
          continue;
        }
        truth += x.truth * y.truth;
        carried += x.err * std::fabs(y.truth) + std::fabs(x.truth) * y.err + x.err * y.err;
        S += (std::fabs(x.truth) + x.err) * (std::fabs(y.truth) + y.err);
      }
      const double rounding = gemm_element_bound(steps, S, std::fabs(truth) + carried);
      const double err = carried + rounding + kTruthSlack * S;
      out.at(m, n) = {truth, err, wild || may_overflow(truth, err)};
    }
  return out;
}

// Bounds on SiLU over an argument's interval: |silu'| <= 1.1 and |silu''| <= 0.5 everywhere.
constexpr double kSiluSlope = 1.1, kSiluCurve = 0.5;
constexpr double kBf16Floor = 0x1p-133;  // bf16's subnormal spacing: any rounding's absolute floor

double sigmoid(double a) { return 1 / (1 + std::exp(-a)); }

// The activation's inputs at one (row, column): the gate a and value b after the clamp (1-Lipschitz,
// so their bounds carry over), and where the clamp's gradient mask may fall on either side.
struct GateValue {
  Bounded a, b;
  bool a_masked = false, a_straddles = false;  // a > clamp: zero gradient for a
  bool b_masked = false, b_straddles = false;  // |b| > clamp: zero gradient for b
};

GateValue clamp_gate_value(const Bounded& a, const Bounded& b, std::optional<double> limit) {
  GateValue out{a, b};
  if (!limit) return out;
  const double L = *limit;
  out.a.truth = std::min(a.truth, L);
  out.b.truth = std::clamp(b.truth, -L, L);
  out.a_masked = a.truth - a.err > L;
  out.a_straddles = !out.a_masked && a.truth + a.err >= L;
  const double b_lo = std::max(0.0, std::fabs(b.truth) - b.err), b_hi = std::fabs(b.truth) + b.err;
  out.b_masked = b_lo > L;
  out.b_straddles = !out.b_masked && b_hi >= L;
  return out;
}

// The activation's forward, Megatron's chain: bf16(silu(a)) times b to bf16, times p in fp32, to bf16.
// Propagated: |d(silu(a) b)| <= 1.1 ea (|b| + eb) + (|silu(a)| + 1.1 ea) eb; rounded: three bf16
// roundings, expf and an fp32 product within 5 * 2^-8 of the computed value; floors: each rounding's
// subnormal spacing, the first carried through b.
Bounded swiglu_value(const GateValue& g, double p, double* silu_out = nullptr) {
  const double silu = g.a.truth * sigmoid(g.a.truth), b = std::fabs(g.b.truth);
  if (silu_out) *silu_out = silu;
  const double sw = silu * g.b.truth;
  const double propagated = kSiluSlope * g.a.err * (b + g.b.err) + (std::fabs(silu) + kSiluSlope * g.a.err) * g.b.err;
  const double rounded = 5 * std::ldexp(std::fabs(sw) + propagated, -8) + 4 * kBf16Floor * (1 + b + g.b.err);
  const double err = p * propagated + rounded * std::max(p, 1.0);
  // The unweighted product is rounded to bf16 too: it must not overflow either.
  return {sw * p, err, g.a.wild || g.b.wild || may_overflow(sw, propagated + rounded) || may_overflow(sw * p, err)};
}

}  // namespace

const char* const kExpertChainBoundDoc =
    "the chain bound: every intermediate carried as its unrounded truth and a bound on the computed value's "
    "distance from it. A GEMM on computed operands a', b' within ea, eb of a, b: sum (ea |b| + |a| eb + ea eb) "
    "plus gemm's cublas bound (any fp32 order, split-K partials in bf16) at S = sum (|a| + ea)(|b| + eb) and K "
    "the GEMM's (the padded rows for d_w1 and d_w2). The activation, Megatron's eager chain after the clamp "
    "(1-Lipschitz): propagated with |silu'| <= 1.1 and |silu''| <= 0.5, each bf16 rounding 2^-8 of the computed "
    "magnitude (5 * 2^-8 forward, 3 * 2^-8 for d_b, 2^-7 for d_a's products; its bf16 sigmoid s within "
    "min(2^-8 sigma, 1 - sigma) carried through 1 + a (1 - s) and its two roundings), subnormal floors 2^-133 carried through the later factors; where "
    "the computed gate or value may fall on the other side of the clamp than the truth, the clamped gradient may "
    "be 0 or the unclamped one, so the bound adds the latter's magnitude. d_probs: each term's propagated error, "
    "fp32 summation (2^-24 a step, F steps) and F * 2^-148 for underflowing products. 2^-40 of each sum's "
    "magnitudes covers the fp64 truths' own error. An output reached by a non-finite input, a non-finite truth or "
    "a possible fp32 overflow is not judged (unbounded)";

std::map<std::string, ElementBounds> expert_mlp_chain_bound(const Case& c) {
  const Tensor& x_t = *c.input("x");
  const Tensor& w1_t = *c.input("w1");
  const Tensor& w2_t = *c.input("w2");
  const Tensor* probs = c.input("probs");
  const int64_t M = x_t.dim(0), H = x_t.dim(1), F = w1_t.dim(1) / 2, Mp = expert_padded_rows(M);
  std::optional<double> limit;
  if (const std::optional<double> attr = c.float_attr("clamp"); attr && *attr > 0) limit = *attr;

  const Matrix x = exact(x_t, M, H), w1 = exact(w1_t, H, 2 * F), w2 = exact(w2_t, F, H);
  const Matrix h = gemm(x, w1, H);
  auto prob = [&](int64_t r) { return probs ? probs->f64(r) : 1.0; };
  auto prob_wild = [&](int64_t r) { return !std::isfinite(prob(r)); };

  Matrix act(M, F);
  std::vector<GateValue> gv(static_cast<size_t>(M * F));
  for (int64_t r = 0; r < M; ++r)
    for (int64_t j = 0; j < F; ++j) {
      GateValue& g = gv[static_cast<size_t>(r * F + j)] = clamp_gate_value(h.at(r, j), h.at(r, F + j), limit);
      act.at(r, j) = swiglu_value(g, std::fabs(prob(r)));
      act.at(r, j).truth = act.at(r, j).truth * (prob(r) < 0 ? -1 : 1);
      act.at(r, j).wild = act.at(r, j).wild || prob_wild(r);
    }

  std::map<std::string, ElementBounds> out;
  auto emit = [&out](const std::string& name, const Matrix& m) {
    ElementBounds& e = out[name];
    for (const Bounded& b : m.v) {
      e.truth.push_back(b.truth);
      e.bound.push_back(b.wild ? INFINITY : b.err);
    }
  };
  if (c.direction == Direction::kForward) {
    emit("out", gemm(act, w2, F));
    return out;
  }

  const Matrix d_out = exact(*c.input("d_out"), M, H);
  const Matrix d_act = gemm(d_out, transpose(w2), H);
  emit("d_w2", gemm(transpose(act), d_out, Mp));

  Matrix d_h(M, 2 * F), d_probs(M, 1);
  for (int64_t r = 0; r < M; ++r) {
    const double p = std::fabs(prob(r));
    double dp_truth = 0, dp_err = 0, dp_abs = 0;
    bool dp_wild = prob_wild(r);
    for (int64_t j = 0; j < F; ++j) {
      const GateValue& g = gv[static_cast<size_t>(r * F + j)];
      const Bounded& d = d_act.at(r, j);
      const bool wild = g.a.wild || g.b.wild || d.wild || prob_wild(r);
      const double ga = std::fabs(d.truth), ea = g.a.err, eb = g.b.err, eg = d.err;
      const double a = g.a.truth, b = std::fabs(g.b.truth), sig = sigmoid(a);
      const double silu = a * sig, slope = sig * (1 + a * (1 - sig));
      const double sign = prob(r) < 0 ? -1 : 1;
      // d_a = d_act p b silu'(a): propagated; then Megatron's slope s t4, s = bf16(sigma(a)),
      // t4 = bf16(1 + bf16(a bf16(1 - s))), at the computed argument: |s - sigma| <= ds (RNE to bf16:
      // 2^-8 sigma, and never past 1 - sigma as 1 is a bf16; expf's few fp32 ulps), carried through
      // t4 with its two bf16 roundings, then the fp32 products and the final bf16 (2^-7).
      const double A = std::fabs(a) + ea, sig_hi = sigmoid(a + ea), tail = 1 - sigmoid(a - ea);
      const double ds = std::min(0x1p-8 * sig_hi, tail) + 0x1p-20 * sig_hi + kBf16Floor;
      const double T = 1 + A * tail, dq = 1.01 * A * (ds + 0x1p-7 * tail);
      const double dt4 = 1.01 * dq + 0x1p-8 * (T + dq) + kBf16Floor;
      const double slope_err = ds * (T + dt4) + sig_hi * dt4;
      const double mag_a = (ga + eg) * p * (b + eb);
      Bounded da{sign * d.truth * p * g.b.truth * slope,
                 p * (eg * (b + eb) * kSiluSlope + ga * eb * kSiluSlope + ga * b * kSiluCurve * ea) +
                     mag_a * (slope_err + 0x1p-7 * (kSiluSlope + slope_err)) + kBf16Floor * (1 + mag_a) * (2 + std::fabs(a) + ea),
                 wild};
      // d_b = d_act p silu(a): propagated, then bf16(silu), two fp32 products and bf16.
      const double mag_b = (ga + eg) * p * (std::fabs(silu) + kSiluSlope * ea);
      Bounded db{sign * d.truth * p * silu, p * (eg * (std::fabs(silu) + kSiluSlope * ea) + ga * kSiluSlope * ea) +
                                                3 * std::ldexp(mag_b, -8) + kBf16Floor * (2 + (ga + eg) * p),
                 wild};
      // The clamp's mask: zero on both sides, or either value where the computed argument may cross
      // (the unclamped value's magnitude added to its bound).
      if (g.a_masked) da = {0, 0, wild};
      if (g.a_straddles) da.err += std::fabs(da.truth);
      if (g.b_masked) db = {0, 0, wild};
      if (g.b_straddles) db.err += std::fabs(db.truth);
      // The oracle's truth is the masked one where the unrounded argument is past the clamp.
      if (limit && h.at(r, j).truth > *limit) da.truth = 0;
      if (limit && std::fabs(h.at(r, F + j).truth) > *limit) db.truth = 0;
      // The fp32 products on the way (d_act p s t4 before b) must not overflow either.
      const bool steps_overflow = may_overflow(2 * (ga + eg) * std::max(p, 1.0) * (1 + A) * (1 + b + eb), 0);
      da.wild = da.wild || steps_overflow || may_overflow(da.truth, da.err);
      db.wild = db.wild || steps_overflow || may_overflow(db.truth, db.err);
      d_h.at(r, j) = da;
      d_h.at(r, F + j) = db;
      // d_probs's term silu(a) b d_act, from bf16(bf16(silu(a)) b) and d_act, exact in fp32.
      const Bounded sw = swiglu_value(g, 1.0);
      dp_truth += sw.truth * d.truth;
      dp_err += sw.err * (ga + eg) + std::fabs(sw.truth) * eg;
      dp_abs += (std::fabs(sw.truth) + sw.err) * (ga + eg);
      dp_wild = dp_wild || wild || sw.wild;
    }
    const double k = static_cast<double>(F);
    const double gamma = std::expm1(k * std::log1p(0x1p-24)) * (1 + 1e-12);
    const double err = dp_err + gamma * dp_abs + k * 0x1p-148 + kTruthSlack * dp_abs;
    d_probs.at(r, 0) = {dp_truth, err, dp_wild || !(std::fabs(dp_truth) + err < 0x1p128)};
  }
  emit("d_x", gemm(d_h, transpose(w1), 2 * F));
  emit("d_w1", gemm(transpose(x), d_h, Mp));
  if (probs) emit("d_probs", d_probs);
  return out;
}

}  // namespace bitparity::ops
