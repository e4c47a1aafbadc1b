// The element formulas of the SwiGLU family's contracts, written operation by operation as the
// spec writes them (OP-4, OP-5, OP-6): Megatron's eager and clamped swiglu and their backwards,
// PaddleFleet's fused forward and backward. Every fp32 operation is an explicit intrinsic
// (__fadd_rn, __fmul_rn, __fdiv_rn; __fmaf_rn where the contract fuses), so that nvcc cannot
// contract what the contract rounds twice, nor leave apart what it fuses. A host build of this
// header (gpu/tests) supplies the intrinsics itself (gpu/tests/host_intrinsics.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "gpu/common/dtype_io.cuh"
#include "gpu/common/sigmoid_silu.cuh"
#include "gpu/swiglu_kernels.h"

namespace bitparity::gpu::device {

// per case, so that no element carries a branch) or read from the struct (kClampRuntime).
inline constexpr int kClampRuntime = -1, kClampOff = 0, kClampOn = 1;
template <int kClamp, class Clamp>
__device__ __forceinline__ bool clamp_is_on(const Clamp& c) {
  if constexpr (kClamp == kClampRuntime) return c.on;
  return kClamp == kClampOn;
}

// --- Megatron clamp (ATen clamp kernels, reference numerics.cpp) ---------------------------
// x.clamp(max=hi) and x.clamp(min=lo, max=hi) as ATen's CUDA kernels compute them: NaN inputs
// propagate, otherwise CUDA's fminf/fmaxf (of two zeros, min gives -0 and max gives +0; lo > hi
// gives hi).

__device__ __forceinline__ float clamp_max(float v, float hi) { return isnan(v) ? v : fminf(v, hi); }

__device__ __forceinline__ float clamp_min_max(float v, float lo, float hi) {
  return isnan(v) ? v : fminf(fmaxf(v, lo), hi);
}

struct Halves {
  float a, b;
};
__device__ __forceinline__ Halves clamp_halves(float a, float b, const MegatronClamp& c) {
  if (c.nan_limit) return {clamp_max(a, c.hi), __int_as_float(0x7fffffff)};
  return {clamp_max(a, c.hi), clamp_min_max(b, c.lo, c.hi)};
}

// --- Megatron eager elements (spec OP-4, OP-5, OP-6; reference swiglu_common.cpp) ------------

// The swiglu value in the activation type: bf(f32(bf(silu(a))) * b), or clamped bf(silu(a_c) * b_c).
// kFast: sigmoid_silu_fast, clearing *in_domain where the caller must recompute with kFast false.
template <class Act, bool kFast = false, int kClamp = kClampRuntime>
__device__ __forceinline__ float megatron_swiglu(float a, float b, const MegatronClamp& clamp,
                                                 bool* in_domain = nullptr) {
  if (!clamp_is_on<kClamp>(clamp))
    return round_as<Act>(__fmul_rn(round_as<Act>(silu_as<kFast>(a, in_domain)), b));
  const Halves c = clamp_halves(a, b, clamp);
  return round_as<Act>(__fmul_rn(silu_as<kFast>(c.a, in_domain), c.b));
}

// The backward of one element with g' in the chain dtype (the activation type, or fp32 once g
// was multiplied by an fp32 or other-typed scale), and the swiglu value for d_scale's products.
struct MegatronGrad {
  float da, db;  // rounded to the activation type
  float swiglu;  // megatron_swiglu(a, b)
};

template <class Act, bool kFast = false, int kClamp = kClampRuntime>
__device__ __forceinline__ MegatronGrad megatron_swiglu_back(bool chain_is_act, float g, float a, float b,
                                                             const MegatronClamp& clamp, bool* in_domain = nullptr) {
  auto chain = [chain_is_act](float x) { return chain_is_act ? round_as<Act>(x) : x; };
  if (!clamp_is_on<kClamp>(clamp)) {
    // swiglu_back_eager: each eager op on act tensors rounds to act; products promote to chain.
    const SigmoidSilu f = sigmoid_silu_as<kFast>(a, in_domain);
    const float s = round_as<Act>(f.sigmoid);
    const float t4 = round_as<Act>(__fadd_rn(1.0f, round_as<Act>(__fmul_rn(a, round_as<Act>(__fsub_rn(1.0f, s))))));
    const float silu = round_as<Act>(f.silu);
    const float da = chain(__fmul_rn(chain(__fmul_rn(chain(__fmul_rn(g, s)), t4)), b));
    const float db = chain(__fmul_rn(g, silu));
    // A chain in the activation type has rounded da and db already.
    if (chain_is_act) return {da, db, round_as<Act>(__fmul_rn(silu, b))};
    return {round_as<Act>(da), round_as<Act>(db), round_as<Act>(__fmul_rn(silu, b))};
  }
  // clamped_swiglu_back: fp32 throughout, 0/1 masks of the raw values, one rounding at the end.
  const Halves c = clamp_halves(a, b, clamp);
  const float mask_a = a <= clamp.hi ? 1.0f : 0.0f;
  const float mask_b = (b >= clamp.lo && b <= clamp.hi) ? 1.0f : 0.0f;
  const SigmoidSilu f = sigmoid_silu_as<kFast>(c.a, in_domain);
  const float bracket = __fadd_rn(1.0f, __fmul_rn(c.a, __fsub_rn(1.0f, f.sigmoid)));
  const float da = __fmul_rn(__fmul_rn(__fmul_rn(__fmul_rn(g, f.sigmoid), bracket), c.b), mask_a);
  const float db = __fmul_rn(__fmul_rn(g, f.silu), mask_b);
  return {round_as<Act>(da), round_as<Act>(db), round_as<Act>(__fmul_rn(f.silu, c.b))};
}

// --- PaddleFleet fuse_swiglu_scale.cu elements (reference swiglu_scale.cpp) -------------------

template <int kClamp = kClampRuntime>
__device__ __forceinline__ float paddle_gate(float g, const PaddleClamp& c) {
  return clamp_is_on<kClamp>(c) ? fminf(g, c.cv) : g;
}
template <int kClamp = kClampRuntime>
__device__ __forceinline__ float paddle_value(float v, const PaddleClamp& c) {
  return clamp_is_on<kClamp>(c) ? fmaxf(fminf(v, c.cv), -c.cv) : v;
}

// out = ((g ⊗ σ(g)) ⊗ v) ⊗ s, rounded once to the activation type by the caller.
template <bool kFast = false, int kClamp = kClampRuntime>
__device__ __forceinline__ float paddle_forward(float g_raw, float v_raw, float s, const PaddleClamp& clamp,
                                                bool* in_domain = nullptr) {
  const float g = paddle_gate<kClamp>(g_raw, clamp);
  const float v = paddle_value<kClamp>(v_raw, clamp);
  return __fmul_rn(__fmul_rn(__fmul_rn(g, sigmoid_as<kFast>(g, in_domain)), v), s);
}

struct PaddleGrad {
  float dg, dv;  // fp32, rounded to the activation type by the caller
};

// One element of the backward; accumulates its d_scale term into `acc` the way the kernel's
// source reads (reference paddle_d_scale_step).
template <class Act, bool kFast = false, int kClamp = kClampRuntime>
__device__ __forceinline__ PaddleGrad paddle_backward(float g_raw, float v_raw, float dout, float s, bool scale_is_act,
                                                      const PaddleClamp& clamp, float& acc,
                                                      bool* in_domain = nullptr) {
  const bool on = clamp_is_on<kClamp>(clamp);
  const float g = paddle_gate<kClamp>(g_raw, clamp);
  const float v = paddle_value<kClamp>(v_raw, clamp);
  const float sig = sigmoid_as<kFast>(g, in_domain);
  const float silu = __fmul_rn(g, sig);
  const float sw = __fmul_rn(silu, v);
  if (!on) {
    acc = __fmaf_rn(dout, sw, acc);  // local += dout * swiglu_val
  } else if (scale_is_act) {
    if constexpr (Act::kDType == DType::kFP32) {
      acc = __fmaf_rn(sw, dout, acc);
    } else {
      acc = __fadd_rn(acc, round_as<Act>(__fmul_rn(round_as<Act>(sw), dout)));  // bf16 * bf16 -> bf16
    }
  } else {
    acc = __fmaf_rn(round_as<Act>(sw), dout, acc);  // float(bf16(sw)) * float(dout)
  }
  const float d_u = __fmul_rn(dout, s);
  const float bracket = __fmaf_rn(g, __fsub_rn(1.0f, sig), 1.0f);  // 1 + g * (1 - sig), contracted
  if (on) {
    const float g_mask = g_raw <= clamp.cv ? 1.0f : 0.0f;
    const float v_mask = (v_raw <= clamp.cv && v_raw >= -clamp.cv) ? 1.0f : 0.0f;
    return {__fmul_rn(__fmul_rn(__fmul_rn(__fmul_rn(d_u, sig), bracket), v), g_mask),
            __fmul_rn(__fmul_rn(d_u, silu), v_mask)};
  }
  return {__fmul_rn(__fmul_rn(__fmul_rn(d_u, v), sig), bracket), __fmul_rn(d_u, silu)};
}

}  // namespace bitparity::gpu::device
