// adamw_step: one step of torch.optim.AdamW(fused=True) on one parameter (spec OP-12): the
// parameter, its gradient and the two moment estimates in, the updated parameter and moments out.
#include <algorithm>
#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include <Eigen/Dense>
#include <rapidcheck.h>

#include "core/error.h"
#include "core/gen.h"
#include "core/rows.h"
#include "ops/training.h"

namespace bitparity::ops {
namespace {

const char* const kMegatronFrom =
    "torch.optim.AdamW(fused=True), which Megatron-LM #5335 builds without the precision-aware optimizer; "
    "PyTorch 2.11 fused_adam_utils.cuh (ADAM_MODE::ADAMW, opmath fp32, device powf), CUDA 13.0, sm_90";

const char* const kStates[] = {"param", "grad", "exp_avg", "exp_avg_sq"};
const char* const kOutputs[] = {"param", "exp_avg", "exp_avg_sq"};
constexpr int64_t kBenchParams = 100'000'000;  // the 10^8 parameters
constexpr int64_t kTestParams = 1 << 20;
constexpr int64_t kMinElements = 4096, kElementsPerSize = 1024;
constexpr int64_t kExactCounterSteps = int64_t{1} << 24;  // the fp32 counter counts exactly to here

// --- attributes --------------------------------------------------------------------------------

double float_or(const Case& c, const char* name, double fallback) {
  const auto v = c.float_attr(name);
  return v ? *v : fallback;
}

// A non-negative value as torch.optim.AdamW's constructor demands (`0.0 <= x`, so NaN fails too).
void require_at_least_zero(const std::string& name, double v, const char* torch_words) {
  if (!(v >= 0.0))
    throw RejectError("attr", "adamw_step: " + name + " must be >= 0 (torch.optim.AdamW: " + torch_words +
                                  "); got " + std::to_string(v));
}

// --- validate ----------------------------------------------------------------------------------

OutputMetas validate(const Case& c, const ContractInfo&) {
  const std::string who = "adamw_step";
  const Tensor* first = nullptr;
  for (const char* name : kStates) {
    const Tensor* t = c.input(name);
    if (!t) throw RejectError("shape", who + ": missing input " + name);
    if (t->dtype() != DType::kFP32 && t->dtype() != DType::kBF16 && t->dtype() != DType::kFP16)
      throw RejectError("dtype", who + ": " + name + " must be fp32, bf16 or fp16; got " +
                                     std::string(dtype_name(t->dtype())));
    if (t->rank() < 1)
      throw RejectError("shape", who + ": " + name + " must have at least one dimension; got a scalar");
    if (!first) {
      first = t;
      continue;
    }
    // The fused kernel takes one dtype for the parameter and its three companions.
    if (t->dtype() != first->dtype())
      throw RejectError("dtype", who + ": " + name + " must have param's dtype " +
                                     std::string(dtype_name(first->dtype())) + " (the fused kernel's one dtype); got " +
                                     std::string(dtype_name(t->dtype())));
    if (t->shape() != first->shape())
      throw RejectError("shape", who + ": " + name + " must have param's shape " + shape_string(first->shape()) +
                                     "; got " + shape_string(t->shape()));
  }
  const AdamwHyper h = adamw_hyper(c);
  require_at_least_zero("lr", h.lr, "Invalid learning rate");
  require_at_least_zero("eps", h.eps, "Invalid epsilon value");
  require_at_least_zero("weight_decay", h.weight_decay, "Invalid weight_decay value");
  for (const auto& [name, beta] : {std::pair{"beta1", h.beta1}, std::pair{"beta2", h.beta2}})
    if (!(beta >= 0.0 && beta < 1.0))
      throw RejectError("attr", who + ": " + name + " must be in [0, 1) (torch.optim.AdamW: Invalid beta parameter); got " +
                                    std::to_string(beta));
  if (h.step < 1) throw RejectError("attr", who + ": step must be >= 1 (the step being taken); got " + std::to_string(h.step));
  OutputMetas out;
  for (const char* name : kOutputs) out[name] = {first->shape(), first->dtype()};
  return out;
}

// --- generation ------------------------------------------------------------------------------

rc::Gen<int64_t> step_number() {
  return rc::gen::weightedOneOf<int64_t>({
      {3, rc::gen::just<int64_t>(1)},
      {3, rc::gen::inRange<int64_t>(2, 200)},
      {1, rc::gen::elementOf(std::vector<int64_t>{6, 57, 102, 140})},  // CUDA's powf an ulp off for common betas
      {2, rc::gen::inRange<int64_t>(200, 2'000'000)},
      {1, rc::gen::elementOf(std::vector<int64_t>{kExactCounterSteps, kExactCounterSteps + 1,
                                                  kExactCounterSteps + 3, int64_t{1} << 40})},
  });
}

void set_hyper(Case& c) {
  c.attrs["lr"] = *rc::gen::element(0.0, 1e-3, 3e-4, 0.1, 1.0, 1e-30);
  c.attrs["beta1"] = *rc::gen::element(0.0, 0.5, 0.8, 0.9, 0.99);
  c.attrs["beta2"] = *rc::gen::element(0.0, 0.9, 0.95, 0.999, 0.9999);
  c.attrs["eps"] = *rc::gen::element(1e-8, 1e-6, 1e-30, 1e-45, 0.0);
  c.attrs["weight_decay"] = *rc::gen::element(0.0, 0.01, 0.1, 0.5);
  c.attrs["step"] = *step_number();
  c.attrs["maximize"] = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
  // Now and then an attribute absent, to take AdamW's default.
  if (*rc::gen::weightedElement<bool>({{7, false}, {1, true}}))
    c.attrs.erase(*rc::gen::element<std::string>("lr", "beta1", "beta2", "eps", "weight_decay", "maximize"));
}

rc::Gen<Case> generate(Direction) {
  return rc::gen::exec([] {
    Case c;
    c.op = "adamw_step";
    c.direction = Direction::kForward;
    const DType dt = *rc::gen::weightedElement<DType>({{5, DType::kFP32}, {2, DType::kBF16}, {1, DType::kFP16}});
    const int64_t max_elements =
        kMinElements + int64_t{*rc::gen::withSize([](int size) { return rc::gen::just(size); })} * kElementsPerSize;
    int64_t rows = *gen::rows();
    const int64_t width = *rc::gen::weightedOneOf<int64_t>(
        {{4, rc::gen::inRange<int64_t>(1, 34)}, {1, rc::gen::just<int64_t>(4096)}});
    if (rows > 1 && rows * width > max_elements) rows = std::max<int64_t>(1, max_elements / width);
    const Shape shape = *rc::gen::arbitrary<bool>() ? Shape{rows, width} : Shape{rows * width};
    for (const char* name : kStates) c.inputs[name] = *gen::tensor(dt, shape, *gen::value_family());
    // A second moment is a running mean of squares: non-negative, except in a raw draw.
    if (*rc::gen::weightedElement<bool>({{3, true}, {1, false}})) {
      Tensor& v = c.inputs["exp_avg_sq"];
      const uint64_t sign = uint64_t{1} << (8 * dtype_size(dt) - 1);
      for (int64_t i = 0; i < v.numel(); ++i) v.set_bits(i, v.bits(i) & ~sign);
    }
    set_hyper(c);
    return c;
  });
}

// --- classes ---------------------------------------------------------------------------------

std::string step_class(int64_t step) {
  if (step == 1) return "step=1";
  if (step < 200) return "step=small";
  if (step <= kExactCounterSteps) return "step=large";
  return "step>2^24";
}

// The CUDA kernel's paths (KernelRecord::paths; gpu/training.cu adamw_step_kernel): 16-byte
// packets, then the last numel % packet elements one a thread; nothing for an empty tensor.
void add_kernel_paths(const Tensor& t, std::vector<std::string>& tags) {
  constexpr int64_t kPacketBytes = 16;
  if (t.numel() == 0) return;
  const int64_t packet = kPacketBytes / static_cast<int64_t>(dtype_size(t.dtype()));
  tags.push_back(t.numel() % packet == 0 ? "numel%packet=0" : "numel%packet!=0");
}

CaseClasses classes(const Case& c) {
  CaseClasses k;
  const Tensor& p = *c.input("param");
  const AdamwHyper h = adamw_hyper(c);
  bool nan = false;
  for (const char* name : kStates)
    for (const std::string& v : gen::value_tags(*c.input(name))) nan = nan || v == "nan";
  k.shape_class = p.numel() == 0 ? "numel=0" : p.rank() == 1 ? "rank=1" : "rank=2";
  k.value_class = step_class(h.step) + (h.weight_decay == 0 ? ",wd=0" : "") + (nan ? ",nan" : "");
  k.tags = {step_class(h.step), k.shape_class, "dtype=" + std::string(dtype_name(p.dtype()))};
  if (p.rank() >= 1) k.tags.push_back(gen::rows_class(p.dim(0)));
  if (h.lr == 0) k.tags.push_back("lr=0");
  if (h.weight_decay == 0) k.tags.push_back("wd=0");
  if (static_cast<float>(h.weight_decay) != 0.0f) k.tags.push_back("wd!=0");  // the kernel's decay: f32(wd) != 0
  add_kernel_paths(p, k.tags);
  if (static_cast<float>(h.eps) < 1e-30f) k.tags.push_back("eps=tiny");
  if (h.maximize) k.tags.push_back("maximize");
  for (const char* name : kStates)
    for (const std::string& v : gen::value_tags(*c.input(name))) k.tags.push_back(std::string(name) + ":" + v);
  return k;
}

std::vector<std::string> required_tags(Direction) {
  std::vector<std::string> tags = {"step=1", "step=small", "step=large", "step>2^24", "numel=0", "rank=1", "rank=2",
                                   "dtype=fp32", "dtype=bf16", "dtype=fp16", "rows=0", "rows=large", "lr=0", "wd=0",
                                   "eps=tiny", "maximize", "wd!=0", "numel%packet=0", "numel%packet!=0"};
  for (const char* value : {"nan", "inf", "-0", "subnormal"}) tags.push_back(std::string("grad:") + value);
  return tags;
}

// --- error inputs --------------------------------------------------------------------------------

Case small_case() {
  Case c;
  c.op = "adamw_step";
  c.direction = Direction::kForward;
  for (const char* name : kStates) c.inputs[name] = Tensor(DType::kFP32, {8});
  c.attrs["step"] = int64_t{1};
  return c;
}

std::vector<ErrorInput> error_inputs(Direction) {
  std::vector<ErrorInput> out;
  auto add = [&](std::string name, auto edit, std::string error_class, std::string field) {
    Case c = small_case();
    edit(c);
    out.push_back({std::move(name), std::move(c), std::move(error_class), std::move(field), {}});
  };
  add("lr_negative", [](Case& c) { c.attrs["lr"] = -1e-3; }, "attr", "lr");
  add("lr_nan", [](Case& c) { c.attrs["lr"] = std::nan(""); }, "attr", "lr");
  add("eps_negative", [](Case& c) { c.attrs["eps"] = -1e-8; }, "attr", "eps");
  add("weight_decay_nan", [](Case& c) { c.attrs["weight_decay"] = std::nan(""); }, "attr", "weight_decay");
  add("beta1_one", [](Case& c) { c.attrs["beta1"] = 1.0; }, "attr", "beta1");
  add("beta2_negative", [](Case& c) { c.attrs["beta2"] = -0.5; }, "attr", "beta2");
  add("step_zero", [](Case& c) { c.attrs["step"] = int64_t{0}; }, "attr", "step");
  add("step_missing", [](Case& c) { c.attrs.erase("step"); }, "attr", "step");
  add("step_not_int", [](Case& c) { c.attrs["step"] = 1.0; }, "attr", "step");
  add("grad_bf16_beside_fp32", [](Case& c) { c.inputs["grad"] = Tensor(DType::kBF16, {8}); }, "dtype", "grad");
  add("exp_avg_other_shape", [](Case& c) { c.inputs["exp_avg"] = Tensor(DType::kFP32, {9}); }, "shape", "exp_avg");
  add("param_int32", [](Case& c) { c.inputs["param"] = Tensor(DType::kI32, {8}); }, "dtype", "param");
  add("param_scalar", [](Case& c) {
        for (const char* name : kStates) c.inputs[name] = Tensor(DType::kFP32, {});
      }, "shape", "param");
  return out;
}

// --- reference inputs ----------------------------------------------------------------------------

Case reference_case(int64_t n) {
  Case c;
  c.op = "adamw_step";
  c.direction = Direction::kForward;
  uint64_t seed = 31;
  for (const char* name : kStates) c.inputs[name] = gen::large_tensor(DType::kFP32, {n}, seed++);
  Tensor& v = c.inputs["exp_avg_sq"];
  for (int64_t i = 0; i < v.numel(); ++i) v.set_bits(i, v.bits(i) & 0x7FFFFFFFu);
  // The GLM-4.5 recipe's hyper-parameters at a step where CUDA's powf(0.999, t) is an ulp off.
  c.attrs = {{"lr", 3e-4}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.1},
             {"step", int64_t{102}}, {"maximize", false}};
  return c;
}

std::vector<ReferenceInput> reference_inputs(Direction) {
  return {{"params100000000", {}, [] { return reference_case(kBenchParams); }, true},
          {"params1048576", {}, [] { return reference_case(kTestParams); }, false}};
}

// --- shrinking -------------------------------------------------------------------------------

// Elements [i0, i0 + n) of every state, as a 1-D case (an element's update depends on it alone).
Case elements(const Case& c, int64_t i0, int64_t n) {
  Case out = c;
  for (const char* name : kStates) {
    const Tensor& t = *c.input(name);
    Tensor w(t.dtype(), {n});
    for (int64_t i = 0; i < n; ++i) w.set_bits(i, t.bits(i0 + i));
    out.inputs[name] = w;
  }
  return out;
}

// Rows [r0, r0 + n) of every state (the leading dimension), the other dimensions kept: a finding
// whose class is its rank (rank=2) keeps it while it shrinks.
Case leading_rows(const Case& c, int64_t r0, int64_t n) {
  Case out = c;
  for (const char* name : kStates) out.inputs[name] = tensor_rows(*c.input(name), r0, n);
  return out;
}

std::vector<Case> shrink_shape(const Case& c) {
  constexpr int64_t kMaxSingles = 16;
  const Tensor& p = *c.input("param");
  const int64_t n = p.numel();
  std::vector<Case> out;
  // A rejected case's states may differ in shape: no cut then (the cuts read every state at param's
  // indices).
  const bool same_shapes = std::all_of(std::begin(kStates), std::end(kStates), [&](const char* name) {
    const Tensor* t = c.input(name);
    return t && t->shape() == p.shape();
  });
  if (!same_shapes) return out;
  if (p.rank() > 1) out.push_back(elements(c, 0, n));  // the same elements, flat
  if (p.rank() > 1 && p.dim(0) > 1) {
    const int64_t rows = p.dim(0);
    for (int64_t r = 0; r < std::min(rows, kMaxSingles); ++r) out.push_back(leading_rows(c, r, 1));
    out.push_back(leading_rows(c, 0, rows / 2));
    out.push_back(leading_rows(c, rows / 2, rows - rows / 2));
  }
  if (n > 1) {
    for (int64_t i = 0; i < std::min(n, kMaxSingles); ++i) out.push_back(elements(c, i, 1));
    out.push_back(elements(c, 0, n / 2));
    out.push_back(elements(c, n / 2, n - n / 2));
  }
  return out;
}

// --- oracle: AdamW's update in exact arithmetic ------------------------------------------------

// p' = p - lr wd p - lr / bc1 * m' / (sqrt(v') / sqrt(bc2) + eps), m' = b1 m + (1 - b1) g,
// v' = b2 v + (1 - b2) g^2, bc_i = 1 - b_i^t, with g negated under maximize and the
// hyper-parameters as given (doubles): the update AdamW means, in fp64 (each output within a few
// fp64 ulps of the exact value, except where the update cancels most of the parameter).
std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const AdamwHyper h = adamw_hyper(c);
  const int64_t n = c.input("param")->numel();
  auto column = [&](const char* name) {
    const Tensor& t = *c.input(name);
    Eigen::ArrayXd a(n);
    for (int64_t i = 0; i < n; ++i) a(i) = t.f64(i);
    return a;
  };
  const Eigen::ArrayXd p = column("param"), m = column("exp_avg"), v = column("exp_avg_sq");
  const Eigen::ArrayXd g = h.maximize ? Eigen::ArrayXd(-column("grad")) : column("grad");
  const double t = static_cast<double>(h.step);
  const double bc1 = 1.0 - std::pow(h.beta1, t), bc2 = 1.0 - std::pow(h.beta2, t);
  const Eigen::ArrayXd m1 = h.beta1 * m + (1.0 - h.beta1) * g;
  const Eigen::ArrayXd v1 = h.beta2 * v + (1.0 - h.beta2) * g.square();
  const Eigen::ArrayXd p1 = p - h.lr * h.weight_decay * p - (h.lr / bc1) * m1 / (v1.sqrt() / std::sqrt(bc2) + h.eps);
  auto flat = [](const Eigen::ArrayXd& a) { return std::vector<double>(a.data(), a.data() + a.size()); };
  return {{"param", flat(p1)}, {"exp_avg", flat(m1)}, {"exp_avg_sq", flat(v1)}};
}

}  // namespace

