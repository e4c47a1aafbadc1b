// The registry entries of the SwiGLU family: inputs, contracts, the case generator with its edge
// classes, shape shrinking, signature classes and the oracle.
#include <cmath>
#include <vector>

#include <mpfr.h>
#include <rapidcheck.h>

#include "core/gen.h"
#include "reference/register.h"
#include "reference/swiglu.h"

namespace bitparity::ref {
namespace {

using swiglu::ClampGate;

constexpr int64_t kGlmExpertF = 1408;    // GLM-4.5-Air expert FFN size
constexpr int64_t kMaxRowsForWideF = 32; // keeps generated cases small when F is wide
constexpr int kOracleBits = 160;         // MPFR precision of the oracle's row sums
constexpr int64_t kMinElements = 4096, kElementsPerSize = 1024;  // elements of y by RapidCheck size

const char* const kMegatronFrom =
    "Megatron-LM eager functions (#5335 swiglu_eager/swiglu_back_eager/weighted_swiglu_back_eager; clamped "
    "functions of Megatron main, #5940); eager PyTorch 2.11 on CUDA 13.0, sm_90 (shared/probes)";
const char* const kPaddleFrom =
    "PaddleFleet paddlefleet_ops fuse_swiglu_scale.cu (version with input checks) and fused_swiglu_scale.py "
    "(#1078: clamp when not None and > 0)";

// --- generation ------------------------------------------------------------------------------

rc::Gen<int64_t> hidden_F() {
  return rc::gen::weightedOneOf<int64_t>({
      {2, rc::gen::inRange<int64_t>(1, 17)},                                                  // small
      {4, rc::gen::map(rc::gen::inRange<int64_t>(1, 33), [](int64_t k) { return 8 * k; })},  // vector multiples
      {1, rc::gen::just(kGlmExpertF)},
      {1, rc::gen::map(rc::gen::pair(rc::gen::inRange<int64_t>(1, 17), rc::gen::inRange<int64_t>(1, 8)),
                       [](const std::pair<int64_t, int64_t>& p) { return 8 * p.first + p.second; })},  // not a multiple
  });
}

rc::Gen<DType> activation_dtype() {
  return rc::gen::weightedElement<DType>({{6, DType::kBF16}, {2, DType::kFP32}, {1, DType::kFP16}});
}

rc::Gen<DType> scale_dtype() {
  return rc::gen::weightedElement<DType>({{4, DType::kFP32}, {3, DType::kBF16}, {1, DType::kFP16}});
}

void set_clamp(Case& c, std::optional<double> clamp) {
  if (clamp) c.attrs["clamp"] = *clamp;
}

rc::Gen<Case> generate_swiglu_family(const std::string& op, Direction dir) {
  const bool scaled = op == "swiglu_scale";
  return rc::gen::exec([op, dir, scaled] {
    Case c;
    c.op = op;
    c.direction = dir;
    const DType act = *activation_dtype();
    const int64_t F = *hidden_F();
    int64_t rows = *gen::rows();
    if (F > 64 && rows > kMaxRowsForWideF) rows = kMaxRowsForWideF;
    // RapidCheck's size (0..100) bounds the elements of y, so small sizes give small cases.
    const int64_t max_elements = kMinElements + int64_t{*rc::gen::withSize([](int size) { return rc::gen::just(size); })} * kElementsPerSize;
    if (rows > 1 && rows * 2 * F > max_elements) rows = std::max<int64_t>(1, max_elements / (2 * F));
    set_clamp(c, *gen::clamp());
    c.inputs["y"] = *gen::tensor(act, {rows, 2 * F}, *gen::value_family());
    if (scaled) {
      const bool two_d = *rc::gen::arbitrary<bool>();
      const Shape shape = two_d ? Shape{rows, 1} : Shape{rows};
      c.inputs["scale"] = *gen::tensor(*scale_dtype(), shape, *gen::value_family());
    } else if (*rc::gen::weightedElement<bool>({{3, false}, {1, true}})) {
      c.inputs["bias"] = *gen::tensor(act, {2 * F}, *gen::value_family());
    }
    if (dir == Direction::kBackward) c.inputs["g"] = *gen::tensor(act, {rows, F}, *gen::value_family());
    return c;
  });
}

// --- shrinking -------------------------------------------------------------------------------

// The case restricted to rows [r0, r0 + nr) and columns [j0, j0 + nf) of F (in both halves of y).
Case slice(const Case& c, int64_t r0, int64_t nr, int64_t j0, int64_t nf) {
  const int64_t F = c.input("y")->dim(1) / 2;
  Case out = c;
  auto copy_rows_cols = [&](const Tensor& t, bool two_halves) {
    const int64_t width = t.rank() == 1 ? 1 : t.dim(1);
    const bool per_row = t.rank() >= 1;
    Shape shape = t.shape();
    shape[0] = nr;
    if (t.rank() == 2 && width != 1) shape[1] = two_halves ? 2 * nf : nf;
    Tensor s(t.dtype(), shape);
    const int64_t out_w = t.rank() == 2 ? shape[1] : 1;
    for (int64_t r = 0; r < nr && per_row; ++r)
      for (int64_t k = 0; k < out_w; ++k) {
        int64_t src_col = k;
        if (t.rank() == 2 && width != 1) src_col = two_halves ? (k < nf ? j0 + k : F + j0 + k - nf) : j0 + k;
        s.set_bits(r * out_w + k, t.bits((r0 + r) * width + src_col));
      }
    return s;
  };
  out.inputs["y"] = copy_rows_cols(*c.input("y"), true);
  if (const Tensor* g = c.input("g")) out.inputs["g"] = copy_rows_cols(*g, false);
  if (const Tensor* s = c.input("scale")) out.inputs["scale"] = copy_rows_cols(*s, false);
  if (const Tensor* b = c.input("bias")) {
    Tensor nb(b->dtype(), {2 * nf});
    for (int64_t k = 0; k < nf; ++k) {
      nb.set_bits(k, b->bits(j0 + k));
      nb.set_bits(nf + k, b->bits(F + j0 + k));
    }
    out.inputs["bias"] = nb;
  }
  return out;
}

// Candidates from most to least aggressive: drop the bias, a 2-D scale as 1-D (the simpler
// form, so that findings that do not depend on the rank meet under one signature), single rows,
// halves of the rows, then column windows: halves (rounded to the 8-element vector so that
// contracts with a vector width still accept them), then narrow windows.
std::vector<Case> shrink_swiglu_family(const Case& c) {
  constexpr int64_t kMaxSingleRows = 8, kMaxWindows = 16, kVector = 8;
  const Tensor& y = *c.input("y");
  const int64_t rows = y.dim(0), F = y.dim(1) / 2;
  std::vector<Case> out;
  if (c.inputs.count("bias")) {
    Case nb = c;
    nb.inputs.erase("bias");
    out.push_back(nb);
  }
  if (const Tensor* s = c.input("scale"); s && s->rank() == 2) {
    Case flat = c;
    flat.inputs["scale"] = s->reshaped({rows});
    out.push_back(flat);
  }
  if (rows > 1) {
    for (int64_t r = 0; r < std::min(rows, kMaxSingleRows); ++r) out.push_back(slice(c, r, 1, 0, F));
    out.push_back(slice(c, 0, rows / 2, 0, F));
    out.push_back(slice(c, rows / 2, rows - rows / 2, 0, F));
  }
  auto add_windows = [&](int64_t width, int64_t max_windows) {
    if (width <= 0 || width >= F) return;
    for (int64_t w = 0; w < std::min((F + width - 1) / width, max_windows); ++w) {
      const int64_t start = std::min(w * width, F - width);
      out.push_back(slice(c, 0, rows, start, width));
    }
  };
  add_windows(F / 2, 3);
  add_windows(F / 2 / kVector * kVector, 3);
  for (int64_t width : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}, int64_t{16}}) add_windows(width, kMaxWindows);
  return out;
}

