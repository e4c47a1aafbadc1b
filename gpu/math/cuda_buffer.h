// A device allocation that frees itself, and the check that turns a CUDA error into a message
// (host code only; compiled as C++ against the CUDA runtime API).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace bitparity::gpu::math {

// False with `error` = "<what>: <CUDA error name and text>" when `err` is not cudaSuccess.
inline bool cuda_ok(int err, const char* what, std::string* error) {
  if (err == cudaSuccess) return true;
  if (error) {
    *error = std::string(what) + ": " + cudaGetErrorName(static_cast<cudaError_t>(err)) + " (" +
             cudaGetErrorString(static_cast<cudaError_t>(err)) + ")";
  }
  return false;
}

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  bool allocate(size_t count, std::string* error) {
    return cuda_ok(cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T)), "cudaMalloc", error);
  }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

// Pinned host memory, so that device-to-host copies run at full speed and asynchronously.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  bool allocate(size_t count, std::string* error) {
    return cuda_ok(cudaMallocHost(reinterpret_cast<void**>(&ptr_), count * sizeof(T)), "cudaMallocHost", error);
  }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

}  // namespace bitparity::gpu::math
