// CUDA's fp32 math as the GPU computes it. Built with nvcc's defaults: no --use_fast_math, so
// expf/logf/log1pf are libdevice's __nv_* functions, and --fmad=true, so nvcc contracts
// `1 + expf(-x)` into fma.rn(ex2, s, 1) exactly as it does in PyTorch's kernels.
#include "gpu/math/math_kernels.h"

#include <cuda_runtime.h>

namespace bitparity::gpu::math {
namespace {

constexpr int kThreads = 256;
constexpr float kSoftplusThreshold = 20.0f;  // PyTorch's default threshold, beta = 1
// ref::math::kEx2TableSize (this file stays C++17 and free of the reference headers).
constexpr uint32_t kEx2TableSize = 1u << 23;

__device__ __forceinline__ float ex2_approx_ftz(float r) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(r));
  return y;
}

__device__ __forceinline__ void eval_all(float x, float* out, uint32_t n, uint32_t i) {
  out[0 * size_t(n) + i] = ex2_approx_ftz(x);
  out[1 * size_t(n) + i] = expf(x);
  out[2 * size_t(n) + i] = logf(x);
  out[3 * size_t(n) + i] = log1pf(x);
  out[4 * size_t(n) + i] = 1.0f / (1.0f + expf(-x));
  out[5 * size_t(n) + i] = x / (1.0f + expf(-x));
  out[6 * size_t(n) + i] = x > kSoftplusThreshold ? x : log1pf(expf(x));
}

__global__ void sweep_kernel(uint32_t base, uint32_t n, float* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) eval_all(__uint_as_float(base + i), out, n, i);
}

__global__ void list_kernel(const uint32_t* x, uint32_t n, float* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) eval_all(__uint_as_float(x[i]), out, n, i);
}

__global__ void ex2_tables_kernel(float* tp, float* tn) {
  const uint32_t f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= kEx2TableSize) return;
  const float r = static_cast<float>(f) * 0x1p-23f;  // exact: f < 2^23
  tp[f] = ex2_approx_ftz(r);
  tn[f] = ex2_approx_ftz(-r);
}

unsigned blocks_for(uint32_t n) { return (n + kThreads - 1) / kThreads; }

}  // namespace

int launch_math_sweep(uint32_t base, uint32_t n, float* d_out, void* stream) {
  if (n == 0) return cudaSuccess;
  sweep_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(base, n, d_out);
  return cudaGetLastError();
}

int launch_math_list(const uint32_t* d_x, uint32_t n, float* d_out, void* stream) {
  if (n == 0) return cudaSuccess;
  list_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(d_x, n, d_out);
  return cudaGetLastError();
}

int launch_ex2_tables(float* d_tp, float* d_tn, void* stream) {
  ex2_tables_kernel<<<blocks_for(kEx2TableSize), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(d_tp, d_tn);
  return cudaGetLastError();
}

}  // namespace bitparity::gpu::math
