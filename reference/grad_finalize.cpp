// grad_finalize (spec OP-12): the fp32 arithmetic of finalize_model_grads after the gradient sync,
// as eager PyTorch runs it on CUDA. `grad_data *= python_float` multiplies by the double rounded to
// fp32 once on the host; r0.13's `1.0 / num_tokens` is an fp32 reciprocal of the int32 count on the
// device; `tensor / python_int` multiplies by the fp32 reciprocal (ATen's scalar division path);
// torch.sign gives -1, +0 or +1.
#include <cmath>

#include "ops/training.h"
#include "reference/numerics.h"
#include "reference/training.h"

namespace bitparity::ref {
namespace {

// g * s in fp32, each product rounded once (a NaN as CUDA writes it).
Tensor scaled(const Tensor& g, float s) {
  Tensor out(DType::kFP32, g.shape());
  for (int64_t i = 0; i < g.numel(); ++i) out.set_f32(i, canonical(g.f32(i) * s));
  return out;
}

TensorMap aligned(const Case& c, const ContractInfo&) {
  const ops::GradFinalizeAttrs a = ops::grad_finalize_attrs(c);
  const Tensor& g = *c.input("main_grad");
  TensorMap out = {{"main_grad", a.dp_size > 1 ? scaled(g, static_cast<float>(1.0 / static_cast<double>(a.dp_size)))
                                              : g}};  // no scaling: the buffer as it was
  if (const Tensor* counts = c.input("tokens_per_expert")) {
    out["tokens_per_expert"] = *counts;  // neither accumulated nor read
    out["expert_bias"] = *c.input("expert_bias");
  }
  return out;
}

TensorMap r013(const Case& c, const ContractInfo&) {
  const ops::GradFinalizeAttrs a = ops::grad_finalize_attrs(c);
  const Tensor& g = *c.input("main_grad");
  const bool scale = a.num_tokens && *a.num_tokens > 0;
  TensorMap out = {{"main_grad", scale ? scaled(g, 1.0f / static_cast<float>(*a.num_tokens)) : g}};  // no scaling: the buffer as it was
  if (const Tensor* counts = c.input("tokens_per_expert")) {
    const Tensor& bias = *c.input("expert_bias");
    const int64_t L = counts->dim(0), E = counts->dim(1);
    const float inv_e = 1.0f / static_cast<float>(E);
    const float rate = static_cast<float>(a.bias_update_rate);
    Tensor moved(DType::kFP32, bias.shape());
    for (int64_t l = 0; l < L; ++l) {
      float sum = 0;  // whole counts below 2^24 (validate): exact in any order
      for (int64_t e = 0; e < E; ++e) sum += counts->f32(l * E + e);
      const float average = sum * inv_e;
      for (int64_t e = 0; e < E; ++e) {
        const float offset = average - counts->f32(l * E + e);
        const float sign = static_cast<float>((0.0f < offset) - (offset < 0.0f));
        moved.set_f32(l * E + e, canonical(bias.f32(l * E + e) + sign * rate));
      }
    }
    out["expert_bias"] = moved;
    out["tokens_per_expert"] = Tensor(DType::kFP32, counts->shape());  // zero_()
  }
  return out;
}

}  // namespace

std::vector<ImplEntry> grad_finalize_impls() {
  return {{"grad_finalize", "megatron_aligned", aligned}, {"grad_finalize", "megatron_r013", r013}};
}

}  // namespace bitparity::ref
