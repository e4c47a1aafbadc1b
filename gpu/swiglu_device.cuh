// Device code shared by gpu/swiglu.cu and gpu/swiglu_scale.cu: element types, 16-byte packets,
// and the element formulas of each contract, written operation by operation as the reference
// writes them (reference/swiglu_common.cpp, reference/swiglu_scale.cpp, reference/math/
// device_math.cpp). Every fp32 operation is an explicit intrinsic (__fadd_rn, __fmul_rn, __fdiv_rn;
// __fmaf_rn where the reference writes std::fma), so that nvcc cannot contract what the reference
// rounds twice, nor leave apart what it fuses. A host build of this header (tests) supplies the
// intrinsics itself (gpu/tests/host_intrinsics.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gpu/runtime.h"
#include "gpu/swiglu_kernels.h"

namespace bitparity::gpu::device {

// --- element types ---------------------------------------------------------------------------

struct BF16 {
  using Storage = uint16_t;
  static constexpr DType kDType = DType::kBF16;
  __device__ static float load(Storage s) { return __uint_as_float(static_cast<uint32_t>(s) << 16); }
  __device__ static Storage store(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};

struct FP16 {
  using Storage = uint16_t;
  static constexpr DType kDType = DType::kFP16;
  __device__ static float load(Storage s) { return __half2float(__ushort_as_half(s)); }
  __device__ static Storage store(float x) { return __half_as_ushort(__float2half_rn(x)); }
};

struct FP32 {
  using Storage = float;
  static constexpr DType kDType = DType::kFP32;
  __device__ static float load(Storage s) { return s; }
  __device__ static Storage store(float x) { return x; }
};

// The value an fp32 result has once stored in a tensor of type T (one RNE rounding).
template <class T>
__device__ __forceinline__ float round_as(float x) {
  return T::load(T::store(x));
}

// bf16: cvt.rn.bf16x2.f32 of (x, 0) is one F2FP instruction whose 32 bits are the fp32 value of
// bf16(x) (upper half bf16(x), lower half bf16(+0) = 0), where __float2bfloat16_rn and a shift
// take two. Same rounding (RNE, subnormals kept); the FastMath tests (gpu/tests) compare the two
// on all 2^32 inputs.
template <>
__device__ __forceinline__ float round_as<BF16>(float x) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x), "f"(0.0f));
  return __uint_as_float(r);
#else
  return BF16::load(BF16::store(x));
#endif
}

// The same for a dtype known only at run time (bf16, fp16 or fp32): scale and chain dtypes.
__device__ __forceinline__ float round_dtype(DType dtype, float x) {
  switch (dtype) {
    case DType::kBF16: return round_as<BF16>(x);
    case DType::kFP16: return round_as<FP16>(x);
    default: return x;
  }
}

