#include "gpu/math/device_info.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cctype>
#include <ctime>
#include <fstream>
#include <sstream>

#ifndef BITPARITY_NVCC_VERSION
#define BITPARITY_NVCC_VERSION "unknown"
#endif

namespace bitparity::gpu::math {
namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The first word shaped like a version number (digits and dots) of /proc/driver/nvidia/version:
// "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..." gives
// "580.159.04" (the proprietary module writes "... x86_64 Kernel Module  580.159.04 ...").
std::string driver_from_proc() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  std::istringstream words(line);
  std::string w;
  while (words >> w) {
    const bool shaped = !w.empty() && std::isdigit(static_cast<unsigned char>(w.front())) &&
                        w.find('.') != std::string::npos &&
                        w.find_first_not_of("0123456789.") == std::string::npos;
    if (shaped) return w;
  }
  return {};
}

std::string driver_from_nvml() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return {};
  using InitFn = int (*)();
  using VersionFn = int (*)(char*, unsigned);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto version = reinterpret_cast<VersionFn>(dlsym(lib, "nvmlSystemGetDriverVersion"));
  auto shutdown = reinterpret_cast<InitFn>(dlsym(lib, "nvmlShutdown"));
  std::string out;
  if (init != nullptr && version != nullptr && init() == 0) {
    char buf[96] = {};
    if (version(buf, sizeof buf) == 0) out = buf;
    if (shutdown != nullptr) shutdown();
  }
  dlclose(lib);
  return out;
}

}  // namespace

bool cuda_device_present(std::string* reason) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (reason) *reason = std::string("no CUDA device: cudaGetDeviceCount returned ") + cudaGetErrorName(err) + " (" +
                          cudaGetErrorString(err) + ")";
    return false;
  }
  if (count == 0) {
    if (reason) *reason = "no CUDA device: cudaGetDeviceCount found 0 devices";
    return false;
  }
  return true;
}

std::string nvidia_driver_version() {
  std::string v = driver_from_proc();
  if (v.empty()) v = driver_from_nvml();
  return v.empty() ? "unknown" : v;
}

bool read_device_metadata(ref::math::Ex2Metadata* meta, std::string* error) {
  if (!cuda_device_present(error)) return false;
  cudaDeviceProp prop{};
  cudaError_t err = cudaGetDeviceProperties(&prop, 0);
  if (err != cudaSuccess) {
    if (error) *error = std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(err);
    return false;
  }
  meta->gpu_name = prop.name;
  meta->cc_major = prop.major;
  meta->cc_minor = prop.minor;
  meta->arch = ref::math::gpu_arch_name(prop.major, prop.minor);
  cudaDriverGetVersion(&meta->cuda_driver_api_version);
  cudaRuntimeGetVersion(&meta->cuda_runtime_version);
  meta->driver_version = nvidia_driver_version();
  meta->nvcc_version = BITPARITY_NVCC_VERSION;
  meta->captured_utc = utc_now();
  return true;
}

}  // namespace bitparity::gpu::math
