// CUDA's fp32 transcendentals, bit for bit, on the CPU (spec rule 12).
//
// Two math models:
// - kLibdevice: libdevice's non-fast-math __nv_expf, __nv_logf, __nv_log1pf and __nv_powf exactly
//   as nvcc 13.0 compiles them for sm_90 (transcribed from the PTX that nvcc emits for
//   libdevice.10.bc). __nv_expf is IEEE steps plus one ex2.approx.ftz.f32 (the MUFU.EX2 unit), which
//   is emulated by the two tables captured off the GPU (ex2_tables.h). __nv_logf and __nv_log1pf
//   are fma.rn polynomials (plus one add.rz in log1pf) and need no table. __nv_powf is a
//   double-float log2 and exp2 in fma.rn steps plus one rcp.approx.ftz.f32 (MUFU.RCP), emulated as
//   the correctly rounded reciprocal (libdevice_ptx.md says how far that is confirmed).
// - kCorrectlyRounded: the fp64 function (host libm) rounded once to fp32. It is the oracle's view
//   of the true value, and reproduces eager PyTorch only through a bf16 rounding (rule 3).
//
// Both models return NaN as the GPU does: the canonical pattern 0x7FFFFFFF.
#pragma once

#include <cstdint>
#include <span>

#include "reference/math/ex2_tables.h"

namespace bitparity::ref::math {

enum class MathModel { kLibdevice, kCorrectlyRounded };

// "libdevice" or "cr".
const char* math_model_name(MathModel model);

// The canonical NaN that every fp32 operation of an NVIDIA GPU returns.
inline constexpr uint32_t kCanonicalNanBits = 0x7FFFFFFFu;

// --- the MUFU.EX2 unit ---------------------------------------------------------------------------
// ex2.approx.ftz.f32 of the GPU whose tables are loaded (default_ex2_tables()).
float ex2_approx(float r);
float ex2_approx(const Ex2Tables& tables, float r);

// --- the four functions ----------------------------------------------------------------------
float expf(MathModel model, float x);
float logf(MathModel model, float x);
float log1pf(MathModel model, float x);
// x^y. PyTorch's kernels call it for pow and for AdamW's bias corrections 1 - beta^step; the
// libdevice result is not correctly rounded (0.9f^57 is 1 ulp above the cr model's).
float powf(MathModel model, float x, float y);

// __nv_expf(x) with explicit tables (for a capture other than the default one).
float libdevice_expf(const Ex2Tables& tables, float x);
float libdevice_logf(float x);
float libdevice_log1pf(float x);
float libdevice_powf(float x, float y);

// __nv_expf(x) ends with `ex2(r) * s`. nvcc contracts that product with a following addition
// into one fma.rn (`1 + expf(-x)` becomes fma(ex2(r), s, 1)), so formulas need the two factors.
struct ExpfFactors {
  float mantissa;  // ex2.approx(r)
  float scale;     // 2^d, a power of two
};
ExpfFactors libdevice_expf_factors(const Ex2Tables& tables, float x);

// --- rule 2 formulas, as nvcc compiles them from the fp32 source ---------------------------------
// kLibdevice: the denominators are fma.rn(ex2(r), s, 1) (nvcc's contraction, read in its PTX);
// the division is IEEE div.rn / rcp.rn. kCorrectlyRounded: each operation rounded once,
// 1 ⊘ (1 ⊕ expf_cr(−x)), the form that rule 3 checked on bf16 outputs.
float sigmoid(MathModel model, float x);   // 1 / (1 + expf(-x))
float silu(MathModel model, float x);      // x / (1 + expf(-x))
float softplus(MathModel model, float x);  // x > 20 ? x : log1pf(expf(x))
// silu and sigmoid of one x from one expf (they share the denominator): each bit-identical to its
// own call, at the cost of one.
struct SiluSigmoid {
  float silu, sigmoid;
};
SiluSigmoid silu_sigmoid(MathModel model, float x);

// The kLibdevice formulas with explicit tables.
float libdevice_sigmoid(const Ex2Tables& tables, float x);
float libdevice_silu(const Ex2Tables& tables, float x);
SiluSigmoid libdevice_silu_sigmoid(const Ex2Tables& tables, float x);
float libdevice_softplus(const Ex2Tables& tables, float x);

// softplus's threshold (beta = 1, threshold = 20, PyTorch's defaults).
inline constexpr float kSoftplusThreshold = 20.0f;

// --- batched forms ---------------------------------------------------------------------------
// y[i] = f(model, x[i]), bit-identical to the scalar calls; kLibdevice prefetches the ex2 table
// entries of a block of inputs before reading them, several times faster on large arrays (a lone
// lookup in the 64 MiB of tables usually waits on memory). x and y may be the same span; throws
// std::invalid_argument when their sizes differ.
void expf_n(MathModel model, std::span<const float> x, std::span<float> y);
void sigmoid_n(MathModel model, std::span<const float> x, std::span<float> y);
void silu_n(MathModel model, std::span<const float> x, std::span<float> y);
void softplus_n(MathModel model, std::span<const float> x, std::span<float> y);

// --- IEEE steps with directed rounding, exact on the CPU ---------------------------------------
// add.rz.f32: a + b rounded toward zero (exact error of the RNE sum by TwoSum, then one step
// toward zero when RNE rounded away from zero). No FTZ.
float add_rz(float a, float b);

}  // namespace bitparity::ref::math
