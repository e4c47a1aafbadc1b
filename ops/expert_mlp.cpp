// expert_mlp: one expert's MLP, fc1 -> weighted SwiGLU -> fc2 (spec OP-10; OP-4/5/6 for the
// activation). Forward: h = x @ w1 ([M, 2F]), act = swiglu_scale(h, probs) (swiglu(h) without
// probs), out = act @ w2. Backward from d_out: d_act = d_out @ w2^T, d_w2 = act^T @ d_out, the
// activation's backward gives d_h and d_probs, d_x = d_h @ w1^T, d_w1 = x^T @ d_h. Each contract
// names the gemm contract of its five GEMMs and the activation contract; both directions pad
// 0 < M < 17 tokens to 32 with zero rows and zero probs first (Megatron's rule) and slice back.
#include "ops/expert_mlp.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Dense>
#include <rapidcheck.h>

#include "core/error.h"
#include "core/gen.h"
#include "core/random.h"
#include "core/rows.h"
#include "ops/gemm.h"

namespace bitparity::ops {
namespace {

constexpr const char* kOp = "expert_mlp";
constexpr const char* kClampAttr = "clamp";

// What an expert_mlp contract is made of.
struct Composition {
  const char* contract;
  const char* gemm_contract;        // gemm's contract for fc1, fc2 and the three backward GEMMs
  const char* activation_contract;  // swiglu_scale's (with probs) and swiglu's (without)
  const char* doc;
  const char* derived_from;
  bool bounded;  // judged by expert_mlp_chain_bound (its GEMMs' order is unknown), not bit for bit
};

const Composition kCompositions[] = {
    {"fixed_order", "fixed_order", "megatron_eager",
     "Megatron's expert MLP (padding 0 < M < 17 to 32, its eager weighted SwiGLU: swiglu_scale megatron_eager, "
     "swiglu megatron_eager without probs) with every GEMM in gemm's fixed_order (the tensor core's MMA step, "
     "K-chunks of 16 in ascending k): every rounding written down, so bit-exact on every backend",
     "Megatron-LM's SequentialMLP with the bit-exact small-M padding (PaddleFleet #1627/#1903) and "
     "WeightedSwiGLUFunction; cuBLAS's GEMMs replaced by bitparity's fixed-order tensor-core GEMM",
     false},
    {"megatron_eager", "cublas", "megatron_eager",
     "Megatron's expert MLP as it runs: padding 0 < M < 17 to 32, every GEMM through cuBLASLt (gemm's cublas: "
     "NVIDIA's order, chosen anew for each shape), its eager weighted SwiGLU between them; judged within the "
     "chain bound of the unrounded MLP, not bit for bit",
     "Megatron-LM's SequentialMLP (torch.matmul GEMMs, PyTorch 2.11 default cuBLAS settings) with the small-M "
     "padding (PaddleFleet #1627/#1903) and WeightedSwiGLUFunction",
     true},
};

// --- validate ----------------------------------------------------------------------------------

const Tensor& required_bf16_matrix(const Case& c, const std::string& name, const char* form) {
  const Tensor* t = c.input(name);
  if (!t) throw RejectError("shape", std::string(kOp) + ": missing input " + name);
  if (t->dtype() != DType::kBF16)
    throw RejectError("dtype", std::string(kOp) + ": " + name + " must be bf16; got " + std::string(dtype_name(t->dtype())));
  if (t->rank() != 2)
    throw RejectError("shape", std::string(kOp) + ": " + name + " must have shape " + form + "; got " + shape_string(t->shape()));
  return *t;
}

struct Dims {
  int64_t M, H, F;
};

Dims check_dims(const Case& c) {
  const std::string who = kOp;
  const Tensor& x = required_bf16_matrix(c, "x", "[M, H]");
  const Tensor& w1 = required_bf16_matrix(c, "w1", "[H, 2F]");
  const Tensor& w2 = required_bf16_matrix(c, "w2", "[F, H]");
  const int64_t M = x.dim(0), H = x.dim(1);
  if (w1.dim(0) != H || w1.dim(1) % 2 != 0)
    throw RejectError("shape", who + ": w1 must have shape [H, 2F] with H = x's " + std::to_string(H) +
                                   " columns and an even second dimension; got " + shape_string(w1.shape()));
  const int64_t F = w1.dim(1) / 2;
  if (w2.dim(0) != F || w2.dim(1) != H)
    throw RejectError("shape", who + ": w2 must have shape [F, H] = [" + std::to_string(F) + ", " + std::to_string(H) +
                                   "] (F from w1's [H, 2F]); got " + shape_string(w2.shape()));
  if (const Tensor* probs = c.input("probs")) {
    if (probs->dtype() != DType::kFP32)
      throw RejectError("dtype", who + ": probs must be fp32; got " + std::string(dtype_name(probs->dtype())));
    if (probs->rank() != 1 || probs->dim(0) != M)
      throw RejectError("shape", who + ": probs must have shape [M] = [" + std::to_string(M) + "]; got " +
                                     shape_string(probs->shape()));
  }
  if (c.direction == Direction::kBackward) {
    const Tensor& d_out = required_bf16_matrix(c, "d_out", "[M, H]");
    if (d_out.dim(0) != M || d_out.dim(1) != H)
      throw RejectError("shape", who + ": d_out must have x's shape [" + std::to_string(M) + ", " + std::to_string(H) +
                                     "]; got " + shape_string(d_out.shape()));
  }
  return {M, H, F};
}

OutputMetas validate(const Case& c, const ContractInfo&) {
  const auto [M, H, F] = check_dims(c);
  if (c.direction == Direction::kForward) return {{"out", {{M, H}, DType::kBF16}}};
  OutputMetas metas = {{"d_x", {{M, H}, DType::kBF16}}, {"d_w1", {{H, 2 * F}, DType::kBF16}},
                       {"d_w2", {{F, H}, DType::kBF16}}};
  if (c.input("probs")) metas["d_probs"] = {{M}, DType::kFP32};
  return metas;
}

// --- the composition: one chain for every backend --------------------------------------------------

// t [R, C] as [C, R], element by element in its own width (the chain's operands are bf16).
Tensor transposed(const Tensor& t) {
  const int64_t R = t.dim(0), C = t.dim(1);
  Tensor out(t.dtype(), {C, R});
  auto copy = [&]<typename Bits>(Bits) {
    const auto* in = reinterpret_cast<const Bits*>(t.data());
    auto* to = reinterpret_cast<Bits*>(out.data());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < C; ++k) to[k * R + r] = in[r * C + k];
  };
  switch (dtype_size(t.dtype())) {
    case 2: copy(uint16_t{}); break;
    case 4: copy(uint32_t{}); break;
    default:
      for (int64_t r = 0; r < R; ++r)
        for (int64_t k = 0; k < C; ++k) out.set_bits(k * R + r, t.bits(r * C + k));
  }
  return out;
}

// One backend's stages of one contract.
struct Stages {
  Impl gemm, scaled, plain;  // gemm, swiglu_scale, swiglu
  ContractInfo gemm_contract, scaled_contract, plain_contract;
  GemmRows rows = GemmRows::kMayDependOnCount;
};

// Operands by value: a temporary (a transpose, a sliced gradient) moves into the stage's case.
Tensor matmul(const Stages& s, Tensor a, Tensor b) {
  Case g;
  g.op = "gemm";
  g.direction = Direction::kForward;
  g.inputs["a"] = std::move(a);
  g.inputs["b"] = std::move(b);
  TensorMap out = s.gemm(g, s.gemm_contract);
  return std::move(out.at("out"));
}

// The activation's case: swiglu_scale with probs as its per-row scale, swiglu without. Operands by
// value, as for matmul: the chain moves in those it no longer needs.
TensorMap activation(const Stages& s, const Case& c, Direction direction, Tensor h, std::optional<Tensor> probs,
                     std::optional<Tensor> g) {
  Case a;
  a.op = probs ? "swiglu_scale" : "swiglu";
  a.direction = direction;
  if (auto it = c.attrs.find(kClampAttr); it != c.attrs.end()) a.attrs[kClampAttr] = it->second;
  a.inputs["y"] = std::move(h);
  const bool scaled = probs.has_value();
  if (probs) a.inputs["scale"] = std::move(*probs);
  if (g) a.inputs["g"] = std::move(*g);
  return scaled ? s.scaled(a, s.scaled_contract) : s.plain(a, s.plain_contract);
}

TensorMap run_chain(const Stages& s, const Case& c, ExpertPadding padding) {
  const Tensor& x = *c.input("x");
  const Tensor& w1 = *c.input("w1");
  const Tensor& w2 = *c.input("w2");
  const int64_t M = x.dim(0);
  // Where the kind's gemm computes rows alone, a row sliced away is not computed: the forward's rows
  // are independent through the activation (elementwise) and both GEMMs, so it pads nothing, and
  // the backward's d_x takes the returned rows of d_h only.
  const bool rows_alone = s.rows == GemmRows::kIndependent;
  const bool pads = padding == ExpertPadding::kMegatron && !(rows_alone && c.direction == Direction::kForward);
  const int64_t Mp = pads ? expert_padded_rows(M) : M;
  Tensor xp = zero_padded_rows(x, Mp);
  std::optional<Tensor> probs;
  if (const Tensor* p = c.input("probs")) probs = zero_padded_rows(*p, Mp);

  if (c.direction == Direction::kForward) {  // moves into the stages what the backward keeps
    Tensor h = matmul(s, std::move(xp), w1);
    Tensor act = std::move(activation(s, c, Direction::kForward, std::move(h), std::move(probs), std::nullopt).at("out"));
    return {{"out", tensor_rows(matmul(s, std::move(act), w2), 0, M)}};
  }
  Tensor h = matmul(s, xp, w1);
  Tensor act = std::move(activation(s, c, Direction::kForward, h, probs, std::nullopt).at("out"));

  Tensor dp = zero_padded_rows(*c.input("d_out"), Mp);
  Tensor d_act = matmul(s, dp, transposed(w2));
  TensorMap out;
  out["d_w2"] = matmul(s, transposed(act), std::move(dp));
  const bool scaled = probs.has_value();
  TensorMap d_activation = activation(s, c, Direction::kBackward, std::move(h), std::move(probs), std::move(d_act));
  Tensor& d_h = d_activation.at("d_y");
  out["d_x"] = tensor_rows(matmul(s, rows_alone ? tensor_rows(d_h, 0, M) : d_h, transposed(w1)), 0, M);
  out["d_w1"] = matmul(s, transposed(xp), std::move(d_h));
  if (scaled) out["d_probs"] = tensor_rows(d_activation.at("d_scale"), 0, M);
  return out;
}

// --- generation ------------------------------------------------------------------------------

// Rows: each padded count 1..16, the threshold's neighbours, the pad size's, and larger experts.
rc::Gen<int64_t> expert_rows() {
  std::vector<int64_t> padded_counts;  // uniform, whatever the size: each must occur
  for (int64_t M = 1; M < kExpertPadBelow; ++M) padded_counts.push_back(M);
  return rc::gen::weightedOneOf<int64_t>({
      {1, rc::gen::just<int64_t>(0)},
      {8, rc::gen::elementOf(padded_counts)},
      {1, rc::gen::element<int64_t>(int64_t{kExpertPadBelow}, int64_t{kExpertPadRows - 1}, int64_t{kExpertPadRows},
                                                 int64_t{kExpertPadRows + 1})},
      {2, rc::gen::inRange<int64_t>(kExpertPadRows + 2, 80)},
  });
}

enum class Values { kLayer, kMixed, kSmallInt };

rc::Gen<Case> generate(Direction direction) {
  return rc::gen::exec([direction] {
    Case c;
    c.op = kOp;
    c.direction = direction;
    const int64_t M = *expert_rows();
    const int64_t H = *rc::gen::weightedOneOf<int64_t>(
        {{2, rc::gen::inRange<int64_t>(1, 24)}, {2, rc::gen::element<int64_t>(16, 32, 48, 64)}});
    const int64_t F = *rc::gen::weightedOneOf<int64_t>(
        {{2, rc::gen::inRange<int64_t>(1, 20)}, {2, rc::gen::element<int64_t>(8, 16, 24, 32)}});
    const Values values = *rc::gen::weightedElement<Values>({{6, Values::kLayer}, {2, Values::kMixed}, {1, Values::kSmallInt}});
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    auto tensor = [&](const char* name, Shape shape, int lo, int hi, uint64_t salt) {
      switch (values) {
        case Values::kLayer: c.inputs[name] = bf16_with_exponents(std::move(shape), seed ^ salt, lo, hi); break;
        case Values::kMixed: c.inputs[name] = *gen::tensor(DType::kBF16, std::move(shape), gen::ValueFamily::kMixed); break;
        case Values::kSmallInt: c.inputs[name] = *gen::tensor(DType::kBF16, std::move(shape), gen::ValueFamily::kSmallInt); break;
      }
    };
    // A layer's magnitudes: activations about 1, weights about 1 / sqrt(H), gradients small.
    tensor("x", {M, H}, -4, 1, 1);
    tensor("w1", {H, 2 * F}, -9, -3, 2);
    tensor("w2", {F, H}, -9, -3, 3);
    if (direction == Direction::kBackward) tensor("d_out", {M, H}, -12, -6, 4);
    if (*rc::gen::weightedElement<bool>({{3, true}, {1, false}})) {
      // Router probabilities in [0, 1], some rows exactly 0 (a token whose weight vanished) or 1.
      Tensor probs(DType::kFP32, {M});
      for (int64_t r = 0; r < M; ++r)
        probs.set_f32(r, *rc::gen::weightedOneOf<float>({{1, rc::gen::just(0.0f)},
                                                         {1, rc::gen::just(1.0f)},
                                                         {6, rc::gen::map(rc::gen::inRange(1, 1 << 20), [](int v) {
                                                            return static_cast<float>(v) / static_cast<float>(1 << 20);
                                                          })}}));
      c.inputs["probs"] = std::move(probs);
    }
    if (const std::optional<double> clamp = *gen::clamp()) c.attrs[kClampAttr] = *clamp;
    return c;
  });
}

// --- classes ---------------------------------------------------------------------------------

std::string rows_tag(int64_t M) {
  if (M <= kExpertPadRows + 1) return "M=" + std::to_string(M);
  return "M=large";
}

CaseClasses classes(const Case& c) {
  CaseClasses k;
  const int64_t M = c.input("x")->dim(0), F = c.input("w1")->dim(1) / 2;
  k.shape_class = M == 0 ? "rows=0" : expert_padded_rows(M) != M ? "padded" : "unpadded";
  const Tensor* probs = c.input("probs");
  k.tags = {rows_tag(M), gen::rows_class(M), k.shape_class, probs ? "probs" : "no_probs",
            gen::clamp_class(c.float_attr(kClampAttr)), F % 8 == 0 ? "F%8=0" : "F%8!=0"};
  if (probs)
    for (int64_t r = 0; r < probs->numel(); ++r)
      if (probs->f32(r) == 0) {
        k.tags.push_back("prob=0");
        break;
      }
  std::vector<std::string> values;
  for (const char* name : {"x", "w1", "w2", "d_out"})
    if (const Tensor* t = c.input(name))
      for (const std::string& v : gen::value_tags(*t)) {
        k.tags.push_back(std::string(name) + ":" + v);
        if ((v == "nan" || v == "inf") && std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
      }
  for (const std::string& v : values) k.value_class += (k.value_class.empty() ? "" : ",") + v;
  if (k.value_class.empty()) k.value_class = "plain";
  return k;
}

std::vector<std::string> required_tags(Direction) {
  std::vector<std::string> tags;
  for (int64_t M = 0; M < kExpertPadBelow; ++M) tags.push_back("M=" + std::to_string(M));
  for (int64_t M : {kExpertPadBelow, kExpertPadRows - 1, kExpertPadRows, kExpertPadRows + 1})
    tags.push_back("M=" + std::to_string(M));
  tags.insert(tags.end(), {"M=large", "rows=0", "padded", "unpadded", "probs", "no_probs", "prob=0", "clamp=none", "clamp=normal",
                           "clamp=negative", "clamp=nan", "F%8=0", "F%8!=0", "x:nan", "x:inf", "w1:-0"});
  return tags;
}

// --- error inputs --------------------------------------------------------------------------------

Case small_case(Direction direction) {
  Case c;
  c.op = kOp;
  c.direction = direction;
  c.inputs["x"] = Tensor(DType::kBF16, {3, 8});
  c.inputs["w1"] = Tensor(DType::kBF16, {8, 12});
  c.inputs["w2"] = Tensor(DType::kBF16, {6, 8});
  c.inputs["probs"] = Tensor(DType::kFP32, {3});
  if (direction == Direction::kBackward) c.inputs["d_out"] = Tensor(DType::kBF16, {3, 8});
  return c;
}

std::vector<ErrorInput> error_inputs(Direction direction) {
  std::vector<ErrorInput> out;
  auto add = [&](std::string name, auto edit, std::string error_class, std::string field) {
    Case c = small_case(direction);
    edit(c);
    out.push_back({std::move(name), std::move(c), std::move(error_class), std::move(field), {}});
  };
  add("x_fp32", [](Case& c) { c.inputs["x"] = Tensor(DType::kFP32, {3, 8}); }, "dtype", "x");
  add("x_rank1", [](Case& c) { c.inputs["x"] = Tensor(DType::kBF16, {24}); }, "shape", "x");
  add("w1_odd_columns", [](Case& c) { c.inputs["w1"] = Tensor(DType::kBF16, {8, 11}); }, "shape", "w1");
  add("w1_rows_not_H", [](Case& c) { c.inputs["w1"] = Tensor(DType::kBF16, {7, 12}); }, "shape", "w1");
  add("w2_transposed", [](Case& c) { c.inputs["w2"] = Tensor(DType::kBF16, {8, 6}); }, "shape", "w2");
  add("w2_missing", [](Case& c) { c.inputs.erase("w2"); }, "shape", "w2");
  add("probs_bf16", [](Case& c) { c.inputs["probs"] = Tensor(DType::kBF16, {3}); }, "dtype", "probs");
  add("probs_2d", [](Case& c) { c.inputs["probs"] = Tensor(DType::kFP32, {3, 1}); }, "shape", "probs");
  add("probs_rows", [](Case& c) { c.inputs["probs"] = Tensor(DType::kFP32, {4}); }, "shape", "probs");
  if (direction == Direction::kBackward)
    add("d_out_shape", [](Case& c) { c.inputs["d_out"] = Tensor(DType::kBF16, {3, 7}); }, "shape", "d_out");
  return out;
}

// --- reference inputs ----------------------------------------------------------------------------

std::vector<ReferenceInput> reference_inputs(Direction direction) {
  struct Dims {
    int64_t M, H, F;
    bool bench_only;
  };
  // A narrow expert at the token counts the rule pads (1, 16) and does not (17, 40), CPU-sized; and
  // GLM-4.5-Air's expert (H 4096, F 1408) at 16 tokens (padded to 32) and 32, for the benchmarks: the
  // padding's cost is the difference.
  const Dims kDims[] = {{1, 256, 128, false},   {16, 256, 128, false},  {17, 256, 128, false},
                        {40, 256, 128, false},  {16, 4096, 1408, true}, {32, 4096, 1408, true}};
  std::vector<ReferenceInput> out;
  for (const Dims& d : kDims) {
    // The GEMMs' floating-point operations at the padded row count: fc1 and fc2 forward; the
    // backward recomputes fc1 and runs four more.
    const double per_row = static_cast<double>(d.H) * static_cast<double>(d.F);
    const double flops = static_cast<double>(expert_padded_rows(d.M)) * per_row * (direction == Direction::kForward ? 6 : 16);
    out.push_back({"M" + std::to_string(d.M) + "_H" + std::to_string(d.H) + "_F" + std::to_string(d.F) + "_probs", {},
                   [d, direction] {
                     const int64_t M = d.M, H = d.H, F = d.F;
                     Case c;
                     c.op = kOp;
                     c.direction = direction;
                     c.inputs["x"] = bf16_with_exponents({M, H}, 41, -4, 1);
                     c.inputs["w1"] = bf16_with_exponents({H, 2 * F}, 42, -9, -4);
                     c.inputs["w2"] = bf16_with_exponents({F, H}, 43, -9, -4);
                     Tensor probs(DType::kFP32, {M});
                     uint64_t state = 44;
                     for (int64_t r = 0; r < M; ++r)
                       probs.set_f32(r, static_cast<float>(splitmix64_next(state) >> 40) / static_cast<float>(1 << 24));
                     c.inputs["probs"] = probs;
                     if (direction == Direction::kBackward) c.inputs["d_out"] = bf16_with_exponents({M, H}, 45, -12, -6);
                     c.attrs[kClampAttr] = 7.0;
                     return c;
                   },
                   d.bench_only, 0, flops});
  }
  return out;
}

// --- reference scenarios -------------------------------------------------------------------------

// GLM-4.5-Air's MoE layer: 128 experts of hidden 4096 and intermediate 1408, top 8, one case an
// expert as Megatron's SequentialMLP runs them, with the token counts a router gives a batch of T
// tokens: T * 8 assignments spread by log-normal weights (sigma 0.5, drawn once from a fixed seed),
// so that some experts get many tokens, some few, and at small T some fall below the padding
// threshold. The benchmarks time the layer under each contract with a CUDA record; TFLOP/s counts
// the GEMMs at the padded row counts.
constexpr int64_t kLayerExperts = 128, kLayerTopK = 8, kLayerHidden = 4096, kLayerIntermediate = 1408;
constexpr double kLayerLoadSpread = 0.5;

std::vector<int64_t> layer_expert_tokens(int64_t T) {
  uint64_t state = 20261203;
  std::vector<double> w(static_cast<size_t>(kLayerExperts));
  for (double& x : w) {
    // Box-Muller from two uniforms in (0, 1].
    const double u1 = (static_cast<double>(splitmix64_next(state) >> 11) + 1) * 0x1p-53;
    const double u2 = static_cast<double>(splitmix64_next(state) >> 11) * 0x1p-53;
    x = std::exp(kLayerLoadSpread * std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2));
  }
  double total = 0;
  for (double x : w) total += x;
  std::vector<int64_t> tokens;
  int64_t assigned = 0;
  for (size_t e = 0; e < w.size(); ++e) {
    const int64_t n = e + 1 < w.size()
                          ? static_cast<int64_t>(std::floor(w[e] / total * static_cast<double>(T * kLayerTopK)))
                          : T * kLayerTopK - assigned;
    tokens.push_back(std::min(n, T));  // an expert sees a token at most once
    assigned += n;
  }
  return tokens;
}

std::vector<ReferenceScenario> reference_scenarios(Direction direction) {
  std::vector<ReferenceScenario> out;
  for (const int64_t T : {int64_t{1024}, int64_t{4096}}) {
    const std::vector<int64_t> tokens = layer_expert_tokens(T);
    ReferenceScenario s;
    s.name = "glm45_air_T" + std::to_string(T);
    s.cases = tokens.size();
    s.make = [tokens, direction](size_t i) {
      const int64_t M = tokens.at(i), H = kLayerHidden, F = kLayerIntermediate;
      Case c;
      c.op = kOp;
      c.direction = direction;
      c.attrs[kClampAttr] = 7.0;
      c.inputs["x"] = Tensor(DType::kBF16, {M, H});
      c.inputs["w1"] = Tensor(DType::kBF16, {H, 2 * F});
      c.inputs["w2"] = Tensor(DType::kBF16, {F, H});
      c.inputs["probs"] = Tensor(DType::kFP32, {M});
      if (direction == Direction::kBackward) c.inputs["d_out"] = Tensor(DType::kBF16, {M, H});
      return c;
    };
    // fc1 and fc2 forward (6 H F a row); the backward recomputes fc1 and runs four more (16 H F).
    const double per_row = static_cast<double>(kLayerHidden) * static_cast<double>(kLayerIntermediate) *
                           (direction == Direction::kForward ? 6 : 16);
    int64_t padded = 0, rows = 0;
    for (const int64_t M : tokens) {
      s.flops += static_cast<double>(expert_padded_rows(M)) * per_row;
      padded += M > 0 && expert_padded_rows(M) != M;
      rows += M;
    }
    s.counters = {{"experts", static_cast<double>(tokens.size())},
                  {"padded_experts", static_cast<double>(padded)},
                  {"token_rows", static_cast<double>(rows)},
                  {"max_rows", static_cast<double>(*std::max_element(tokens.begin(), tokens.end()))},
                  {"min_rows", static_cast<double>(*std::min_element(tokens.begin(), tokens.end()))}};
    out.push_back(std::move(s));
  }
  return out;
}

// --- shrinking -------------------------------------------------------------------------------

// Rows [r0, r0 + nr), hidden columns [h0, h0 + nh) and expert columns [f0, f0 + nf) (of both halves
// of w1).
Case window(const Case& c, int64_t r0, int64_t nr, int64_t h0, int64_t nh, int64_t f0, int64_t nf) {
  const int64_t H = c.input("x")->dim(1), F = c.input("w1")->dim(1) / 2;
  auto cut = [](const Tensor& t, int64_t i0, int64_t ni, int64_t cols, auto col_of, int64_t ncols) {
    Tensor out(t.dtype(), {ni, ncols});
    for (int64_t i = 0; i < ni; ++i)
      for (int64_t j = 0; j < ncols; ++j) out.set_bits(i * ncols + j, t.bits((i0 + i) * cols + col_of(j)));
    return out;
  };
  Case out = c;
  auto hidden = [h0](int64_t j) { return h0 + j; };
  out.inputs["x"] = cut(*c.input("x"), r0, nr, H, hidden, nh);
  if (const Tensor* d_out = c.input("d_out")) out.inputs["d_out"] = cut(*d_out, r0, nr, H, hidden, nh);
  out.inputs["w1"] = cut(*c.input("w1"), h0, nh, 2 * F, [=](int64_t j) { return j < nf ? f0 + j : F + f0 + j - nf; }, 2 * nf);
  out.inputs["w2"] = cut(*c.input("w2"), f0, nf, H, hidden, nh);
  if (const Tensor* probs = c.input("probs")) out.inputs["probs"] = tensor_rows(*probs, r0, nr);
  return out;
}

std::vector<Case> shrink_shape(const Case& c) {
  constexpr int64_t kMaxSingles = 4;
  const int64_t M = c.input("x")->dim(0), H = c.input("x")->dim(1), F = c.input("w1")->dim(1) / 2;
  std::vector<Case> out;
  if (M > 1) {
    for (int64_t r = 0; r < std::min(M, kMaxSingles); ++r) out.push_back(window(c, r, 1, 0, H, 0, F));
    out.push_back(window(c, 0, M / 2, 0, H, 0, F));
    out.push_back(window(c, M / 2, M - M / 2, 0, H, 0, F));
  }
  if (F > 1) {
    for (int64_t f = 0; f < std::min(F, kMaxSingles); ++f) out.push_back(window(c, 0, M, 0, H, f, 1));
    out.push_back(window(c, 0, M, 0, H, 0, F / 2));
    out.push_back(window(c, 0, M, 0, H, F / 2, F - F / 2));
  }
  if (H > 1) {
    for (int64_t h = 0; h < std::min(H, kMaxSingles); ++h) out.push_back(window(c, 0, M, h, 1, 0, F));
    out.push_back(window(c, 0, M, 0, H / 2, 0, F));
    out.push_back(window(c, 0, M, H / 2, H - H / 2, 0, F));
  }
  return out;
}

// --- oracle ------------------------------------------------------------------------------------

Eigen::MatrixXd matrix(const Tensor& t) {
  Eigen::MatrixXd m(t.dim(0), t.dim(1));
  for (int64_t i = 0; i < t.dim(0); ++i)
    for (int64_t j = 0; j < t.dim(1); ++j) m(i, j) = t.f64(i * t.dim(1) + j);
  return m;
}

std::vector<double> values(const Eigen::MatrixXd& m) {
  std::vector<double> out(static_cast<size_t>(m.size()));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) out[static_cast<size_t>(i * m.cols() + j)] = m(i, j);
  return out;
}

