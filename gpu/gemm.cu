// bitparity's tensor-core GEMM in a written-down order (contract fixed_order; gpu/gemm_kernels.h).
// Every output's accumulator sees the K products in chunks of 16, one mma.sync m16n8k16 step a
// chunk, in ascending k, starting from +0: the block tiling, the pipeline and the launch decide only
// which outputs a warp holds, never the order of one output's steps, so the bits do not depend on
// M, N or the grid (batch invariance), and the reference's model of the step (rule 13) reproduces
// them. A chunk wholly beyond K is never issued (the order is the ceil(K / 16) chunks); a partial
// last chunk is zero-filled (zero products are ignored by the step).
//
// Tiles: three configurations by M (gpu/gemm_kernels.h), each a block of warps over a tile of out,
// each warp a grid of 16 x 8 MMA tiles; K advances through a ring of stages in shared memory, filled
// by cp.async 16-byte copies (zero-filled past M, N or K) where K and N are multiples of 8, element
// by element otherwise. Fragments come from shared memory through ldmatrix (.trans for b, row-major
// [K, N]).
#include <atomic>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpu/common/shared_limit.h"
#include "gpu/gemm_kernels.h"
#include "gpu/runtime.h"

namespace bitparity::gpu {
namespace {

constexpr int kChunk = 16;  // K of one MMA step

// A tile configuration: the block's tile of out (kBlockM x kBlockN), its warps (kWarpsM x kWarpsN,
// each a (kBlockM / kWarpsM) x (kBlockN / kWarpsN) tile of 16 x 8 MMA tiles), the K of one stage
// and the stages of the ring. Rows of the shared tiles are padded by 8 elements (16 bytes), so that
// the 8 row addresses of one ldmatrix fall in different banks.
template <int BlockM, int BlockN, int BlockK, int WarpsM, int WarpsN, int Stages>
struct Tiles {
  static constexpr int kBlockM = BlockM, kBlockN = BlockN, kBlockK = BlockK, kStages = Stages;
  static constexpr int kWarpsN = WarpsN, kThreads = 32 * WarpsM * WarpsN;
  static constexpr int kWarpM = BlockM / WarpsM, kWarpN = BlockN / WarpsN;
  static constexpr int kTilesM = kWarpM / 16, kTilesN = kWarpN / 8;
  static constexpr int kStrideA = BlockK + 8, kStrideB = BlockN + 8;
  static constexpr int kStageA = BlockM * kStrideA, kStageB = BlockK * kStrideB;  // elements
  static constexpr size_t kSharedBytes = sizeof(uint16_t) * Stages * (kStageA + kStageB);
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0 && BlockK % kChunk == 0 && Stages >= 2);
};
// M up to 32: a warp a block, 32 x 16 of out, so that N / 16 blocks stream b; long stages.
using SmallTiles = Tiles<32, 16, 128, 1, 1, 4>;
// M up to 256: 64 x 64, four warps of 32 x 32.
using MediumTiles = Tiles<64, 64, 64, 2, 2, 4>;
// Larger M: 128 x 256, eight warps of 64 x 64 (one block an SM: 196 registers a thread); or 128 x
// 128, four warps of 64 x 64 (two blocks an SM).
using LargeTiles = Tiles<128, 256, 32, 2, 4, 4>;
using LargeTilesTwoBlocks = Tiles<128, 128, 32, 2, 2, 4>;
constexpr int kLargeDefaultIlp = 2;  // measured on the H200: 468 against 510 µs at 4096 x 4096 x 2816 (bench/NOTES.md)

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared, or zeros where `valid` is false (src-size 0: nothing is read).
__device__ __forceinline__ void copy_16_or_zero(void* shared, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared)), "l"(global),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wait_pending() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// d = c + a b over one chunk of 16: the instruction whose step rule 13 models.
__device__ __forceinline__ void mma_step(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <class T, bool kVector>
__global__ void __launch_bounds__(T::kThreads) fixed_order_kernel(Gemm g) {
  extern __shared__ __align__(16) uint16_t shared[];
  uint16_t* tile_a = shared;                          // [stage][kBlockM][kStrideA]
  uint16_t* tile_b = shared + T::kStages * T::kStageA;  // [stage][kBlockK][kStrideB]
  const auto* a = static_cast<const uint16_t*>(g.a);
  const auto* b = static_cast<const uint16_t*>(g.b);
  const int64_t M = g.M, K = g.K, N = g.N;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * T::kBlockM, n0 = static_cast<int64_t>(blockIdx.x) * T::kBlockN;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = (warp / T::kWarpsN) * T::kWarpM, warp_n = (warp % T::kWarpsN) * T::kWarpN;

  // One stage: a's rows [m0, m0 + kBlockM) x columns [k0, k0 + kBlockK), b's rows [k0, k0 + kBlockK)
  // x columns [n0, n0 + kBlockN).
  auto load = [&](int stage, int64_t k0) {
    uint16_t* sa = tile_a + stage * T::kStageA;
    uint16_t* sb = tile_b + stage * T::kStageB;
    if constexpr (kVector) {
      constexpr int kVectorsA = T::kBlockM * T::kBlockK / 8, kVectorsB = T::kBlockK * T::kBlockN / 8;
#pragma unroll
      for (int i = tid; i < kVectorsA; i += T::kThreads) {
        const int row = i / (T::kBlockK / 8), col = (i % (T::kBlockK / 8)) * 8;
        const bool valid = m0 + row < M && k0 + col < K;
        copy_16_or_zero(sa + row * T::kStrideA + col, valid ? a + (m0 + row) * K + k0 + col : a, valid);
      }
#pragma unroll
      for (int i = tid; i < kVectorsB; i += T::kThreads) {
        const int row = i / (T::kBlockN / 8), col = (i % (T::kBlockN / 8)) * 8;
        const bool valid = k0 + row < K && n0 + col < N;
        copy_16_or_zero(sb + row * T::kStrideB + col, valid ? b + (k0 + row) * N + n0 + col : b, valid);
      }
    } else {
      for (int i = tid; i < T::kBlockM * T::kBlockK; i += T::kThreads) {
        const int row = i / T::kBlockK, col = i % T::kBlockK;
        sa[row * T::kStrideA + col] = m0 + row < M && k0 + col < K ? a[(m0 + row) * K + k0 + col] : uint16_t{0};
      }
      for (int i = tid; i < T::kBlockK * T::kBlockN; i += T::kThreads) {
        const int row = i / T::kBlockN, col = i % T::kBlockN;
        sb[row * T::kStrideB + col] = k0 + row < K && n0 + col < N ? b[(k0 + row) * N + n0 + col] : uint16_t{0};
      }
    }
  };

  float acc[T::kTilesM][T::kTilesN][4];
#pragma unroll
  for (int i = 0; i < T::kTilesM; ++i)
#pragma unroll
    for (int j = 0; j < T::kTilesN; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

  const int64_t k_tiles = (K + T::kBlockK - 1) / T::kBlockK;
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < k_tiles) load(s, s * T::kBlockK);
    commit();
  }
  for (int64_t t = 0; t < k_tiles; ++t) {
    wait_pending<T::kStages - 2>();
    __syncthreads();  // tile t has landed for every thread, and tile t - 1's stage is free
    const int64_t next = t + T::kStages - 1;
    if (next < k_tiles) load(static_cast<int>(next % T::kStages), next * T::kBlockK);
    commit();
    const int stage = static_cast<int>(t % T::kStages);
    const uint16_t* sa = tile_a + stage * T::kStageA;
    const uint16_t* sb = tile_b + stage * T::kStageB;
    // The chunks of this stage that K reaches: none wholly beyond K is issued.
    const int64_t left = K - t * T::kBlockK;
    const int chunks = left >= T::kBlockK ? T::kBlockK / kChunk : static_cast<int>((left + kChunk - 1) / kChunk);
#pragma unroll
    for (int c = 0; c < T::kBlockK / kChunk; ++c) {
      if (c >= chunks) break;
      const int kk = c * kChunk;
      uint32_t fa[T::kTilesM][4], fb[T::kTilesN / 2][4];
#pragma unroll
      for (int i = 0; i < T::kTilesM; ++i)
        ldmatrix_x4(fa[i], sa + (warp_m + i * 16 + lane % 16) * T::kStrideA + kk + (lane / 16) * 8);
#pragma unroll
      for (int j = 0; j < T::kTilesN / 2; ++j)
        ldmatrix_x4_trans(fb[j], sb + (kk + lane % 16) * T::kStrideB + warp_n + j * 16 + (lane / 16) * 8);
#pragma unroll
      for (int i = 0; i < T::kTilesM; ++i)
#pragma unroll
        for (int j = 0; j < T::kTilesN; ++j)
          mma_step(acc[i][j], fa[i], fb[j / 2][(j % 2) * 2], fb[j / 2][(j % 2) * 2 + 1]);
    }
  }

  // Fragment layout of the accumulator: registers 0, 1 at row lane / 4, columns 2 (lane % 4) + 0, 1;
  // registers 2, 3 eight rows below.
  auto* out = static_cast<__nv_bfloat16*>(g.out);
#pragma unroll
  for (int i = 0; i < T::kTilesM; ++i)
#pragma unroll
    for (int j = 0; j < T::kTilesN; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int64_t m = m0 + warp_m + i * 16 + lane / 4 + (r / 2) * 8;
        const int64_t n = n0 + warp_n + j * 8 + (lane % 4) * 2 + r % 2;
        if (m < M && n < N) out[m * N + n] = __float2bfloat16_rn(acc[i][j][r]);
      }
}

