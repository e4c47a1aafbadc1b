// Launcher of bitparity's tensor-core GEMM (gpu/gemm.cu), contract fixed_order of the gemm op (spec
// OP-10, rule 13): out[M, N] = bf16_rn(acc), acc the fp32 accumulator of mma.sync m16n8k16 steps,
// one K-chunk of 16 products a step, chunks in ascending k from +0, no split-K, whatever M, N or the
// tile. No CUDA types here, so that host code compiled by g++ can call it.
//
// Row-major bf16 a [M, K], b [K, N], out [M, N]; every pointer is device memory. Launches nothing
// where M or N is 0; K = 0 writes +0. Checks its launch and throws gpu::CudaError on failure.
#pragma once

#include <cstdint>

namespace bitparity::gpu {

struct Gemm {
  int64_t M = 0, K = 0, N = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  void* stream = nullptr;  // a cudaStream_t; nullptr is the default stream
  // The ILP knob (gpu/common/ilp.h) for the large tiles, M > kGemmMediumMaxM: the blocks an SM keeps
  // in flight. 1: 128 x 256 tiles of 8 warps, one block an SM; 2 or 4: 128 x 128 tiles of 4 warps
  // (64 x 64 each), two blocks an SM; kIlpDefault: the measured best (2). Changes no bit.
  int ilp = 0;
};
// The contract's one launcher: the warpgroup-MMA kernel (gpu/gemm_wgmma.cu) on devices of compute
// capability 9.0 (H100, H200), the mma.sync kernel (gpu/gemm.cu) elsewhere. The same bits either way.
void launch_gemm_fixed_order(const Gemm& args);
// The two kernels, each the whole contract on its own: mma.sync m16n8k16 steps (any device of sm_80
// and later); wgmma m64nNk16 steps (sm_90a only; shapes or alignments its tensor maps cannot take
// go to the mma.sync kernel).
void launch_gemm_fixed_order_mma(const Gemm& args);
void launch_gemm_fixed_order_wgmma(const Gemm& args);

// The tile configuration a launch takes, by M: small (M <= 32: one warp a 32 x 16 block, so that
// N / 16 blocks stream b), medium (M <= 256: 64 x 64), large (128 x 256). Which one never changes an
// output's bits (the order is per output); they are the kernel's paths (the op's tags).
enum class GemmTiles { kSmall, kMedium, kLarge };
inline constexpr int64_t kGemmSmallMaxM = 32, kGemmMediumMaxM = 256;
GemmTiles gemm_tiles(const Gemm& args);

// Whether the launch loads 16-byte vectors (K and N multiples of 8, 16-byte aligned bases) or
// single elements: the kernel's two paths (the op's tags loads=16B and loads=2B).
bool gemm_vector_loads(const Gemm& args);

}  // namespace bitparity::gpu
