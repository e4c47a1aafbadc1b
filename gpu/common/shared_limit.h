// The dynamic shared-memory limit of a kernel, raised once per device. cudaFuncSetAttribute is a
// call into the driver; a launcher that set the limit before every launch paid it on every small
// case, and one that guarded it with a lock serialized the threads of a campaign.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>

#include <cuda_runtime.h>

#include "gpu/runtime.h"

namespace bitparity::gpu {

// Raises kKernel's dynamic shared-memory limit on the current device to at least `bytes`. The
// limit is the kernel's on that device for the whole process, and every launch and occupancy query
// reads it: it only ever rises, so that no thread's smaller launch lowers it under another thread's
// larger one (which would fail with cudaErrorInvalidValue). Once the limit covers `bytes`, a call
// reads one atomic and takes no lock. `what` names the caller in errors.
template <auto kKernel>
void raise_shared_limit(size_t bytes, const char* what) {
  constexpr int kDevices = 64;  // devices past this are set on every call (correct, only slower)
  static std::atomic<size_t> limit[kDevices];  // static storage: zero
  static std::mutex mutex;
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) check_cuda(err, what);
  const bool cached = device >= 0 && device < kDevices;
  if (cached && limit[device].load(std::memory_order_acquire) >= bytes) return;
  const std::lock_guard<std::mutex> lock(mutex);
  if (cached && limit[device].load(std::memory_order_relaxed) >= bytes) return;
  check_cuda(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             what);
  if (cached) limit[device].store(bytes, std::memory_order_release);
}

}  // namespace bitparity::gpu