template <class T, bool kVector>
void launch(const Gemm& g) {
  constexpr auto kernel = fixed_order_kernel<T, kVector>;
  raise_shared_limit<kernel>(T::kSharedBytes, "gemm fixed_order: cudaFuncSetAttribute");
  const int64_t blocks_n = (g.N + T::kBlockN - 1) / T::kBlockN, blocks_m = (g.M + T::kBlockM - 1) / T::kBlockM;
  if (blocks_n > 0x7FFFFFFF || blocks_m > 65535)
    throw CudaError(cudaErrorInvalidConfiguration, "gemm fixed_order: M or N too large for one grid");
  const dim3 grid(static_cast<unsigned>(blocks_n), static_cast<unsigned>(blocks_m));
  kernel<<<grid, T::kThreads, T::kSharedBytes, static_cast<cudaStream_t>(g.stream)>>>(g);
  check_launch("gemm fixed_order", g.stream);
}

template <class T>
void launch_tiles(const Gemm& g) {
  if (gemm_vector_loads(g)) {
    launch<T, true>(g);
  } else {
    launch<T, false>(g);
  }
}

}  // namespace

bool gemm_vector_loads(const Gemm& g) {
  return g.K % 8 == 0 && g.N % 8 == 0 && reinterpret_cast<uintptr_t>(g.a) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(g.b) % 16 == 0;
}