// --- classes ---------------------------------------------------------------------------------

std::string coarse_clamp_class(const Case& c) {
  const std::string cls = gen::clamp_class(c.float_attr("clamp"));
  if (cls == "clamp=0" || cls == "clamp=-0" || cls == "clamp=negative") return "clamp<=0";
  if (cls == "clamp=tiny" || cls == "clamp=normal") return "clamp>0";
  return cls;
}

CaseClasses swiglu_family_classes(const Case& c) {
  CaseClasses k;
  const Tensor& y = *c.input("y");
  // The signature keeps what separates distinct behaviours: the scale's rank (the d_scale shape
  // rule), the bias variant, the clamp's class and whether y holds a NaN (Paddle turns a NaN gate
  // into the clamp value). Finer tags (Inf, -0, subnormals) stay in `tags`: they would split one
  // divergence into many entries.
  if (const Tensor* s = c.input("scale")) k.shape_class = s->rank() == 1 ? "scale=1d" : "scale=2d";
  else k.shape_class = c.input("bias") ? "bias" : "no_bias";
  bool nan = false;
  for (const std::string& v : gen::value_tags(y)) nan = nan || v == "nan";
  k.value_class = coarse_clamp_class(c) + (nan ? ",nan" : "");
  k.tags = {gen::rows_class(y.dim(0)), gen::clamp_class(c.float_attr("clamp")),
            std::string("y=") + std::string(dtype_name(y.dtype()))};
  const int64_t F = y.dim(1) / 2;
  k.tags.push_back(F == kGlmExpertF ? "F=1408" : F % 8 != 0 ? "F%8!=0" : F <= 16 ? "F=small" : "F=vector-multiple");
  if (!k.shape_class.empty()) k.tags.push_back(k.shape_class);
  for (const auto& [name, t] : c.inputs)
    for (const std::string& v : gen::value_tags(t)) k.tags.push_back(name + ":" + v);
  return k;
}

