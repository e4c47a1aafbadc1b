#include "gpu/runtime.h"

#include <cuda_runtime.h>

namespace bitparity::gpu {

std::optional<std::string> unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(err);
  if (count == 0) return std::string("no CUDA device: cudaGetDeviceCount found none");
  return std::nullopt;
}

std::string device_description() {
  if (auto why = unavailable_reason()) return *why;
  int device = 0, driver = 0, runtime = 0;
  cudaGetDevice(&device);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + "), driver " +
         version(driver) + ", runtime " + version(runtime);
}

}  // namespace bitparity::gpu