GemmTiles gemm_tiles(const Gemm& g) {
  if (g.M <= kGemmSmallMaxM) return GemmTiles::kSmall;
  return g.M <= kGemmMediumMaxM ? GemmTiles::kMedium : GemmTiles::kLarge;
}

void launch_gemm_fixed_order_mma(const Gemm& g) {
  if (g.M == 0 || g.N == 0) return;
  switch (gemm_tiles(g)) {
    case GemmTiles::kSmall: launch_tiles<SmallTiles>(g); break;
    case GemmTiles::kMedium: launch_tiles<MediumTiles>(g); break;
    case GemmTiles::kLarge:
      if ((g.ilp == 0 ? kLargeDefaultIlp : g.ilp) == 1) {
        launch_tiles<LargeTiles>(g);
      } else {
        launch_tiles<LargeTilesTwoBlocks>(g);
      }
      break;
  }
}

namespace {

// Whether the current device runs the sm_90a kernel: compute capability 9.0, asked once per device.
bool wgmma_device() {
  static std::atomic<int> cached[64] = {};  // 0 unknown, 1 yes, 2 no; asked from several threads at once
  int device = 0;
  check_cuda(cudaGetDevice(&device), "gemm fixed_order: cudaGetDevice");
  std::atomic<int>& known = cached[device & 63];
  if (known.load(std::memory_order_relaxed) == 0) {
    int major = 0, minor = 0;
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
    known.store(major == 9 && minor == 0 ? 1 : 2, std::memory_order_relaxed);
  }
  return known.load(std::memory_order_relaxed) == 1;
}

}  // namespace

void launch_gemm_fixed_order(const Gemm& g) {
  if (wgmma_device()) {
    launch_gemm_fixed_order_wgmma(g);
  } else {
    launch_gemm_fixed_order_mma(g);
  }
}

}  // namespace bitparity::gpu
