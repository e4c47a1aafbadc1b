// grad_finalize: what Megatron's finalize_model_grads does to the fp32 main_grad buffer and the
// routers' expert bias once the gradients are synchronized (spec OP-12). The aligned mode (#5335,
// GLM_ALIGN_BIT_EXACT) multiplies the summed gradients by 1/dp_size and leaves the expert bias
// alone; core_r0.13 multiplies them by 1/num_tokens (per-token loss) and moves each expert's bias
// by the update rate toward balance. The collective itself is not part of the op: main_grad is its
// result (NCCL's summation order is not modelled).
#include <algorithm>
#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include <Eigen/Dense>
#include <rapidcheck.h>

#include "core/error.h"
#include "core/gen.h"
#include "ops/training.h"

namespace bitparity::ops {
namespace {

const char* const kAlignedFrom =
    "Megatron-LM #5335 f5b5555ec6 finalize_model_grads.py 293-361 (loss_normalized_in_graph: num_tokens dropped; "
    "scale_gradients(1.0 / dp_size) after finish_grad_sync; _update_router_expert_bias skipped), router.py 465-469";
const char* const kR013From =
    "Megatron-LM core_r0.13.0 73a28a1078 finalize_model_grads.py 334-361 (scale_gradients(1.0 / num_tokens) when "
    "num_tokens > 0) and 192-217 with moe_utils.py 781-799 get_updated_expert_bias; ATen fp32 opmath";

constexpr double kCountLimit = 16777216.0;  // 2^24: fp32 counts and their sums stay exact below it
constexpr int64_t kMaxNumTokens = 2147483647;  // num_tokens is an int32 tensor

// --- attributes --------------------------------------------------------------------------------

int64_t int_attr(const Case& c, const char* name, const char* who) {
  const auto it = c.attrs.find(name);
  if (it == c.attrs.end()) throw RejectError("attr", std::string(who) + ": " + name + " is required");
  const int64_t* v = std::get_if<int64_t>(&it->second);
  if (!v) throw RejectError("attr", std::string(who) + ": " + name + " must be an int");
  return *v;
}

// --- validate ----------------------------------------------------------------------------------

void check_fp32(const Tensor& t, const std::string& name) {
  if (t.dtype() != DType::kFP32)
    throw RejectError("dtype", "grad_finalize: " + name + " must be fp32 (Megatron's main_grad and router buffers); got " +
                                   std::string(dtype_name(t.dtype())));
}

OutputMetas validate(const Case& c, const ContractInfo&) {
  const std::string who = "grad_finalize";
  const Tensor* g = c.input("main_grad");
  if (!g) throw RejectError("shape", who + ": missing input main_grad");
  check_fp32(*g, "main_grad");
  if (g->rank() != 1) throw RejectError("shape", who + ": main_grad must have shape [n]; got " + shape_string(g->shape()));
  const GradFinalizeAttrs a = grad_finalize_attrs(c);
  if (a.dp_size < 1) throw RejectError("attr", who + ": dp_size must be >= 1; got " + std::to_string(a.dp_size));
  if (a.num_tokens && (*a.num_tokens < 0 || *a.num_tokens > kMaxNumTokens))
    throw RejectError("attr", who + ": num_tokens must be in [0, 2^31) (an int32 count); got " +
                                  std::to_string(*a.num_tokens));
  if (!std::isfinite(a.bias_update_rate))
    throw RejectError("attr", who + ": bias_update_rate must be finite; got " + std::to_string(a.bias_update_rate));
  OutputMetas out = {{"main_grad", {g->shape(), DType::kFP32}}};
  const Tensor* counts = c.input("tokens_per_expert");
  const Tensor* bias = c.input("expert_bias");
  if (!counts && !bias) return out;
  if (!counts || !bias)
    throw RejectError("shape", who + ": tokens_per_expert and expert_bias come together; got only " +
                                   (counts ? "tokens_per_expert" : "expert_bias"));
  check_fp32(*counts, "tokens_per_expert");
  check_fp32(*bias, "expert_bias");
  if (counts->rank() != 2 || counts->dim(1) < 1)
    throw RejectError("shape", who + ": tokens_per_expert must have shape [layers, experts]; got " +
                                   shape_string(counts->shape()));
  if (bias->shape() != counts->shape())
    throw RejectError("shape", who + ": expert_bias must have tokens_per_expert's shape " +
                                   shape_string(counts->shape()) + "; got " + shape_string(bias->shape()));
  const int64_t E = counts->dim(1);
  for (int64_t l = 0; l < counts->dim(0); ++l) {
    double row = 0;
    for (int64_t e = 0; e < E; ++e) {
      const double v = counts->f64(l * E + e);
      if (!(v >= 0) || v != std::floor(v) || std::signbit(v))
        throw RejectError("unmodelled", who + ": tokens_per_expert must hold whole counts >= +0 (the all-reduce's "
                                              "order is not modelled; whole counts are exact in any order); got " +
                                              std::to_string(v) + " at [" + std::to_string(l) + ", " +
                                              std::to_string(e) + "]");
      row += v;
    }
    // Below 2^24 every sum of counts is exact in fp32, whatever order the all-reduce and the row sum take.
    if (row >= kCountLimit)
      throw RejectError("unmodelled", who + ": a layer's tokens_per_expert must sum to less than 2^24 (exact in fp32 "
                                            "in any order); row " + std::to_string(l) + " sums to " +
                                            std::to_string(row));
  }
  out["tokens_per_expert"] = {counts->shape(), DType::kFP32};
  out["expert_bias"] = {bias->shape(), DType::kFP32};
  return out;
}

// --- generation ------------------------------------------------------------------------------

rc::Gen<Tensor> counts_tensor(int64_t L, int64_t E) {
  return rc::gen::exec([L, E] {
    Tensor t(DType::kFP32, {L, E});
    const int mode = *rc::gen::inRange(0, 3);  // 0 random, 1 all equal (ties everywhere), 2 near the 2^24 limit
    const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(kCountLimit) / std::max<int64_t>(1, E) - 1);
    const int64_t equal = *rc::gen::inRange<int64_t>(0, std::min<int64_t>(cap, 5000));
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t v = equal;
      if (mode == 0) v = *rc::gen::inRange<int64_t>(0, 2000);
      if (mode == 2) v = cap - *rc::gen::inRange<int64_t>(0, 3);
      t.set_f32(i, static_cast<float>(v));
    }
    return t;
  });
}

