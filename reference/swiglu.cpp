// swiglu and its bias variant (spec OP-4, OP-6): Megatron's SwiGLUFunction / BiasSwiGLUFunction.
#include "reference/swiglu.h"

#include "core/error.h"
#include "reference/swiglu_common.h"

namespace bitparity::ref {
namespace {

using swiglu::ClampGate;

void check_activation_dtype(const Tensor& t, const std::string& name) {
  if (t.dtype() != DType::kBF16 && t.dtype() != DType::kFP16 && t.dtype() != DType::kFP32)
    throw RejectError("dtype", "swiglu: " + name + " must be bf16, fp16 or fp32; got " +
                                   std::string(dtype_name(t.dtype())));
}

// y + bias when the bias variant is used: one eager add, rounded to y's dtype.
Tensor biased_input(const Case& c) {
  const Tensor& y = *c.input("y");
  const Tensor* bias = c.input("bias");
  if (!bias) return y;
  if (bias->rank() != 1 || bias->dim(0) != y.dim(1))
    throw RejectError("shape", "swiglu: bias must have shape [" + std::to_string(y.dim(1)) + "]; got " +
                                   shape_string(bias->shape()));
  if (bias->dtype() != y.dtype()) throw RejectError("dtype", "swiglu: bias must have y's dtype");
  Tensor out(y.dtype(), y.shape());
  for (int64_t i = 0; i < y.numel(); ++i) out.set_f32(i, y.f32(i) + bias->f32(i % y.dim(1)));
  return out;
}

}  // namespace

TensorMap swiglu_megatron(const Case& c, swiglu::ClampGate gate) {
  check_activation_dtype(*c.input("y"), "y");
  const auto [rows, F] = swiglu::split_y("swiglu", *c.input("y"));
  const Tensor y = biased_input(c);
  const std::optional<double> clamp = swiglu::active_clamp(c, gate);
  const DType act = y.dtype();

  if (c.direction == Direction::kForward) {
    Tensor out(act, {rows, F});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < F; ++j)
        out.set_f32(r * F + j, swiglu::megatron_swiglu(act, y.f32(r * 2 * F + j), y.f32(r * 2 * F + F + j), clamp));
    return {{"out", out}};
  }
  const Tensor& g = *c.input("g");
  if (g.shape() != Shape{rows, F})
    throw RejectError("shape", "swiglu: g must have shape " + shape_string({rows, F}) + "; got " +
                                   shape_string(g.shape()));
  if (g.dtype() != act) throw RejectError("dtype", "swiglu: g must have y's dtype");
  Tensor d_y(act, {rows, 2 * F});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < F; ++j) {
      const auto grad = swiglu::megatron_swiglu_back(act, act, g.f32(r * F + j), y.f32(r * 2 * F + j),
                                                     y.f32(r * 2 * F + F + j), clamp);
      d_y.set_f32(r * 2 * F + j, grad.da);
      d_y.set_f32(r * 2 * F + F + j, grad.db);
    }
  return {{"d_y", d_y}};
}

}  // namespace bitparity::ref
