// What a capture records about the GPU it ran on (no CUDA types here).
#pragma once

#include <string>

#include "reference/math/ex2_tables.h"

namespace bitparity::gpu::math {

// True when a CUDA device can be used; otherwise false with `reason` saying why ("no CUDA device:
// cudaGetDeviceCount returned ..."), for tests to skip with.
bool cuda_device_present(std::string* reason);

// Fills arch, gpu_name, compute capability, driver and CUDA versions, nvcc version and the UTC
// time of device 0 (the hashes stay empty). False with `error` set when no device answers.
bool read_device_metadata(ref::math::Ex2Metadata* meta, std::string* error);

// The NVIDIA driver version ("580.159.04"): /proc/driver/nvidia/version, else NVML through dlopen,
// else "unknown".
std::string nvidia_driver_version();

}  // namespace bitparity::gpu::math
