// What the two SwiGLU ops share: the split of y into gate and value halves, the clamp gates of
// each framework, the element formulas of Megatron's eager functions (spec OP-4, OP-5, OP-6) and
// of PaddleFleet's fused kernel, and the case generator pieces.
#pragma once

#include <optional>
#include <string>

#include "core/case.h"
#include "core/registry.h"

namespace bitparity::ref::swiglu {

// y is [rows, 2F]: columns [0, F) are the gate a, [F, 2F) the value b (torch.chunk).
struct Split {
  int64_t rows = 0;
  int64_t F = 0;
};
Split split_y(const std::string& op, const Tensor& y);

// Which clamp a framework applies, from the attribute (a double, as Python passes it).
enum class ClampGate {
  kPositive,  // `clamp_value is not None and clamp_value > 0` (Megatron's fused functions, Paddle)
  kPresent,   // `clamp_value is not None` (Megatron's unfused glu(): a value <= 0 clamps everything)
};
std::optional<double> active_clamp(const Case& c, ClampGate gate);

// dtype promotion of two floating tensors in eager PyTorch: equal dtypes stay, otherwise fp32
// (bf16 with fp16 promotes to fp32 too).
DType promote(DType a, DType b);

// --- input checks: every backend calls these, so a rejection has one class and one message -----
void check_activation_dtype(const std::string& who, const Tensor& t, const std::string& name);  // bf16/fp16/fp32
void check_bias(const Tensor& y, const Tensor* bias);  // [2F], y's dtype
// scale is [rows] or [rows, 1]; d_scale takes the same shape (the rank rule of the #1078 review).
void check_scale_shape(const std::string& who, const Tensor& scale, int64_t rows);
void check_grad(const std::string& who, const Tensor& g, int64_t rows, int64_t F, DType act);

// --- Megatron eager element formulas (each eager op rounds to its output dtype, rule 1) -------

// The swiglu value of one element, in the activation dtype `act`: the unclamped eager form
// bf(f32(bf(silu(a))) * b), or the clamped form that upcasts to fp32, clamps with the fp32 limit,
// and rounds once (Megatron's clamped_swiglu). `clamp` is the active clamp, if any.
float megatron_swiglu(DType act, float a, float b, std::optional<double> clamp);

struct Grad2 {
  float da, db;  // in fp32, already rounded to the activation dtype
};
// swiglu_back_eager(g', y) (unclamped) or clamped_swiglu_back(g', y, c), with g' of dtype `chain`
// (the activation dtype, or the promotion with the scale dtype once g is multiplied by it).
Grad2 megatron_swiglu_back(DType act, DType chain, float g, float a, float b, std::optional<double> clamp);

// --- PaddleFleet fuse_swiglu_scale.cu (stored version with input checks) --------------------
struct PaddleClamp {
  bool on = false;
  float cv = 0;  // static_cast<float>(clamp_value)
};
// The checks of the kernel's host code (dtypes, vector width, the clamp kernel's own check of
// clamp_value), in its order; the clamp is active when present and > 0 (the Python wrapper).
struct PaddleInputs {
  std::string who;  // "fused_swiglu_scale" or "fused_swiglu_scale_bwd", as its messages say
  DType act, s;
  int64_t rows, F;
  PaddleClamp clamp;
  int64_t vec;  // elements per 16-byte packet (8 for bf16, 4 for fp32); F is a multiple of it
};
PaddleInputs check_paddle(const Case& c);

float paddle_gate(float g, const PaddleClamp& c);   // fminf(g, cv)
float paddle_value(float v, const PaddleClamp& c);  // fmaxf(fminf(v, cv), -cv)

}  // namespace bitparity::ref::swiglu
