// Helper kernels of the benchmarks (no CUDA types here): random bytes for the copy that a kernel is
// compared with, and the empty kernel of the launch-latency benchmark. Streams are cudaStream_t as void*.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bitparity::bench {

// n bf16 values with |x| in [2^-6, 2^7), random sign and mantissa (no NaN, Inf or zero).
void fill_random_bf16(void* data, size_t n, uint64_t seed);
// n fp32 values of the same kind.
void fill_random_fp32(void* data, size_t n, uint64_t seed);

// A kernel of one block of 32 threads that does nothing.
void launch_empty_kernel(void* stream);

}  // namespace bitparity::bench