rc::Gen<Case> generate(Direction) {
  return rc::gen::exec([] {
    Case c;
    c.op = "grad_finalize";
    c.direction = Direction::kForward;
    const int64_t n = *gen::rows() * *rc::gen::element<int64_t>(1, 7, 64);
    c.inputs["main_grad"] = *gen::tensor(DType::kFP32, {n}, *gen::value_family());
    c.attrs["dp_size"] = *rc::gen::element<int64_t>(1, 2, 3, 6, 8, 64, 96);
    if (*rc::gen::weightedElement<bool>({{4, true}, {1, false}}))
      c.attrs["num_tokens"] = *rc::gen::weightedOneOf<int64_t>({
          {1, rc::gen::just<int64_t>(0)},
          {1, rc::gen::just<int64_t>(1)},
          {4, rc::gen::inRange<int64_t>(2, 1'000'000)},
          {1, rc::gen::element<int64_t>(16777217, 33554433, kMaxNumTokens)},  // not exact in fp32
      });
    if (*rc::gen::weightedElement<bool>({{2, true}, {1, false}})) {
      const int64_t L = *rc::gen::inRange<int64_t>(1, 5);
      const int64_t E = *rc::gen::element<int64_t>(1, 3, 8, 128, 160);
      c.inputs["tokens_per_expert"] = *counts_tensor(L, E);
      c.inputs["expert_bias"] = *gen::tensor(DType::kFP32, {L, E}, *gen::value_family());
      c.attrs["bias_update_rate"] = *rc::gen::element(1e-3, 1e-2, 0.0, -1e-3, 0.1);
    }
    return c;
  });
}

// --- classes ---------------------------------------------------------------------------------

bool power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Whether some expert's count equals its layer's mean exactly (its bias stays).
bool has_tie(const Tensor& counts) {
  const int64_t E = counts.dim(1);
  for (int64_t l = 0; l < counts.dim(0); ++l) {
    double s = 0;
    for (int64_t e = 0; e < E; ++e) s += counts.f64(l * E + e);
    for (int64_t e = 0; e < E; ++e)
      if (counts.f64(l * E + e) * static_cast<double>(E) == s) return true;
  }
  return false;
}

