// What the two SwiGLU ops' references share: the clamp each contract applies, the element formulas
// of Megatron's eager functions (spec OP-4, OP-5, OP-6) and of PaddleFleet's fused kernel. The
// input checks are the op's spec (ops/swiglu_family.h), applied before any of this runs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "core/case.h"
#include "core/registry.h"

namespace bitparity::ref::swiglu {

// Which clamp a contract applies (its ContractInfo::clamp_gate), evaluated on the attribute (a
// double, as Python passes it): the clamp value in effect, or none.
std::optional<double> active_clamp(const Case& c, ClampGate gate);

// y + bias (the bias variant of swiglu: one eager add, rounded to y's dtype), or y when the case has
// no bias.
Tensor biased_input(const Case& c);

// dtype promotion of two floating tensors in eager PyTorch: equal dtypes stay, otherwise fp32
// (bf16 with fp16 promotes to fp32 too).
DType promote(DType a, DType b);

// Whether row r (r > 0) of each of `tensors` (rows first: [rows, ...] or [rows]) holds the bits of
// row r - 1. A row-wise formula then gives row r the outputs of row r - 1, which copy_previous_row
// copies instead of computing them again (an expert's padded rows are all zeros).
bool repeats_previous_row(std::initializer_list<const Tensor*> tensors, int64_t r);
void copy_previous_row(Tensor& t, int64_t r);

// --- Megatron eager element formulas (each eager op rounds to its output dtype, rule 1) -------

// The swiglu value of one element, in the activation dtype `act`: the unclamped eager form
// bf(f32(bf(silu(a))) * b), or the clamped form that upcasts to fp32, clamps with the fp32 limit,
// and rounds once (Megatron's clamped_swiglu). `clamp` is the active clamp, if any.
float megatron_swiglu(DType act, float a, float b, std::optional<double> clamp);

struct Grad2 {
  float da, db;  // in fp32, already rounded to the activation dtype
  float out;     // megatron_swiglu(act, a, b, clamp), the forward value, from the same silu
};
// swiglu_back_eager(g', y) (unclamped) or clamped_swiglu_back(g', y, c), with g' of dtype `chain`
// (the activation dtype, or the promotion with the scale dtype once g is multiplied by it). The
// sigmoid and the silu come from one expf (silu_sigmoid_f32).
Grad2 megatron_swiglu_back(DType act, DType chain, float g, float a, float b, std::optional<double> clamp);

// --- PaddleFleet fuse_swiglu_scale.cu -----------------------------------------------------------
struct PaddleClamp {
  bool on = false;
  float cv = 0;  // static_cast<float>(clamp_value)
};
// The clamp of the kernels: active when present and > 0 (the Python wrapper); the value cast once.
PaddleClamp paddle_clamp(const Case& c);

float paddle_gate(float g, const PaddleClamp& c);   // fminf(g, cv)
float paddle_value(float v, const PaddleClamp& c);  // fmaxf(fminf(v, cv), -cv)

}  // namespace bitparity::ref::swiglu
