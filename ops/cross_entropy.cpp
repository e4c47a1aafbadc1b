// cross_entropy: the language model's loss, F.cross_entropy(logits.float(), labels,
// reduction='none', ignore_index) per token (spec OP-8, cross-entropy-order.md), and its gradient
// for an upstream g. megatron_eager is eager PyTorch 2.11 on CUDA, whose softmax kernel and
// summation order change with the vocabulary size V; fused is one pass with an online max and sum
// (the order bitparity's kernel takes), so that a user sees what a fused kernel changes.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include <Eigen/Dense>
#include <rapidcheck.h>

#include "core/error.h"
#include "core/gen.h"
#include "core/random.h"
#include "ops/training.h"

namespace bitparity::ops {
namespace {

const char* const kWho = "cross_entropy";
const char* const kEagerFrom =
    "PyTorch 2.11.0+cu130 on an H200 (sm_90): log_softmax (SoftMax.cu softmax_warp_forward / cunn_SoftMaxForwardReg / "
    "cunn_SoftMaxForwardSmem / cunn_SoftMaxForward by V) + nll_loss_forward_no_reduce; backward "
    "nll_loss_backward_no_reduce + _log_softmax_backward_data (fma(-exp(logp), sum, gO)); libdevice expf/logf; "
    "spec/cross-entropy-order.md, 0 mismatches over 300 M elements; Megatron-LM #5335 language_module.py";
const char* const kFusedFrom =
    "bitparity's fused kernels: one read of the logits, a row in 8 contiguous segments of ceil(V / 8192) * 1024 "
    "elements, 1024 lanes each with an online max and sum, halving trees of (max, sum) pairs in each segment and over "
    "the 8, then eager's output formula (x - m) - logf(S) and backward fma(-expf(logp), G, gO)";

constexpr int64_t kDefaultIgnoreIndex = -100;
constexpr int64_t kGlmVocab = 151552;  // GLM-4.5's vocabulary
// Elements of a generated case at most (a few [N, 151552] rows).
constexpr int64_t kMaxGeneratedElements = int64_t{1} << 19;

// Every V where the eager dispatch changes kernel (cross-entropy-order.md §1), with its neighbours,
// and GLM-4.5's vocabulary.
const int64_t kBoundaryVs[] = {1,     2,     31,    32,    33,    1023,  1024,  1025,   2047,   2048,   2049,
                               9215,  9216,  9217,  9219,  9220,  12252, 12255, 12256,  12257,  12271,  12272,
                               12273, 32000, 32001, 151551, 151552, 151553};

bool is_boundary(int64_t V) { return std::find(std::begin(kBoundaryVs), std::end(kBoundaryVs), V) != std::end(kBoundaryVs); }

// The eager forward kernel of a V (the reference's plan, restated here for the classes).
std::string eager_kernel(int64_t V) {
  if (V <= 2048) return "warp";
  if ((V + 1023) / 1024 < 10) return "reg";
  if (V % 4 == 0 && V < 12256) return "smem";
  return "ilp";
}

// --- validate ----------------------------------------------------------------------------------

OutputMetas validate(const Case& c, const ContractInfo&) {
  const std::string who = kWho;
  const Tensor* x = c.input("logits");
  const Tensor* t = c.input("labels");
  if (!x) throw RejectError("shape", who + ": missing input logits");
  if (!t) throw RejectError("shape", who + ": missing input labels");
  if (x->dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": logits must be fp32 (the loss takes logits.float()); got " +
                                   std::string(dtype_name(x->dtype())));
  if (x->rank() != 2 || x->dim(1) < 1)
    throw RejectError("shape", who + ": logits must have shape [N, V] with V >= 1; got " + shape_string(x->shape()));
  const int64_t N = x->dim(0), V = x->dim(1);
  if (t->dtype() != DType::kI64)
    throw RejectError("dtype", who + ": labels must be i64; got " + std::string(dtype_name(t->dtype())));
  if (t->shape() != Shape{N})
    throw RejectError("shape", who + ": labels must have shape [N] = " + shape_string({N}) + "; got " +
                                   shape_string(t->shape()));
  const int64_t ignore = cross_entropy_ignore_index(c);
  for (int64_t i = 0; i < N; ++i) {
    const auto label = static_cast<int64_t>(t->bits(i));
    if (label != ignore && (label < 0 || label >= V))
      throw RejectError("shape", who + ": labels row " + std::to_string(i) + " holds " + std::to_string(label) +
                                     ", outside [0, V) with V = " + std::to_string(V) + " and not ignore_index (" +
                                     std::to_string(ignore) + ")");
  }
  if (c.direction == Direction::kForward) return {{"loss", {{N}, DType::kFP32}}};
  const Tensor* g = c.input("g");
  if (!g) throw RejectError("shape", who + ": the backward needs input g ([N] fp32, the loss's gradient)");
  if (g->dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": g must be fp32; got " + std::string(dtype_name(g->dtype())));
  if (g->shape() != Shape{N})
    throw RejectError("shape", who + ": g must have shape [N] = " + shape_string({N}) + "; got " + shape_string(g->shape()));
  return {{"d_logits", {{N, V}, DType::kFP32}}};
}

// --- generation ------------------------------------------------------------------------------

rc::Gen<int64_t> vocab() {
  return rc::gen::weightedOneOf<int64_t>({
      {6, rc::gen::inRange<int64_t>(1, 65)},
      {5, rc::gen::elementOf(std::vector<int64_t>(std::begin(kBoundaryVs), std::end(kBoundaryVs) - 3))},
      {3, rc::gen::inRange<int64_t>(65, 2049)},
      {2, rc::gen::inRange<int64_t>(2049, 13000)},
      {1, rc::gen::inRange<int64_t>(13000, 40000)},
      // GLM-4.5's vocabulary twice as often as each neighbour: a required tag, reached in ~2.8 % of
      // cases, so that the classes test's 400 cases miss it with odds near 1e-5.
      {1, rc::gen::element<int64_t>(151551, kGlmVocab, kGlmVocab, 151553)},
      // Past the fused backward's on-chip segments (kFusedBufferedMaxV): its kernel's other path.
      {1, rc::gen::inRange<int64_t>(kFusedBufferedMaxV + 1, kFusedBufferedMaxV + 8193)},
  });
}

// How a row's logits are drawn (from a seed, outside RapidCheck's shrink tree: a row may hold
// 151552 values; shrink_shape makes cases smaller).
enum RowFamily {
  kModerate,  // |x| in [2^-6, 2^7), random sign
  kGlm,       // bf16 values of scale * (about normal) + an offset: GLM-like logits
  kNegInf,    // kGlm with about one in eight -Inf (masked vocabulary)
  kAllNegInf, // every logit -Inf
  kDominant,  // one logit above the rest by at least 120: every other exp underflows, S == 1
  kTies,      // values from {0, 1, 2} or all equal: the max repeats
  kLarge,     // magnitudes up to FLT_MAX beside moderate ones
  kSpecial,   // moderate with NaN or +Inf sprinkled
  kSmallInt,  // integers in [-8, 8]
  kFloor,     // -Inf with NaN and -FLT_MAX, one in eight each: nothing above -FLT_MAX
  kFamilies
};

float uniform01(uint64_t& s) { return static_cast<float>(splitmix64_next(s) >> 40) * 0x1p-24f; }

float about_normal(uint64_t& s) {
  float v = 0;
  for (int k = 0; k < 4; ++k) v += uniform01(s);
  return (v - 2.0f) * 1.7320508f;
}

float bf16_value(float v) { return f32_from_bf16(bf16_from_f32(v)); }

void fill_row(Tensor& x, int64_t i, int64_t V, RowFamily f, uint64_t& s) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  auto set = [&](int64_t j, float v) { x.set_f32(i * V + j, v); };
  const float scale = std::array<float, 4>{0.5f, 2.0f, 6.0f, 15.0f}[splitmix64_next(s) % 4];
  const float offset = about_normal(s) * 4.0f;
  for (int64_t j = 0; j < V; ++j) {
    const uint64_t r = splitmix64_next(s);
    const float moderate = std::ldexp(1.0f + uniform01(s), static_cast<int>(r % 13) - 6) * ((r >> 8) & 1 ? -1.0f : 1.0f);
    switch (f) {
      case kModerate: set(j, moderate); break;
      case kGlm: set(j, bf16_value(scale * about_normal(s) + offset)); break;
      case kNegInf: set(j, (r >> 12) % 8 == 0 ? -kInf : bf16_value(scale * about_normal(s) + offset)); break;
      case kAllNegInf: set(j, -kInf); break;
      case kDominant: set(j, (r >> 12) % 5 == 0 ? -kInf : offset - 120.0f - 64.0f * uniform01(s)); break;
      case kTies: set(j, static_cast<float>((r >> 12) % 3)); break;
      case kLarge: {
        const float big = std::ldexp(1.0f + uniform01(s), 100 + static_cast<int>((r >> 12) % 28));
        set(j, (r >> 20) % 4 == 0 ? moderate : ((r >> 8) & 1 ? -big : big));
        if ((r >> 24) % 16 == 0) set(j, (r >> 8) & 1 ? -std::numeric_limits<float>::max() : std::numeric_limits<float>::max());
        break;
      }
      case kSpecial: set(j, (r >> 12) % 16 == 0 ? ((r >> 20) & 1 ? NAN : kInf) : moderate); break;
      case kSmallInt: set(j, static_cast<float>(static_cast<int>((r >> 12) % 17) - 8)); break;
      case kFloor: set(j, (r >> 12) % 8 == 0 ? NAN : (r >> 12) % 8 == 1 ? -std::numeric_limits<float>::max() : -kInf); break;
      default: set(j, moderate);
    }
  }
  if (f == kDominant) set(static_cast<int64_t>(splitmix64_next(s) % static_cast<uint64_t>(V)), offset);
  if (f == kTies && splitmix64_next(s) % 2 == 0)
    for (int64_t j = 0; j < V; ++j) set(j, offset);
  if (f == kNegInf) set(static_cast<int64_t>(splitmix64_next(s) % static_cast<uint64_t>(V)), offset);  // one finite
}

int64_t row_argmax(const Tensor& x, int64_t i, int64_t V) {
  int64_t best = 0;
  for (int64_t j = 1; j < V; ++j)
    if (x.f32(i * V + j) > x.f32(i * V + best)) best = j;
  return best;
}

Tensor labels_tensor(const std::vector<int64_t>& v) {
  Tensor t(DType::kI64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.set_bits(static_cast<int64_t>(i), static_cast<uint64_t>(v[i]));
  return t;
}

rc::Gen<Case> generate(Direction dir) {
  return rc::gen::exec([dir] {
    Case c;
    c.op = kWho;
    c.direction = dir;
    const int64_t V = *vocab();
    int64_t N = *gen::rows();
    if (N > 1 && N * V > kMaxGeneratedElements) N = std::max<int64_t>(1, kMaxGeneratedElements / V);
    const int ignore_mode = *rc::gen::weightedElement<int>({{5, 0}, {1, 1}, {1, 2}, {1, 3}});
    int64_t ignore = kDefaultIgnoreIndex;
    if (ignore_mode == 1) c.attrs["ignore_index"] = kDefaultIgnoreIndex;
    if (ignore_mode == 2) c.attrs["ignore_index"] = ignore = *rc::gen::inRange<int64_t>(0, V);  // a class ignored
    if (ignore_mode == 3) c.attrs["ignore_index"] = ignore = -1;
    // One family for the whole case, or each row its own.
    const int family = *rc::gen::inRange(0, static_cast<int>(kFamilies) + 3);
    uint64_t s = *rc::gen::arbitrary<uint64_t>();
    Tensor x(DType::kFP32, {N, V});
    std::vector<int64_t> labels(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) {
      const auto f = static_cast<RowFamily>(family < kFamilies ? family : splitmix64_next(s) % kFamilies);
      fill_row(x, i, V, f, s);
      const uint64_t pick = splitmix64_next(s) % 6;
      int64_t label = static_cast<int64_t>(splitmix64_next(s) % static_cast<uint64_t>(V));
      if (pick == 0) label = 0;
      if (pick == 1) label = V - 1;
      if (pick == 2) label = row_argmax(x, i, V);
      if (pick == 3) label = ignore;
      labels[static_cast<size_t>(i)] = label;
    }
    c.inputs["logits"] = x;
    c.inputs["labels"] = labels_tensor(labels);
    if (dir == Direction::kBackward) c.inputs["g"] = *gen::tensor(DType::kFP32, {N}, *gen::value_family());
    return c;
  });
}

// --- classes ---------------------------------------------------------------------------------

struct RowFacts {
  bool neg_inf = false, pos_inf = false, nan = false, all_neg_inf = true, large = false, neg_max = false, above_neg_max = false;
  bool tie_max = false, dominant = false;
};

RowFacts row_facts(const Tensor& x, int64_t i, int64_t V) {
  RowFacts f;
  float m = -std::numeric_limits<float>::infinity();
  int64_t at_max = 0;
  for (int64_t j = 0; j < V; ++j) {
    const float v = x.f32(i * V + j);
    f.nan = f.nan || std::isnan(v);
    f.neg_inf = f.neg_inf || v == -std::numeric_limits<float>::infinity();
    f.pos_inf = f.pos_inf || v == std::numeric_limits<float>::infinity();
    f.all_neg_inf = f.all_neg_inf && v == -std::numeric_limits<float>::infinity();
    f.large = f.large || (std::isfinite(v) && std::fabs(v) >= 0x1p100f);
    f.neg_max = f.neg_max || v == -std::numeric_limits<float>::max();
    f.above_neg_max = f.above_neg_max || v > -std::numeric_limits<float>::max();
    if (v > m) {
      m = v;
      at_max = 1;
    } else if (v == m) {
      ++at_max;
    }
  }
  f.tie_max = at_max > 1 && std::isfinite(m);
  // Every other logit at least 110 below a unique finite max: its exp underflows to +0 in fp32
  // (e^-110 < 2^-158), so S == 1 exactly, L = +0 and the max's loss is -0.
  if (std::isfinite(m) && at_max == 1 && !f.nan) {
    f.dominant = true;
    for (int64_t j = 0; j < V && f.dominant; ++j) {
      const float v = x.f32(i * V + j);
      if (v != m && !(static_cast<double>(v) - m <= -110.0)) f.dominant = false;
    }
  }
  return f;
}

CaseClasses classes(const Case& c) {
  CaseClasses k;
  const Tensor& x = *c.input("logits");
  const Tensor& t = *c.input("labels");
  const int64_t N = x.dim(0), V = x.dim(1);
  const int64_t ignore = cross_entropy_ignore_index(c);
  const std::string kernel = "kernel=" + eager_kernel(V);
  k.shape_class = kernel;
  k.tags = {gen::rows_class(N), kernel};
  if (V == 1) k.tags.push_back("V=1");
  if (V == kGlmVocab) k.tags.push_back("V=151552");
  if (is_boundary(V)) k.tags.push_back("V=dispatch_boundary");
  if (eager_kernel(V) == "ilp" && V % 4 != 0 && N >= 2) k.tags.push_back("ilp_row_shift");
  // The fused kernels' paths: a segment without elements, a last 1024-step that not every lane
  // takes, the backward without on-chip segments (the forward has no such path), and the backward
  // whose rows are not 16-byte vectors (V % 4 != 0: its threads load the logits, no bulk copies).
  const int64_t S = fused_segment_span(V), last = V - (V - 1) / S * S;
  if ((V - 1) / S < kFusedSegments - 1) k.tags.push_back("fused:empty_segment");
  if (last % kFusedSegmentLanes != 0) k.tags.push_back("fused:partial_step");
  if (V > kFusedBufferedMaxV && c.direction == Direction::kBackward) k.tags.push_back("fused:unbuffered");
  if (V % 4 != 0 && c.direction == Direction::kBackward) k.tags.push_back("fused:scalar_rows");
  if (ignore >= 0 && ignore < V) k.tags.push_back("ignore_index=class");
  bool nonfinite = false, ignored_any = false;
  for (int64_t i = 0; i < N; ++i) {
    const RowFacts f = row_facts(x, i, V);
    const auto label = static_cast<int64_t>(t.bits(i));
    const bool ignored = label == ignore;
    ignored_any = ignored_any || ignored;
    nonfinite = nonfinite || f.nan || f.pos_inf || f.all_neg_inf;
    if (f.neg_inf) k.tags.push_back("logits:-inf");
    if (f.all_neg_inf) k.tags.push_back("row:all_-inf");
    if (f.nan) k.tags.push_back("logits:nan");
    if (f.pos_inf) k.tags.push_back("logits:+inf");
    if (f.large) k.tags.push_back("logits:large");
    if (f.tie_max) k.tags.push_back("row:tied_max");
    // NaN beside -FLT_MAX and nothing above it: where a running max that starts at -FLT_MAX rather
    // than -Inf must tell a true max of -FLT_MAX from -Inf (the fused backward's walk).
    if (f.nan && f.neg_max && !f.above_neg_max) k.tags.push_back("row:nan_and_-max_only");
    if (ignored) {
      k.tags.push_back("label=ignored");
      continue;
    }
    if (f.dominant && label == row_argmax(x, i, V)) k.tags.push_back("row:S==1_at_label");
    if (label == 0) k.tags.push_back("label=0");
    if (label == V - 1) k.tags.push_back("label=V-1");
    if (label == row_argmax(x, i, V)) k.tags.push_back("label=argmax");
  }
  if (const Tensor* g = c.input("g"))
    for (const std::string& v : gen::value_tags(*g)) k.tags.push_back("g:" + v);
  std::sort(k.tags.begin(), k.tags.end());
  k.tags.erase(std::unique(k.tags.begin(), k.tags.end()), k.tags.end());
  k.value_class = std::string(nonfinite ? "nonfinite" : "finite") + (ignored_any ? ",ignored" : "");
  return k;
}

std::vector<std::string> required_tags(Direction dir) {
  std::vector<std::string> tags = {"rows=0", "rows=1..16", "rows=large", "kernel=warp", "kernel=reg", "kernel=smem",
                                   "kernel=ilp", "V=1", "V=151552", "V=dispatch_boundary", "ilp_row_shift",
                                   "ignore_index=class", "logits:-inf", "row:all_-inf", "logits:nan", "logits:+inf",
                                   "logits:large", "row:tied_max", "row:S==1_at_label", "label=ignored", "label=0",
                                   "label=V-1", "label=argmax", "fused:empty_segment", "fused:partial_step",
                                   "row:nan_and_-max_only"};
  if (dir == Direction::kBackward) tags.push_back("fused:unbuffered");
  if (dir == Direction::kBackward) tags.push_back("fused:scalar_rows");
  if (dir == Direction::kBackward)
    for (const char* v : {"nan", "inf", "-0", "subnormal"}) tags.push_back(std::string("g:") + v);
  return tags;
}

// --- error inputs --------------------------------------------------------------------------------

constexpr int64_t kErrN = 3, kErrV = 5;

Case small_case(Direction dir) {
  Case c;
  c.op = kWho;
  c.direction = dir;
  c.inputs["logits"] = Tensor(DType::kFP32, {kErrN, kErrV});
  c.inputs["labels"] = labels_tensor({0, 4, kDefaultIgnoreIndex});
  if (dir == Direction::kBackward) c.inputs["g"] = Tensor(DType::kFP32, {kErrN});
  return c;
}

std::vector<ErrorInput> error_inputs(Direction dir) {
  std::vector<ErrorInput> out;
  auto add = [&](std::string name, auto edit, std::string error_class, std::string field) {
    Case c = small_case(dir);
    edit(c);
    out.push_back({std::move(name), std::move(c), std::move(error_class), std::move(field), {}});
  };
  add("label_equal_to_V", [](Case& c) { c.inputs["labels"] = labels_tensor({0, kErrV, 1}); }, "shape", "labels");
  add("label_negative_not_ignored", [](Case& c) { c.inputs["labels"] = labels_tensor({0, 1, -1}); }, "shape", "labels");
  add("label_default_ignore_with_other_ignore_index",
      [](Case& c) { c.attrs["ignore_index"] = int64_t{2}; }, "shape", "labels");
  add("logits_bf16", [](Case& c) { c.inputs["logits"] = Tensor(DType::kBF16, {kErrN, kErrV}); }, "dtype", "logits");
  add("logits_rank1", [](Case& c) { c.inputs["logits"] = Tensor(DType::kFP32, {kErrN * kErrV}); }, "shape", "logits");
  add("logits_no_classes", [](Case& c) { c.inputs["logits"] = Tensor(DType::kFP32, {kErrN, 0}); }, "shape", "logits");
  add("labels_i32", [](Case& c) { c.inputs["labels"] = Tensor(DType::kI32, {kErrN}); }, "dtype", "labels");
  add("labels_more_rows", [](Case& c) { c.inputs["labels"] = labels_tensor({0, 1, 2, 3}); }, "shape", "labels");
  add("ignore_index_float", [](Case& c) { c.attrs["ignore_index"] = -100.0; }, "attr", "ignore_index");
  if (dir == Direction::kBackward) {
    add("g_bf16", [](Case& c) { c.inputs["g"] = Tensor(DType::kBF16, {kErrN}); }, "dtype", "g");
    add("g_wrong_shape", [](Case& c) { c.inputs["g"] = Tensor(DType::kFP32, {kErrN, 1}); }, "shape", "g");
    add("g_missing", [](Case& c) { c.inputs.erase("g"); }, "shape", "g");
  }
  return out;
}

// --- reference inputs ----------------------------------------------------------------------------

// GLM-like logits: bf16 values of 2.5 * (about normal) + a row offset, the last 7 columns of every
// 16th row -Inf (padded vocabulary); labels random with every 97th row ignored; g = 1/4096 (the
// per-token loss of a 4096-token batch) on even rows, small random values on odd ones.
Case glm_case(Direction dir, int64_t N, int64_t V, uint64_t seed) {
  Case c;
  c.op = kWho;
  c.direction = dir;
  Tensor x(DType::kFP32, {N, V});
  std::vector<int64_t> labels(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    uint64_t s = splitmix64_mix(seed * 0x100000001b3ull + static_cast<uint64_t>(i));
    const float offset = about_normal(s);
    for (int64_t j = 0; j < V; ++j) x.set_f32(i * V + j, bf16_value(2.5f * about_normal(s) + offset));
    if (i % 16 == 0)
      for (int64_t j = std::max<int64_t>(0, V - 7); j < V - 1; ++j) x.set_f32(i * V + j, -std::numeric_limits<float>::infinity());
    labels[static_cast<size_t>(i)] = i % 97 == 1 ? kDefaultIgnoreIndex : static_cast<int64_t>(splitmix64_next(s) % static_cast<uint64_t>(V));
  }
  c.inputs["logits"] = std::move(x);
  c.inputs["labels"] = labels_tensor(labels);
  if (dir == Direction::kBackward) {
    Tensor g(DType::kFP32, {N});
    uint64_t s = seed;
    for (int64_t i = 0; i < N; ++i) g.set_f32(i, i % 2 == 0 ? 1.0f / 4096 : 1e-3f * about_normal(s));
    c.inputs["g"] = g;
  }
  return c;
}

// Rows of -Inf, NaN and -FLT_MAX at V 16384, where each of a fused segment's 1024 lanes walks two
// elements (j and j + 1024 of its segment): lanes holding NaN beside -FLT_MAX in either order (true
// max -FLT_MAX), NaN beside -Inf only (true max -Inf), -FLT_MAX alone and twice, lanes of one thread
// (2q, 2q + 1) with different ones, the same beside a segment of moderate values, the generator's
// kFloor family, and ordinary rows. The running max of the fused backward's walk starts at -FLT_MAX
// and must give each lane's true max back.
Case floor_lanes_case(Direction dir) {
  constexpr int64_t N = 12, V = 16384, S = fused_segment_span(V);
  constexpr float kInf = std::numeric_limits<float>::infinity(), kMax = std::numeric_limits<float>::max();
  static_assert(S == 2 * kFusedSegmentLanes);
  Case c;
  c.op = kWho;
  c.direction = dir;
  Tensor x(DType::kFP32, {N, V});
  for (int64_t i = 0; i < N * V; ++i) x.set_f32(i, -kInf);
  // Element `step` of lane `lane` in segment `seg`.
  auto at = [&](int64_t row, int64_t seg, int64_t lane, int64_t step, float v) {
    x.set_f32(row * V + seg * S + step * kFusedSegmentLanes + lane, v);
  };
  at(0, 0, 5, 0, NAN), at(0, 0, 5, 1, -kMax);  // NaN, then -FLT_MAX
  at(1, 2, 5, 0, NAN);                          // NaN beside -Inf
  at(2, 1, 5, 0, -kMax), at(2, 1, 5, 1, -kMax); // -FLT_MAX twice
  at(3, 7, 6, 0, -kMax), at(3, 7, 6, 1, NAN);   // -FLT_MAX, then NaN
  at(4, 3, 4, 1, NAN), at(4, 3, 5, 0, -kMax);   // one thread's two lanes: NaN beside -Inf; -FLT_MAX
  at(5, 0, 9, 1, NAN), at(5, 0, 8, 0, -kMax), at(5, 0, 8, 1, NAN);
  uint64_t s = 0x5eed;
  for (int64_t row : {6, 7}) {  // row 5's lanes beside a segment of moderate values, before and after them
    for (int64_t j = 0; j < S; ++j) x.set_f32(row * V + (row == 6 ? 4 : 0) * S + j, about_normal(s));
    at(row, row == 6 ? 0 : 4, 9, 1, NAN), at(row, row == 6 ? 0 : 4, 8, 0, -kMax), at(row, row == 6 ? 0 : 4, 8, 1, NAN);
  }
  for (int64_t row : {8, 9}) fill_row(x, row, V, kFloor, s);
  for (int64_t row : {10, 11}) fill_row(x, row, V, kGlm, s);
  std::vector<int64_t> labels(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) labels[static_cast<size_t>(i)] = static_cast<int64_t>(splitmix64_next(s) % V);
  labels[3] = kDefaultIgnoreIndex;
  c.inputs["logits"] = std::move(x);
  c.inputs["labels"] = labels_tensor(labels);
  if (dir == Direction::kBackward) {
    Tensor g(DType::kFP32, {N});
    for (int64_t i = 0; i < N; ++i) g.set_f32(i, 1.0f / 4096);
    c.inputs["g"] = g;
  }
  return c;
}

std::vector<ReferenceInput> reference_inputs(Direction dir) {
  struct Shape2 {
    int64_t N, V;
    bool bench_only;
  };
  // The benchmark (8192 tokens of GLM-4.5's vocabulary), and for GPU tests the same V at 64
  // rows, 32001 (the ILP kernel with every row shift) and 12252 (Smem) at a few hundred rows.
  // 204803 (past kFusedBufferedMaxV) takes the fused backward's path without on-chip segments.
  constexpr Shape2 kShapes[] = {{8192, kGlmVocab, true}, {64, kGlmVocab, false}, {257, 32001, false},
                                {300, 12252, false}, {9, kFusedBufferedMaxV + 3, false}};
  std::vector<ReferenceInput> out;
  for (const Shape2& s : kShapes)
    out.push_back({"rows" + std::to_string(s.N) + "_V" + std::to_string(s.V), {},
                   [s, dir] { return glm_case(dir, s.N, s.V, 71); }, s.bench_only});
  out.push_back({"rows12_V16384_floor_lanes", {}, [dir] { return floor_lanes_case(dir); }});
  return out;
}

// --- shrinking -------------------------------------------------------------------------------

Case take(const Case& c, int64_t r0, int64_t n, int64_t V) {
  Case out = c;
  const Tensor& x = *c.input("logits");
  const Tensor& t = *c.input("labels");
  const int64_t V0 = x.dim(1);
  const int64_t ignore = cross_entropy_ignore_index(c);
  Tensor w(DType::kFP32, {n, V});
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < V; ++j) w.set_bits(r * V + j, x.bits((r0 + r) * V0 + j));
    const auto label = static_cast<int64_t>(t.bits(r0 + r));
    labels[static_cast<size_t>(r)] = label >= 0 && label < V ? label : ignore;  // a label cut away is ignored
  }
  out.inputs["logits"] = w;
  out.inputs["labels"] = labels_tensor(labels);
  if (const Tensor* g = c.input("g")) {
    Tensor gw(DType::kFP32, {n});
    for (int64_t r = 0; r < n; ++r) gw.set_bits(r, g->bits(r0 + r));
    out.inputs["g"] = gw;
  }
  return out;
}

