// expert_mlp's data movement (gpu/expert_mlp_kernels.h): a 32 x 32 tiled transpose through shared
// memory (the tile padded by one element against bank conflicts), and stream-ordered memset and
// memcpy.
#include <cstdint>

#include <cuda_runtime.h>

#include "gpu/expert_mlp_kernels.h"
#include "gpu/runtime.h"

namespace bitparity::gpu {
namespace {

constexpr int kTile = 32, kRowsPerPass = 8;

__global__ void transpose16_kernel(const uint16_t* __restrict__ src, int64_t rows, int64_t cols,
                                   uint16_t* __restrict__ dst) {
  __shared__ uint16_t tile[kTile][kTile + 1];
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile, r0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = src[r * cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;  // dst row c, column r
    if (c < cols && r < rows) dst[c * rows + r] = tile[threadIdx.x][i];
  }
}

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

void zero_async(void* dst, size_t bytes, void* stream) {
  if (bytes > 0) check_cuda(cudaMemsetAsync(dst, 0, bytes, as_stream(stream)), "cudaMemsetAsync");
}

void copy_async(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes > 0)
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream)), "cudaMemcpyAsync");
}

void launch_transpose16(const void* src, int64_t rows, int64_t cols, void* dst, void* stream) {
  if (rows <= 0 || cols <= 0) return;
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  transpose16_kernel<<<grid, dim3(kTile, kRowsPerPass), 0, as_stream(stream)>>>(static_cast<const uint16_t*>(src), rows,
                                                                                  cols, static_cast<uint16_t*>(dst));
  check_launch("transpose16_kernel", stream);
}

}  // namespace bitparity::gpu
