// router_topk: the MoE router's scores, top-k selection and normalization (spec OP-1, rule 9;
// the backward's order in spec/router-backward-order.md). The record: inputs and outputs per
// direction, the input checks of each contract, the generators (sample, error and reference
// inputs), the shape shrinker and the Eigen oracle. Checks, traits and case construction only:
// each backend writes the contract's arithmetic itself (reference/router_topk.cpp).
#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Dense>
#include <rapidcheck.h>

#include "core/error.h"
#include "core/gen.h"
#include "core/random.h"
#include "ops/routing.h"

namespace bitparity::ops {
namespace {

const char* const kWho = "router_topk";
const char* const kMegatronFrom =
    "Megatron-LM #5335 (f5b5555ec6, moe_utils.py topk_routing_with_score_function, aligned mode); eager "
    "PyTorch 2.11 on CUDA 13.0, sm_90 (spec/router-backward-order.md, shared/probes/router)";
const char* const kBaselineFrom =
    "Megatron-LM r0.13 moe_utils.py topk_softmax_with_capacity (the denominator before the alignment); eager "
    "PyTorch 2.11 on CUDA 13.0, sm_90";

constexpr double kRouterEpsilon = 1e-20;  // Megatron's `+ 1e-20` in the denominator

// --- attributes and the input checks -----------------------------------------------------------

enum class Score { kSigmoid, kSqrtSoftplus };

struct Dims {
  int64_t T = 0, E = 0, k = 0;
  DType logits = DType::kBF16;
  Score score = Score::kSigmoid;
};

int64_t read_k(const Case& c, int64_t E) {
  const auto it = c.attrs.find("k");
  if (it == c.attrs.end())
    throw RejectError("attr", std::string(kWho) + ": k is required (1 <= k <= E = " + std::to_string(E) + ")");
  const int64_t* k = std::get_if<int64_t>(&it->second);
  if (!k) throw RejectError("attr", std::string(kWho) + ": k must be an integer");
  if (*k < 1 || *k > E)
    throw RejectError("attr", std::string(kWho) + ": k must satisfy 1 <= k <= E = " + std::to_string(E) + "; got " +
                                  std::to_string(*k));
  return *k;
}

Score read_score(const Case& c) {
  const auto it = c.attrs.find("score");
  if (it == c.attrs.end()) return Score::kSigmoid;
  const std::string* s = std::get_if<std::string>(&it->second);
  if (s && *s == "sigmoid") return Score::kSigmoid;
  if (s && *s == "sqrt_softplus") return Score::kSqrtSoftplus;
  throw RejectError("attr", std::string(kWho) + ": score must be \"sigmoid\" or \"sqrt_softplus\"" +
                                (s ? "; got \"" + *s + "\"" : std::string("; got a non-string value")));
}

void check_scaling(const Case& c) {
  const auto it = c.attrs.find("scaling");
  if (it != c.attrs.end() && !c.float_attr("scaling"))
    throw RejectError("attr", std::string(kWho) + ": scaling must be a number");
}

Dims check_forward_inputs(const Case& c) {
  const Tensor* logits = c.input("logits");
  if (!logits) throw RejectError("shape", std::string(kWho) + ": logits is required");
  if (logits->rank() != 2)
    throw RejectError("shape", std::string(kWho) + ": logits must have shape [T, E]; got " + shape_string(logits->shape()));
  if (logits->dtype() != DType::kBF16 && logits->dtype() != DType::kFP32)
    throw RejectError("dtype", std::string(kWho) + ": logits must be bf16 or fp32; got " +
                                   std::string(dtype_name(logits->dtype())));
  Dims d;
  d.T = logits->dim(0);
  d.E = logits->dim(1);
  d.logits = logits->dtype();
  d.k = read_k(c, d.E);
  d.score = read_score(c);
  check_scaling(c);
  if (const Tensor* bias = c.input("bias")) {
    if (bias->rank() != 1 || bias->dim(0) != d.E)
      throw RejectError("shape", std::string(kWho) + ": bias must have shape [E] = [" + std::to_string(d.E) + "]; got " +
                                     shape_string(bias->shape()));
    if (bias->dtype() != DType::kFP32)
      throw RejectError("dtype", std::string(kWho) + ": bias must be fp32 (Megatron keeps the expert bias in fp32); got " +
                                     std::string(dtype_name(bias->dtype())));
  }
  return d;
}

// The dtype of probs under a contract: the aligned fp64 denominator writes fp32 probs for k > 1;
// k == 1 (no division) and the baseline keep the logits dtype.
DType probs_dtype(const ContractInfo& contract, const Dims& d) {
  return contract.name == "megatron_eager" && d.k > 1 ? DType::kFP32 : d.logits;
}

void check_topk_idx(const Case& c, const Dims& d) {
  const Tensor* idx = c.input("topk_idx");
  if (!idx) throw RejectError("shape", std::string(kWho) + ": topk_idx is required in the backward");
  if (idx->dtype() != DType::kI64)
    throw RejectError("dtype", std::string(kWho) + ": topk_idx must be i64; got " + std::string(dtype_name(idx->dtype())));
  if (idx->shape() != Shape{d.T, d.k})
    throw RejectError("shape", std::string(kWho) + ": topk_idx must have shape [T, k] = " + shape_string({d.T, d.k}) +
                                   "; got " + shape_string(idx->shape()));
  std::vector<char> seen(static_cast<size_t>(d.E));
  for (int64_t t = 0; t < d.T; ++t) {
    std::fill(seen.begin(), seen.end(), 0);
    for (int64_t j = 0; j < d.k; ++j) {
      const auto e = static_cast<int64_t>(idx->bits(t * d.k + j));
      if (e < 0 || e >= d.E)
        throw RejectError("shape", std::string(kWho) + ": topk_idx row " + std::to_string(t) + " names expert " +
                                       std::to_string(e) + ", outside [0, " + std::to_string(d.E) + ")");
      if (seen[static_cast<size_t>(e)]++)
        throw RejectError("shape", std::string(kWho) + ": topk_idx row " + std::to_string(t) + " names expert " +
                                       std::to_string(e) + " twice; each row must hold k distinct experts");
    }
  }
}

OutputMetas validate(const Case& c, const ContractInfo& contract) {
  const Dims d = check_forward_inputs(c);
  const Shape te = {d.T, d.E};
  if (c.direction == Direction::kForward)
    return {{"probs", {te, probs_dtype(contract, d)}}, {"routing_map", {te, DType::kBool}}};
  check_topk_idx(c, d);
  const Tensor* d_probs = c.input("d_probs");
  if (!d_probs) throw RejectError("shape", std::string(kWho) + ": d_probs is required in the backward");
  if (d_probs->shape() != te)
    throw RejectError("shape", std::string(kWho) + ": d_probs must have shape [T, E] = " + shape_string(te) + "; got " +
                                   shape_string(d_probs->shape()));
  if (contract.name != "megatron_eager")
    throw RejectError("unmodelled", std::string(kWho) + ": the " + contract.name + " contract has no modelled backward");
  const DType want = probs_dtype(contract, d);
  if (d_probs->dtype() != want)
    throw RejectError("dtype", std::string(kWho) + ": d_probs must have the probs dtype, " +
                                   std::string(dtype_name(want)) + " for " + std::string(dtype_name(d.logits)) +
                                   " logits and k = " + std::to_string(d.k) + "; got " +
                                   std::string(dtype_name(d_probs->dtype())));
  return {{"d_logits", {te, d.logits}}};
}

// --- the expected selection (for generating backward cases and for classes) ----------------------
//
// The slot order the forward returns, estimated in fp64: S = dL(f32(score(x))) with the correctly
// rounded score (not libdevice's expf, which the reference emulates: the estimate may differ from
// the contract's S in the last fp32 place, so a backward case's topk_idx is the forward's order
// almost always, and a valid order always). Selection as rule 9: descending R, NaN above every
// number, ties by ascending index.

double exact_score(Score score, double x) {
  if (score == Score::kSigmoid) return 1.0 / (1.0 + std::exp(-x));
  const double softplus = x > 20.0 ? x : std::log1p(std::exp(x));
  return std::sqrt(softplus);
}

// R of every element of the logits, as fp32 values (S, plus the bias where there is one).
std::vector<float> estimated_ranking_values(const Case& c, const Dims& d) {
  const Tensor& logits = *c.input("logits");
  const Tensor* bias = c.input("bias");
  std::vector<float> r(static_cast<size_t>(logits.numel()));
  for (int64_t i = 0; i < logits.numel(); ++i) {
    const float s = round_to(d.logits, static_cast<float>(exact_score(d.score, logits.f64(i))));
    r[static_cast<size_t>(i)] = bias ? s + bias->f32(i % d.E) : s;
  }
  return r;
}

// a ranks before b: NaN first, then descending value; equal values (and NaN among NaN) by index.
bool ranks_before(float ra, int64_t a, float rb, int64_t b) {
  const bool na = std::isnan(ra), nb = std::isnan(rb);
  if (na != nb) return na;
  if (!na && ra != rb) return ra > rb;
  return a < b;
}

bool same_rank_value(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Every expert of row t in ranking order.
std::vector<int64_t> ranked_row(const std::vector<float>& r, int64_t t, int64_t E) {
  std::vector<int64_t> order(static_cast<size_t>(E));
  std::iota(order.begin(), order.end(), int64_t{0});
  const float* row = r.data() + t * E;
  std::sort(order.begin(), order.end(), [row](int64_t a, int64_t b) { return ranks_before(row[a], a, row[b], b); });
  return order;
}

// [T, k] i64 of the estimated forward slot order.
Tensor estimated_topk_idx(const Case& c, const Dims& d) {
  const std::vector<float> r = estimated_ranking_values(c, d);
  Tensor idx(DType::kI64, {d.T, d.k});
  for (int64_t t = 0; t < d.T; ++t) {
    const std::vector<int64_t> order = ranked_row(r, t, d.E);
    for (int64_t j = 0; j < d.k; ++j) idx.set_bits(t * d.k + j, static_cast<uint64_t>(order[static_cast<size_t>(j)]));
  }
  return idx;
}

// The slots of each row with every run of equal R reversed: another order that CUDA's topk may
// return (its order among ties is not verified), which the backward must take as given.
Tensor ties_reversed(const Tensor& idx, const std::vector<float>& r, int64_t E) {
  Tensor out = idx;
  const int64_t T = idx.dim(0), k = idx.dim(1);
  for (int64_t t = 0; t < T; ++t) {
    auto value = [&](int64_t j) { return r[static_cast<size_t>(t * E + static_cast<int64_t>(idx.bits(t * k + j)))]; };
    for (int64_t j = 0; j < k;) {
      int64_t end = j + 1;
      while (end < k && same_rank_value(value(end), value(j))) ++end;
      for (int64_t a = j, b = end - 1; a < b; ++a, --b) {
        const uint64_t tmp = out.bits(t * k + a);
        out.set_bits(t * k + a, out.bits(t * k + b));
        out.set_bits(t * k + b, tmp);
      }
      j = end;
    }
  }
  return out;
}

// --- generation ------------------------------------------------------------------------------

constexpr int64_t kSmallExpertsMax = 16;
constexpr int64_t kWideExperts = 256;      // E >> T: DeepSeek-V3's expert count with one or two tokens
constexpr int64_t kWideTokensMax = 2;
// Experts just past each limit of the forward kernel's variants (gpu/router_topk.cu forward_as: 2,
// 4 or 8 scores a lane in registers, or a scratch row above 256), and twice the last.
constexpr int64_t kVariantExperts[] = {65, 129, 257, 320, 512};
constexpr int64_t kMinElements = 2048, kElementsPerSize = 256;  // logits elements by RapidCheck size
constexpr float kSaturatedLogit = 30.0f;   // sigma = 1 in fp32; softplus's x > 20 branch
constexpr float kTinySumLogit = -60.0f;    // sigma = 8.7e-27: the sum of G stays below 1e-20
constexpr float kUnderflowLogit = -95.0f;  // expf subnormal; sigma = 0 in fp32

enum class RowKind { kKeep, kTied, kMinusInf, kTinySum, kSaturated, kOneNan, kUnderflow };

rc::Gen<RowKind> row_kind() {
  return rc::gen::weightedElement<RowKind>({{10, RowKind::kKeep},
                                            {2, RowKind::kTied},
                                            {1, RowKind::kMinusInf},
                                            {1, RowKind::kTinySum},
                                            {1, RowKind::kSaturated},
                                            {1, RowKind::kOneNan},
                                            {1, RowKind::kUnderflow}});
}

void fill_row(Tensor& t, int64_t row, float value) {
  const int64_t E = t.dim(1);
  for (int64_t e = 0; e < E; ++e) t.set_f32(row * E + e, value);
}

// The edge rows of the GPU probe (router-backward-order.md, "What the inputs contain"), each row
// of the case drawn as one with a fixed probability.
void add_edge_rows(Tensor& logits) {
  const int64_t T = logits.dim(0), E = logits.dim(1);
  for (int64_t t = 0; t < T; ++t) {
    switch (*row_kind()) {
      case RowKind::kKeep: break;
      case RowKind::kTied: {
        const uint64_t bits = *gen::element_bits(logits.dtype(), gen::ValueClass::kModerate);
        for (int64_t e = 0; e < E; ++e) logits.set_bits(t * E + e, bits);
        break;
      }
      case RowKind::kMinusInf: fill_row(logits, t, -std::numeric_limits<float>::infinity()); break;
      case RowKind::kTinySum: fill_row(logits, t, kTinySumLogit); break;
      case RowKind::kSaturated: fill_row(logits, t, kSaturatedLogit); break;
      case RowKind::kUnderflow: fill_row(logits, t, kUnderflowLogit); break;
      case RowKind::kOneNan:
        logits.set_f32(t * E + *rc::gen::inRange<int64_t>(0, E), std::numeric_limits<float>::quiet_NaN());
        break;
    }
  }
}

struct GenShape {
  int64_t T, E, k;
};

rc::Gen<GenShape> gen_shape() {
  return rc::gen::exec([] {
    enum Kind { kSmall, kRealistic, kAllExperts, kWide, kVariants };
    const Kind kind = *rc::gen::weightedElement<Kind>(
        {{4, kSmall}, {3, kRealistic}, {1, kAllExperts}, {1, kWide}, {2, kVariants}});
    GenShape s{};
    switch (kind) {
      case kSmall:
        s.E = *rc::gen::inRange<int64_t>(1, kSmallExpertsMax + 1);
        s.k = *rc::gen::inRange<int64_t>(1, s.E + 1);
        s.T = *gen::rows();
        break;
      case kRealistic:  // GLM-4.5-Air (128/8), DeepSeek-V2 (160/6), DeepSeek-V3 (256/8), small MoEs
        s.E = *rc::gen::element<int64_t>(64, 128, 160, 256);
        s.k = *rc::gen::element<int64_t>(1, 2, 4, 6, 8);
        s.T = *gen::rows();
        break;
      case kAllExperts:
        s.E = *rc::gen::inRange<int64_t>(1, kSmallExpertsMax + 1);
        s.k = s.E;
        s.T = *gen::rows();
        break;
      case kWide:
        s.E = kWideExperts;
        s.k = *rc::gen::inRange<int64_t>(1, 9);
        s.T = *rc::gen::inRange<int64_t>(1, kWideTokensMax + 1);
        break;
      case kVariants:  // element, not inRange: every variant at every RapidCheck size
        s.E = *rc::gen::elementOf(std::vector<int64_t>(std::begin(kVariantExperts), std::end(kVariantExperts)));
        s.k = *rc::gen::element<int64_t>(1, 2, 8);
        s.T = *gen::rows();
        break;
    }
    const int size = *rc::gen::withSize([](int n) { return rc::gen::just(n); });
    const int64_t max_elements = kMinElements + int64_t{size} * kElementsPerSize;
    if (s.T > 1 && s.T * s.E > max_elements) s.T = std::max<int64_t>(1, max_elements / s.E);
    return s;
  });
}

std::optional<std::string> gen_score() {
  return *rc::gen::weightedElement<std::optional<std::string>>(
      {{3, std::string("sigmoid")}, {2, std::string("sqrt_softplus")}, {1, std::nullopt}});
}

// Absent, 0 (Megatron's `if scale:` is false), 1.0 (GLM-4.5-Air), 2.5 (DeepSeek-V3), 1.3 (not an
// fp32 value: the scalar is rounded first).
std::optional<double> gen_scaling() {
  return *rc::gen::weightedElement<std::optional<double>>(
      {{6, std::nullopt}, {1, 0.0}, {2, 1.0}, {2, 2.5}, {2, 1.3}});
}

rc::Gen<Case> generate_case(Direction dir) {
  return rc::gen::exec([dir] {
    Case c;
    c.op = kWho;
    c.direction = dir;
    const GenShape s = *gen_shape();
    const DType dl = *rc::gen::weightedElement<DType>({{3, DType::kBF16}, {1, DType::kFP32}});
    c.attrs["k"] = s.k;
    if (const auto score = gen_score()) c.attrs["score"] = *score;
    if (const auto scaling = gen_scaling()) c.attrs["scaling"] = *scaling;
    Tensor logits = *gen::tensor(dl, {s.T, s.E}, *gen::value_family());
    if (*rc::gen::arbitrary<bool>()) add_edge_rows(logits);
    c.inputs["logits"] = logits;
    enum BiasKind { kNone, kZero, kRandom };
    switch (*rc::gen::element<BiasKind>(kNone, kZero, kRandom)) {
      case kNone: break;
      case kZero: c.inputs["bias"] = Tensor(DType::kFP32, {s.E}); break;  // the aligned mode's bias
      case kRandom: c.inputs["bias"] = *gen::tensor(DType::kFP32, {s.E}, *gen::value_family()); break;
    }
    if (dir == Direction::kForward) return c;
    const Dims d = check_forward_inputs(c);
    Tensor idx = estimated_topk_idx(c, d);
    if (*rc::gen::weightedElement<bool>({{3, false}, {1, true}}))
      idx = ties_reversed(idx, estimated_ranking_values(c, d), d.E);
    c.inputs["topk_idx"] = idx;
    const DType pd = s.k > 1 ? DType::kFP32 : dl;  // megatron_eager's probs dtype
    Tensor d_probs = *gen::tensor(pd, {s.T, s.E}, *gen::value_family());
    if (*rc::gen::arbitrary<bool>())
      for (int64_t t = 0; t < s.T; ++t)
        if (*rc::gen::weightedElement<bool>({{3, false}, {1, true}})) fill_row(d_probs, t, -0.0f);
    c.inputs["d_probs"] = d_probs;
    return c;
  });
}

// --- classes -------------------------------------------------------------------------------------

bool row_all(const Tensor& t, int64_t row, const std::function<bool(double)>& pred) {
  const int64_t E = t.dim(1);
  if (E == 0) return false;
  for (int64_t e = 0; e < E; ++e)
    if (!pred(t.f64(row * E + e))) return false;
  return true;
}

std::string scaling_tag(const Case& c) {
  const std::optional<double> s = c.float_attr("scaling");
  if (!s) return "scaling=none";
  if (*s == 0) return "scaling=0";
  if (*s == 1.0) return "scaling=1";
  if (*s == 2.5) return "scaling=2.5";
  if (*s == 1.3) return "scaling=1.3";
  return "scaling=other";
}

// The forward kernel's variant by E (gpu/router_topk.cu forward_as): 2, 4 or 8 experts a lane in
// registers, or a scratch row above 256.
std::string experts_tag(int64_t E) {
  if (E <= 64) return "E=1..64";
  if (E <= 128) return "E=65..128";
  if (E <= 256) return "E=129..256";
  return "E>256";
}

std::string bias_tag(const Tensor* bias) {
  if (!bias) return "bias=none";
  for (int64_t e = 0; e < bias->numel(); ++e)
    if (bias->f64(e) != 0) return "bias=random";
  return "bias=zero";
}

// Row tags of the estimated selection: all R tied, a tie at the top-k boundary, a sum of the
// selected scores below 1e-20.
void add_selection_tags(const Case& c, const Dims& d, std::vector<std::string>& tags) {
  const std::vector<float> r = estimated_ranking_values(c, d);
  bool all_tied = false, boundary_tie = false, tiny_sum = false;
  for (int64_t t = 0; t < d.T; ++t) {
    const std::vector<int64_t> order = ranked_row(r, t, d.E);
    const float* row = r.data() + t * d.E;
    bool tied = d.E > 1 && !std::isnan(row[0]);
    for (int64_t e = 1; e < d.E && tied; ++e) tied = row[e] == row[0];
    all_tied = all_tied || tied;
    if (d.k < d.E)
      boundary_tie = boundary_tie || same_rank_value(row[order[static_cast<size_t>(d.k - 1)]], row[order[static_cast<size_t>(d.k)]]);
    double sum = 0;
    const Tensor& logits = *c.input("logits");
    for (int64_t j = 0; j < d.k; ++j)
      sum += round_to(d.logits, static_cast<float>(exact_score(d.score, logits.f64(t * d.E + order[static_cast<size_t>(j)]))));
    tiny_sum = tiny_sum || sum < kRouterEpsilon;
  }
  if (all_tied) tags.push_back("row:all_tied");
  if (boundary_tie) tags.push_back("row:boundary_tie");
  if (tiny_sum) tags.push_back("row:sumG<1e-20");
}

std::string topk_idx_tag(const Case& c, const Dims& d) {
  const Tensor& idx = *c.input("topk_idx");
  const Tensor forward = estimated_topk_idx(c, d);
  if (idx == forward) return "topk_idx=forward_order";
  if (idx == ties_reversed(forward, estimated_ranking_values(c, d), d.E)) return "topk_idx=ties_reordered";
  return "topk_idx=other";
}

CaseClasses classes(const Case& c) {
  CaseClasses k;
  Dims d;
  try {
    d = check_forward_inputs(c);
  } catch (const RejectError& e) {
    k.shape_class = "invalid";
    k.value_class = e.error_class();
    k.tags = {"invalid"};
    return k;
  }
  const Tensor& logits = *c.input("logits");
  const Tensor* bias = c.input("bias");
  const std::vector<std::string> logit_values = gen::value_tags(logits);
  const bool nan = std::count(logit_values.begin(), logit_values.end(), "nan") > 0;
  const std::string score = d.score == Score::kSigmoid ? "sigmoid" : "sqrt_softplus";
  // The signature: the normalization (k == 1 has none), the path (bias: gather, else topk: the
  // sign of a zero gradient), the logits dtype, the score and whether a logit is NaN.
  k.shape_class = std::string(d.k == 1 ? "k=1" : "k>1") + (bias ? ",gather" : ",topk");
  k.value_class = std::string(dtype_name(d.logits)) + "," + score + (nan ? ",nan" : "");
  k.tags = {gen::rows_class(d.T), std::string("logits=") + std::string(dtype_name(d.logits)),
            c.attrs.count("score") ? "score=" + score : "score=absent", scaling_tag(c), bias_tag(bias),
            d.k == 1 ? "k=1" : "k>1", experts_tag(d.E)};
  if (d.k == d.E) k.tags.push_back("E=k");
  if (d.T >= 1 && d.E >= 32 * d.T) k.tags.push_back("E>>T");
  for (const std::string& v : logit_values) k.tags.push_back("logits:" + v);
  bool minus_inf = false, saturated = false;
  for (int64_t t = 0; t < d.T; ++t) {
    minus_inf = minus_inf || row_all(logits, t, [](double x) { return x == -INFINITY; });
    saturated = saturated || row_all(logits, t, [](double x) { return x >= kSaturatedLogit; });
  }
  if (minus_inf) k.tags.push_back("row:-inf");
  if (saturated) k.tags.push_back("row:saturated");
  add_selection_tags(c, d, k.tags);
  if (c.direction == Direction::kBackward && c.input("topk_idx") && c.input("d_probs")) {
    const Tensor& d_probs = *c.input("d_probs");
    if (c.input("topk_idx")->shape() == Shape{d.T, d.k}) k.tags.push_back(topk_idx_tag(c, d));
    bool zero_row = false;
    for (int64_t t = 0; d_probs.rank() == 2 && t < d_probs.dim(0); ++t)
      zero_row = zero_row || row_all(d_probs, t, [](double v) { return v == 0 && std::signbit(v); });
    if (zero_row) k.tags.push_back("d_probs:-0_row");
    for (const std::string& v : gen::value_tags(d_probs)) k.tags.push_back("d_probs:" + v);
  }
  return k;
}

std::vector<std::string> required_tags(Direction dir) {
  std::vector<std::string> tags = {
      "rows=0", "rows=1..16", "rows=17", "rows=large", "E=k", "E>>T", "k=1", "k>1", "logits=bf16", "logits=fp32",
      "score=sigmoid", "score=sqrt_softplus", "score=absent", "scaling=none", "scaling=0", "scaling=1",
      "scaling=2.5", "scaling=1.3", "bias=none", "bias=zero", "bias=random", "row:all_tied", "row:boundary_tie",
      "row:-inf", "row:saturated", "row:sumG<1e-20", "logits:nan", "logits:inf", "logits:-0", "logits:subnormal",
      "E=1..64", "E=65..128", "E=129..256", "E>256"};
  if (dir == Direction::kBackward)
    tags.insert(tags.end(), {"topk_idx=forward_order", "topk_idx=ties_reordered", "d_probs:-0_row", "d_probs:nan"});
  return tags;
}

// --- error inputs --------------------------------------------------------------------------------

constexpr int64_t kErrT = 2, kErrE = 4, kErrK = 2;

Tensor idx_tensor(const std::vector<int64_t>& v, Shape shape) {
  Tensor t(DType::kI64, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.set_bits(static_cast<int64_t>(i), static_cast<uint64_t>(v[i]));
  return t;
}

Case error_base(Direction dir) {
  Case c;
  c.op = kWho;
  c.direction = dir;
  c.attrs["k"] = kErrK;
  c.inputs["logits"] = Tensor(DType::kBF16, {kErrT, kErrE});
  if (dir == Direction::kBackward) {
    c.inputs["topk_idx"] = idx_tensor({0, 1, 2, 3}, {kErrT, kErrK});
    c.inputs["d_probs"] = Tensor(DType::kFP32, {kErrT, kErrE});
  }
  return c;
}

std::vector<ErrorInput> error_inputs(Direction dir) {
  std::vector<ErrorInput> out;
  auto add = [&](std::string name, auto edit, std::string error_class, std::string field,
                 std::vector<std::string> contracts = {}) {
    Case c = error_base(dir);
    edit(c);
    out.push_back({std::move(name), std::move(c), std::move(error_class), std::move(field), std::move(contracts)});
  };
  add("k_zero", [](Case& c) { c.attrs["k"] = int64_t{0}; }, "attr", "k");
  add("k_above_E", [](Case& c) { c.attrs["k"] = kErrE + 1; }, "attr", "k");
  add("k_missing", [](Case& c) { c.attrs.erase("k"); }, "attr", "k");
  add("score_unknown", [](Case& c) { c.attrs["score"] = std::string("softmax"); }, "attr", "score");
  add("logits_rank3", [](Case& c) { c.inputs["logits"] = Tensor(DType::kBF16, {kErrT, kErrE, 1}); }, "shape", "logits");
  add("logits_i64", [](Case& c) { c.inputs["logits"] = Tensor(DType::kI64, {kErrT, kErrE}); }, "dtype", "logits");
  add("bias_wrong_length", [](Case& c) { c.inputs["bias"] = Tensor(DType::kFP32, {kErrE - 1}); }, "shape", "bias");
  add("bias_bf16", [](Case& c) { c.inputs["bias"] = Tensor(DType::kBF16, {kErrE}); }, "dtype", "bias");
  if (dir == Direction::kBackward) {
    add("topk_idx_repeated_expert", [](Case& c) { c.inputs["topk_idx"] = idx_tensor({0, 1, 3, 3}, {kErrT, kErrK}); },
        "shape", "topk_idx");
    add("topk_idx_out_of_range", [](Case& c) { c.inputs["topk_idx"] = idx_tensor({0, 1, 2, kErrE}, {kErrT, kErrK}); },
        "shape", "topk_idx");
    add("topk_idx_negative", [](Case& c) { c.inputs["topk_idx"] = idx_tensor({0, 1, -1, 2}, {kErrT, kErrK}); },
        "shape", "topk_idx");
    add("topk_idx_wrong_width", [](Case& c) { c.inputs["topk_idx"] = idx_tensor({0, 1, 2, 0, 2, 3}, {kErrT, kErrK + 1}); },
        "shape", "topk_idx");
    add("topk_idx_i32", [](Case& c) { c.inputs["topk_idx"] = Tensor(DType::kI32, {kErrT, kErrK}); }, "dtype", "topk_idx");
    add("d_probs_wrong_shape", [](Case& c) { c.inputs["d_probs"] = Tensor(DType::kFP32, {kErrT, kErrE + 1}); }, "shape",
        "d_probs");
    // The baseline's backward is unmodelled, which its validate says before the dtype rule.
    add("d_probs_wrong_dtype", [](Case& c) { c.inputs["d_probs"] = Tensor(DType::kBF16, {kErrT, kErrE}); }, "dtype",
        "d_probs", {"megatron_eager"});
    add("d_probs_logits_dtype_k1", [](Case& c) {
          c.attrs["k"] = int64_t{1};
          c.inputs["topk_idx"] = idx_tensor({0, 3}, {kErrT, 1});
        }, "dtype", "d_probs", {"megatron_eager"});  // k == 1: probs (and so d_probs) are bf16
  }
  return out;
}

// --- reference inputs ------------------------------------------------------------------------------

enum : uint64_t { kSeedLogits = 11, kSeedDProbs = 12 };

// bf16 (or fp32) values ~ N(0, 1) from splitmix64 (Box-Muller), so that (dtype, shape, seed)
// name the bits: realistic router logits.
Tensor normal_tensor(DType dtype, Shape shape, uint64_t seed) {
  constexpr double kTwoPi = 6.283185307179586;
  constexpr double kUnit = 1.0 / 9007199254740992.0;  // 2^-53
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint64_t a = splitmix64_mix(seed * 0x100000001b3ull + 2 * static_cast<uint64_t>(i));
    const uint64_t b = splitmix64_mix(seed * 0x100000001b3ull + 2 * static_cast<uint64_t>(i) + 1);
    const double u1 = (static_cast<double>(a >> 11) + 1.0) * kUnit, u2 = static_cast<double>(b >> 11) * kUnit;
    t.set_bits(i, from_double(dtype, std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2)));
  }
  return t;
}

Case reference_case(Direction dir, int64_t T, int64_t E, int64_t k) {
  Case c;
  c.op = kWho;
  c.direction = dir;
  c.attrs["k"] = k;
  c.inputs["logits"] = normal_tensor(DType::kBF16, {T, E}, kSeedLogits);
  c.inputs["bias"] = Tensor(DType::kFP32, {E});  // the aligned mode never updates the expert bias
  if (dir == Direction::kBackward) {
    c.inputs["topk_idx"] = estimated_topk_idx(c, check_forward_inputs(c));
    c.inputs["d_probs"] = normal_tensor(k > 1 ? DType::kFP32 : DType::kBF16, {T, E}, kSeedDProbs);
  }
  return c;
}

std::vector<ReferenceInput> reference_inputs(Direction dir) {
  std::vector<ReferenceInput> out;
  struct Shape3 {
    int64_t T, E, k;
    bool bench_only;
  };
  // GLM-4.5-Air (128 experts) and DeepSeek-V3 (256) at a 16K-token batch; 160 experts, 2K tokens for
  // the GPU tests (160 is not a power of two).
  for (const Shape3 s : {Shape3{16384, 128, 8, true}, Shape3{16384, 256, 8, true}, Shape3{2048, 160, 8, false}}) {
    const std::string name = "tokens" + std::to_string(s.T) + "_E" + std::to_string(s.E) + "_k" + std::to_string(s.k);
    out.push_back({name, {}, [=] { return reference_case(dir, s.T, s.E, s.k); }, s.bench_only});
  }
  return out;
}

// --- shrinking ----------------------------------------------------------------------------------

// The case on rows `rows` and experts `experts` (ascending), with k; topk_idx keeps its slots'
// order, renumbered, and drops slots beyond k. Empty when a row's slots name a dropped expert.
std::optional<Case> restrict(const Case& c, const std::vector<int64_t>& rows, const std::vector<int64_t>& experts,
                             int64_t k) {
  const Tensor& logits = *c.input("logits");
  const int64_t T = logits.dim(0), E = logits.dim(1);
  const int64_t nT = static_cast<int64_t>(rows.size()), nE = static_cast<int64_t>(experts.size());
  // A case whose per-row inputs do not fit the logits (an error input) keeps its shape.
  const Tensor* d_probs = c.input("d_probs");
  const Tensor* topk_idx = c.input("topk_idx");
  if (d_probs && d_probs->shape() != Shape{T, E}) return std::nullopt;
  if (const Tensor* b = c.input("bias"); b && b->shape() != Shape{E}) return std::nullopt;
  if (topk_idx && (topk_idx->rank() != 2 || topk_idx->dim(0) != T || topk_idx->dim(1) < k)) return std::nullopt;
  std::vector<int64_t> renumber(static_cast<size_t>(E), -1);
  for (int64_t i = 0; i < nE; ++i) renumber[static_cast<size_t>(experts[static_cast<size_t>(i)])] = i;
  auto cut = [&](const Tensor& t) {
    Tensor s(t.dtype(), {nT, nE});
    for (int64_t r = 0; r < nT; ++r)
      for (int64_t i = 0; i < nE; ++i)
        s.set_bits(r * nE + i, t.bits(rows[static_cast<size_t>(r)] * E + experts[static_cast<size_t>(i)]));
    return s;
  };
  Case out = c;
  out.attrs["k"] = k;
  out.inputs["logits"] = cut(logits);
  if (const Tensor* b = c.input("bias")) {
    Tensor nb(b->dtype(), {nE});
    for (int64_t i = 0; i < nE; ++i) nb.set_bits(i, b->bits(experts[static_cast<size_t>(i)]));
    out.inputs["bias"] = nb;
  }
  if (d_probs) {
    // k > 1 to k == 1 changes megatron_eager's probs dtype from fp32 to the logits dtype: the
    // gradient follows it (rounded once), so that the candidate stays a valid case.
    Tensor d = cut(*d_probs);
    const DType old_dtype = topk_idx && topk_idx->dim(1) > 1 ? DType::kFP32 : logits.dtype();
    const DType new_dtype = k > 1 ? DType::kFP32 : logits.dtype();
    if (d.dtype() == old_dtype && new_dtype != old_dtype && is_floating(logits.dtype())) {
      Tensor rounded(new_dtype, d.shape());
      for (int64_t i = 0; i < d.numel(); ++i) rounded.set_f32(i, d.f32(i));
      d = rounded;
    }
    out.inputs["d_probs"] = d;
  }
  if (const Tensor* idx = topk_idx) {
    const int64_t old_k = idx->dim(1);
    Tensor ni(DType::kI64, {nT, k});
    for (int64_t r = 0; r < nT; ++r)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = static_cast<int64_t>(idx->bits(rows[static_cast<size_t>(r)] * old_k + j));
        if (e < 0 || e >= E || renumber[static_cast<size_t>(e)] < 0) return std::nullopt;
        ni.set_bits(r * k + j, static_cast<uint64_t>(renumber[static_cast<size_t>(e)]));
      }
    out.inputs["topk_idx"] = ni;
  }
  return out;
}

std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> v(static_cast<size_t>(std::max<int64_t>(end - begin, 0)));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

// Most aggressive first: single rows, halves of the rows; the path without bias; smaller k (1,
// half, one less); halves of the experts, then each expert dropped (while k <= E and, in the
// backward, no kept slot names a dropped expert).
std::vector<Case> shrink_shape(const Case& c) {
  constexpr int64_t kMaxSingleRows = 8, kMaxDroppedExperts = 32;
  const Tensor* logits = c.input("logits");
  const auto k_it = c.attrs.find("k");
  if (!logits || logits->rank() != 2 || k_it == c.attrs.end() || !std::get_if<int64_t>(&k_it->second)) return {};
  const int64_t T = logits->dim(0), E = logits->dim(1), k = std::get<int64_t>(k_it->second);
  if (k < 1 || k > E) return {};
  const std::vector<int64_t> all_rows = range(0, T), all_experts = range(0, E);
  std::vector<Case> out;
  auto push = [&](const std::optional<Case>& candidate) {
    if (candidate) out.push_back(*candidate);
  };
  if (T > 1) {
    for (int64_t r = 0; r < std::min(T, kMaxSingleRows); ++r) push(restrict(c, {r}, all_experts, k));
    push(restrict(c, range(0, T / 2), all_experts, k));
    push(restrict(c, range(T / 2, T), all_experts, k));
  }
  if (c.inputs.count("bias")) {
    Case no_bias = c;
    no_bias.inputs.erase("bias");
    out.push_back(no_bias);
  }
  for (const int64_t smaller : {int64_t{1}, k / 2, k - 1})
    if (smaller >= 1 && smaller < k) push(restrict(c, all_rows, all_experts, smaller));
  if (E > 1) {
    if (E / 2 >= k) {
      push(restrict(c, all_rows, range(0, E / 2), k));
      push(restrict(c, all_rows, range(E - E / 2, E), k));
    }
    if (E - 1 >= k)
      for (int64_t drop = 0; drop < std::min(E, kMaxDroppedExperts); ++drop) {
        std::vector<int64_t> kept = all_experts;
        kept.erase(kept.begin() + drop);
        push(restrict(c, all_rows, kept, k));
      }
  }
  return out;
}

// --- oracle ---------------------------------------------------------------------------------------
//
// The true values of the router's mathematics, in Eigen fp64: S = sigma(x) or sqrt(softplus(x))
// of the logits' exact values (no rounding of S to the logits dtype); the selection on S + bias
// in fp64 by rule 9's order (NaN first, ties by index), so the oracle's top-k set may differ from
// a contract's at rows that tie or nearly tie at the boundary; P = G / (sum G + 1e-20) (k == 1: P
// = G), times the scaling when Megatron's `if scale:` holds. The backward is the exact chain rule
// through the case's topk_idx, in its slot order: with dP_j = d_probs[t, idx_j] * scaling,
// D = sum G + 1e-20, dG_j = dP_j / D - (sum_i dP_i G_i) / D^2 (k == 1: dG = dP), and d_logits =
// dG * S'(x) at the selected experts and 0 elsewhere (sigma' = sigma (1 - sigma); sqrt(softplus)'
// = sigma / (2 sqrt(softplus))). fp64 is not exact for every element (exp, the division), but it
// is 2^29 times finer than the fp32 outputs, which is what an arbitration needs.

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

Matrix to_matrix(const Tensor& t, int64_t rows, int64_t cols) {
  Matrix m(rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i) m.data()[i] = t.f64(i);
  return m;
}

double score_derivative(Score score, double x) {
  const double sigma = 1.0 / (1.0 + std::exp(-x));
  if (score == Score::kSigmoid) return sigma * (1.0 - sigma);
  return sigma / (2.0 * exact_score(Score::kSqrtSoftplus, x));
}

std::vector<int64_t> exact_selection(const Matrix& R, int64_t t, int64_t k) {
  std::vector<int64_t> order(static_cast<size_t>(R.cols()));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const double ra = R(t, a), rb = R(t, b);
    if (std::isnan(ra) != std::isnan(rb)) return std::isnan(ra);
    return !std::isnan(ra) && ra > rb;
  });
  order.resize(static_cast<size_t>(k));
  return order;
}