std::vector<Case> shrink_shape(const Case& c) {
  constexpr int64_t kMaxSingles = 8;
  const Tensor& x = *c.input("logits");
  const int64_t N = x.dim(0), V = x.dim(1);
  std::vector<Case> out;
  if (N > 1) {
    for (int64_t r = 0; r < std::min(N, kMaxSingles); ++r) out.push_back(take(c, r, 1, V));
    out.push_back(take(c, 0, N / 2, V));
    out.push_back(take(c, N / 2, N - N / 2, V));
  }
  if (V > 1) out.push_back(take(c, 0, N, V / 2));  // another kernel, perhaps: the shrinker keeps it only if it still fails
  return out;
}

// --- oracle ------------------------------------------------------------------------------------

// The exact loss -log softmax(x)_t and gradient g (softmax(x) - onehot(t)) in fp64: with d_j = x_j - m
// (m the max) every exp(d_j) is in (0, 1] and the sum of the others is a sum of positive terms, so
// loss = log1p(others / e_t) (others <= e_t) or log(S) - d_t, and 1 - p_t = others / S, carry no
// cancellation: fp64 is within a few fp64 ulps of the true value without MPFR. Rows with a NaN,
// +Inf or only -Inf have no value (NaN); ignored rows are 0.
std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const Tensor& x = *c.input("logits");
  const Tensor& t = *c.input("labels");
  const int64_t N = x.dim(0), V = x.dim(1);
  const int64_t ignore = cross_entropy_ignore_index(c);
  const bool bwd = c.direction == Direction::kBackward;
  std::vector<double> loss(static_cast<size_t>(N)), grad(bwd ? static_cast<size_t>(N * V) : 0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t i = 0; i < N; ++i) {
    const auto label = static_cast<int64_t>(t.bits(i));
    Eigen::ArrayXd row(V);
    for (int64_t j = 0; j < V; ++j) row(j) = x.f64(i * V + j);
    const double g = bwd ? c.input("g")->f64(i) : 1.0;
    auto put = [&](double l, const Eigen::ArrayXd& d) {
      loss[static_cast<size_t>(i)] = l;
      if (bwd)
        for (int64_t j = 0; j < V; ++j) grad[static_cast<size_t>(i * V + j)] = d(j);
    };
    if (label == ignore) {
      put(0.0, Eigen::ArrayXd::Zero(V));
      continue;
    }
    const double m = row.maxCoeff();
    if (row.isNaN().any() || std::isinf(m)) {
      put(nan, Eigen::ArrayXd::Constant(V, nan));
      continue;
    }
    const Eigen::ArrayXd e = (row - m).exp();
    const double e_t = e(label);
    const double others = e.sum() - e_t;  // positive terms: fine in fp64
    const double S = e_t + others;
    const double l = others <= e_t ? std::log1p(others / e_t) : std::log(S) - (row(label) - m);
    Eigen::ArrayXd d = g * (e / S);
    d(label) = -g * (others / S);
    put(l, d);
  }
  if (bwd) return {{"d_logits", grad}};
  return {{"loss", loss}};
}

}  // namespace