// --- oracle: the exact values under Megatron's semantics (clamp when > 0, NaN propagates) ------

struct Exact {
  double a, b, mask_a, mask_b;
};
Exact exact_halves(double a, double b, std::optional<double> clamp) {
  if (!clamp) return {a, b, 1, 1};
  const double c = *clamp;
  const double mask_a = a <= c ? 1 : 0, mask_b = (b >= -c && b <= c) ? 1 : 0;
  return {std::isnan(a) ? a : std::min(a, c), std::isnan(b) ? b : std::clamp(b, -c, c), mask_a, mask_b};
}

double sigmoid64(double x) { return 1.0 / (1.0 + std::exp(-x)); }

std::map<std::string, std::vector<double>> swiglu_family_oracle(const Case& c) {
  const Tensor& y = *c.input("y");
  const int64_t rows = y.dim(0), F = y.dim(1) / 2;
  const Tensor* scale = c.input("scale");
  const Tensor* bias = c.input("bias");
  const std::optional<double> clamp = swiglu::active_clamp(c, ClampGate::kPositive);
  auto in = [&](int64_t r, int64_t col) { return y.f64(r * 2 * F + col) + (bias ? bias->f64(col) : 0.0); };
  std::map<std::string, std::vector<double>> truth;
  if (c.direction == Direction::kForward) {
    auto& out = truth["out"];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < F; ++j) {
        const Exact e = exact_halves(in(r, j), in(r, F + j), clamp);
        out.push_back(e.a * sigmoid64(e.a) * e.b * (scale ? scale->f64(r) : 1.0));
      }
    return truth;
  }
  const Tensor& g = *c.input("g");
  auto& d_y = truth["d_y"];
  d_y.assign(static_cast<size_t>(rows * 2 * F), 0.0);
  auto& d_scale = truth["d_scale"];
  mpfr_t sum, term;
  mpfr_inits2(kOracleBits, sum, term, static_cast<mpfr_ptr>(nullptr));
  for (int64_t r = 0; r < rows; ++r) {
    const double s = scale ? scale->f64(r) : 1.0;
    mpfr_set_zero(sum, 1);
    for (int64_t j = 0; j < F; ++j) {
      const Exact e = exact_halves(in(r, j), in(r, F + j), clamp);
      const double gj = g.f64(r * F + j), sig = sigmoid64(e.a);
      d_y[static_cast<size_t>(r * 2 * F + j)] = gj * s * sig * (1 + e.a * (1 - sig)) * e.b * e.mask_a;
      d_y[static_cast<size_t>(r * 2 * F + F + j)] = gj * s * e.a * sig * e.mask_b;
      mpfr_set_d(term, e.a * sig, MPFR_RNDN);
      mpfr_mul_d(term, term, e.b, MPFR_RNDN);
      mpfr_mul_d(term, term, gj, MPFR_RNDN);
      mpfr_add(sum, sum, term, MPFR_RNDN);
    }
    if (scale) d_scale.push_back(mpfr_get_d(sum, MPFR_RNDN));
  }
  mpfr_clears(sum, term, static_cast<mpfr_ptr>(nullptr));
  if (!scale) truth.erase("d_scale");
  return truth;
}

