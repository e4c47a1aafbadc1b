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
  } else {
    return;
  }
  bitparity::gpu::check_cuda(cudaDeviceSynchronize(), "cuda_fault_worker planted " + mode);
}