AdamwHyper adamw_hyper(const Case& c) {
  AdamwHyper h;
  h.lr = float_or(c, "lr", h.lr);
  h.beta1 = float_or(c, "beta1", h.beta1);
  h.beta2 = float_or(c, "beta2", h.beta2);
  h.eps = float_or(c, "eps", h.eps);
  h.weight_decay = float_or(c, "weight_decay", h.weight_decay);
  const auto step = c.attrs.find("step");
  if (step == c.attrs.end()) throw RejectError("attr", "adamw_step: step is required (the step being taken, from 1)");
  const int64_t* s = std::get_if<int64_t>(&step->second);
  if (!s) throw RejectError("attr", "adamw_step: step must be an int");
  h.step = *s;
  if (const auto maximize = c.attrs.find("maximize"); maximize != c.attrs.end()) {
    const bool* b = std::get_if<bool>(&maximize->second);
    if (!b) throw RejectError("attr", "adamw_step: maximize must be a bool");
    h.maximize = *b;
  }
  return h;
}

float adamw_step_counter(int64_t step) {
  const float before = static_cast<float>(static_cast<double>(step - 1));
  return before + 1.0f;
}

OpInfo adamw_step() {
  OpInfo op;
  op.name = "adamw_step";
  op.doc = "one step of torch.optim.AdamW(fused=True) on one parameter: param, exp_avg, exp_avg_sq updated";
  op.inputs[Direction::kForward] = {{"param", "the parameter before the step", false, true},
                                    {"grad", "its gradient (param's shape and dtype)", false, true},
                                    {"exp_avg", "first moment estimate before the step", false, true},
                                    {"exp_avg_sq", "second moment estimate before the step", false, true}};
  op.outputs[Direction::kForward] = {{"param", "the parameter after the step", false, true},
                                     {"exp_avg", "first moment estimate after the step", false, true},
                                     {"exp_avg_sq", "second moment estimate after the step", false, true}};
  op.attrs = {{"lr", AttrType::kFloat, "learning rate (default 1e-3)"},
              {"beta1", AttrType::kFloat, "first moment decay (default 0.9)"},
              {"beta2", AttrType::kFloat, "second moment decay (default 0.999)"},
              {"eps", AttrType::kFloat, "added to the denominator (default 1e-8)"},
              {"weight_decay", AttrType::kFloat, "decoupled weight decay (default 1e-2)"},
              {"step", AttrType::kInt, "the step being taken, from 1 (required): the fp32 counter holds step - 1 before it"},
              {"maximize", AttrType::kBool, "ascend instead of descend (default false)"}};
  op.contracts = {{"megatron_eager",
                   "fp32 opmath: hyper-parameters rounded to fp32 once; decay p - f32(lr wd) p as one fma; moments by "
                   "fma(b, m, fma(-b, g, g)); bias corrections 1 - powf(b, t) with CUDA's powf; ((lr / bc1) m) / "
                   "(sqrt(v) / sqrt(bc2) + eps); results rounded to the dtype",
                   kMegatronFrom}};
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
