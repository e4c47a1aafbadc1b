#include "reference/swiglu_common.h"

#include <cmath>

#include "core/error.h"
#include "reference/numerics.h"

namespace bitparity::ref::swiglu {

Split split_y(const std::string& op, const Tensor& y) {
  if (y.rank() != 2 || y.dim(1) % 2 != 0)
    throw RejectError("shape", op + ": y must have shape [rows, 2 * F]; got " + shape_string(y.shape()));
  return {y.dim(0), y.dim(1) / 2};
}

void check_activation_dtype(const std::string& who, const Tensor& t, const std::string& name) {
  if (t.dtype() != DType::kBF16 && t.dtype() != DType::kFP16 && t.dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": " + name + " must be bf16, fp16 or fp32; got " + std::string(dtype_name(t.dtype())));
}

void check_bias(const Tensor& y, const Tensor* bias) {
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

PaddleInputs check_paddle(const Case& c) {
  constexpr int kPacketBytes = 16;  // the kernel's Packed128
  const bool bwd = c.direction == Direction::kBackward;
  const std::string who = bwd ? "fused_swiglu_scale_bwd" : "fused_swiglu_scale";
  const Tensor& y = *c.input("y");
  const Tensor& scale = *c.input("scale");
  const auto [rows, F] = split_y(who, y);
  check_scale_shape(who, scale, rows);
  if (bwd) check_grad(who, *c.input("g"), rows, F, y.dtype());
  if (y.dtype() != DType::kBF16 && y.dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": X must be bfloat16 or float32; got " + std::string(dtype_name(y.dtype())));
  if (scale.dtype() != DType::kBF16 && scale.dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": Scale must be bfloat16 or float32; got " + std::string(dtype_name(scale.dtype())));
  if (y.dtype() == DType::kFP32 && scale.dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": float32 X requires float32 Scale");
  const int64_t vec = kPacketBytes / dtype_size(y.dtype());
  if (F % vec != 0)
    throw RejectError("shape", who + ": hidden_size must be divisible by the vector width (" + std::to_string(vec) +
                                   " for " + std::string(dtype_name(y.dtype())) + "); got " + std::to_string(F));
  PaddleClamp clamp;
  if (const auto value = active_clamp(c, ClampGate::kPositive)) {
    if (!std::isfinite(*value))
      throw RejectError("attr", who + "_clamp: clamp_value must be finite and greater than zero");
    clamp = {true, static_cast<float>(*value)};
  }
  return {who, y.dtype(), scale.dtype(), rows, F, clamp, vec};
}

std::optional<double> active_clamp(const Case& c, ClampGate gate) {
  const std::optional<double> value = c.float_attr("clamp");
  if (!value) return std::nullopt;
  if (gate == ClampGate::kPositive && !(*value > 0)) return std::nullopt;  // NaN > 0 is false too
  return value;
}

DType promote(DType a, DType b) { return a == b ? a : DType::kFP32; }

namespace {

// y.to(fp32).chunk(); y_1.clamp(max=c); y_2.clamp(min=-c, max=c). A NaN limit in the min-max
// clamp fills the result with NaN (TensorCompare.cpp); in the max-only clamp it changes nothing.
struct Clamped {
  float a, b;
};
Clamped clamp_halves(float a, float b, double clamp) {
  const float hi = static_cast<float>(clamp);
  const float lo = static_cast<float>(-clamp);
  if (std::isnan(clamp)) return {clamp_max_f32(a, hi), std::nanf("")};
  return {clamp_max_f32(a, hi), clamp_min_max_f32(b, lo, hi)};
}

}  // namespace

float megatron_swiglu(DType act, float a, float b, std::optional<double> clamp) {
  if (!clamp) return round_to(act, round_to(act, silu_f32(a)) * b);  // F.silu(y_1) * y_2
  const Clamped c = clamp_halves(a, b, *clamp);
  return round_to(act, silu_f32(c.a) * c.b);  // fp32 throughout, res.to(dtype)
}

Grad2 megatron_swiglu_back(DType act, DType chain, float g, float a, float b, std::optional<double> clamp) {
  if (!clamp) {
    // swiglu_back_eager: g * sigmoid(y_1) * (1 + y_1 * (1 - sigmoid(y_1))) * y_2, g * silu(y_1);
    // sigmoid and the bracket are ops on act tensors, the products promote to `chain`.
    const float s = round_to(act, sigmoid_f32(a));
    const float t4 = round_to(act, 1.0f + round_to(act, a * round_to(act, 1.0f - s)));
    const float da = round_to(chain, round_to(chain, round_to(chain, g * s) * t4) * b);
    const float db = round_to(chain, g * round_to(act, silu_f32(a)));
    return {round_to(act, da), round_to(act, db)};
  }
  // clamped_swiglu_back: all in fp32 after y.to(fp32), masks 0/1, one rounding at the end.
  const Clamped c = clamp_halves(a, b, *clamp);
  const float hi = static_cast<float>(*clamp);
  const float lo = static_cast<float>(-*clamp);
  const float mask_a = a <= hi ? 1.0f : 0.0f;
  const float mask_b = (b >= lo && b <= hi) ? 1.0f : 0.0f;
  const float s = sigmoid_f32(c.a);
  const float da = (((g * s) * (1.0f + c.a * (1.0f - s))) * c.b) * mask_a;
  const float db = (g * silu_f32(c.a)) * mask_b;
  return {round_to(act, da), round_to(act, db)};
}


float paddle_gate(float g, const PaddleClamp& c) { return c.on ? cuda_fminf(g, c.cv) : g; }
float paddle_value(float v, const PaddleClamp& c) { return c.on ? cuda_fmaxf(cuda_fminf(v, c.cv), -c.cv) : v; }

}  // namespace bitparity::ref::swiglu
