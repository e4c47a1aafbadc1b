#include "gpu/tests/fast_math_check.h"

#include <cuda_runtime.h>

#include "gpu/runtime.h"
#include "gpu/swiglu_device.cuh"

namespace bitparity::gpu::testing_support {
namespace {

constexpr int kExamples = 8;

struct Counters {
  unsigned long long in_domain, mismatches;
  uint32_t examples[kExamples];
};

__device__ void record(Counters* c, uint32_t x) {
  const unsigned long long n = atomicAdd(&c->mismatches, 1ull);
  if (n < kExamples) c->examples[n] = x;
}

__global__ void fast_sigmoid_silu_kernel(Counters* c) {
  unsigned long long in_domain = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < (uint64_t{1} << 32);
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float x = __uint_as_float(static_cast<uint32_t>(i));
    bool ok = true;
    const device::SigmoidSilu fast = device::sigmoid_silu_fast(x, ok);
    if (!ok) continue;
    ++in_domain;
    const device::SigmoidSilu exact = device::sigmoid_silu(x);
    if (__float_as_uint(fast.sigmoid) != __float_as_uint(exact.sigmoid) ||
        __float_as_uint(fast.silu) != __float_as_uint(exact.silu))
      record(c, static_cast<uint32_t>(i));
  }
  atomicAdd(&c->in_domain, in_domain);
}

__global__ void fast_silu_kernel(Counters* c) {
  unsigned long long in_domain = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < (uint64_t{1} << 32);
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float x = __uint_as_float(static_cast<uint32_t>(i));
    bool ok = true;
    const float fast = device::silu_fast(x, ok);
    if (!ok) continue;
    ++in_domain;
    if (__float_as_uint(fast) != __float_as_uint(device::sigmoid_silu(x).silu)) record(c, static_cast<uint32_t>(i));
  }
  atomicAdd(&c->in_domain, in_domain);
}

__global__ void fast_sigmoid_kernel(Counters* c) {
  unsigned long long in_domain = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < (uint64_t{1} << 32);
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float x = __uint_as_float(static_cast<uint32_t>(i));
    bool ok = true;
    const float fast = device::sigmoid_fast(x, ok);
    if (!ok) continue;
    ++in_domain;
    if (__float_as_uint(fast) != __float_as_uint(device::sigmoid_silu(x).sigmoid)) record(c, static_cast<uint32_t>(i));
  }
  atomicAdd(&c->in_domain, in_domain);
}

__global__ void bf16_rounding_kernel(Counters* c) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < (uint64_t{1} << 32);
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float x = __uint_as_float(static_cast<uint32_t>(i));
    const float one = device::round_as<device::BF16>(x);
    const float two = device::BF16::load(device::BF16::store(x));
    if (__float_as_uint(one) != __float_as_uint(two)) record(c, static_cast<uint32_t>(i));
  }
  if (threadIdx.x == 0) atomicAdd(&c->in_domain, 0ull);
}

template <class Kernel>
ExhaustiveResult run(Kernel kernel, const char* what, bool all_in_domain) {
  Counters* c = nullptr;
  check_cuda(cudaMalloc(&c, sizeof(Counters)), "cudaMalloc");
  check_cuda(cudaMemset(c, 0, sizeof(Counters)), "cudaMemset");
  kernel<<<132 * 16, 256>>>(c);
  check_launch(what, nullptr);
  Counters host{};
  check_cuda(cudaMemcpy(&host, c, sizeof(Counters), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(c);
  ExhaustiveResult r;
  r.inputs = uint64_t{1} << 32;
  r.in_domain = all_in_domain ? r.inputs : host.in_domain;
  r.mismatches = host.mismatches;
  for (unsigned long long i = 0; i < host.mismatches && i < kExamples; ++i) r.examples.push_back(host.examples[i]);
  return r;
}

}  // namespace

ExhaustiveResult check_fast_sigmoid_silu() { return run(fast_sigmoid_silu_kernel, "fast_sigmoid_silu_kernel", false); }
ExhaustiveResult check_fast_silu() { return run(fast_silu_kernel, "fast_silu_kernel", false); }
ExhaustiveResult check_fast_sigmoid() { return run(fast_sigmoid_kernel, "fast_sigmoid_kernel", false); }
ExhaustiveResult check_bf16_rounding() { return run(bf16_rounding_kernel, "bf16_rounding_kernel", true); }

}  // namespace bitparity::gpu::testing_support
