#include "bench/bench_kernels.h"

#include <cuda_runtime.h>

#include "core/random.h"
#include "gpu/runtime.h"

namespace bitparity::bench {
namespace {

// Bits of an fp32 with exponent in [-6, 6], random sign and mantissa.
__device__ uint32_t moderate_f32_bits(uint64_t r) {
  const uint32_t exponent = 127u - 6u + static_cast<uint32_t>((r >> 8) % 13);
  return (static_cast<uint32_t>(r & 1) << 31) | (exponent << 23) | static_cast<uint32_t>((r >> 24) & 0x7fffff);
}

__global__ void fill_bf16_kernel(uint16_t* out, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<uint16_t>(moderate_f32_bits(splitmix64_mix(seed ^ (i * 0x100000001b3ull))) >> 16);
}

__global__ void fill_fp32_kernel(uint32_t* out, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    out[i] = moderate_f32_bits(splitmix64_mix(seed ^ (i * 0x100000001b3ull)));
}

__global__ void empty_kernel() {}

constexpr int kFillThreads = 256;
constexpr unsigned kFillBlocks = 4096;

}  // namespace

void fill_random_bf16(void* data, size_t n, uint64_t seed) {
  fill_bf16_kernel<<<kFillBlocks, kFillThreads>>>(static_cast<uint16_t*>(data), n, seed);
  gpu::check_launch("fill_random_bf16", nullptr);
}

void fill_random_fp32(void* data, size_t n, uint64_t seed) {
  fill_fp32_kernel<<<kFillBlocks, kFillThreads>>>(static_cast<uint32_t*>(data), n, seed);
  gpu::check_launch("fill_random_fp32", nullptr);
}

void launch_empty_kernel(void* stream) {
  empty_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>();
}

}  // namespace bitparity::bench
