#include "gpu/tests/fast_math_check.h"

#include <cuda_runtime.h>

#include "gpu/runtime.h"
#include "gpu/common/dtype_io.cuh"
#include "gpu/common/sigmoid_silu.cuh"

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

// Every fp32 bit pattern x: check(x, in_domain) says whether the shortcut gives the replaced
// operation's bits, and clears in_domain where the shortcut does not claim to.
template <class Check>
__global__ void exhaustive_kernel(Counters* c, Check check) {
  unsigned long long in_domain = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < (uint64_t{1} << 32);
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float x = __uint_as_float(static_cast<uint32_t>(i));
    bool ok = true;
    const bool same = check(x, ok);
    if (!ok) continue;
    ++in_domain;
    if (!same) record(c, static_cast<uint32_t>(i));
  }
  atomicAdd(&c->in_domain, in_domain);
}

__device__ bool same_bits(float a, float b) { return __float_as_uint(a) == __float_as_uint(b); }

struct FastSigmoidSilu {
  __device__ bool operator()(float x, bool& ok) const {
    const device::SigmoidSilu fast = device::sigmoid_silu_fast(x, ok), exact = device::sigmoid_silu(x);
    return same_bits(fast.sigmoid, exact.sigmoid) && same_bits(fast.silu, exact.silu);
  }
};
struct FastSilu {
  __device__ bool operator()(float x, bool& ok) const {
    return same_bits(device::silu_fast(x, ok), device::sigmoid_silu(x).silu);
  }
};
struct FastSigmoid {
  __device__ bool operator()(float x, bool& ok) const {
    return same_bits(device::sigmoid_fast(x, ok), device::sigmoid_silu(x).sigmoid);
  }
};
struct Bf16Rounding {  // every input is in the domain
  __device__ bool operator()(float x, bool&) const {
    return same_bits(device::round_as<device::BF16>(x), device::BF16::load(device::BF16::store(x)));
  }
};

template <class Check>
ExhaustiveResult run(Check check, const char* what) {
  Counters* c = nullptr;
  check_cuda(cudaMalloc(&c, sizeof(Counters)), "cudaMalloc");
  check_cuda(cudaMemset(c, 0, sizeof(Counters)), "cudaMemset");
  exhaustive_kernel<<<132 * 16, 256>>>(c, check);
  check_launch(what, nullptr);
  Counters host{};
  check_cuda(cudaMemcpy(&host, c, sizeof(Counters), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(c);
  ExhaustiveResult r;
  r.inputs = uint64_t{1} << 32;
  r.in_domain = host.in_domain;
  r.mismatches = host.mismatches;
  for (unsigned long long i = 0; i < host.mismatches && i < kExamples; ++i) r.examples.push_back(host.examples[i]);
  return r;
}

}  // namespace

ExhaustiveResult check_fast_sigmoid_silu() { return run(FastSigmoidSilu{}, "sigmoid_silu_fast"); }
ExhaustiveResult check_fast_silu() { return run(FastSilu{}, "silu_fast"); }
ExhaustiveResult check_fast_sigmoid() { return run(FastSigmoid{}, "sigmoid_fast"); }
ExhaustiveResult check_bf16_rounding() { return run(Bf16Rounding{}, "bf16 rounding"); }

}  // namespace bitparity::gpu::testing_support