// The CUDA scaling kernel's paths (KernelRecord::paths; gpu/training.cu grad_scale_kernel): 16-byte
// packets of 4 fp32 values, then the last numel % 4 one a thread; nothing for an empty buffer.
void add_kernel_paths(const Tensor& g, std::vector<std::string>& tags) {
  constexpr int64_t kPacket = 16 / sizeof(float);
  if (g.numel() == 0) return;
  tags.push_back(g.numel() % kPacket == 0 ? "numel%packet=0" : "numel%packet!=0");
}

CaseClasses classes(const Case& c) {
  CaseClasses k;
  const Tensor& g = *c.input("main_grad");
  const GradFinalizeAttrs a = grad_finalize_attrs(c);
  const std::string dp = a.dp_size == 1 ? "dp=1" : power_of_two(a.dp_size) ? "dp=power_of_two" : "dp=other";
  const std::string nt = !a.num_tokens              ? "num_tokens=absent"
                         : *a.num_tokens == 0       ? "num_tokens=0"
                         : *a.num_tokens == 1       ? "num_tokens=1"
                         : *a.num_tokens > 16777216 ? "num_tokens>2^24"
                                                    : "num_tokens=other";
  const Tensor* counts = c.input("tokens_per_expert");
  bool nan = false;
  for (const std::string& v : gen::value_tags(g)) nan = nan || v == "nan";
  k.shape_class = counts ? "expert_bias" : "no_expert_bias";
  k.value_class = dp + "," + nt + (nan ? ",nan" : "");
  k.tags = {gen::rows_class(g.dim(0)), dp, nt, k.shape_class};
  if (counts && has_tie(*counts)) k.tags.push_back("counts=tie");
  add_kernel_paths(g, k.tags);
  for (const auto& [name, t] : c.inputs)
    for (const std::string& v : gen::value_tags(t)) k.tags.push_back(name + ":" + v);
  return k;
}

std::vector<std::string> required_tags(Direction) {
  std::vector<std::string> tags = {"rows=0", "rows=1..16", "rows=large", "dp=1", "dp=power_of_two", "dp=other",
                                   "num_tokens=absent", "num_tokens=0", "num_tokens=1", "num_tokens>2^24",
                                   "num_tokens=other", "expert_bias", "no_expert_bias", "counts=tie",
                                   "numel%packet=0", "numel%packet!=0"};
  for (const char* value : {"nan", "inf", "-0", "subnormal"}) tags.push_back(std::string("main_grad:") + value);
  tags.push_back("expert_bias:-0");
  return tags;
}

// --- error inputs --------------------------------------------------------------------------------

Case small_case() {
  Case c;
  c.op = "grad_finalize";
  c.direction = Direction::kForward;
  c.inputs["main_grad"] = Tensor(DType::kFP32, {8});
  c.inputs["tokens_per_expert"] = Tensor(DType::kFP32, {1, 4});
  c.inputs["expert_bias"] = Tensor(DType::kFP32, {1, 4});
  c.attrs["dp_size"] = int64_t{2};
  c.attrs["num_tokens"] = int64_t{16};
  return c;
}