// The unrounded MLP in fp64 (no padding: zero rows change nothing in exact arithmetic), with
// Megatron's clamp semantics (clamp when > 0: a <= c, -c <= b <= c, zero gradient where clamped;
// NaN propagating).
std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const Eigen::MatrixXd X = matrix(*c.input("x")), W1 = matrix(*c.input("w1")), W2 = matrix(*c.input("w2"));
  const int64_t M = X.rows(), F = W1.cols() / 2;
  const Eigen::MatrixXd Hm = X * W1;
  const std::optional<double> attr = c.float_attr(kClampAttr);
  const bool clamped = attr && *attr > 0;
  const double limit = clamped ? *attr : 0.0;
  const Tensor* probs = c.input("probs");
  Eigen::MatrixXd act(M, F), d_a_factor(M, F), d_b_factor(M, F), sw(M, F);
  for (int64_t r = 0; r < M; ++r) {
    const double p = probs ? probs->f64(r) : 1.0;
    for (int64_t j = 0; j < F; ++j) {
      double a = Hm(r, j), b = Hm(r, F + j);
      bool a_clamped = false, b_clamped = false;
      if (clamped) {
        a_clamped = a > limit;
        b_clamped = b > limit || b < -limit;
        a = std::min(a, limit);
        b = std::clamp(b, -limit, limit);
      }
      const double sig = 1 / (1 + std::exp(-a)), silu = a * sig;
      sw(r, j) = silu * b;
      act(r, j) = silu * b * p;
      d_a_factor(r, j) = a_clamped ? 0 : p * b * sig * (1 + a * (1 - sig));
      d_b_factor(r, j) = b_clamped ? 0 : p * silu;
    }
  }
  if (c.direction == Direction::kForward) return {{"out", values(act * W2)}};
  const Eigen::MatrixXd D = matrix(*c.input("d_out"));
  const Eigen::MatrixXd d_act = D * W2.transpose();
  Eigen::MatrixXd d_h(M, 2 * F);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t j = 0; j < F; ++j) {
      d_h(r, j) = d_act(r, j) * d_a_factor(r, j);
      d_h(r, F + j) = d_act(r, j) * d_b_factor(r, j);
    }
  std::map<std::string, std::vector<double>> out = {{"d_x", values(d_h * W1.transpose())},
                                                    {"d_w1", values(X.transpose() * d_h)},
                                                    {"d_w2", values(act.transpose() * D)}};
  if (probs) {
    std::vector<double> d_probs(static_cast<size_t>(M));
    for (int64_t r = 0; r < M; ++r) d_probs[static_cast<size_t>(r)] = sw.row(r).dot(d_act.row(r));
    out["d_probs"] = d_probs;
  }
  return out;
}

}  // namespace