OpInfo swiglu_info() {
  OpInfo op;
  op.name = "swiglu";
  op.doc = "SwiGLU silu(a) * b of y = [a | b] (Megatron SwiGLUFunction, BiasSwiGLUFunction), optional clamp";
  op.inputs[Direction::kForward] = {{"y", "[rows, 2F] activations", false, true}, {"bias", "[2F], added to y first", true}};
  op.inputs[Direction::kBackward] = {{"y", "[rows, 2F] activations", false, true},
                                     {"bias", "[2F], added to y first", true},
                                     {"g", "[rows, F] gradient of out", false, true}};
  op.outputs[Direction::kForward] = {{"out", "[rows, F]"}};
  op.outputs[Direction::kBackward] = {{"d_y", "[rows, 2F] gradient of y (and, before its row sum, of bias)"}};
  op.attrs = {{"clamp", AttrType::kFloat, "clamp value: a <= c, -c <= b <= c; absent means no clamp"}};
  op.contracts = {
      {"megatron_eager", "eager ops, each rounded to the activation dtype; clamp when present and > 0", kMegatronFrom},
      {"megatron_unfused", "megatron_eager's arithmetic with the unfused glu() clamp gate: clamp whenever present",
       kMegatronFrom}};
  op.generate = [](Direction d) { return generate_swiglu_family("swiglu", d); };
  op.shrink_shape = shrink_swiglu_family;
  op.classes = swiglu_family_classes;
  op.oracle = swiglu_family_oracle;
  return op;
}

OpInfo swiglu_scale_info() {
  OpInfo op;
  op.name = "swiglu_scale";
  op.doc = "SwiGLU scaled per row (Megatron WeightedSwiGLUFunction, PaddleFleet fused_swiglu_scale), optional clamp";
  op.inputs[Direction::kForward] = {{"y", "[rows, 2F] activations", false, true}, {"scale", "[rows] or [rows, 1] per-row scale", false, true}};
  op.inputs[Direction::kBackward] = {{"y", "[rows, 2F] activations", false, true},
                                     {"scale", "[rows] or [rows, 1] per-row scale", false, true},
                                     {"g", "[rows, F] gradient of out", false, true}};
  op.outputs[Direction::kForward] = {{"out", "[rows, F]"}};
  op.outputs[Direction::kBackward] = {{"d_y", "[rows, 2F]"}, {"d_scale", "scale's shape: [rows] or [rows, 1]"}};
  op.attrs = {{"clamp", AttrType::kFloat, "clamp value: a <= c, -c <= b <= c; absent means no clamp"}};
  op.contracts = {
      {"megatron_eager",
       "bf(f32(bf(swiglu)) * w) (double rounding); d_scale = rule-7 row sum of swiglu * g.to(w); clamp when present "
       "and > 0",
       kMegatronFrom},
      {"megatron_unfused", "megatron_eager's arithmetic with the unfused glu() clamp gate: clamp whenever present",
       kMegatronFrom},
      {"paddle_fused",
       "x*sigmoid(x) silu, single rounding of the scaled output, NaN gate/value -> clamp value, its own d_scale "
       "order; bf16/fp32 only, F a multiple of the 16-byte vector; d_scale rank follows scale",
       kPaddleFrom},
      {"paddle_fused_shipped", "paddle_fused, but the clamp kernels return d_scale as [rows, 1] for any scale rank",
       kPaddleFrom}};
  op.generate = [](Direction d) { return generate_swiglu_family("swiglu_scale", d); };
  op.shrink_shape = shrink_swiglu_family;
  op.classes = swiglu_family_classes;
  op.oracle = swiglu_family_oracle;
  return op;
}

}  // namespace

void register_reference(Registry& registry) {
  registry.add_backend({"ref", "the CPU reference: each contract's exact sequence of roundings and reduction orders", nullptr});
  registry.add_op(swiglu_info());
  registry.add_op(swiglu_scale_info());
  registry.add_impl("swiglu", "ref", "megatron_eager", [](const Case& c) { return swiglu_megatron(c, ClampGate::kPositive); });
  registry.add_impl("swiglu", "ref", "megatron_unfused", [](const Case& c) { return swiglu_megatron(c, ClampGate::kPresent); });
  registry.add_impl("swiglu_scale", "ref", "megatron_eager",
                    [](const Case& c) { return swiglu_scale_megatron(c, ClampGate::kPositive); });
  registry.add_impl("swiglu_scale", "ref", "megatron_unfused",
                    [](const Case& c) { return swiglu_scale_megatron(c, ClampGate::kPresent); });
  registry.add_impl("swiglu_scale", "ref", "paddle_fused", [](const Case& c) { return swiglu_scale_paddle(c, false); });
  registry.add_impl("swiglu_scale", "ref", "paddle_fused_shipped",
                    [](const Case& c) { return swiglu_scale_paddle(c, true); });
}

}  // namespace bitparity::ref
