// Host stand-ins for the CUDA intrinsics that the kernels' device headers use, so that g++ can compile
// the kernels' element formulas and a CPU test can hold them against the reference (CI has no
// GPU). Each __f*_rn is one IEEE operation rounded to nearest even, as on the device (the build
// uses -ffp-contract=off); the MUFU.EX2 instruction is the reference's table emulation of it, and
// fminf/fmaxf are the reference's model of CUDA's min/max (peers/torch pins both to an H200).
// Include this before those headers (gpu/common/*.cuh, gpu/swiglu_elements.cuh), in host test code only.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "reference/math/device_math.h"
#include "reference/numerics.h"

using std::isnan;

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
// fma rounded toward -Inf, for arguments whose exact result a double holds (the expf reduction:
// t * 252 + 0x4B400001 with t in [0, 1]).
inline float __fmaf_rd(float a, float b, float c) {
  const double exact = static_cast<double>(a) * static_cast<double>(b) + static_cast<double>(c);
  const float nearest = static_cast<float>(exact);
  return static_cast<double>(nearest) > exact ? std::nextafter(nearest, -INFINITY) : nearest;
}
// cvt.sat: clamp to [0, 1], NaN to +0.
inline float __saturatef(float x) { return std::isnan(x) || x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __uint_as_float(uint32_t u) { return std::bit_cast<float>(u); }
inline uint32_t __float_as_uint(float f) { return std::bit_cast<uint32_t>(f); }
inline float __int_as_float(int32_t u) { return std::bit_cast<float>(u); }

namespace bitparity::gpu::device {
inline float host_ex2_approx_ftz(float r) { return ref::math::ex2_approx(r); }
}  // namespace bitparity::gpu::device

#define fminf bitparity::ref::cuda_fminf
#define fmaxf bitparity::ref::cuda_fmaxf
