// sigmoid(x) and silu(x) in fp32 as nvcc compiles `1 / (1 + expf(-x))` and `x / (1 + expf(-x))`
// (rule 12: libdevice expf with the contracted denominator, IEEE division), and the shortcuts
// that replace the two divisions by one reciprocal where they give the same bits. Op-generic: the
// activations of SwiGLU, and the sigmoid of a router.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "gpu/common/libdevice_expf.cuh"

namespace bitparity::gpu::device {

// rcp.rn and div.rn of libdevice_sigmoid / libdevice_silu.
struct SigmoidSilu {
  float sigmoid, silu;
};
__device__ __forceinline__ SigmoidSilu sigmoid_silu(float x) {
  const ExpfFactors e = expf_factors(-x);
  const float den = __fmaf_rn(e.mantissa, e.scale, 1.0f);
  return {__fdiv_rn(1.0f, den), __fdiv_rn(x, den)};
}

// rcp.approx.ftz.f32, the MUFU.RCP unit (host: the correctly rounded reciprocal, flushed like it).
__device__ __forceinline__ float rcp_approx_ftz(float d) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return r;
#else
  const float r = 1.0f / d;
  return std::fabs(r) < 0x1p-126f ? std::copysign(0.0f, r) : r;
#endif
}

// The shortcuts below replace sigmoid_silu's two divisions by __fdiv_rn's own fast-path sequence
// without its range check and out-of-line slow path, so that the eight elements of a packet
// compile to one straight block: one MUFU.RCP and one Newton step shared by both quotients, then
// each quotient and its correction. den is scaled by 1/8 first, so that its reciprocal stays
// normal (> 2^-125) for every finite den, where rcp.approx.ftz would flush the reciprocal of a
// den above 2^126 (x in about [-88.7, -87.3]); den = +Inf is clamped to 2^127, whose flushed
// reciprocal 0 gives the IEEE quotients +0 and -0. A shortcut is exact (equal to sigmoid_silu's
// bits) wherever its `in_domain` says so, and the FastMath tests (gpu/tests) compare each with
// sigmoid_silu on all 2^32 inputs; the callers recompute the rest with sigmoid_silu.
struct ScaledDen {
  float d;  // min(den / 8, 2^127)
  float r;  // 1 / d to within an ulp (MUFU.RCP and one Newton step)
};
__device__ __forceinline__ ScaledDen scaled_den(float x) {
  const ExpfFactors e = expf_factors(-x);
  const float d = fminf(__fmul_rn(__fmaf_rn(e.mantissa, e.scale, 1.0f), 0.125f), 0x1p127f);
  const float r0 = rcp_approx_ftz(d);
  return {d, __fmaf_rn(r0, __fmaf_rn(-d, r0, 1.0f), r0)};
}

// 1/den = (1/8) / d: the quotient t = r / 8 (exact while normal, rounded once where 1/den is
// subnormal) and its correction, whose remainder 1/8 - d t is exact; one rounding at the end.
__device__ __forceinline__ float sigmoid_of(const ScaledDen& s) {
  const float t = __fmul_rn(s.r, 0.125f);
  return __fmaf_rn(__fmaf_rn(-s.d, t, 0.125f), s.r, t);
}

// x/den = (x / d) / 8: the quotient 8x/den is normal unless |x| < 2^-125, where den = 2 exactly and
// every step but the last is exact, so that the scaling back by 1/8 rounds once.
__device__ __forceinline__ float silu_of(const ScaledDen& s, float x) {
  const float q = __fmul_rn(x, s.r);
  return __fmul_rn(__fmaf_rn(__fmaf_rn(-s.d, q, x), s.r, q), 0.125f);
}

// silu alone (Megatron's forward has no use for sigmoid). Exact wherever 0 < |x| < 2^124 (x = -0
// would give +0; 8x must not overflow; NaN and the infinities are outside).
__device__ __forceinline__ float silu_fast(float x, bool& in_domain) {
  const float ax = fabsf(x);
  in_domain = in_domain && ax > 0.0f && ax < 0x1p124f;
  return silu_of(scaled_den(x), x);
}

// sigmoid and silu together (Megatron's backwards): silu_fast's domain, inside which sigmoid is
// exact too.
__device__ __forceinline__ SigmoidSilu sigmoid_silu_fast(float x, bool& in_domain) {
  const ScaledDen s = scaled_den(x);
  const float ax = fabsf(x);
  in_domain = in_domain && ax > 0.0f && ax < 0x1p124f;
  return {sigmoid_of(s), silu_of(s, x)};
}

// sigmoid alone (PaddleFleet's kernels): exact for every x but NaN (for which fminf drops the NaN
// den); the infinities give den = 1 and +Inf, hence 1 and +0.
__device__ __forceinline__ float sigmoid_fast(float x, bool& in_domain) {
  in_domain = in_domain && x == x;
  return sigmoid_of(scaled_den(x));
}

template <bool kFast>
__device__ __forceinline__ float sigmoid_as(float x, bool* in_domain) {
  if constexpr (kFast) {
    return sigmoid_fast(x, *in_domain);
  } else {
    (void)in_domain;
    return sigmoid_silu(x).sigmoid;
  }
}

template <bool kFast>
__device__ __forceinline__ float silu_as(float x, bool* in_domain) {
  if constexpr (kFast) {
    return silu_fast(x, *in_domain);
  } else {
    (void)in_domain;
    return sigmoid_silu(x).silu;
  }
}

// sigmoid_silu (kFast false) or sigmoid_silu_fast, which clears *in_domain where it may differ.
template <bool kFast>
__device__ __forceinline__ SigmoidSilu sigmoid_silu_as(float x, bool* in_domain) {
  if constexpr (kFast) {
    return sigmoid_silu_fast(x, *in_domain);
  } else {
    (void)in_domain;
    return sigmoid_silu(x);
  }
}

// Whether a kernel's clamp is on: fixed at compile time (kClampOff, kClampOn: kernels instantiated

}  // namespace bitparity::gpu::device
