// The planted device faults of cuda_fault_worker.cpp: kernels that break the way a faulty kernel
// does. plant_cuda_fault returns the CUDA error as a gpu::CudaError (a hang never returns).
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "gpu/runtime.h"

namespace {

__global__ void store_through(float* p) { *p = 1.0f; }
__global__ void trap_kernel() { asm volatile("trap;"); }
__global__ void spin_kernel(const volatile int* flag) {
  while (*flag == 0) {
  }
}
// A shared-memory reduction step with its barrier missing: thread t reads the slot another warp
// writes. The values are usually right; racecheck reports the hazard.
__global__ void racy_neighbour_sum(float* out) {
  __shared__ float slots[128];
  const int t = threadIdx.x;
  slots[t] = static_cast<float>(t);
  out[t] = slots[t] + slots[(t + 64) % 128];  // no __syncthreads() between the write and the read
}
// One element past the end of its buffer: no fault without a checker (the allocation's granule is
// larger), memcheck reports the invalid read.
__global__ void read_past_end(const float* in, float* out, int n) { out[0] = in[n]; }

}  // namespace

void plant_cuda_fault(const std::string& mode) {
  if (mode == "illegal_address") {
    store_through<<<1, 1>>>(reinterpret_cast<float*>(uintptr_t{16}));
  } else if (mode == "trap") {
    trap_kernel<<<1, 1>>>();
  } else if (mode == "hang") {
    int* flag = nullptr;
    bitparity::gpu::check_cuda(cudaMalloc(&flag, sizeof(int)), "cuda_fault_worker: cudaMalloc");
    bitparity::gpu::check_cuda(cudaMemset(flag, 0, sizeof(int)), "cuda_fault_worker: cudaMemset");
    spin_kernel<<<1, 1>>>(flag);
  } else if (mode == "race" || mode == "out_of_bounds") {
    float* in = nullptr;  // 128 floats
    float* out = nullptr;
    // `out` first: the allocator places a later allocation right after an earlier one, and a read
    // one past `in` that lands inside `out` is a read of live memory, which memcheck cannot flag.
    bitparity::gpu::check_cuda(cudaMalloc(&out, 128 * sizeof(float)), "cuda_fault_worker: cudaMalloc");
    bitparity::gpu::check_cuda(cudaMalloc(&in, 128 * sizeof(float)), "cuda_fault_worker: cudaMalloc");
    bitparity::gpu::check_cuda(cudaMemset(in, 0, 128 * sizeof(float)), "cuda_fault_worker: cudaMemset");
    if (mode == "race") racy_neighbour_sum<<<1, 128>>>(out);
    else read_past_end<<<1, 1>>>(in, out, 128);
    bitparity::gpu::check_cuda(cudaDeviceSynchronize(), "cuda_fault_worker planted " + mode);
    bitparity::gpu::check_cuda(cudaFree(in), "cuda_fault_worker: cudaFree");
    bitparity::gpu::check_cuda(cudaFree(out), "cuda_fault_worker: cudaFree");
    return;
  } else {
    return;
  }
  bitparity::gpu::check_cuda(cudaDeviceSynchronize(), "cuda_fault_worker planted " + mode);
}