std::vector<ErrorInput> error_inputs(Direction) {
  std::vector<ErrorInput> out;
  auto add = [&](std::string name, auto edit, std::string error_class, std::string field) {
    Case c = small_case();
    edit(c);
    out.push_back({std::move(name), std::move(c), std::move(error_class), std::move(field), {}});
  };
  add("dp_size_zero", [](Case& c) { c.attrs["dp_size"] = int64_t{0}; }, "attr", "dp_size");
  add("dp_size_missing", [](Case& c) { c.attrs.erase("dp_size"); }, "attr", "dp_size");
  add("num_tokens_negative", [](Case& c) { c.attrs["num_tokens"] = int64_t{-1}; }, "attr", "num_tokens");
  add("num_tokens_past_int32", [](Case& c) { c.attrs["num_tokens"] = int64_t{1} << 31; }, "attr", "num_tokens");
  add("bias_update_rate_nan", [](Case& c) { c.attrs["bias_update_rate"] = std::nan(""); }, "attr", "bias_update_rate");
  add("main_grad_bf16", [](Case& c) { c.inputs["main_grad"] = Tensor(DType::kBF16, {8}); }, "dtype", "main_grad");
  add("main_grad_rank2", [](Case& c) { c.inputs["main_grad"] = Tensor(DType::kFP32, {2, 4}); }, "shape", "main_grad");
  add("expert_bias_alone", [](Case& c) { c.inputs.erase("tokens_per_expert"); }, "shape", "tokens_per_expert");
  add("expert_bias_other_shape", [](Case& c) { c.inputs["expert_bias"] = Tensor(DType::kFP32, {1, 5}); }, "shape",
      "expert_bias");
  add("tokens_per_expert_fractional", [](Case& c) { c.inputs["tokens_per_expert"].set_f32(1, 2.5f); }, "unmodelled",
      "tokens_per_expert");
  add("tokens_per_expert_negative", [](Case& c) { c.inputs["tokens_per_expert"].set_f32(0, -1.0f); }, "unmodelled",
      "tokens_per_expert");
  add("tokens_per_expert_past_2_24", [](Case& c) { c.inputs["tokens_per_expert"].set_f32(2, 16777216.0f); },
      "unmodelled", "tokens_per_expert");
  return out;
}

// --- reference inputs ----------------------------------------------------------------------------

std::vector<ReferenceInput> reference_inputs(Direction) {
  // A GLM-4.5-Air expert layer's worth of gradients (about 1.1e8 fp32 values per rank shard is
  // typical; 10^8 here) for benchmarks, 2^20 for GPU tests; 46 MoE layers of 128 experts.
  auto make = [](int64_t n) {
    Case c;
    c.op = "grad_finalize";
    c.direction = Direction::kForward;
    c.inputs["main_grad"] = gen::large_tensor(DType::kFP32, {n}, 41);
    Tensor counts(DType::kFP32, {46, 128});
    for (int64_t i = 0; i < counts.numel(); ++i) counts.set_f32(i, static_cast<float>((i * 7919) % 2048));
    c.inputs["tokens_per_expert"] = counts;
    c.inputs["expert_bias"] = gen::large_tensor(DType::kFP32, {46, 128}, 42);
    c.attrs = {{"dp_size", int64_t{6}}, {"num_tokens", int64_t{98304}}, {"bias_update_rate", 1e-3}};
    return c;
  };
  return {{"params100000000", {}, [make] { return make(100'000'000); }, true},
          {"params1048576", {}, [make] { return make(1 << 20); }, false}};
}

// --- shrinking -------------------------------------------------------------------------------

Case with_grad(const Case& c, int64_t i0, int64_t n) {
  Case out = c;
  const Tensor& g = *c.input("main_grad");
  Tensor w(DType::kFP32, {n});
  for (int64_t i = 0; i < n; ++i) w.set_bits(i, g.bits(i0 + i));
  out.inputs["main_grad"] = w;
  return out;
}

Case with_layer(const Case& c, int64_t l) {
  Case out = c;
  for (const char* name : {"tokens_per_expert", "expert_bias"}) {
    const Tensor& t = *c.input(name);
    const int64_t E = t.dim(1);
    Tensor w(DType::kFP32, {1, E});
    for (int64_t e = 0; e < E; ++e) w.set_bits(e, t.bits(l * E + e));
    out.inputs[name] = w;
  }
  return out;
}

std::vector<Case> shrink_shape(const Case& c) {
  constexpr int64_t kMaxSingles = 16;
  std::vector<Case> out;
  if (c.input("tokens_per_expert")) {
    Case none = c;
    none.inputs.erase("tokens_per_expert");
    none.inputs.erase("expert_bias");
    out.push_back(none);
    const int64_t L = c.input("tokens_per_expert")->dim(0);
    if (L > 1)
      for (int64_t l = 0; l < L; ++l) out.push_back(with_layer(c, l));
  }
  const int64_t n = c.input("main_grad")->numel();
  if (n > 1) {
    for (int64_t i = 0; i < std::min(n, kMaxSingles); ++i) out.push_back(with_grad(c, i, 1));
    out.push_back(with_grad(c, 0, n / 2));
    out.push_back(with_grad(c, n / 2, n - n / 2));
  }
  return out;
}

