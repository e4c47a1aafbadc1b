#include "reference/swiglu_common.h"

#include <cmath>
#include <cstring>

#include "reference/numerics.h"

namespace bitparity::ref::swiglu {

PaddleClamp paddle_clamp(const Case& c) {
  const std::optional<double> value = active_clamp(c, ClampGate::kPositive);
  if (!value) return {};
  return {true, static_cast<float>(*value)};
}

std::optional<double> active_clamp(const Case& c, ClampGate gate) {
  const std::optional<double> value = c.float_attr("clamp");
  if (!value || gate == ClampGate::kNone) return std::nullopt;
  if (gate == ClampGate::kPositive && !(*value > 0)) return std::nullopt;  // NaN > 0 is false too
  return value;
}

DType promote(DType a, DType b) { return a == b ? a : DType::kFP32; }

namespace {
size_t row_bytes(const Tensor& t) { return t.nbytes() / static_cast<size_t>(t.dim(0)); }
}  // namespace

bool repeats_previous_row(std::initializer_list<const Tensor*> tensors, int64_t r) {
  for (const Tensor* t : tensors) {
    const size_t n = row_bytes(*t);
    if (n == 0) continue;  // rows of no element (an empty tensor has no data to compare)
    const uint8_t* row = t->data() + static_cast<size_t>(r) * n;
    if (std::memcmp(row, row - n, n) != 0) return false;
  }
  return true;
}

void copy_previous_row(Tensor& t, int64_t r) {
  const size_t n = row_bytes(t);
  if (n == 0) return;
  uint8_t* row = t.data() + static_cast<size_t>(r) * n;
  std::memcpy(row, row - n, n);
}

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

Tensor biased_input(const Case& c) {
  const Tensor& y = *c.input("y");
  const Tensor* bias = c.input("bias");
  if (!bias) return y;
  Tensor out(y.dtype(), y.shape());
  for (int64_t i = 0; i < y.numel(); ++i) out.set_f32(i, y.f32(i) + bias->f32(i % y.dim(1)));
  return out;
}

float megatron_swiglu(DType act, float a, float b, std::optional<double> clamp) {
  if (!clamp) return round_to(act, round_to(act, silu_f32(a)) * b);  // F.silu(y_1) * y_2
  const Clamped c = clamp_halves(a, b, *clamp);
  return round_to(act, silu_f32(c.a) * c.b);  // fp32 throughout, res.to(dtype)
}

Grad2 megatron_swiglu_back(DType act, DType chain, float g, float a, float b, std::optional<double> clamp) {
  if (!clamp) {
    // swiglu_back_eager: g * sigmoid(y_1) * (1 + y_1 * (1 - sigmoid(y_1))) * y_2, g * silu(y_1);
    // sigmoid and the bracket are ops on act tensors, the products promote to `chain`.
    const math::SiluSigmoid f = silu_sigmoid_f32(a);
    const float s = round_to(act, f.sigmoid);
    const float silu = round_to(act, f.silu);
    const float t4 = round_to(act, 1.0f + round_to(act, a * round_to(act, 1.0f - s)));
    const float da = round_to(chain, round_to(chain, round_to(chain, g * s) * t4) * b);
    const float db = round_to(chain, g * silu);
    return {round_to(act, da), round_to(act, db), round_to(act, silu * b)};
  }
  // clamped_swiglu_back: all in fp32 after y.to(fp32), masks 0/1, one rounding at the end.
  const Clamped c = clamp_halves(a, b, *clamp);
  const float hi = static_cast<float>(*clamp);
  const float lo = static_cast<float>(-*clamp);
  const float mask_a = a <= hi ? 1.0f : 0.0f;
  const float mask_b = (b >= lo && b <= hi) ? 1.0f : 0.0f;
  const math::SiluSigmoid f = silu_sigmoid_f32(c.a);
  const float s = f.sigmoid;
  const float da = (((g * s) * (1.0f + c.a * (1.0f - s))) * c.b) * mask_a;
  const float db = (g * f.silu) * mask_b;
  return {round_to(act, da), round_to(act, db), round_to(act, f.silu * c.b)};
}


float paddle_gate(float g, const PaddleClamp& c) { return c.on ? cuda_fminf(g, c.cv) : g; }
float paddle_value(float v, const PaddleClamp& c) { return c.on ? cuda_fmaxf(cuda_fminf(v, c.cv), -c.cv) : v; }

}  // namespace bitparity::ref::swiglu