std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const Dims d = check_forward_inputs(c);
  const Matrix X = to_matrix(*c.input("logits"), d.T, d.E);
  const Matrix S = X.unaryExpr([&](double x) { return exact_score(d.score, x); });
  const std::optional<double> scaling = c.float_attr("scaling");
  const double scale = scaling && *scaling != 0 ? *scaling : 1.0;  // `if scale:` (NaN is true)
  auto flat = [](const Matrix& m) { return std::vector<double>(m.data(), m.data() + m.size()); };
  std::map<std::string, std::vector<double>> truth;
  if (c.direction == Direction::kForward) {
    Matrix R = S;
    if (const Tensor* bias = c.input("bias")) R.rowwise() += to_matrix(*bias, 1, d.E).row(0);
    Matrix probs = Matrix::Zero(d.T, d.E), map = Matrix::Zero(d.T, d.E);
    for (int64_t t = 0; t < d.T; ++t) {
      const std::vector<int64_t> sel = exact_selection(R, t, d.k);
      double sum = 0;
      for (const int64_t e : sel) sum += S(t, e);
      for (const int64_t e : sel) {
        probs(t, e) = (d.k == 1 ? S(t, e) : S(t, e) / (sum + kRouterEpsilon)) * scale;
        map(t, e) = 1;
      }
    }
    truth["probs"] = flat(probs);
    truth["routing_map"] = flat(map);
    return truth;
  }
  const Tensor& idx = *c.input("topk_idx");
  const Matrix dProbs = to_matrix(*c.input("d_probs"), d.T, d.E);
  Matrix d_logits = Matrix::Zero(d.T, d.E);
  for (int64_t t = 0; t < d.T; ++t) {
    Eigen::VectorXd G(d.k), dP(d.k);
    std::vector<int64_t> e(static_cast<size_t>(d.k));
    for (int64_t j = 0; j < d.k; ++j) {
      e[static_cast<size_t>(j)] = static_cast<int64_t>(idx.bits(t * d.k + j));
      G(j) = S(t, e[static_cast<size_t>(j)]);
      dP(j) = dProbs(t, e[static_cast<size_t>(j)]) * scale;
    }
    Eigen::VectorXd dG = dP;
    if (d.k > 1) {
      const double D = G.sum() + kRouterEpsilon;
      dG = (dP.array() / D - dP.dot(G) / (D * D)).matrix();
    }
    for (int64_t j = 0; j < d.k; ++j) {
      const int64_t col = e[static_cast<size_t>(j)];
      d_logits(t, col) = dG(j) * score_derivative(d.score, X(t, col));
    }
  }
  truth["d_logits"] = flat(d_logits);
  return truth;
}

}  // namespace

