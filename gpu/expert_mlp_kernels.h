// The data movement of expert_mlp's composed record (gpu/expert_mlp_records.cpp): zero padding,
// row prefixes and transposes of 16-bit matrices, all on a stream. No arithmetic: the GEMMs and the
// activation are the gemm and swiglu records'. Host code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bitparity::gpu {

// dst[0, bytes) = 0, on `stream` (a cudaStream_t; nullptr: the default stream).
void zero_async(void* dst, size_t bytes, void* stream);
// dst[0, bytes) = src[0, bytes), device to device, on `stream`.
void copy_async(void* dst, const void* src, size_t bytes, void* stream);
// dst [cols, rows] = src [rows, cols]^T, 16-bit elements (bit patterns moved, never converted).
void launch_transpose16(const void* src, int64_t rows, int64_t cols, void* dst, void* stream);

}  // namespace bitparity::gpu