__device__ __forceinline__ float load_scalar(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16: return BF16::load(static_cast<const uint16_t*>(p)[i]);
    case DType::kFP16: return FP16::load(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_scalar(void* p, DType dtype, int64_t i, float x) {
  switch (dtype) {
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = BF16::store(x); break;
    case DType::kFP16: static_cast<uint16_t*>(p)[i] = FP16::store(x); break;
    default: static_cast<float*>(p)[i] = x; break;
  }
}

// --- contiguous chunks of N elements, loaded and stored in one access ----------------------

template <int Bytes> struct RawVector;
template <> struct RawVector<16> { using type = uint4; };
template <> struct RawVector<8> { using type = uint2; };
template <> struct RawVector<4> { using type = uint32_t; };
template <> struct RawVector<2> { using type = uint16_t; };

template <class T, int N>
union Chunk {
  typename RawVector<N * sizeof(typename T::Storage)>::type raw;
  typename T::Storage e[N];
};

// Elements per 16-byte packet: 8 for bf16 and fp16, 4 for fp32.
template <class T>
inline constexpr int kPacket = 16 / static_cast<int>(sizeof(typename T::Storage));

// Loads N elements at p (aligned to N elements) into x[0..N) as fp32, in one access.
template <class T, int N>
__device__ __forceinline__ void load_chunk(const typename T::Storage* p, float* x) {
  Chunk<T, N> c;
  c.raw = *reinterpret_cast<const decltype(c.raw)*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) x[i] = T::load(c.e[i]);
}

// The raw chunk at p, so that several loads can be in flight before their values are used.
template <class T, int N>
__device__ __forceinline__ Chunk<T, N> load_raw(const typename T::Storage* p) {
  Chunk<T, N> c;
  c.raw = *reinterpret_cast<const decltype(c.raw)*>(p);
  return c;
}

// Stores x[0..N), each rounded once to T, in one access.
template <class T, int N>
__device__ __forceinline__ void store_chunk(typename T::Storage* p, const float* x) {
  Chunk<T, N> c;
#pragma unroll
  for (int i = 0; i < N; ++i) c.e[i] = T::store(x[i]);
  *reinterpret_cast<decltype(c.raw)*>(p) = c.raw;
}

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

// --- index arithmetic -------------------------------------------------------------------------

// n / d for 0 <= n < 2^31 as one multiply-high, an add and a shift (the magic-number division of
// Granlund and Montgomery), where a 64-bit division is a call of some 70 instructions.
struct Divider {
  uint32_t d = 1, magic = 0, shift = 0;
  Divider() = default;
  explicit Divider(uint32_t divisor) : d(divisor) {
    while (shift < 32 && (uint64_t{1} << shift) < divisor) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - divisor)) / divisor + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    return (__umulhi(n, magic) + n) >> shift;
#else
    return static_cast<uint32_t>(((uint64_t{n} * magic >> 32) + n) >> shift);
#endif
  }
};

// A grid-stride loop over the work items [first, total) in groups (a group's items are k0,
// k0 + stride, ...; `step` is the stride times the group's size): the next group's loads are issued
// before the current group's arithmetic, so that a thread keeps loads in flight while it computes.
// load(Group&, k0) issues a group's loads; compute(const Group&, k0) does the rest.
template <class Group, class Load, class Compute>
__device__ __forceinline__ void pipelined_grid_stride(uint32_t first, uint32_t total, uint32_t step, Load&& load,
                                                      Compute&& compute) {
  Group current;
  if (first < total) load(current, first);
  for (uint32_t k0 = first; k0 < total; k0 += step) {
    Group next;
    if (k0 + step < total) load(next, k0 + step);
    compute(current, k0);
    current = next;
  }
}

// --- asynchronous copies to shared memory (cp.async, sm_80 and later) ---------------------------
//
// A thread's loads in flight cost registers until they land; the two reducing backwards hold
// eight or more partial sums and a packet's arithmetic besides, so registers, not bandwidth,
// bounded how far ahead they could load. cp.async copies 16 bytes from global to shared memory
// without a register; a thread that copies a packet and later reads only that same packet needs
// no barrier, only cp.async.wait_group.

__device__ __forceinline__ void copy_async_16(void* shared, const void* global) {
#if defined(__CUDA_ARCH__)
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global) : "memory");
#else
  *static_cast<uint4*>(shared) = *static_cast<const uint4*>(global);
#endif
}

// Closes the group of copies issued since the last commit (an empty group where none was).
__device__ __forceinline__ void commit_copies() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_copies() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// A thread's ring of kStages stages of kLoads 16-byte packets in dynamic shared memory, laid out
// [stage][load][thread] so that a warp's 16-byte accesses are consecutive (no bank conflicts).
template <int kStages, int kLoads>
struct PacketRing {
  uint4* mine;  // this thread's packet of stage 0, load 0
  int threads;  // the block's threads: the distance between two of one thread's packets
  static constexpr size_t bytes(int block_threads) { return size_t{16} * kStages * kLoads * block_threads; }
  __device__ uint4* at(int stage, int load) const { return mine + (stage * kLoads + load) * threads; }
  __device__ void fill(int stage, int load, const void* global) const { copy_async_16(at(stage, load), global); }
  __device__ uint4 get(int stage, int load) const { return *at(stage, load); }
};