OpInfo router_topk() {
  OpInfo op;
  op.name = kWho;
  op.doc = "MoE router: sigmoid or sqrt-softplus scores, top-k (expert bias), normalization with Megatron's "
           "+1e-20 denominator and optional scaling; probs and routing_map scattered to [T, E]";
  const TensorSpec logits{"logits", "[T, E] router logits, bf16 or fp32", false, true};
  const TensorSpec bias{"bias", "[E] fp32 expert bias, added to the scores for the selection only (present: the "
                                "gather path; absent: the topk path)", true};
  op.inputs[Direction::kForward] = {logits, bias};
  op.inputs[Direction::kBackward] = {
      logits, bias,
      {"topk_idx", "[T, k] i64: the forward's slots in the order topk returned them (the backward depends on it)",
       false, true},
      {"d_probs", "[T, E] gradient of probs, in the probs dtype", false, true}};
  op.outputs[Direction::kForward] = {
      {"probs", "[T, E]: P at the selected experts, +0 elsewhere (fp32 under megatron_eager for k > 1, else the "
                "logits dtype)", false, true},
      {"routing_map", "[T, E] bool: the selected experts", false, true}};
  op.outputs[Direction::kBackward] = {{"d_logits", "[T, E] in the logits dtype", false, true}};
  op.attrs = {{"k", AttrType::kInt, "experts per token, 1 <= k <= E (required)"},
              {"score", AttrType::kString, "\"sigmoid\" (also when absent) or \"sqrt_softplus\""},
              {"scaling", AttrType::kFloat,
               "moe_router_topk_scaling_factor; Megatron's `if scale:`: absent or 0 is no scaling, otherwise P *= "
               "f32(scaling)"}};
  op.contracts = {
      {"megatron_eager",
       "S = dL(score(f32 L)); top-k of S + bias, ties to the lowest index, sorted; D = f32(fp64 rule-7 sum of G) + "
       "f32(1e-20), P = f32(G) / D in fp32 (k == 1: P = G in dL); backward as router-backward-order.md (dD rule-7 "
       "tree over the slots in topk_idx's order, bf16 dG = bf(bf(a) + bf(dD)); the gather path's scatter_add_ onto +0 is fp32's flushing atomic add, so a -0 or subnormal fp32 dG gives dS = +0). NaN R ranks above every number, "
       "lowest index first among NaNs: not in the GPU probe, but every row with NaN logits of the eager recording "
       "(peers/torch/routing.jsonl.gz) agrees. probs is scattered into zeros of P's dtype (fp32 for k > 1): #5335's "
       "verbatim zeros_like(logits).scatter raises for bf16 logits with k > 1 in eager PyTorch 2.11, so the "
       "contract follows the final alignment's form. Unverified: CUDA topk's order among ties (the backward takes "
       "topk_idx as given); k > 16 (the rule-7 model covers k <= 32)",
       kMegatronFrom},
      {"baseline",
       "the denominator before the alignment: bf16 logits den = bf(bf(rule-7 fp32 sum of G) + 1e-20), P = bf(G / "
       "den); fp32 logits den = rule-7 sum + 1e-20; probs in the logits dtype; the selection as megatron_eager's. "
       "Forward only (the backward is unmodelled)",
       kBaselineFrom}};
  op.validate = validate;
  op.generate = generate_case;
  op.required_tags = required_tags;
  op.classes = classes;
  op.error_inputs = error_inputs;
  op.reference_inputs = reference_inputs;
  op.shrink_shape = shrink_shape;
  op.oracle = oracle;
  return op;
}

}  // namespace bitparity::ops