int64_t cross_entropy_ignore_index(const Case& c) {
  const auto it = c.attrs.find("ignore_index");
  if (it == c.attrs.end()) return kDefaultIgnoreIndex;
  const int64_t* v = std::get_if<int64_t>(&it->second);
  if (!v) throw RejectError("attr", std::string(kWho) + ": ignore_index must be an int");
  return *v;
}

OpInfo cross_entropy() {
  OpInfo op;
  op.name = kWho;
  op.doc = "F.cross_entropy(logits, labels, reduction='none', ignore_index) in fp32, and its gradient for an upstream g";
  // A row's loss and gradient depend on its position where the eager ILP kernel runs with V % 4 != 0:
  // the row's misalignment (row * V) mod 4 sets the threads' order, so a row alone may differ.
  op.inputs[Direction::kForward] = {{"logits", "[N, V] fp32 logits (contiguous, 16-byte-aligned base)", false, true},
                                    {"labels", "[N] i64 target class per row, or ignore_index", false, true}};
  op.inputs[Direction::kBackward] = {{"logits", "[N, V] fp32 logits (contiguous, 16-byte-aligned base)", false, true},
                                     {"labels", "[N] i64 target class per row, or ignore_index", false, true},
                                     {"g", "[N] fp32 gradient of the per-row loss", false, true}};
  op.outputs[Direction::kForward] = {{"loss", "[N] fp32 per-row loss; +0 where ignored", false, true, true}};
  op.outputs[Direction::kBackward] = {{"d_logits", "[N, V] fp32 gradient of the logits", false, true, true}};
  op.attrs = {{"ignore_index", AttrType::kInt, "label value whose row is ignored (default -100)"}};
  op.contracts = {
      {"megatron_eager",
       "eager F.cross_entropy on CUDA: PyTorch's softmax kernel and summation order for the V, (x - m) - logf(S), "
       "loss -logp_t; backward fma(-expf(logp), G, gO); libdevice expf/logf",
       kEagerFrom},
      {"fused",
       "one pass, a row in 8 contiguous segments of 1024 lanes with an online max and sum, combined by halving trees "
       "(each segment's 1024 lanes, then the 8 segments); then eager's formulas",
       kFusedFrom}};
  op.validate = validate;
  op.generate = generate;
  op.required_tags = required_tags;
  op.classes = classes;
  op.error_inputs = error_inputs;
  op.reference_inputs = reference_inputs;
  op.shrink_shape = shrink_shape;
  op.oracle = oracle;
  return op;
}

}  // namespace bitparity::ops