OpInfo expert_mlp() {
  OpInfo op;
  op.name = kOp;
  op.doc = "one expert's MLP: fc1 (x @ w1) -> SwiGLU weighted by probs -> fc2 (@ w2), 0 < M < 17 tokens padded to 32";
  const TensorSpec x = {"x", "[M, H] bf16: the expert's tokens", false, true};
  const TensorSpec w1 = {"w1", "[H, 2F] bf16: fc1's weight (gate columns, then value columns)", false, false};
  const TensorSpec w2 = {"w2", "[F, H] bf16: fc2's weight", false, false};
  const TensorSpec probs = {"probs", "[M] fp32: the router's weight of each token, applied in the activation", true, true};
  op.inputs[Direction::kForward] = {x, w1, w2, probs};
  op.inputs[Direction::kBackward] = {x, w1, w2, probs, {"d_out", "[M, H] bf16: gradient of out", false, true}};
  op.outputs[Direction::kForward] = {{"out", "[M, H] bf16", false, true}};
  op.outputs[Direction::kBackward] = {
      {"d_x", "[M, H] bf16", false, true},
      {"d_w1", "[H, 2F] bf16: x^T @ d_h over the padded rows", false, false},
      {"d_w2", "[F, H] bf16: act^T @ d_out over the padded rows", false, false},
      // Megatron's d_scale row sum follows rule 7, whose order the (padded) row count sets.
      {"d_probs", "[M] fp32, when probs is given", true, true, true}};
  op.attrs = {{kClampAttr, AttrType::kFloat, "the SwiGLU clamp value (as for swiglu): a <= c, -c <= b <= c; absent means no clamp"}};
  for (const Composition& k : kCompositions) {
    op.contracts.push_back({k.contract, k.doc, k.derived_from, ClampGate::kPositive});
    if (!k.bounded) continue;
    ContractInfo& bounded = op.contracts.back();
    bounded.error_bound = expert_mlp_chain_bound;
    bounded.bound_doc = kExpertChainBoundDoc;
    bounded.order_depends_on_shape = true;
  }
  op.validate = validate;
  op.generate = generate;
  op.required_tags = required_tags;
  op.classes = classes;
  op.error_inputs = error_inputs;
  op.reference_inputs = reference_inputs;
  op.reference_scenarios = reference_scenarios;
  op.shrink_shape = shrink_shape;
  op.oracle = oracle;
  return op;
}