// Streams a team's rows through a PacketRing: the team walks rows first, first + step, ... below
// `rows`; a row has `units` units, a unit being at most one packet per load per thread. Copies run
// kStages units ahead of the arithmetic, across row boundaries, so that a row's first units are in
// flight while the previous row finishes.
//   issue(stage, row, unit)    the thread's copies of one unit
//   begin(row), end(row)       around each row
//   consume(stage, row, unit)  the unit's arithmetic, once its copies have landed
// The loop body is one copy of consume: unrolled over a row's units, the kernel overflowed the
// instruction cache.
template <int kStages, class Issue, class Begin, class Consume, class End>
__device__ __forceinline__ void stream_rows(int64_t first, int64_t step, int64_t rows, int units, Issue&& issue,
                                            Begin&& begin, Consume&& consume, End&& end) {
  int64_t next_row = first;  // the producer's cursor, kStages units ahead of the consumer
  int next_unit = 0;
  auto produce = [&](int stage) {
    if (next_row < rows) issue(stage, next_row, next_unit);
    commit_copies();
    if (++next_unit == units) {
      next_unit = 0;
      next_row += step;
    }
  };
  for (int s = 0; s < kStages; ++s) produce(s);
  int stage = 0;
  for (int64_t row = first; row < rows; row += step) {
    begin(row);
    for (int unit = 0; unit < units; ++unit) {
      wait_copies<kStages - 1>();  // this unit's group, committed kStages groups ago, has landed
      consume(stage, row, unit);
      produce(stage);  // the stage just read takes the unit kStages ahead
      stage = stage + 1 == kStages ? 0 : stage + 1;
    }
    end(row);
  }
}

// Row chunks whose work items (rows x items_per_row) number less than 2^31, so that a kernel
// indexes them in 32 bits; calls launch(first_row, rows) for each.
template <class Launch>
void for_each_row_chunk(int64_t rows, int64_t items_per_row, Launch&& launch) {
  const int64_t max_rows = std::max<int64_t>(1, ((int64_t{1} << 31) - 1) / std::max<int64_t>(1, items_per_row));
  for (int64_t first = 0; first < rows; first += max_rows) launch(first, std::min(max_rows, rows - first));
}

// --- launch helpers (host) -------------------------------------------------------------------

inline constexpr int kThreads = 256;

// Blocks of kThreads that a kernel is compiled to keep resident per multiprocessor
// (__launch_bounds__'s second argument: at most 65536 / (256 n) registers a thread), by the
// registers its loads in flight need. Unbounded, ptxas interleaves a packet's eight independent
// elements with up to 120 registers and leaves too few warps to keep the loads in flight; bounded
// too tightly, it spills. bench/NOTES.md has the measurements behind the numbers.
constexpr int blocks_per_sm(int loads_per_item, int ilp) {
  const int live = loads_per_item * ilp;  // 16-byte packets held per thread
  return live <= 2 ? 6 : live <= 4 ? 4 : live <= 6 ? 3 : 2;
}

inline int multiprocessor_count() {
  static const int sms = [] {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return count > 0 ? count : 1;
  }();
  return sms;
}

// Blocks for a grid-stride loop of kKernel over `items` (one per thread per pass): as many as
// are resident at once on the whole device, so that no partial wave is left at the end, and no
// more than the work needs.
template <auto kKernel>
unsigned resident_grid(int64_t items) {
  static const int per_sm = [] {
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, kThreads, 0) != cudaSuccess || blocks < 1) {
      cudaGetLastError();
      blocks = 1;
    }
    return blocks;
  }();
  const int64_t needed = (items + kThreads - 1) / kThreads;
  const int64_t resident = int64_t{per_sm} * multiprocessor_count();
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(needed, resident)));
}

