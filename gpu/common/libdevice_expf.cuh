// libdevice's expf as nvcc compiles fp32 source that calls it (spec rule 12): the IEEE steps of
// __nv_expf and the MUFU.EX2 unit, with the final product ex2(r) * 2^d left to the caller, since
// nvcc contracts it with the `1 +` of sigmoid and silu. Constants and steps as the spec writes
// them. A host build (gpu/tests/host_intrinsics.h) supplies the intrinsics and the ex2 unit.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace bitparity::gpu::device {

// --- rule 2 transcendentals, as nvcc compiles ATen's and Paddle's fp32 source (rule 12) ----------

#if !defined(__CUDA_ARCH__)
float host_ex2_approx_ftz(float r);  // a host build's stand-in for the MUFU.EX2 instruction
#endif

// ex2.approx.ftz.f32, the MUFU.EX2 unit.
__device__ __forceinline__ float ex2_approx_ftz(float r) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(r));
  return y;
#else
  return host_ex2_approx_ftz(r);
#endif
}

// libdevice's __nv_expf(a) is ex2(r) * s; nvcc contracts that final product with the `1 +` of
// sigmoid and silu into fma(ex2(r), s, 1). Constants and steps as reference/math/device_math.cpp.
struct ExpfFactors {
  float mantissa;  // ex2.approx(r)
  float scale;     // 2^d
};
__device__ __forceinline__ ExpfFactors expf_factors(float a) {
  const float log2e_hi = __uint_as_float(0x3FB8AA3Bu);
  const float log2e_lo = __uint_as_float(0x32A57060u);
  const float log2e_over_252 = __uint_as_float(0x3BBB989Du);
  const float j_addend = __uint_as_float(0x4B400001u);  // (-126 + 1.5 * 2^23) + 127
  const float j_bias = __uint_as_float(0x4B40007Fu);    // 1.5 * 2^23 + 127
  const float t = __saturatef(__fmaf_rn(a, log2e_over_252, 0.5f));
  const float j = __fmaf_rd(t, 252.0f, j_addend);
  const float d = __fsub_rn(j, j_bias);
  const float r = __fmaf_rn(a, log2e_lo, __fmaf_rn(a, log2e_hi, -d));
  return {ex2_approx_ftz(r), __uint_as_float(__float_as_uint(j) << 23)};
}

// sigmoid(x) = 1 ⊘ den and silu(x) = x ⊘ den with den = fma(ex2(r), s, 1) of __nv_expf(-x):

}  // namespace bitparity::gpu::device
