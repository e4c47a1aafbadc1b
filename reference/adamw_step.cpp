// adamw_step (spec OP-12): torch.optim.AdamW(fused=True) of PyTorch 2.11 on CUDA, per element in
// fp32 opmath as fused_adam_utils.cuh (ADAM_MODE::ADAMW) computes it and nvcc compiles it. The
// hyper-parameters arrive as doubles and are rounded to fp32 once; the bias corrections use CUDA's
// powf (libdevice __nv_powf, not correctly rounded: reference/math); `param -= lr * weight_decay *
// param` is contracted by nvcc into fma(-f32(lr wd), p, p); the moment updates are the source's
// explicit fmas. Compiled without contraction (-ffp-contract=off), so every other operation here
// rounds once, as on the GPU.
#include <cmath>

#include "ops/training.h"
#include "reference/math/device_math.h"
#include "reference/numerics.h"
#include "reference/training.h"

namespace bitparity::ref {
namespace {

TensorMap adamw_megatron(const Case& c, const ContractInfo&) {
  const ops::AdamwHyper h = ops::adamw_hyper(c);
  const float lr = static_cast<float>(h.lr), b1 = static_cast<float>(h.beta1), b2 = static_cast<float>(h.beta2);
  const float eps = static_cast<float>(h.eps), wd = static_cast<float>(h.weight_decay);
  const float t = ops::adamw_step_counter(h.step);
  // Once per launch block on the GPU, the same value for every element.
  const float bc1 = 1.0f - math::libdevice_powf(b1, t);
  const float bc2 = 1.0f - math::libdevice_powf(b2, t);
  const float bc2_sqrt = std::sqrt(bc2);
  const float step_size = lr / bc1;
  const float decay = lr * wd;

  const Tensor& param = *c.input("param");
  const Tensor& grad = *c.input("grad");
  const Tensor& exp_avg = *c.input("exp_avg");
  const Tensor& exp_avg_sq = *c.input("exp_avg_sq");
  Tensor p_out(param.dtype(), param.shape()), m_out(param.dtype(), param.shape()), v_out(param.dtype(), param.shape());
  for (int64_t i = 0; i < param.numel(); ++i) {
    float p = param.f32(i), g = grad.f32(i), m = exp_avg.f32(i), v = exp_avg_sq.f32(i);
    if (h.maximize) g = -g;
    if (wd != 0.0f) p = std::fma(-decay, p, p);
    m = std::fma(b1, m, std::fma(-b1, g, g));
    const float g2 = g * g;
    v = std::fma(b2, v, std::fma(-b2, g2, g2));
    const float denom = std::sqrt(v) / bc2_sqrt + eps;
    p = p - (step_size * m) / denom;
    p_out.set_f32(i, p);
    m_out.set_f32(i, m);
    v_out.set_f32(i, v);
  }
  return {{"param", p_out}, {"exp_avg", m_out}, {"exp_avg_sq", v_out}};
}

}  // namespace

std::vector<ImplEntry> adamw_step_impls() {
  return {{"adamw_step", "megatron_eager", with_canonical_nans(adamw_megatron)}};
}

}  // namespace bitparity::ref
