// Reads the GPU's ex2.approx.ftz.f32 tables (spec rule 12) and a sample of its fp32 math results,
// for the CPU emulation in reference/math/ (no CUDA types here).
#pragma once

#include <string>

namespace bitparity::gpu::math {

// Captures TP and TN (2 x 2^23 ex2.approx.ftz.f32 results) off device 0 and writes them to
// `out_path` in format bitparity-ex2/1 (reference/math/ex2_tables.h), with the GPU's name,
// compute capability, driver and CUDA versions in the header. Returns 0 on success; otherwise a
// nonzero code with `error` saying what failed (no device, a CUDA error, an unwritable path).
int capture_math(const std::string& out_path, std::string* error);

// Captures the GPU's ex2, expf, logf, log1pf, sigmoid, silu and softplus at the default sample
// inputs (reference/math/device_sample.h) and writes them to `out_path`. Returns as capture_math.
int capture_math_sample(const std::string& out_path, std::string* error);

}  // namespace bitparity::gpu::math
