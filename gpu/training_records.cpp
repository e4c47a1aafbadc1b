// The kernel records of the training-step ops (spec OP-11, OP-12): each binds its launcher
// (gpu/training_kernels.h) to device tensors. The ops' validate has checked the inputs and fixed
// the output shapes; what is left here is each contract's own reading of the case: fanout_grad's
// order of additions, adamw_step's hyper-parameters as the fused kernel holds them (fp32 of the
// doubles, the fp32 step counter before the step), and grad_finalize's fp32 scale of main_grad and
// whether the expert bias moves.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "core/case.h"
#include "gpu/common/device_tensor.h"
#include "gpu/records.h"
#include "gpu/training_kernels.h"

namespace bitparity::gpu {
namespace {

// --- fanout_grad ------------------------------------------------------------------------------

// The branch added to g_dispatcher first; the third branch is added to that sum.
struct FanoutOrder {
  const char* first;
  const char* last;
};
constexpr FanoutOrder kGlm45Order = {"g_shared", "g_router"};  // bf(bf(g_dispatcher + g_shared) + g_router)
constexpr FanoutOrder kDsv4Order = {"g_router", "g_shared"};   // bf(bf(g_dispatcher + g_router) + g_shared)

BoundLaunch bind_fanout(const KernelArgs& k, const FanoutOrder& order) {
  const DeviceTensor& dispatcher = required(k.inputs, "g_dispatcher");
  FanoutGrad p;
  p.dtype = dispatcher.dtype;
  p.n = dispatcher.numel();
  p.dispatcher = dispatcher.data();
  p.first = required(k.inputs, order.first).data();
  p.last = required(k.inputs, order.last).data();
  p.out = required(k.outputs, "d_hidden").data();
  p.ilp = k.ilp;
  p.stream = k.stream;
  return [p] { launch_fanout_grad(p); };
}

BoundLaunch bind_fanout_glm45(const KernelArgs& k) { return bind_fanout(k, kGlm45Order); }
BoundLaunch bind_fanout_dsv4(const KernelArgs& k) { return bind_fanout(k, kDsv4Order); }

// --- adamw_step -------------------------------------------------------------------------------

// torch.optim.AdamW's defaults, for an attribute the case leaves out (the op's spec names the same).
constexpr double kDefaultLr = 1e-3, kDefaultBeta1 = 0.9, kDefaultBeta2 = 0.999, kDefaultEps = 1e-8;
constexpr double kDefaultWeightDecay = 1e-2;

// A hyper-parameter as the fused kernel holds it: the Python float (a double) cast to fp32 once
// (fused_adam_utils.cuh lines 130-135).
float hyper(const Case& c, const char* name, double fallback) {
  const std::optional<double> v = c.float_attr(name);
  return static_cast<float>(v ? *v : fallback);
}

int64_t step_attr(const Case& c) {
  const auto it = c.attrs.find("step");
  if (it != c.attrs.end())
    if (const int64_t* step = std::get_if<int64_t>(&it->second)) return *step;
  throw std::logic_error("adamw_step: a case without the integer attribute step passed validate");
}

bool maximize_attr(const Case& c) {
  const auto it = c.attrs.find("maximize");
  if (it == c.attrs.end()) return false;
  if (const bool* b = std::get_if<bool>(&it->second)) return *b;
  throw std::logic_error("adamw_step: a non-bool maximize attribute passed validate");
}

BoundLaunch bind_adamw(const KernelArgs& k) {
  const DeviceTensor& param = required(k.inputs, "param");
  AdamwStep p;
  p.dtype = param.dtype;
  p.n = param.numel();
  p.lr = hyper(k.c, "lr", kDefaultLr);
  p.beta1 = hyper(k.c, "beta1", kDefaultBeta1);
  p.beta2 = hyper(k.c, "beta2", kDefaultBeta2);
  p.eps = hyper(k.c, "eps", kDefaultEps);
  p.weight_decay = hyper(k.c, "weight_decay", kDefaultWeightDecay);
  // torch keeps the step count as an fp32 tensor holding step - 1 before the step (the integer as a
  // Python float, then rounded to fp32), and the device adds 1 to it in fp32 (the kernel does).
  p.counter_before = static_cast<float>(static_cast<double>(step_attr(k.c) - 1));
  p.maximize = maximize_attr(k.c);
  p.param = param.data();
  p.grad = required(k.inputs, "grad").data();
  p.exp_avg = required(k.inputs, "exp_avg").data();
  p.exp_avg_sq = required(k.inputs, "exp_avg_sq").data();
  p.param_out = required(k.outputs, "param").data();
  p.exp_avg_out = required(k.outputs, "exp_avg").data();
  p.exp_avg_sq_out = required(k.outputs, "exp_avg_sq").data();
  p.ilp = k.ilp;
  p.stream = k.stream;
  return [p] { launch_adamw_step(p); };
}

// --- grad_finalize ----------------------------------------------------------------------------

constexpr double kDefaultBiasUpdateRate = 1e-3;  // moe_router_bias_update_rate's default (the op's spec names the same)

int64_t dp_size_attr(const Case& c) {
  const auto it = c.attrs.find("dp_size");
  if (it != c.attrs.end())
    if (const int64_t* dp_size = std::get_if<int64_t>(&it->second)) return *dp_size;
  throw std::logic_error("grad_finalize: a case without the integer attribute dp_size passed validate");
}

std::optional<int64_t> num_tokens_attr(const Case& c) {
  const auto it = c.attrs.find("num_tokens");
  if (it == c.attrs.end()) return std::nullopt;
  if (const int64_t* num_tokens = std::get_if<int64_t>(&it->second)) return *num_tokens;
  throw std::logic_error("grad_finalize: a non-integer num_tokens attribute passed validate");
}

// What both contracts share: main_grad copied as it is (each contract sets its scale), and the
// routers' buffers, where the case has them, copied as they are (r0.13 sets its step).
GradFinalize grad_finalize_common(const KernelArgs& k) {
  const DeviceTensor& grad = required(k.inputs, "main_grad");
  GradFinalize p;
  p.n = grad.numel();
  p.main_grad = grad.data();
  p.main_grad_out = required(k.outputs, "main_grad").data();
  if (const DeviceTensor* counts = optional(k.inputs, "tokens_per_expert")) {
    p.layers = counts->shape.at(0);
    p.experts = counts->shape.at(1);
    p.tokens_per_expert = counts->data();
    p.expert_bias = required(k.inputs, "expert_bias").data();
    p.tokens_per_expert_out = required(k.outputs, "tokens_per_expert").data();
    p.expert_bias_out = required(k.outputs, "expert_bias").data();
  }
  p.ilp = k.ilp;
  p.stream = k.stream;
  return p;
}

// megatron_aligned: `scale_gradients(1.0 / dp_size)`, the Python double rounded to fp32 once (the
// scalar of an fp32 in-place multiply); at dp_size 1 no scaling, the buffer as it was. The expert
// bias is not updated and the counts are not read: both outputs are the inputs.
BoundLaunch bind_grad_finalize_aligned(const KernelArgs& k) {
  GradFinalize p = grad_finalize_common(k);
  const int64_t dp_size = dp_size_attr(k.c);
  p.scaled = dp_size > 1;
  p.scale = static_cast<float>(1.0 / static_cast<double>(dp_size));
  return [p] { launch_grad_finalize(p); };
}

// megatron_r013: `scale_gradients(1.0 / num_tokens)` where num_tokens > 0, the reciprocal of the
// int32 count computed in fp32 (IEEE division: the host's bits are the device's); else no scaling.
// get_updated_expert_bias in fp32 opmath: the mean as the row sum times f32(1 / E) (ATen's scalar
// division), the rate rounded to fp32 once; the counts zeroed.
BoundLaunch bind_grad_finalize_r013(const KernelArgs& k) {
  GradFinalize p = grad_finalize_common(k);
  const std::optional<int64_t> num_tokens = num_tokens_attr(k.c);
  p.scaled = num_tokens && *num_tokens > 0;
  p.scale = p.scaled ? 1.0f / static_cast<float>(*num_tokens) : 1.0f;
  p.update_bias = true;
  p.inv_experts = p.experts > 0 ? 1.0f / static_cast<float>(p.experts) : 1.0f;
  p.rate = hyper(k.c, "bias_update_rate", kDefaultBiasUpdateRate);
  return [p] { launch_grad_finalize(p); };
}

// --- the kernels' paths (KernelRecord::paths; the tags of ops/fanout_grad.cpp, ops/adamw_step.cpp,
// ops/grad_finalize.cpp) -----------------------------------------------------------------------------

// The flat kernels (training.cu): nothing for an empty tensor; 16-byte packets, then a tail of
// single elements where numel is not a multiple of the packet.
const std::vector<std::string> kFlatPaths = {"numel%packet=0", "numel%packet!=0"};

std::vector<std::string> with_flat(std::vector<std::string> paths) {
  paths.insert(paths.end(), kFlatPaths.begin(), kFlatPaths.end());
  return paths;
}

}  // namespace

std::vector<KernelRecord> training_kernels() {
  // The dtype a template parameter; fanout's empty tensors are its zero rows.
  const std::vector<std::string> fanout = with_flat({"rows=0", "dtype=bf16", "dtype=fp16", "dtype=fp32"});
  // The decay a branch on f32(weight_decay).
  const std::vector<std::string> adamw =
      with_flat({"numel=0", "wd=0", "wd!=0", "dtype=bf16", "dtype=fp16", "dtype=fp32"});
  // main_grad copied (dp_size 1; num_tokens absent or 0) or scaled; the routers' buffers absent,
  // copied (aligned) or stepped by expert_bias_kernel (r0.13).
  const std::vector<std::string> aligned =
      with_flat({"rows=0", "dp=1", "dp=power_of_two", "dp=other", "expert_bias", "no_expert_bias"});
  const std::vector<std::string> r013 =
      with_flat({"rows=0", "num_tokens=absent", "num_tokens=0", "num_tokens=1", "num_tokens=other",
                 "num_tokens>2^24", "expert_bias", "no_expert_bias"});
  return {
      {"fanout_grad", "glm45", bind_fanout_glm45, fanout},
      {"fanout_grad", "dsv4", bind_fanout_dsv4, fanout},
      {"adamw_step", "megatron_eager", bind_adamw, adamw},
      {"grad_finalize", "megatron_aligned", bind_grad_finalize_aligned, aligned},
      {"grad_finalize", "megatron_r013", bind_grad_finalize_r013, r013},
  };
}

}  // namespace bitparity::gpu
