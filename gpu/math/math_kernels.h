// Launchers of the kernels that evaluate CUDA's own fp32 math (no CUDA types here, so host code
// compiled as plain C++ can call them). Each returns a cudaError_t value (0 = success). Streams are
// cudaStream_t values passed as void*; nullptr is the default stream.
#pragma once

#include <cstdint>

namespace bitparity::gpu::math {

// The functions in ref::math::SampleFunction order: ex2.approx.ftz.f32, expf, logf, log1pf, and the
// rule 2 formulas 1/(1+expf(-x)), x/(1+expf(-x)), x > 20 ? x : log1pf(expf(x)), compiled by nvcc
// with its defaults (no fast math, FMA contraction on), as PyTorch's kernels are.
inline constexpr int kDeviceFunctionCount = 7;

// out[k * n + i] = function k at the fp32 pattern base + i, for i < n.
int launch_math_sweep(uint32_t base, uint32_t n, float* d_out, void* stream);
// out[k * n + i] = function k at the fp32 pattern d_x[i].
int launch_math_list(const uint32_t* d_x, uint32_t n, float* d_out, void* stream);
// tp[f] = ex2.approx.ftz.f32(f * 2^-23), tn[f] = ex2.approx.ftz.f32(-f * 2^-23), f < 2^23.
int launch_ex2_tables(float* d_tp, float* d_tn, void* stream);

}  // namespace bitparity::gpu::math
