// Element types of the kernels and their exact conversions: fp32 values loaded from and stored to
// bf16, fp16 or fp32 tensors (one RNE rounding a store), the dtype known at compile time (BF16,
// FP16, FP32) or at run time (round_dtype, load_scalar, store_scalar), and 16-byte packets of
// contiguous elements loaded and stored in one access. Op-generic: every kernel's I/O goes through
// here. A host build (gpu/tests/host_intrinsics.h) supplies the intrinsics itself.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/dtype.h"

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

}  // namespace bitparity::gpu::device