// Blocks for a kernel whose teams (teams_per_block to a block, `shared` bytes of dynamic shared
// memory) walk rows team, team + T, ...: no more teams T than are resident at once, and no more
// than give each team the same number of rows, so that no last round of rows runs on a few teams
// while the rest wait. Raises the kernel's shared-memory limit where it needs more than 48 KiB.
template <auto kKernel>
unsigned row_team_grid(int64_t rows, int teams_per_block, size_t shared) {
  static const int per_sm = [shared] {
    if (shared > size_t{48} << 10)
      cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, kThreads, shared) != cudaSuccess ||
        blocks < 1) {
      cudaGetLastError();
      blocks = 1;
    }
    return blocks;
  }();
  const int64_t resident = int64_t{per_sm} * multiprocessor_count() * teams_per_block;
  const int64_t rows_per_team = (rows + resident - 1) / resident;
  const int64_t teams = (rows + rows_per_team - 1) / rows_per_team;
  return static_cast<unsigned>(std::max<int64_t>(1, (teams + teams_per_block - 1) / teams_per_block));
}

// p moved by `bytes` (nullptr stays nullptr).
template <class T>
T* advanced(T* p, int64_t bytes) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return p ? reinterpret_cast<T*>(reinterpret_cast<Byte*>(p) + bytes) : p;
}

#if defined(__CUDACC__)
// Launches kKernel(chunk, Divider(per_row)) for each row chunk of `args` (for_each_row_chunk), on a
// resident grid, and checks the launch; advance(chunk, first_row) moves the chunk's tensors to its
// first row.
template <auto kKernel, class Args, class Advance>
void launch_row_chunks(const Args& args, int64_t per_row, const char* what, Advance&& advance) {
  for_each_row_chunk(args.rows, per_row, [&](int64_t first, int64_t rows) {
    Args chunk = args;
    chunk.rows = rows;
    advance(chunk, first);
    kKernel<<<resident_grid<kKernel>(rows * per_row), kThreads, 0, static_cast<cudaStream_t>(args.stream)>>>(
        chunk, Divider(static_cast<uint32_t>(per_row)));
    check_launch(what, args.stream);
  });
}
#endif

// Work items of an elementwise kernel: 16-byte packets where F allows, else single elements.
inline int64_t elementwise_items(int64_t rows, int64_t F, int packet) {
  return F % packet == 0 ? rows * (F / packet) : rows * F;
}

// Calls Launch<Act, kIlp>::run(args) for the activation dtype and ILP of `args` (kIlpDefault:
// `default_ilp`, the kernel's measured best); kWithFp16 instantiates the fp16 kernels (Paddle's
// kernels have none).
template <template <class, int> class Launch, class Act, class Args>
void dispatch_ilp(const Args& args, int default_ilp) {
  switch (args.ilp == kIlpDefault ? default_ilp : args.ilp) {
    case 1: return Launch<Act, 1>::run(args);
    case 2: return Launch<Act, 2>::run(args);
    case 4: return Launch<Act, 4>::run(args);
    default: throw std::invalid_argument("swiglu kernels: ilp must be 1, 2 or 4; got " + std::to_string(args.ilp));
  }
}

template <template <class, int> class Launch, bool kWithFp16, class Args>
void dispatch_activation(const Args& args, int default_ilp) {
  switch (args.act) {
    case DType::kBF16: return dispatch_ilp<Launch, BF16>(args, default_ilp);
    case DType::kFP32: return dispatch_ilp<Launch, FP32>(args, default_ilp);
    case DType::kFP16:
      if constexpr (kWithFp16) return dispatch_ilp<Launch, FP16>(args, default_ilp);
      [[fallthrough]];
    default:
      throw std::invalid_argument(std::string("swiglu kernels: no kernel for activations of dtype ") +
                                  std::string(dtype_name(args.act)));
  }
}

}  // namespace bitparity::gpu::device