// --- oracle ------------------------------------------------------------------------------------

// The exact values each contract means: main_grad / dp_size (aligned) or / num_tokens (r0.13), and
// the bias moved by the rate toward the exact mean. The oracle follows the aligned contract's
// meaning for main_grad when num_tokens is absent, and r0.13's for the bias (the aligned contract
// returns it unchanged, which is what it means).
std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const GradFinalizeAttrs a = grad_finalize_attrs(c);
  const Tensor& g = *c.input("main_grad");
  Eigen::ArrayXd grad(g.numel());
  for (int64_t i = 0; i < g.numel(); ++i) grad(i) = g.f64(i);
  const double divisor = a.num_tokens && *a.num_tokens > 0 ? static_cast<double>(*a.num_tokens)
                                                           : static_cast<double>(a.dp_size);
  const Eigen::ArrayXd scaled = grad / divisor;
  std::map<std::string, std::vector<double>> truth = {{"main_grad", {scaled.data(), scaled.data() + scaled.size()}}};
  if (const Tensor* counts = c.input("tokens_per_expert")) {
    const Tensor& bias = *c.input("expert_bias");
    const int64_t L = counts->dim(0), E = counts->dim(1);
    Eigen::ArrayXXd n(L, E), b(L, E);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t e = 0; e < E; ++e) {
        n(l, e) = counts->f64(l * E + e);
        b(l, e) = bias.f64(l * E + e);
      }
    const Eigen::ArrayXd mean = n.rowwise().mean();
    Eigen::ArrayXXd moved = b;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t e = 0; e < E; ++e) {
        const double off = mean(l) - n(l, e);
        moved(l, e) += (off > 0 ? 1.0 : off < 0 ? -1.0 : 0.0) * a.bias_update_rate;
      }
    std::vector<double> flat, zeros(static_cast<size_t>(L * E), 0.0);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t e = 0; e < E; ++e) flat.push_back(moved(l, e));
    truth["expert_bias"] = flat;
    truth["tokens_per_expert"] = zeros;
  }
  return truth;
}

}  // namespace

GradFinalizeAttrs grad_finalize_attrs(const Case& c) {
  GradFinalizeAttrs a;
  a.dp_size = int_attr(c, "dp_size", "grad_finalize");
  if (c.attrs.count("num_tokens")) a.num_tokens = int_attr(c, "num_tokens", "grad_finalize");
  if (const auto rate = c.float_attr("bias_update_rate")) a.bias_update_rate = *rate;
  return a;
}

OpInfo grad_finalize() {
  OpInfo op;
  op.name = "grad_finalize";
  op.doc = "finalize_model_grads after the gradient sync: main_grad scaled, the routers' expert bias updated or not";
  op.inputs[Direction::kForward] = {
      {"main_grad", "[n] fp32 gradient buffer after the data-parallel sum", false, true},
      {"tokens_per_expert", "[layers, experts] fp32 token counts after their all-reduce (whole numbers)", true},
      {"expert_bias", "[layers, experts] fp32 router expert bias", true}};
  op.outputs[Direction::kForward] = {
      {"main_grad", "[n] the finalized gradient", false, true},
      {"tokens_per_expert", "[layers, experts] the counts after finalization (r0.13 zeroes them)", true},
      {"expert_bias", "[layers, experts] the bias after finalization", true}};
  op.attrs = {{"dp_size", AttrType::kInt, "data-parallel x context-parallel size (required)"},
              {"num_tokens", AttrType::kInt, "tokens of the global batch (per-token loss); absent: not given"},
              {"bias_update_rate", AttrType::kFloat, "moe_router_bias_update_rate (default 1e-3)"}};
  op.contracts = {
      {"megatron_aligned",
       "main_grad * f32(1 / dp_size) when dp_size > 1 (num_tokens ignored); expert bias and counts unchanged",
       kAlignedFrom},
      {"megatron_r013",
       "main_grad * (1 / f32(num_tokens)) in fp32 when num_tokens > 0; bias + sign(sum * f32(1/E) - count) * f32(rate) "
       "per expert, counts zeroed",
       kR013From}};
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
