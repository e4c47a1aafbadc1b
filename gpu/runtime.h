// The CUDA runtime as bitparity uses it: device discovery with a reason when there is none.
// No CUDA types in this header, so that host code compiled by g++ can include it.
#pragma once

#include <optional>
#include <string>

namespace bitparity::gpu {

// Empty when a CUDA device is usable; otherwise why not ("no CUDA device: ...").
std::optional<std::string> unavailable_reason();

// "NVIDIA H200 (sm_90), driver 13.0, runtime 13.0", or the reason there is none.
std::string device_description();

}  // namespace bitparity::gpu
