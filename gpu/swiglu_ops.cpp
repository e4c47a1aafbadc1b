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

// --- inputs ------------------------------------------------------------------------------------
// The checks are the reference's own (reference/swiglu_common.h), so both backends reject the same
// inputs with the same class and message. Required inputs are present: run_impl checks them.

const Tensor& input(const Case& c, const std::string& name) { return *c.input(name); }

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

// The forward launch of both Megatron ops: swiglu has an optional bias and no scale, swiglu_scale
// a scale and no bias.
TensorMap megatron_forward(DType act, int64_t rows, int64_t F, const Tensor& y, const Tensor* bias,
                           const Tensor* scale, const MegatronClamp& clamp, const CudaOptions& options) {
  const DeviceBuffer d_y = to_device(y), d_bias = to_device(bias), d_scale = to_device(scale);
  DeviceBuffer out(static_cast<size_t>(rows * F) * dtype_size(act));
  MegatronForward p;
  p.act = act;
  p.rows = rows;
  p.F = F;
  p.y = d_y.get();
  p.bias = d_bias.get();
  p.scale = d_scale.get();
  if (scale) p.scale_dtype = scale->dtype();
  p.clamp = clamp;
  p.out = out.get();
  p.ilp = options.ilp;
  launch_megatron_forward(p);
  return {{"out", from_device(out, act, {rows, F})}};
}

}  // namespace

RowSumPlan torch_row_sum_plan(int64_t width, int64_t rows) {
  const ref::RowSumPlan r = ref::torch_row_sum_plan(width, rows);
  return {r.vectorized, static_cast<int>(r.lanes)};
}

// ---------------------------------------------------------------------------------------------
TensorMap swiglu_megatron_cuda(const Case& c, ClampGate gate, const CudaOptions& options) {
  const Tensor& y = input(c, "y");
  ref::swiglu::check_activation_dtype("swiglu", y, "y");
  const auto [rows, F] = ref::swiglu::split_y("swiglu", y);
  const Tensor* bias = c.input("bias");
  ref::swiglu::check_bias(y, bias);
  const MegatronClamp clamp = megatron_clamp(ref::swiglu::active_clamp(c, gate));
  const DType act = y.dtype();

  if (c.direction == Direction::kForward) return megatron_forward(act, rows, F, y, bias, nullptr, clamp, options);
  const DeviceBuffer d_y_in = to_device(y), d_bias = to_device(bias);
  const Tensor& g = input(c, "g");
  ref::swiglu::check_grad("swiglu", g, rows, F, act);
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
  ref::swiglu::check_activation_dtype(who, y, "y");
  ref::swiglu::check_activation_dtype(who, scale, "scale");
  const auto [rows, F] = ref::swiglu::split_y(who, y);
  ref::swiglu::check_scale_shape(who, scale, rows);
  const MegatronClamp clamp = megatron_clamp(ref::swiglu::active_clamp(c, gate));
  const DType act = y.dtype(), w = scale.dtype();

  if (c.direction == Direction::kForward) return megatron_forward(act, rows, F, y, nullptr, &scale, clamp, options);
  const DeviceBuffer d_y_in = to_device(y), d_scale_in = to_device(scale);
  const Tensor& g = input(c, "g");
  ref::swiglu::check_grad(who, g, rows, F, act);
  const bool any_work = rows > 0 && F > 0;
  const RowSumPlan plan = any_work ? torch_row_sum_plan(F, rows) : RowSumPlan{};
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
  p.plan = plan;
  p.d_y = d_y.get();
  p.d_scale = d_scale.get();
  p.ilp = options.ilp;
  launch_megatron_scale_backward(p);
  if (any_work) d_scale.download(d_scale_host.data(), d_scale_host.nbytes());
  return {{"d_y", from_device(d_y, act, {rows, 2 * F})}, {"d_scale", d_scale_host}};
}

// ---------------------------------------------------------------------------------------------
TensorMap swiglu_scale_paddle_cuda(const Case& c, bool shipped_clamp_shape, const CudaOptions& options) {
  const ref::swiglu::PaddleInputs checked = ref::swiglu::check_paddle(c);
  const bool bwd = c.direction == Direction::kBackward;
  const Tensor& y = input(c, "y");
  const Tensor& scale = input(c, "scale");
  const int64_t rows = checked.rows, F = checked.F;
  const PaddleClamp clamp{checked.clamp.on, checked.clamp.cv};
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
