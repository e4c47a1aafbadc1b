#include "gpu/swiglu_ops.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "gpu/runtime.h"
#include "reference/numerics.h"

namespace bitparity::gpu {
namespace {

using ref::swiglu::ClampGate;

// --- the reference's checks ----------------------------------------------------------------------
// The reference keeps these in file-local helpers (reference/swiglu.cpp, swiglu_scale.cpp,
// numerics.cpp); they are restated here in the same order with the same classes and messages.
// Shared ones (split_y, active_clamp, promote) are called, not restated.

const Tensor& input(const Case& c, const std::string& name) {
  const Tensor* t = c.input(name);
  if (!t) throw RejectError("shape", c.op + ": missing input '" + name + "'");
  return *t;
}

bool is_activation_dtype(DType d) { return d == DType::kBF16 || d == DType::kFP16 || d == DType::kFP32; }

void check_swiglu_bias(const Tensor& y, const Tensor* bias) {
  if (!bias) return;
  if (bias->rank() != 1 || bias->dim(0) != y.dim(1))
    throw RejectError("shape", "swiglu: bias must have shape [" + std::to_string(y.dim(1)) + "]; got " +
                                   shape_string(bias->shape()));
  if (bias->dtype() != y.dtype()) throw RejectError("dtype", "swiglu: bias must have y's dtype");
}

void check_scale_shape(const std::string& who, const Tensor& scale, int64_t rows) {
  const bool ok = (scale.rank() == 1 && scale.dim(0) == rows) ||
                  (scale.rank() == 2 && scale.dim(0) == rows && scale.dim(1) == 1);
  if (!ok)
    throw RejectError("shape", who + ": scale must have shape [rows] or [rows, 1] with rows = " +
                                   std::to_string(rows) + "; got " + shape_string(scale.shape()));
}

void check_grad(const std::string& who, const Tensor& g, int64_t rows, int64_t F, DType act) {
  if (g.shape() != Shape{rows, F})
    throw RejectError("shape", who + ": g must have shape " + shape_string({rows, F}) + "; got " +
                                   shape_string(g.shape()));
  if (g.dtype() != act) throw RejectError("dtype", who + ": g must have y's dtype");
}

// The layouts that reference torch_row_sum rejects (it is reached only for rows > 0 and F > 0).
void check_row_sum_modelled(int64_t width) {
  if (width > ref::kMaxModelledRowWidth)
    throw RejectError("unmodelled", "rule 7 models torch.sum rows up to " + std::to_string(ref::kMaxModelledRowWidth) +
                                        " wide; got " + std::to_string(width));
  constexpr int64_t kVectorizeFrom = 128, kVectorWidth = 4;
  if (width >= kVectorizeFrom && width % kVectorWidth != 0)
    throw RejectError("unmodelled", "rule 7 does not model torch.sum over rows of width >= 128 that are not a "
                                    "multiple of 4; got " + std::to_string(width));
}

MegatronClamp megatron_clamp(std::optional<double> clamp) {
  MegatronClamp m;
  if (!clamp) return m;
  m.on = true;
  m.nan_limit = std::isnan(*clamp);
  m.hi = static_cast<float>(*clamp);
  m.lo = static_cast<float>(-*clamp);
  return m;
}

// --- device copies -----------------------------------------------------------------------------

DeviceBuffer to_device(const Tensor& t) {
  DeviceBuffer buffer(t.nbytes());
  buffer.upload(t.data(), t.nbytes());
  return buffer;
}

DeviceBuffer to_device(const Tensor* t) { return t ? to_device(*t) : DeviceBuffer(); }

Tensor from_device(const DeviceBuffer& buffer, DType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  buffer.download(t.data(), t.nbytes());
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
TensorMap swiglu_megatron_cuda(const Case& c, ClampGate gate, const CudaOptions& options) {
  const Tensor& y = input(c, "y");
  if (!is_activation_dtype(y.dtype()))
    throw RejectError("dtype", "swiglu: y must be bf16, fp16 or fp32; got " + std::string(dtype_name(y.dtype())));
  const Tensor* bias = c.input("bias");
  check_swiglu_bias(y, bias);
  const auto [rows, F] = ref::swiglu::split_y("swiglu", y);
  const MegatronClamp clamp = megatron_clamp(ref::swiglu::active_clamp(c, gate));
  const DType act = y.dtype();

  const DeviceBuffer d_y_in = to_device(y), d_bias = to_device(bias);
  if (c.direction == Direction::kForward) {
    DeviceBuffer out(static_cast<size_t>(rows * F) * dtype_size(act));
    MegatronForward p;
    p.act = act;
    p.rows = rows;
    p.F = F;
    p.y = d_y_in.get();
    p.bias = d_bias.get();
    p.clamp = clamp;
    p.out = out.get();
    p.ilp = options.ilp;
    launch_megatron_forward(p);
    return {{"out", from_device(out, act, {rows, F})}};
  }
  const Tensor& g = input(c, "g");
  check_grad("swiglu", g, rows, F, act);
  const DeviceBuffer d_g = to_device(g);
  DeviceBuffer d_y(static_cast<size_t>(rows * 2 * F) * dtype_size(act));
  MegatronBackward p;
  p.act = act;
  p.rows = rows;
  p.F = F;
  p.y = d_y_in.get();
  p.bias = d_bias.get();
  p.g = d_g.get();
  p.clamp = clamp;
  p.d_y = d_y.get();
  p.ilp = options.ilp;
  launch_megatron_backward(p);
  return {{"d_y", from_device(d_y, act, {rows, 2 * F})}};
}

// ---------------------------------------------------------------------------------------------
TensorMap swiglu_scale_megatron_cuda(const Case& c, ClampGate gate, const CudaOptions& options) {
  const std::string who = "swiglu_scale";
  const Tensor& y = input(c, "y");
  const Tensor& scale = input(c, "scale");
  for (const Tensor* t : {&y, &scale})
    if (!is_activation_dtype(t->dtype())) throw RejectError("dtype", who + ": y and scale must be bf16, fp16 or fp32");
  const auto [rows, F] = ref::swiglu::split_y(who, y);
  check_scale_shape(who, scale, rows);
  const MegatronClamp clamp = megatron_clamp(ref::swiglu::active_clamp(c, gate));
  const DType act = y.dtype(), w = scale.dtype();

  const DeviceBuffer d_y_in = to_device(y), d_scale_in = to_device(scale);
  if (c.direction == Direction::kForward) {
    DeviceBuffer out(static_cast<size_t>(rows * F) * dtype_size(act));
    MegatronForward p;
    p.act = act;
    p.rows = rows;
    p.F = F;
    p.y = d_y_in.get();
    p.scale = d_scale_in.get();
    p.scale_dtype = w;
    p.clamp = clamp;
    p.out = out.get();
    p.ilp = options.ilp;
    launch_megatron_forward(p);
    return {{"out", from_device(out, act, {rows, F})}};
  }
  const Tensor& g = input(c, "g");
  check_grad(who, g, rows, F, act);
  const bool any_work = rows > 0 && F > 0;
  if (any_work) check_row_sum_modelled(F);
  const DeviceBuffer d_g = to_device(g);
  DeviceBuffer d_y(static_cast<size_t>(rows * 2 * F) * dtype_size(act));
  DeviceBuffer d_scale(scale.nbytes());
  Tensor d_scale_host(w, scale.shape());  // +0 for every row when F = 0, as the reference's empty sum
  MegatronScaleBackward p;
  p.act = act;
  p.scale_dtype = w;
  p.rows = rows;
  p.F = F;
  p.y = d_y_in.get();
  p.scale = d_scale_in.get();
  p.g = d_g.get();
  p.clamp = clamp;
  if (any_work) p.plan = torch_row_sum_plan(F, rows);
  p.d_y = d_y.get();
  p.d_scale = d_scale.get();
  p.ilp = options.ilp;
  launch_megatron_scale_backward(p);
  if (any_work) d_scale.download(d_scale_host.data(), d_scale_host.nbytes());
  return {{"d_y", from_device(d_y, act, {rows, 2 * F})}, {"d_scale", d_scale_host}};
}

// ---------------------------------------------------------------------------------------------
TensorMap swiglu_scale_paddle_cuda(const Case& c, bool shipped_clamp_shape, const CudaOptions& options) {
  // reference check_paddle
  const bool bwd = c.direction == Direction::kBackward;
  const std::string who = bwd ? "fused_swiglu_scale_bwd" : "fused_swiglu_scale";
  const Tensor& y = input(c, "y");
  const Tensor& scale = input(c, "scale");
  const auto [rows, F] = ref::swiglu::split_y(who, y);
  check_scale_shape(who, scale, rows);
  if (bwd) check_grad(who, input(c, "g"), rows, F, y.dtype());
  if (y.dtype() != DType::kBF16 && y.dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": X must be bfloat16 or float32; got " + std::string(dtype_name(y.dtype())));
  if (scale.dtype() != DType::kBF16 && scale.dtype() != DType::kFP32)
    throw RejectError("dtype",
                      who + ": Scale must be bfloat16 or float32; got " + std::string(dtype_name(scale.dtype())));
  if (y.dtype() == DType::kFP32 && scale.dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": float32 X requires float32 Scale");
  constexpr int kPacketBytes = 16;
  const int64_t vec = kPacketBytes / dtype_size(y.dtype());
  if (F % vec != 0)
    throw RejectError("shape", who + ": hidden_size must be divisible by the vector width (" + std::to_string(vec) +
                                   " for " + std::string(dtype_name(y.dtype())) + "); got " + std::to_string(F));
  PaddleClamp clamp;
  if (const auto value = ref::swiglu::active_clamp(c, ClampGate::kPositive)) {
    if (!std::isfinite(*value))
      throw RejectError("attr", who + "_clamp: clamp_value must be finite and greater than zero");
    clamp = {true, static_cast<float>(*value)};
  }
  const DType act = y.dtype(), w = scale.dtype();

  const DeviceBuffer d_y_in = to_device(y), d_scale_in = to_device(scale);
  if (!bwd) {
    DeviceBuffer out(static_cast<size_t>(rows * F) * dtype_size(act));
    PaddleForward p;
    p.act = act;
    p.scale_dtype = w;
    p.rows = rows;
    p.F = F;
    p.y = d_y_in.get();
    p.scale = d_scale_in.get();
    p.clamp = clamp;
    p.out = out.get();
    p.ilp = options.ilp;
    launch_paddle_forward(p);
    return {{"out", from_device(out, act, {rows, F})}};
  }
  const DeviceBuffer d_g = to_device(input(c, "g"));
  DeviceBuffer d_y(static_cast<size_t>(rows * 2 * F) * dtype_size(act));
  DeviceBuffer d_scale(scale.nbytes());
  // The stored clamp kernels return [rows, 1] whatever scale's rank (spec OP-6).
  Tensor d_scale_host(w, clamp.on && shipped_clamp_shape ? Shape{rows, 1} : scale.shape());
  PaddleBackward p;
  p.act = act;
  p.scale_dtype = w;
  p.rows = rows;
  p.F = F;
  p.y = d_y_in.get();
  p.scale = d_scale_in.get();
  p.g = d_g.get();
  p.clamp = clamp;
  p.d_y = d_y.get();
  p.d_scale = d_scale.get();
  p.ilp = options.ilp;
  launch_paddle_backward(p);
  if (rows > 0 && F > 0) d_scale.download(d_scale_host.data(), d_scale_host.nbytes());
  return {{"d_y", from_device(d_y, act, {rows, 2 * F})}, {"d_scale", d_scale_host}};
}

}  // namespace bitparity::gpu
