// router_topk's contracts (spec OP-1, rules 7 and 9; spec/router-backward-order.md, VERIFIED on an
// H200 against shared/probes/router/emu.py, whose orders this transcribes). Every fp32 step is one
// IEEE operation (⊕ ⊗ ⊘ below), every bf(·) one RNE rounding to bf16, dL(·) the rounding to the
// logits dtype. Inputs have passed the op's validate (ops/router_topk.cpp).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "reference/math/device_math.h"
#include "reference/numerics.h"
#include "reference/routing.h"

namespace bitparity::ref {
namespace {

constexpr float kRouterEpsilon = 1e-20f;  // Megatron's `+ 1e-20`, a Python float cast to fp32 (0x1E3CE508)
// The slot sums are rule-7 last-dim reductions of width k; up to 32 their lane count is P2(k)
// whatever the row count (VERIFIED for k <= 16). Wider rows are not modelled.
constexpr int64_t kMaxModelledK = 32;
constexpr uint32_t kCanonicalNanF32 = 0x7FFFFFFFu;  // every NaN an NVIDIA fp32 operation returns

enum class Score { kSigmoid, kSqrtSoftplus };

struct Router {
  int64_t T = 0, E = 0, k = 0;
  DType dl = DType::kBF16;  // the logits dtype
  Score score = Score::kSigmoid;
  std::optional<float> scale;  // f32(scaling) when Megatron's `if scale:` holds
  const Tensor* logits = nullptr;
  const Tensor* bias = nullptr;
};

Router read(const Case& c) {
  Router r;
  r.logits = c.input("logits");
  r.bias = c.input("bias");
  r.T = r.logits->dim(0);
  r.E = r.logits->dim(1);
  r.k = std::get<int64_t>(c.attrs.at("k"));
  r.dl = r.logits->dtype();
  const auto score = c.attrs.find("score");
  if (score != c.attrs.end() && std::get<std::string>(score->second) == "sqrt_softplus") r.score = Score::kSqrtSoftplus;
  const std::optional<double> scaling = c.float_attr("scaling");
  if (scaling && *scaling != 0) r.scale = static_cast<float>(*scaling);  // NaN is truthy in Python
  if (r.k > kMaxModelledK)
    throw RejectError("unmodelled", "router_topk: the slot sums are modelled for k <= " + std::to_string(kMaxModelledK) +
                                        " (rule 7's lane count is then P2(k)); got k = " + std::to_string(r.k));
  return r;
}

float dl_round(DType dl, float v) { return round_to(dl, v); }
float bf(float v) { return round_to(DType::kBF16, v); }

// The GPU writes NaN as 0x7FFFFFFF in fp32 and, through __float2bfloat16, 0x7FFF in bf16 (which
// set_f32 gives from the canonical fp32 pattern); the reference's own NaNs carry x86 payloads.
void store(Tensor& t, int64_t i, float v) { t.set_f32(i, std::isnan(v) ? f32_from_bits(kCanonicalNanF32) : v); }

// --- scores and the selection (rule 9) --------------------------------------------------------------

// sigmoid: y = σ(f32 L) (libdevice expf); sqrt_softplus: s = sqrtf(softplus(f32 L)) (IEEE sqrt).
float score_f32(Score score, float x) {
  return score == Score::kSigmoid ? sigmoid_f32(x) : std::sqrt(softplus_f32(x));
}

// Top-k of one row of R, sorted: descending R, NaN above every number (not in the GPU probe; the
// eager recording's rows with NaN logits agree), ties (NaN among NaN too) to the lowest index.
std::vector<int64_t> topk(std::span<const float> R, int64_t k) {
  std::vector<int64_t> order(R.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
    const float ra = R[static_cast<size_t>(a)], rb = R[static_cast<size_t>(b)];
    const bool na = std::isnan(ra), nb = std::isnan(rb);
    if (na != nb) return na;
    if (!na && ra != rb) return ra > rb;
    return a < b;
  });
  order.resize(static_cast<size_t>(k));
  return order;
}

// Rule 7's tree over the k slots in fp64 (the `G.double().sum(-1)` of the aligned denominator): the
// lane plan of torch_row_sum_plan, each lane's four position accumulators from +0, then halving.
double rule7_row_sum_f64(std::span<const double> row, int64_t rows) {
  const int64_t width = static_cast<int64_t>(row.size());
  const RowSumPlan plan = torch_row_sum_plan(width, rows);
  const int64_t lanes = plan.lanes;  // k <= kMaxModelledK: never vectorized
  std::vector<double> lane(static_cast<size_t>(lanes));
  for (int64_t l = 0; l < lanes; ++l) {
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    for (int64_t it = 0; l + lanes * it < width; ++it) acc[it % 4] += row[static_cast<size_t>(l + lanes * it)];
    lane[static_cast<size_t>(l)] = ((acc[0] + acc[1]) + acc[2]) + acc[3];
  }
  for (int64_t stride = lanes / 2; stride >= 1; stride /= 2)
    for (int64_t l = 0; l < stride; ++l) lane[static_cast<size_t>(l)] += lane[static_cast<size_t>(l + stride)];
  return lane[0];
}

// S = dL(score(f32 L)) of row t.
std::vector<float> scores_row(const Router& r, int64_t t) {
  std::vector<float> S(static_cast<size_t>(r.E));
  for (int64_t e = 0; e < r.E; ++e) S[static_cast<size_t>(e)] = dl_round(r.dl, score_f32(r.score, r.logits->f32(t * r.E + e)));
  return S;
}

// The slots of row t: R = f32(S) ⊕ bias[e] (the gather path) or S (the topk path).
std::vector<int64_t> select_row(const Router& r, const std::vector<float>& S) {
  std::vector<float> R = S;
  if (r.bias)
    for (int64_t e = 0; e < r.E; ++e) R[static_cast<size_t>(e)] = S[static_cast<size_t>(e)] + r.bias->f32(e);
  return topk(R, r.k);
}

// The aligned denominator: D = f32(Σ64 G) ⊕ f32(1e-20), Σ64 in rule 7's tree over the slots.
float aligned_denominator(std::span<const float> G, int64_t rows) {
  std::vector<double> g64(G.begin(), G.end());
  return static_cast<float>(rule7_row_sum_f64(g64, rows)) + kRouterEpsilon;
}

// --- forward ---------------------------------------------------------------------------------------

// The probs of the k slots of one row, in the probs dtype's values.
using Normalize = std::vector<float> (*)(const Router&, std::span<const float> G);

// k == 1 under both contracts: P = G (no division); scaling then in the probs (= logits) dtype.
std::vector<float> single_slot(const Router& r, std::span<const float> G) {
  std::vector<float> P(G.begin(), G.end());
  if (r.scale)
    for (float& p : P) p = dl_round(r.dl, p * *r.scale);
  return P;
}

std::vector<float> megatron_normalize(const Router& r, std::span<const float> G) {
  if (r.k == 1) return single_slot(r, G);
  const float D = aligned_denominator(G, r.T);
  std::vector<float> P(G.size());
  for (size_t j = 0; j < G.size(); ++j) {
    P[j] = G[j] / D;
    if (r.scale) P[j] = P[j] * *r.scale;
  }
  return P;
}

// r0.13: G / (G.sum(-1) + 1e-20) as eager ops in the logits dtype (the sum accumulates in fp32 in
// rule 7's order and rounds once to dL), then the scaling in dL.
std::vector<float> baseline_normalize(const Router& r, std::span<const float> G) {
  if (r.k == 1) return single_slot(r, G);
  const float sum = dl_round(r.dl, torch_row_sum(G, r.T));
  const float den = dl_round(r.dl, sum + kRouterEpsilon);
  std::vector<float> P(G.size());
  for (size_t j = 0; j < G.size(); ++j) {
    P[j] = dl_round(r.dl, G[j] / den);
    if (r.scale) P[j] = dl_round(r.dl, P[j] * *r.scale);
  }
  return P;
}

TensorMap forward(const Case& c, DType probs_dtype, Normalize normalize) {
  const Router r = read(c);
  Tensor probs(probs_dtype, {r.T, r.E}), routing_map(DType::kBool, {r.T, r.E});  // +0 and false elsewhere
  for (int64_t t = 0; t < r.T; ++t) {
    const std::vector<float> S = scores_row(r, t);
    const std::vector<int64_t> slots = select_row(r, S);
    std::vector<float> G(slots.size());
    for (size_t j = 0; j < slots.size(); ++j) G[j] = S[static_cast<size_t>(slots[j])];
    const std::vector<float> P = normalize(r, G);
    for (size_t j = 0; j < slots.size(); ++j) {
      store(probs, t * r.E + slots[j], P[j]);
      routing_map.set_bits(t * r.E + slots[j], 1);
    }
  }
  return {{"probs", probs}, {"routing_map", routing_map}};
}

// --- backward (router-backward-order.md §2, megatron_eager) -----------------------------------------

// dG of the k slots of one row, given the slot values G and dP (B1-B4).
std::vector<float> slot_gradients(const Router& r, std::span<const float> G, std::span<const float> dP_in) {
  const size_t k = G.size();
  std::vector<float> dG(k);
  if (r.k == 1) {  // B2, B3: the scalar product in the probs (= logits) dtype
    for (size_t j = 0; j < k; ++j) dG[j] = r.scale ? dl_round(r.dl, dP_in[j] * *r.scale) : dP_in[j];
    return dG;
  }
  const float D = aligned_denominator(G, r.T);
  std::vector<float> a(k), m(k);
  for (size_t j = 0; j < k; ++j) {
    const float dP = r.scale ? dP_in[j] * *r.scale : dP_in[j];  // B2
    a[j] = dP / D;                                              // B4a: grad / other
    m[j] = (-dP) * ((G[j] / D) / D);                            // B4b: -grad * ((self / other) / other)
  }
  const float dD = torch_row_sum(m, r.T);  // B4c: sum_to over the slots, rule 7 with rows = T
  for (size_t j = 0; j < k; ++j)           // B4d-f: bf16 adds three roundings; fp32 one
    dG[j] = r.dl == DType::kBF16 ? bf(bf(a[j]) + bf(dD)) : a[j] + dD;
  return dG;
}

// B5, GatherBackward0: zeros.scatter_add_(1, idx, dG) adds each slot's gradient onto +0 with an
// atomic add, so a -0 becomes +0; for fp32 logits that add is RED.ADD.F32.FTZ, which flushes a
// subnormal addend to a sign-preserving zero, so a subnormal dG becomes +0 too (eager PyTorch on the
// H200 gives +0 where dP is subnormal and k = 1, fp32 logits). bf16's add is not flushed.
float scatter_add_onto_zero(DType logits_dtype, float dG) {
  if (logits_dtype == DType::kFP32) return atomic_sum(std::span<const float>(&dG, 1), DType::kFP32);
  return 0.0f + dG;
}

// d_logits of one element from dS (B6-B8).
float score_backward(Score score, float x, float dS) {
  if (score == Score::kSigmoid) {
    const float y = sigmoid_f32(x);  // the saved fp32 output, not the rounded S
    return (dS * (1.0f - y)) * y;    // B7: a * (1 - b) * b
  }
  const float s = std::sqrt(softplus_f32(x));
  const float g = dS / (2.0f * s);  // B7': SqrtBackward, grad / (2 * result)
  if (x > math::kSoftplusThreshold) return g;
  const float z = device_expf(x);
  return (g * z) / (z + 1.0f);  // SoftplusBackward, beta = 1
}

TensorMap megatron_backward(const Case& c) {
  const Router r = read(c);
  const Tensor& idx = *c.input("topk_idx");
  const Tensor& d_probs = *c.input("d_probs");
  Tensor d_logits(r.dl, {r.T, r.E});
  std::vector<float> dS(static_cast<size_t>(r.E));
  for (int64_t t = 0; t < r.T; ++t) {
    const std::vector<float> S = scores_row(r, t);
    std::vector<int64_t> slots(static_cast<size_t>(r.k));
    std::vector<float> G(slots.size()), dP(slots.size());
    for (int64_t j = 0; j < r.k; ++j) {
      const auto e = static_cast<int64_t>(idx.bits(t * r.k + j));
      slots[static_cast<size_t>(j)] = e;
      G[static_cast<size_t>(j)] = S[static_cast<size_t>(e)];
      dP[static_cast<size_t>(j)] = d_probs.f32(t * r.E + e);  // B1: ScatterBackward's gather, exact
    }
    const std::vector<float> dG = slot_gradients(r, G, dP);
    std::fill(dS.begin(), dS.end(), 0.0f);
    for (size_t j = 0; j < slots.size(); ++j)  // B5: scatter_add_ onto +0 (gather path); B5': scatter keeps dG
      dS[static_cast<size_t>(slots[j])] = r.bias ? scatter_add_onto_zero(r.dl, dG[j]) : dG[j];
    for (int64_t e = 0; e < r.E; ++e)
      store(d_logits, t * r.E + e, score_backward(r.score, r.logits->f32(t * r.E + e), dS[static_cast<size_t>(e)]));
  }
  return {{"d_logits", d_logits}};
}

TensorMap megatron_eager(const Case& c, const ContractInfo&) {
  if (c.direction == Direction::kBackward) return megatron_backward(c);
  const Router r = read(c);
  return forward(c, r.k > 1 ? DType::kFP32 : r.dl, megatron_normalize);
}

TensorMap baseline(const Case& c, const ContractInfo&) {
  if (c.direction == Direction::kBackward)
    throw RejectError("unmodelled", "router_topk: the baseline contract's backward is not modelled");
  return forward(c, read(c).dl, baseline_normalize);
}

}  // namespace

std::vector<ImplEntry> router_topk_impls() {
  return {{"router_topk", "megatron_eager", megatron_eager}, {"router_topk", "baseline", baseline}};
}

}  // namespace bitparity::ref