std::optional<Impl> expert_mlp_chain(const Registry& registry, const std::string& kind, const std::string& contract,
                                     ExpertPadding padding, GemmRows rows) {
  for (const Composition& k : kCompositions) {
    if (contract != k.contract) continue;
    const Impl* gemm = registry.impl("gemm", kind + ":" + k.gemm_contract);
    const Impl* scaled = registry.impl("swiglu_scale", kind + ":" + k.activation_contract);
    const Impl* plain = registry.impl("swiglu", kind + ":" + k.activation_contract);
    const OpInfo* gemm_op = registry.op("gemm");
    const OpInfo* scaled_op = registry.op("swiglu_scale");
    const OpInfo* plain_op = registry.op("swiglu");
    if (!gemm || !scaled || !plain || !gemm_op || !scaled_op || !plain_op) return std::nullopt;
    Stages s{*gemm,
             *scaled,
             *plain,
             *gemm_op->contract(k.gemm_contract),
             *scaled_op->contract(k.activation_contract),
             *plain_op->contract(k.activation_contract),
             rows};
    return Impl([s, padding](const Case& c, const ContractInfo&) { return run_chain(s, c, padding); });
  }
  return std::nullopt;
}

std::vector<ExpertComposition> expert_mlp_compositions() {
  std::vector<ExpertComposition> out;
  for (const Composition& k : kCompositions) out.push_back({k.contract, k.gemm_contract, k.activation_contract});
  return out;
}

std::vector<ImplEntry> expert_mlp_impls(const Registry& registry, const std::string& kind, GemmRows rows) {
  std::vector<ImplEntry> out;
  for (const Composition& k : kCompositions) {
    if (registry.impl(kOp, kind + ":" + k.contract)) continue;  // the kind has its own
    if (std::optional<Impl> impl = expert_mlp_chain(registry, kind, k.contract, ExpertPadding::kMegatron, rows))
      out.push_back({kOp, k.contract, std::move(*impl)});
  }
  return out;
}

}  // namespace bitparity::ops
