// Probes the H200's warpgroup MMA, `wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16` (sm_90a),
// against the arithmetic of `mma.sync.aligned.m16n8k16` that the gemm op's fixed_order contract
// models (spec rule 13), and records its answers as that contract's cases (peers/hw/WGMMA.md).
//
// One warpgroup (128 threads) computes one 64 x N output tile: A (64 x 16) and B (N x 16, K-major)
// are copied for each K-chunk of 16 into shared memory in the no-swizzle core-matrix layout and
// read by the instruction through matrix descriptors; the fp32 accumulator stays in registers
// across the K-chunks, which are issued in ascending k (up to `stage` instructions in flight
// between a commit_group and a wait_group 0). The accumulator starts either from registers the
// kernel filled (with +0, or with given fp32 values) and scale-d = 1, or from scale-d = 0 on the
// first instruction. The fp32 result is written as it is and rounded to bf16 (RNE).
//
//   record_wgmma_hw probe OUTDIR [SEED]           operand-layout check with small integers, then
//        directed and random single-step tests (fp32 result against the CPU model of rule 13 and
//        against rival models), then multi-step tests (K up to 512) against ascending and
//        descending chunk orders; widths N = 8, 16, 32, 64, 128, 256. Writes mismatching outputs
//        (if any) under OUTDIR; prints a summary.
//   record_wgmma_hw record OUT.jsonl [CASES] [SEED]   bitparity-case/1 lines (op gemm, contract
//        fixed_order) whose outputs are the instruction's, in 64 x 8 and 64 x 256 tiles; then
//        gzip -9n OUT.jsonl into peers/hw/gemm_wgmma.jsonl.gz
//
// Build: the record_wgmma_hw target (peers/CMakeLists.txt), or
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. peers/hw/record_wgmma.cu -o record_wgmma_hw
// A file that defines RECORD_WGMMA_EMULATE and then includes this one builds the harness with the
// CPU model standing in for the GPU (no device needed): a check of the harness, never a recording.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/random.h"

namespace {

using bitparity::splitmix64_next;

#define CHECK(x)                                                                      \
  do {                                                                                \
    const cudaError_t e = (x);                                                        \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

// ---------------------------------------------------------------------------------------------
// The device side.

#define F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define F8(i) F4(i), F4(i + 4)
#define F16(i) F8(i), F8(i + 8)
#define F32(i) F16(i), F16(i + 16)
#define F64(i) F32(i), F32(i + 32)
#define F128(i) F64(i), F64(i + 64)

// One wgmma.mma_async m64nNk16 bf16 x bf16 -> f32, A and B both K-major from shared memory,
// scale-a = scale-b = 1; scale_d = 0 ignores the accumulator's incoming value.
template <int N>
__device__ void wgmma(float* d, uint64_t da, uint64_t db, int scale_d);

template <>
__device__ __forceinline__ void wgmma<8>(float* d, uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3"
      "}, %4, %5, p, 1, 1, 0, 0;\n}\n"
      : F4(0)
      : "l"(da), "l"(db), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma<16>(float* d, uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7"
      "}, %8, %9, p, 1, 1, 0, 0;\n}\n"
      : F8(0)
      : "l"(da), "l"(db), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma<32>(float* d, uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : F16(0)
      : "l"(da), "l"(db), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma<64>(float* d, uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : F32(0)
      : "l"(da), "l"(db), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma<128>(float* d, uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : F64(0)
      : "l"(da), "l"(db), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma<256>(float* d, uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : F128(0)
      : "l"(da), "l"(db), "r"(scale_d));
}

// A shared-memory matrix descriptor, no swizzle: start address, leading-dimension byte offset
// (between the two core matrices adjacent in K) and stride-dimension byte offset (between core
// matrices adjacent in M or N). swap != 0 exchanges the two fields (the layout check tries both).
__device__ uint64_t descriptor(const void* p, int swap) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  const uint64_t lbo = swap ? 256 : 128, sbo = swap ? 128 : 256;
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32);
}

template <int N>
__device__ __forceinline__ void fence_accumulator(float* d) {
#pragma unroll
  for (int i = 0; i < N / 2; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Byte offset of element (row, kk) of a rows x 16 chunk in the no-swizzle K-major layout: 8 x 8
// core matrices of 128 contiguous bytes (8 rows of 16 bytes), K-neighbours 128 bytes apart,
// row-neighbours (8 rows on) 256 bytes apart.
__device__ __forceinline__ int core_offset(int row, int kk) {
  return (row / 8) * 256 + (kk / 8) * 128 + (row % 8) * 16 + (kk % 8) * 2;
}

// Tile t: A [64][Kp] (row-major), Bt [N][Kp] (B transposed: K contiguous), C [64][N] fp32 bits or
// null (then the registers start at +0), D [64][N] fp32 bits, D16 [64][N] bf16 (RNE).
template <int N>
__global__ void __launch_bounds__(128)
    wgmma_tiles(const uint16_t* A, const uint16_t* Bt, const uint32_t* C, uint32_t* D, uint16_t* D16, int Kp,
                int scale_first, int stage, int swap) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* sA = smem;
  uint8_t* sB = smem + stage * 2048;
  const int t = threadIdx.x, w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
  const size_t tile = blockIdx.x;
  const uint16_t* a = A + tile * 64 * Kp;
  const uint16_t* b = Bt + tile * N * Kp;
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    const int m = 16 * w + g + 8 * ((i >> 1) & 1), n = 8 * (i / 4) + 2 * q + (i & 1);
    d[i] = C ? __uint_as_float(C[tile * 64 * N + m * N + n]) : 0.0f;
  }
  bool first = true;
  for (int k0 = 0; k0 < Kp; k0 += 16 * stage) {
    const int chunks = min(stage, (Kp - k0) / 16);
    __syncthreads();
    for (int i = t; i < 64 * 16 * chunks; i += 128) {
      const int m = i / (16 * chunks), kk = i % (16 * chunks);
      *reinterpret_cast<uint16_t*>(sA + (kk / 16) * 2048 + core_offset(m, kk % 16)) =
          a[static_cast<size_t>(m) * Kp + k0 + kk];
    }
    for (int i = t; i < N * 16 * chunks; i += 128) {
      const int n = i / (16 * chunks), kk = i % (16 * chunks);
      *reinterpret_cast<uint16_t*>(sB + (kk / 16) * (N * 32) + core_offset(n, kk % 16)) =
          b[static_cast<size_t>(n) * Kp + k0 + kk];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    fence_accumulator<N>(d);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    for (int c = 0; c < chunks; ++c)
      wgmma<N>(d, descriptor(sA + c * 2048, swap), descriptor(sB + c * N * 32, swap),
               (first && c == 0) ? scale_first : 1);
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    fence_accumulator<N>(d);
    first = false;
  }
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    const int m = 16 * w + g + 8 * ((i >> 1) & 1), n = 8 * (i / 4) + 2 * q + (i & 1);
    D[tile * 64 * N + m * N + n] = __float_as_uint(d[i]);
    const __nv_bfloat16 v = __float2bfloat16_rn(d[i]);
    D16[tile * 64 * N + m * N + n] = *reinterpret_cast<const uint16_t*>(&v);
  }
}

// ---------------------------------------------------------------------------------------------
// Launching a batch of tiles.

struct Batch {
  int N = 8, tiles = 0, Kp = 0;
  std::vector<uint16_t> A, Bt;  // tiles * 64 * Kp, tiles * N * Kp
  std::vector<uint32_t> C;      // tiles * 64 * N, or empty
  int scale_first = 1, stage = 1;
  std::vector<uint32_t> D;
  std::vector<uint16_t> D16;
  void resize(int n, int t, int kp, bool with_c) {
    N = n, tiles = t, Kp = kp;
    A.assign(static_cast<size_t>(t) * 64 * kp, 0);
    Bt.assign(static_cast<size_t>(t) * n * kp, 0);
    C.assign(with_c ? static_cast<size_t>(t) * 64 * n : 0, 0);
  }
  uint16_t& a(int tile, int m, int k) { return A[(static_cast<size_t>(tile) * 64 + m) * Kp + k]; }
  uint16_t& b(int tile, int k, int n) { return Bt[(static_cast<size_t>(tile) * N + n) * Kp + k]; }
  uint32_t& c(int tile, int m, int n) { return C[(static_cast<size_t>(tile) * 64 + m) * N + n]; }
  size_t out(int tile, int m, int n) const { return (static_cast<size_t>(tile) * 64 + m) * N + n; }
};

int g_swap = 0;  // the descriptor convention the layout check found

template <int N>
void launch_n(Batch& bt, const uint16_t* dA, const uint16_t* dB, const uint32_t* dC, uint32_t* dD, uint16_t* dD16) {
  const int smem = bt.stage * 2048 + bt.stage * N * 32;
  CHECK(cudaFuncSetAttribute(wgmma_tiles<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  wgmma_tiles<N><<<bt.tiles, 128, smem>>>(dA, dB, dC, dD, dD16, bt.Kp, bt.scale_first, bt.stage, g_swap);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
}

#ifdef RECORD_WGMMA_EMULATE  // a host-only test build of this harness: the CPU model stands in for the GPU
void emulate(Batch& bt);
void run(Batch& bt) { emulate(bt); }
#else
void run(Batch& bt) {
  const size_t outs = static_cast<size_t>(bt.tiles) * 64 * bt.N;
  uint16_t *dA = nullptr, *dB = nullptr, *dD16 = nullptr;
  uint32_t *dC = nullptr, *dD = nullptr;
  CHECK(cudaMalloc(&dA, bt.A.size() * 2 + 16));
  CHECK(cudaMalloc(&dB, bt.Bt.size() * 2 + 16));
  CHECK(cudaMalloc(&dD, outs * 4));
  CHECK(cudaMalloc(&dD16, outs * 2));
  CHECK(cudaMemcpy(dA, bt.A.data(), bt.A.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, bt.Bt.data(), bt.Bt.size() * 2, cudaMemcpyHostToDevice));
  if (!bt.C.empty()) {
    CHECK(cudaMalloc(&dC, bt.C.size() * 4));
    CHECK(cudaMemcpy(dC, bt.C.data(), bt.C.size() * 4, cudaMemcpyHostToDevice));
  }
  switch (bt.N) {
    case 8:
      launch_n<8>(bt, dA, dB, dC, dD, dD16);
      break;
    case 16:
      launch_n<16>(bt, dA, dB, dC, dD, dD16);
      break;
    case 32:
      launch_n<32>(bt, dA, dB, dC, dD, dD16);
      break;
    case 64:
      launch_n<64>(bt, dA, dB, dC, dD, dD16);
      break;
    case 128:
      launch_n<128>(bt, dA, dB, dC, dD, dD16);
      break;
    case 256:
      launch_n<256>(bt, dA, dB, dC, dD, dD16);
      break;
    default:
      std::fprintf(stderr, "no tile width %d\n", bt.N);
      std::exit(1);
  }
  bt.D.resize(outs);
  bt.D16.resize(outs);
  CHECK(cudaMemcpy(bt.D.data(), dD, outs * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(bt.D16.data(), dD16, outs * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(dA));
  CHECK(cudaFree(dB));
  CHECK(cudaFree(dD));
  CHECK(cudaFree(dD16));
  if (dC) CHECK(cudaFree(dC));
}
#endif

// ---------------------------------------------------------------------------------------------
// The CPU model of one step (spec rule 13, as reference/gemm.cpp has it), with knobs for the rival
// hypotheses: how many bits below the largest tag are kept, rounding toward zero or to nearest,
// and how the 16 products and the accumulator are grouped.

constexpr uint32_t kNan = 0x7FFFFFFFu, kPlusInf = 0x7F800000u, kMinusInf = 0xFF800000u;

struct Term {
  int64_t sig = 0;
  int exp = 0;
  int tag = 0;
};

Term product(uint16_t a, uint16_t b) {
  auto decode = [](uint16_t h, int& e, int64_t& m) {
    const int biased = (h >> 7) & 0xFF;
    m = h & 0x7F;
    if (biased == 0) {
      e = -126;
    } else {
      e = biased - 127;
      m |= 0x80;
    }
  };
  int ea = 0, eb = 0;
  int64_t ma = 0, mb = 0;
  decode(a, ea, ma);
  decode(b, eb, mb);
  const int64_t p = ma * mb;
  return {((a ^ b) & 0x8000u) ? -p : p, ea + eb - 14, ea + eb};
}

Term f32_term(uint32_t c) {
  const int biased = static_cast<int>((c >> 23) & 0xFF);
  int64_t m = c & 0x7FFFFF;
  int e = -126;
  if (biased != 0) {
    e = biased - 127;
    m |= 0x800000;
  }
  return {(c >> 31) ? -m : m, e - 23, e};
}

// S * 2^q to fp32: toward zero (a vanishing result is +0), or to nearest even.
uint32_t to_f32(__int128 S, int q, bool rne) {
  if (S == 0) return 0;
  const uint32_t sign = S < 0 ? 0x80000000u : 0;
  const unsigned __int128 M = S < 0 ? static_cast<unsigned __int128>(-S) : static_cast<unsigned __int128>(S);
  int bits = 0;
  for (unsigned __int128 x = M; x; x >>= 1) ++bits;
  int lsb = q + bits - 1 - 23;
  if (lsb < -149) lsb = -149;
  const int shift = lsb - q;
  unsigned __int128 R = 0;
  if (shift <= 0) {
    R = M << (-shift);
  } else if (shift < 127) {
    R = M >> shift;
    if (rne) {
      const unsigned __int128 rem = M - (R << shift), half = static_cast<unsigned __int128>(1) << (shift - 1);
      if (rem > half || (rem == half && (R & 1))) ++R;
    }
  }
  if (R >= (static_cast<unsigned __int128>(1) << 24)) {
    R >>= 1;
    ++lsb;
  }
  if (R == 0) return rne ? sign : 0;
  if (R < (static_cast<unsigned __int128>(1) << 23)) return sign | static_cast<uint32_t>(R);
  const int e = lsb + 23;
  if (e > 127) return sign | kPlusInf;
  return sign | (static_cast<uint32_t>(e + 127) << 23) | (static_cast<uint32_t>(R) & 0x7FFFFFu);
}

// One fused sum: Emax the largest tag of the nonzero terms, each truncated toward zero to a
// multiple of 2^(Emax - kept), the sum exact, then rounded.
uint32_t fused(const Term* t, int n, int kept, bool rne) {
  int emax = -100000;
  for (int i = 0; i < n; ++i)
    if (t[i].sig != 0 && t[i].tag > emax) emax = t[i].tag;
  if (emax == -100000) return 0;
  const int q = emax - kept;
  __int128 sum = 0;
  for (int i = 0; i < n; ++i) {
    if (t[i].sig == 0) continue;
    const int shift = q - t[i].exp;
    const int64_t mag = t[i].sig < 0 ? -t[i].sig : t[i].sig;
    const __int128 aligned = shift <= 0 ? static_cast<__int128>(mag) << (-shift) : (shift >= 63 ? 0 : mag >> shift);
    sum += t[i].sig < 0 ? -aligned : aligned;
  }
  return to_f32(sum, q, rne);
}

bool is_nan16(uint16_t h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0; }
bool is_inf16(uint16_t h) { return (h & 0x7FFFu) == 0x7F80u; }
bool is_zero16(uint16_t h) { return (h & 0x7FFFu) == 0; }

// NaN input, Inf * 0 or +Inf with -Inf: the canonical NaN; otherwise an Inf term gives that Inf.
bool special(const uint16_t* a, const uint16_t* b, uint32_t c, uint32_t& out) {
  bool nan = false, pinf = false, minf = false;
  if (((c >> 23) & 0xFF) == 0xFF) {
    if (c & 0x7FFFFF)
      nan = true;
    else
      ((c >> 31) ? minf : pinf) = true;
  }
  for (int k = 0; k < 16; ++k) {
    if (is_nan16(a[k]) || is_nan16(b[k])) {
      nan = true;
    } else if (is_inf16(a[k]) || is_inf16(b[k])) {
      if (is_zero16(a[k]) || is_zero16(b[k]))
        nan = true;
      else
        (((a[k] ^ b[k]) & 0x8000u) ? minf : pinf) = true;
    }
  }
  if (nan || (pinf && minf)) return out = kNan, true;
  if (pinf) return out = kPlusInf, true;
  if (minf) return out = kMinusInf, true;
  return false;
}

struct Hypothesis {
  const char* name;
  int kind;  // 0: the accumulator and `group` products per fused sum, groups in ascending k;
             // 1: the 16 products fused and rounded, then added to the accumulator (fused, 2 terms);
             // 2: two k8 halves fused and rounded each, then the accumulator and both halves fused
  int kept;
  bool rne;
  int group;
};

const Hypothesis kHypotheses[] = {
    {"rule13 (k16 fused, 25 bits, RZ)", 0, 25, false, 16},
    {"kept 24 bits", 0, 24, false, 16},
    {"kept 26 bits", 0, 26, false, 16},
    {"round to nearest", 0, 25, true, 16},
    {"two k8 steps", 0, 25, false, 8},
    {"four k4 steps", 0, 25, false, 4},
    {"products fused, then + c", 1, 25, false, 16},
    {"k8 halves rounded, then fused with c", 2, 25, false, 16},
};
constexpr int kHyp = sizeof kHypotheses / sizeof kHypotheses[0];

uint32_t step(const uint16_t* a, const uint16_t* b, uint32_t c, const Hypothesis& h) {
  uint32_t out = 0;
  if (special(a, b, c, out)) return out;
  Term t[17];
  if (h.kind == 0) {
    uint32_t acc = c;
    for (int g0 = 0; g0 < 16; g0 += h.group) {
      t[0] = f32_term(acc);
      for (int k = 0; k < h.group; ++k) t[k + 1] = product(a[g0 + k], b[g0 + k]);
      acc = fused(t, h.group + 1, h.kept, h.rne);
    }
    return acc;
  }
  if (h.kind == 1) {
    for (int k = 0; k < 16; ++k) t[k] = product(a[k], b[k]);
    Term two[2] = {f32_term(c), f32_term(fused(t, 16, h.kept, h.rne))};
    return fused(two, 2, h.kept, h.rne);
  }
  Term three[3];
  three[0] = f32_term(c);
  for (int half = 0; half < 2; ++half) {
    for (int k = 0; k < 8; ++k) t[k] = product(a[8 * half + k], b[8 * half + k]);
    three[half + 1] = f32_term(fused(t, 8, h.kept, h.rne));
  }
  return fused(three, 3, h.kept, h.rne);
}

// K products in chunks of 16 (the last padded with zeros) from accumulator c, chunks in ascending
// (or descending) k, each chunk one step. a[k] at a[k], b[k] at b[k].
uint32_t chain(const uint16_t* a, const uint16_t* b, int K, uint32_t c, const Hypothesis& h, bool descending) {
  const int chunks = (K + 15) / 16;
  uint32_t acc = c;
  for (int i = 0; i < chunks; ++i) {
    const int j = descending ? chunks - 1 - i : i;
    uint16_t ca[16], cb[16];
    for (int k = 0; k < 16; ++k) {
      const int kk = 16 * j + k;
      ca[k] = kk < K ? a[kk] : 0;
      cb[k] = kk < K ? b[kk] : 0;
    }
    acc = step(ca, cb, acc, h);
  }
  return acc;
}

// bf16 of an fp32 bit pattern, to nearest even; a NaN gives 0x7FFF.
uint16_t bf16_rne(uint32_t u) {
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)) return 0x7FFF;
  const uint32_t r = u + 0x7FFFu + ((u >> 16) & 1);
  return static_cast<uint16_t>(r >> 16);
}

void parallel_for(size_t n, const std::function<void(size_t, size_t)>& f) {
  const unsigned workers = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  const size_t per = (n + workers - 1) / workers;
  for (unsigned w = 0; w < workers; ++w) {
    const size_t lo = w * per, hi = std::min(n, lo + per);
    if (lo < hi) pool.emplace_back(f, lo, hi);
  }
  for (std::thread& t : pool) t.join();
}

#ifdef RECORD_WGMMA_EMULATE
void emulate(Batch& bt) {
  const size_t outs = static_cast<size_t>(bt.tiles) * 64 * bt.N;
  bt.D.resize(outs);
  bt.D16.resize(outs);
  parallel_for(outs, [&](size_t lo, size_t hi) {
    for (size_t o = lo; o < hi; ++o) {
      const size_t tile = o / (64 * bt.N), m = (o / bt.N) % 64, n = o % bt.N;
      const uint32_t c = bt.C.empty() || !bt.scale_first ? 0 : bt.C[o];
      bt.D[o] =
          chain(&bt.A[(tile * 64 + m) * bt.Kp], &bt.Bt[(tile * bt.N + n) * bt.Kp], bt.Kp, c, kHypotheses[0], false);
      bt.D16[o] = bf16_rne(bt.D[o]);
    }
  });
}
#endif

// ---------------------------------------------------------------------------------------------
// Inputs: the rule-13 mma probe's input mixes (its gen.h), on 64 x K and K x N operands.

struct Rng {
  uint64_t s;
  uint32_t u() { return static_cast<uint32_t>(splitmix64_next(s) >> 32); }
  int ri(int lo, int hi) { return lo + static_cast<int>(u() % static_cast<uint32_t>(hi - lo + 1)); }
};

uint16_t mkbf(int s, int e, int m) {
  if (e > 127) e = 127;
  if (e < -126) {
    const int sh = -126 - e;
    const uint32_t full = sh > 7 ? 0 : (0x80u | static_cast<uint32_t>(m)) >> sh;
    return static_cast<uint16_t>((s << 15) | full);
  }
  return static_cast<uint16_t>((s << 15) | ((e + 127) << 7) | (m & 0x7F));
}

uint32_t mkf(int s, int e, uint32_t m23) {
  if (e > 127) e = 127;
  if (e < -126) {
    const int sh = -126 - e;
    const uint32_t full = sh >= 24 ? 0 : (0x800000u | m23) >> sh;
    return (static_cast<uint32_t>(s) << 31) | full;
  }
  return (static_cast<uint32_t>(s) << 31) | (static_cast<uint32_t>(e + 127) << 23) | (m23 & 0x7FFFFF);
}

int mant(Rng& r, int mode) {
  if (mode == 0) return r.u() & 0x7F;
  if (mode == 1) {
    const int x = r.u() % 4;
    return x == 0 ? 0 : (x == 1 ? 0x40 : (x == 2 ? 0x7F : static_cast<int>(r.u() & 0x7F)));
  }
  return (r.u() & 3) << 5;
}

float bf2f(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

constexpr int kProfiles = 16;
const char* const kProfileNames[kProfiles] = {"moderate",
                                              "spread 2^10",
                                              "spread 2^30",
                                              "cancelling pairs",
                                              "c dominant",
                                              "sparse",
                                              "per-k steps",
                                              "underflow region",
                                              "carries",
                                              "per-k spread",
                                              "coarse mantissas",
                                              "c cancels sum",
                                              "subnormal a x huge b",
                                              "full range",
                                              "near overflow",
                                              "tiny c"};

// Fills tile `tile` of bt (K of its Kp columns; the rest stays zero) with mix `prof`; C too when
// bt has one. chunk_mode 1 shrinks later K-chunks (by up to 2^-30 each), 2 grows them (up to 2^12).
void gen_tile(Rng& r, int prof, int K, Batch& bt, int tile, int chunk_mode) {
  const int N = bt.N;
  int ae0 = -3, ae1 = 3, be0 = -3, be1 = 3, ce0 = -6, ce1 = 6, mm = 0, pz = 0, cz = 8;
  std::vector<int> sk(static_cast<size_t>(K), 0);
  switch (prof) {
    case 1:
      ae0 = -10, ae1 = 10, be0 = -10, be1 = 10, ce0 = -20, ce1 = 20;
      break;
    case 2:
      ae0 = -30, ae1 = 30, be0 = -30, be1 = 30, ce0 = -60, ce1 = 60;
      break;
    case 3:
      ae0 = -4, ae1 = 4, be0 = -4, be1 = 4, ce0 = -12, ce1 = 6;
      break;
    case 4:
      ae0 = -2, ae1 = 2, be0 = -2, be1 = 2, ce0 = 6, ce1 = 30, cz = 0;
      break;
    case 5:
      ae0 = -15, ae1 = 15, be0 = -15, be1 = 15, ce0 = -30, ce1 = 30, pz = 10;
      break;
    case 6:
      ae0 = -2, ae1 = 0, be0 = -2, be1 = 0, ce0 = -3, ce1 = 1, mm = 1;
      for (int& s : sk) s = (r.u() % 4 == 0) ? 0 : -r.ri(16, 34);
      break;
    case 7:
      ae0 = -72, ae1 = -56, be0 = -72, be1 = -56, ce0 = -150, ce1 = -118, mm = 1;
      break;
    case 8:
      ae0 = 0, ae1 = 1, be0 = 0, be1 = 1, ce0 = 0, ce1 = 5, mm = 1;
      break;
    case 9:
      ae0 = -2, ae1 = 2, be0 = -2, be1 = 2, ce0 = -30, ce1 = 4;
      for (int& s : sk) s = -r.ri(0, 28);
      break;
    case 10:
      ae0 = -3, ae1 = 3, be0 = -3, be1 = 3, ce0 = -3, ce1 = 3, mm = 2;
      for (int& s : sk) s = -r.ri(0, 30);
      break;
    case 11:
      ae0 = -6, ae1 = 6, be0 = -6, be1 = 6;
      break;
    case 12:
      ae0 = -133, ae1 = -120, be0 = 108, be1 = 127, ce0 = -24, ce1 = 8;
      break;
    case 13:
      ae0 = -140, ae1 = 127, be0 = -140, be1 = 127, ce0 = -160, ce1 = 127;
      break;
    case 14:
      ae0 = 58, ae1 = 64, be0 = 58, be1 = 63, ce0 = 110, ce1 = 127;
      break;
    case 15:
      ae0 = -8, ae1 = 8, be0 = -8, be1 = 8, ce0 = -140, ce1 = -100;
      break;
    default:
      break;
  }
  const bool ranged = prof == 7 || prof == 12 || prof == 13 || prof == 14;
  if (chunk_mode && !ranged) {
    std::vector<int> cs(static_cast<size_t>((K + 15) / 16), 0);
    for (size_t j = 1; j < cs.size(); ++j) cs[j] = chunk_mode == 1 ? -r.ri(0, 30) : r.ri(0, 12);
    for (int k = 0; k < K; ++k) sk[static_cast<size_t>(k)] += cs[static_cast<size_t>(k / 16)];
  }
  const bool allpos = prof == 8;
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < K; ++k) {
      if (pz && static_cast<int>(r.u() % 16) < pz) continue;
      bt.a(tile, m, k) = mkbf(allpos ? 0 : (r.u() & 1), r.ri(ae0, ae1) + sk[static_cast<size_t>(k)], mant(r, mm));
    }
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) {
      if (pz && static_cast<int>(r.u() % 16) < pz) continue;
      bt.b(tile, k, n) = mkbf(allpos ? 0 : (r.u() & 1), r.ri(be0, be1), mant(r, mm));
    }
  if (prof == 3) {  // pairs: a[., 2j+1] = a[., 2j], b[2j+1, .] = -b[2j, .] with low bits perturbed
    for (int m = 0; m < 64; ++m)
      for (int k = 1; k < K; k += 2)
        if (r.u() % 8) bt.a(tile, m, k) = bt.a(tile, m, k - 1);
    for (int k = 1; k < K; k += 2)
      for (int n = 0; n < N; ++n) {
        uint16_t v = bt.b(tile, k - 1, n) ^ 0x8000;
        if (r.u() % 2) v ^= (r.u() & 3);
        if (r.u() % 8) bt.b(tile, k, n) = v;
      }
  }
  if (prof == 7 || prof == 12) {  // bf16 subnormals
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < K; ++k)
        if (r.u() % (prof == 12 ? 3 : 16) == 0) bt.a(tile, m, k) = (bt.a(tile, m, k) & 0x8000) | (r.u() & 0x7F);
    for (int k = 0; k < K; ++k)
      for (int n = 0; n < N; ++n)
        if (r.u() % 16 == 0) bt.b(tile, k, n) = (bt.b(tile, k, n) & 0x8000) | (r.u() & 0x7F);
  }
  if (bt.C.empty()) return;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < N; ++n) {
      uint32_t c = 0;
      if (static_cast<int>(r.u() % 64) < cz) {
        c = (r.u() & 1) ? 0x80000000u : 0;
      } else {
        uint32_t m23 = r.u() & 0x7FFFFF;
        if (mm == 1) {
          const int x = r.u() % 3;
          m23 = x == 0 ? 0 : (x == 1 ? 0x400000 : m23);
        }
        if (mm == 2) m23 &= 0x7F0000;
        c = mkf(allpos ? 0 : (r.u() & 1), r.ri(ce0, ce1), m23);
      }
      if (prof == 11) {  // c close to minus the sum
        double s = 0;
        for (int k = 0; k < K; ++k) s += static_cast<double>(bf2f(bt.a(tile, m, k))) * bf2f(bt.b(tile, k, n));
        const float fs = static_cast<float>(-s);
        uint32_t u;
        std::memcpy(&u, &fs, 4);
        const int x = r.u() % 4;
        if (x == 1)
          u ^= (r.u() & 0xFF);
        else if (x == 2)
          u += static_cast<int>(r.u() % 5) - 2;
        else if (x == 3)
          u ^= (r.u() & 0xFFFF);
        c = s == 0 ? 0 : u;
      }
      bt.c(tile, m, n) = c;
    }
}

// ---------------------------------------------------------------------------------------------
// Directed single-step tests: the rule-13 mma probe's directed.py and directed2.py, and splits
// across the two k8 halves.

struct Directed1 {
  uint16_t a[16] = {}, b[16] = {};
  uint32_t c = 0;
  std::string label;
};

uint32_t f32_bits(double x) {
  const float f = static_cast<float>(x);
  if (static_cast<double>(f) != x) {
    std::fprintf(stderr, "not an fp32: %.17g\n", x);
    std::exit(1);
  }
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

uint16_t bf(double x) {
  const uint32_t u = f32_bits(x);
  if (u & 0xFFFF) {
    std::fprintf(stderr, "not a bf16: %.17g\n", x);
    std::exit(1);
  }
  return static_cast<uint16_t>(u >> 16);
}

struct P {
  int k;
  uint16_t a, b;
};

std::vector<Directed1> directed_single() {
  std::vector<Directed1> v;
  auto T = [&](const std::string& label, const std::vector<P>& prods, uint32_t c) {
    Directed1 d;
    for (const P& p : prods) d.a[p.k] = p.a, d.b[p.k] = p.b;
    d.c = c;
    d.label = label;
    v.push_back(d);
  };
  auto p2 = [](int e) { return std::ldexp(1.0, e); };
  const uint16_t one = bf(1.0);
  for (auto xy : std::vector<std::pair<double, double>>{
           {1 + p2(-7), 1 + p2(-7)}, {1.9921875, 1.9921875}, {1.5078125, 1.9921875}, {-1.5, 1 + p2(-7)}})
    T("prod", {{0, bf(xy.first), bf(xy.second)}}, 0);
  for (int big : {16, 0, 5, 8, 15})  // 16: c
    for (int t = 25; t <= 43; ++t)
      for (int s : {1, -1}) {
        std::vector<P> prods;
        uint32_t c = 0;
        if (big == 16)
          c = f32_bits(1.0);
        else
          prods.push_back({big, one, one});
        std::vector<int> free;
        for (int k = 0; k < 16; ++k)
          if (k != big) free.push_back(k);
        prods.push_back({free[0], bf(p2(-24)), one});
        prods.push_back({free[1], bf(s * p2(-t)), one});
        T("window big=" + std::to_string(big) + " 1+2^-24" + (s > 0 ? "+" : "-") + "2^-" + std::to_string(t), prods, c);
      }
  for (int big : {16, 0})
    for (int t = 24; t <= 43; ++t)
      for (int s : {-1, 1}) {
        std::vector<P> prods;
        uint32_t c = 0;
        if (big == 16)
          c = f32_bits(1.0);
        else
          prods.push_back({0, one, one});
        for (int k = 0; k < 16; ++k)
          if (!(big == 0 && k == 0)) prods.push_back({k, bf(s * p2(-t)), one});
        T(std::string(s < 0 ? "negtiny" : "postiny") + " big=" + std::to_string(big) + " t=" + std::to_string(t), prods,
          c);
      }
  for (auto xy : std::vector<std::pair<double, double>>{{1.5, 1.5}, {1.0, 2.0}, {1.0, 1.0}, {1.9921875, 1.9921875}})
    for (int t = 22; t <= 43; ++t)
      for (int s : {1, -1})
        T("msb t=" + std::to_string(t),
          {{0, bf(xy.first), bf(xy.second)},
           {1, bf(s * p2(-t)), one},
           {2, bf(s * p2(-t)), one},
           {3, bf(s * p2(-t)), one}},
          0);
  T("rnd c=1 p=3*2^-25", {{0, bf(1.5), bf(p2(-24))}}, f32_bits(1.0));
  T("rnd c=-1 p=-3*2^-25", {{0, bf(-1.5), bf(p2(-24))}}, f32_bits(-1.0));
  T("rnd c=1 p=2^-24", {{0, one, bf(p2(-24))}}, f32_bits(1.0));
  T("rnd c=1+2^-23 p=2^-24", {{0, one, bf(p2(-24))}}, f32_bits(1.0 + p2(-23)));
  T("rnd c=1 p=-2^-25", {{0, bf(-1.0), bf(p2(-25))}}, f32_bits(1.0));
  T("rnd c=1 p=-2^-26", {{0, bf(-1.0), bf(p2(-26))}}, f32_bits(1.0));
  T("rnd c=1 p=-3*2^-26", {{0, bf(-1.5), bf(p2(-25))}}, f32_bits(1.0));
  T("rnd p0=1 p1=3*2^-25", {{0, one, one}, {1, bf(1.5), bf(p2(-24))}}, 0);
  T("rnd p0=1 p1=-3*2^-26", {{0, one, one}, {1, bf(-1.5), bf(p2(-25))}}, 0);
  T("rnd p0=1 p1=-2^-26", {{0, one, one}, {1, bf(-1.0), bf(p2(-26))}}, 0);
  for (int t : {30, 40})  // big at i (16: c), 2^-24 at j, 2^-t at l
    for (int i = 0; i <= 16; ++i)
      for (int j = 0; j < 16; ++j)
        for (int l = 0; l < 16; ++l) {
          if (j == i || l == i || l == j) continue;
          std::vector<P> prods = {{j, bf(p2(-24)), one}, {l, bf(p2(-t)), one}};
          uint32_t c = 0;
          if (i == 16)
            c = f32_bits(1.0);
          else
            prods.push_back({i, one, one});
          T("grp t=" + std::to_string(t) + " big=" + std::to_string(i) + " half=" + std::to_string(j) +
                " tiny=" + std::to_string(l),
            prods, c);
        }
  for (int i = 0; i <= 16; ++i)   // +1 at i (16: c), -1 at j, 2^-30 at l: one fused sum truncates the
    for (int j = 0; j < 16; ++j)  // 2^-30 away (result +0); a group that holds it alone keeps it
      for (int l = 0; l < 16; ++l) {
        if (j == i || l == i || l == j) continue;
        std::vector<P> prods = {{j, bf(-1.0), one}, {l, bf(p2(-30)), one}};
        uint32_t c = 0;
        if (i == 16)
          c = f32_bits(1.0);
        else
          prods.push_back({i, one, one});
        T("cancel big=" + std::to_string(i) + " neg=" + std::to_string(j) + " tiny=" + std::to_string(l), prods, c);
      }
  T("sub p=2^-130", {{0, bf(p2(-65)), bf(p2(-65))}}, 0);
  T("sub p=2^-140", {{0, bf(p2(-70)), bf(p2(-70))}}, 0);
  T("sub p=2^-149", {{0, bf(p2(-75)), bf(p2(-74))}}, 0);
  T("sub p=2^-150", {{0, bf(p2(-75)), bf(p2(-75))}}, 0);
  T("sub p=1.5*2^-150", {{0, bf(1.5 * p2(-75)), bf(p2(-75))}}, 0);
  T("sub p=2^-160", {{0, bf(p2(-80)), bf(p2(-80))}}, 0);
  T("sub a=2^-130 (bf16 subnormal) * 1", {{0, bf(p2(-130)), one}}, 0);
  T("sub a=2^-133 * 2^10", {{0, bf(p2(-133)), bf(p2(10))}}, 0);
  T("sub a=3*2^-133 * 1", {{0, bf(3 * p2(-133)), one}}, 0);
  T("sub c=2^-140 only", {}, f32_bits(p2(-140)));
  T("sub c=2^-149 only", {}, f32_bits(p2(-149)));
  T("sub c=2^-126 p=-2^-127", {{0, bf(-p2(-64)), bf(p2(-63))}}, f32_bits(p2(-126)));
  T("sub c=2^-126 p=-2^-126*(1-2^-7)", {{0, bf(-p2(-63) * (1 - p2(-7))), bf(p2(-63))}}, f32_bits(p2(-126)));
  T("sub p0=2^-120 p1=-2^-120*(1-2^-7)", {{0, bf(p2(-60)), bf(p2(-60))}, {1, bf(-p2(-60) * (1 - p2(-7))), bf(p2(-60))}},
    0);
  T("sub c=2^-140 p=2^-140", {{0, bf(p2(-70)), bf(p2(-70))}}, f32_bits(p2(-140)));
  T("sub c=1 p=2^-140", {{0, bf(p2(-70)), bf(p2(-70))}}, f32_bits(1.0));
  T("sub c=2^-149 p=3*2^-150", {{0, bf(p2(-75) * 1.5), bf(p2(-74))}}, f32_bits(p2(-149)));
  T("zero c=-0", {}, 0x80000000u);
  T("zero c=+0", {}, 0);
  T("zero c=-0 p=-0", {{0, 0x8000, one}}, 0x80000000u);
  T("zero c=1 p=-1", {{0, bf(-1.0), one}}, f32_bits(1.0));
  T("zero c=-1 p=1", {{0, one, one}}, f32_bits(-1.0));
  T("zero p0=1 p1=-1", {{0, one, one}, {1, bf(-1.0), one}}, 0);
  T("zero p0=1 p1=-1 c=-0", {{0, one, one}, {1, bf(-1.0), one}}, 0x80000000u);
  {
    std::vector<P> all;
    for (int k = 0; k < 16; ++k) all.push_back({k, bf(1.9921875), bf(1.9921875)});
    T("carry 16*(255/128)^2 + 3.96875", all, f32_bits(3.96875));
    T("carry 16*(255/128)^2 + 2^-20", all, f32_bits(p2(-20)));
  }
  {
    std::vector<P> negz;
    for (int k = 0; k < 16; ++k) negz.push_back({k, 0x8000, one});
    T("zs all a=-0 c=-0", negz, 0x80000000u);
    T("zs all a=-0 c=+0", negz, 0);
    std::vector<P> mixed = {{0, one, one}, {1, bf(-1.0), one}};
    for (int k = 2; k < 16; ++k) mixed.push_back({k, 0x8000, one});
    T("zs p0=1 p1=-1 rest -0 c=-0", mixed, 0x80000000u);
  }
  T("zs c=-2^-140 p=2^-140", {{0, bf(p2(-70)), bf(p2(-70))}}, f32_bits(-p2(-140)));
  for (double cc : {-p2(-25), -p2(-26), -3 * p2(-26), p2(-26), -p2(-27)})
    T("ctrunc p0=1 p1=-2^-23", {{0, one, one}, {1, bf(-1.0), bf(p2(-23))}}, f32_bits(cc));
  T("ztag a0=0 b0=2^127 p1=1.5*2^-30", {{0, 0, bf(p2(127))}, {1, bf(1.5 * p2(-30)), one}}, 0);
  T("ztag a0=0 b0=2^127 c=1.5*2^-30", {{0, 0, bf(p2(127))}}, f32_bits(1.5 * p2(-30)));
  T("ztag a0=2^127 b0=-0 p1=1.5*2^-30", {{0, bf(p2(127)), 0x8000}, {1, bf(1.5 * p2(-30)), one}}, 0);
  T("ztag p0=(1+2^-7)^2*2^-140", {{0, bf((1 + p2(-7)) * p2(-70)), bf((1 + p2(-7)) * p2(-70))}}, 0);
  T("stag a0=2^-127 b0=2^127 p1=-2^-25", {{0, bf(p2(-127)), bf(p2(127))}, {1, bf(-p2(-25)), one}}, 0);
  T("stag a0=2^-126 b0=2^126 p1=-2^-25", {{0, bf(p2(-126)), bf(p2(126))}, {1, bf(-p2(-25)), one}}, 0);
  T("stag a0=2^-133 b0=2^127 p1=-2^-31", {{0, bf(p2(-133)), bf(p2(127))}, {1, bf(-p2(-31)), one}}, 0);
  T("stag a0=2^-133 b0=2^127 p1=-2^-30", {{0, bf(p2(-133)), bf(p2(127))}, {1, bf(-p2(-30)), one}}, 0);
  T("stag c=2^-127 p0=-2^-152", {{0, bf(-p2(-76)), bf(p2(-76))}}, f32_bits(p2(-127)));
  T("stag c=2^-127 p0=-2^-151", {{0, bf(-p2(-76)), bf(p2(-75))}}, f32_bits(p2(-127)));
  T("stag c=2^-127 p0=-2^-150", {{0, bf(-p2(-75)), bf(p2(-75))}}, f32_bits(p2(-127)));
  {
    std::vector<P> big;
    for (int k = 0; k < 16; ++k) big.push_back({k, bf(1.9921875 * p2(63)), bf(1.9921875 * p2(63))});
    T("ovf 16*(255/128*2^63)^2", big, 0);
  }
  T("ovf p=2^128", {{0, bf(p2(64)), bf(p2(64))}}, 0);
  T("ovf p=-2^128", {{0, bf(-p2(64)), bf(p2(64))}}, 0);
  T("ovf c=FLTMAX p=2^104", {{0, bf(p2(52)), bf(p2(52))}}, 0x7F7FFFFFu);
  T("ovf c=FLTMAX p=2^103", {{0, bf(p2(52)), bf(p2(51))}}, 0x7F7FFFFFu);
  T("ovf c=FLTMAX p=FLTMAXish", {{0, bf(1.9921875 * p2(63)), bf(1.9921875 * p2(63))}}, 0x7F7FFFFFu);
  T("ovf p0=2^128 p1=-2^128 c=1", {{0, bf(p2(64)), bf(p2(64))}, {1, bf(-p2(64)), bf(p2(64))}}, f32_bits(1.0));
  T("ovf p0=2^128 p1=-2^127", {{0, bf(p2(64)), bf(p2(64))}, {1, bf(-p2(64)), bf(p2(63))}}, 0);
  T("ovf p0=2^130 p1=-2^130*(1-2^-7)", {{0, bf(p2(65)), bf(p2(65))}, {1, bf(-p2(65) * (1 - p2(-7))), bf(p2(65))}}, 0);
  {
    std::vector<P> four;
    for (int k = 0; k < 4; ++k) four.push_back({k, bf(1.5 * p2(64)), bf(p2(63))});
    T("ovf 4*1.5*2^127", four, 0);
  }
  T("inf a0=inf", {{0, 0x7F80, one}}, 0);
  T("inf a0=-inf", {{0, 0xFF80, one}}, 0);
  T("inf a0=inf b0=0", {{0, 0x7F80, 0}}, 0);
  T("inf c=inf", {{0, one, one}}, 0x7F800000u);
  T("inf c=inf p=-inf", {{0, 0xFF80, one}}, 0x7F800000u);
  T("inf c=-inf p=+inf", {{0, 0x7F80, one}}, 0xFF800000u);
  T("inf p0=inf p1=-inf", {{0, 0x7F80, one}, {1, 0xFF80, one}}, 0);
  T("nan c=7fc00001", {{0, one, one}}, 0x7FC00001u);
  T("nan c=ffc00000", {}, 0xFFC00000u);
  T("nan c=7f800001", {}, 0x7F800001u);
  T("nan a0=7fc1", {{0, 0x7FC1, one}}, 0);
  T("nan a0=ffc1", {{0, 0xFFC1, one}}, 0);
  T("nan a0=7f81", {{0, 0x7F81, one}}, 0);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Comparing a batch's fp32 results with the models.

constexpr int kWidths[] = {8, 16, 32, 64, 128, 256};

std::string hex16(const uint16_t* x, int n) {
  std::string s;
  char buf[8];
  for (int i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%04x", x[i]);
    s += buf;
  }
  return s;
}

struct Tally {
  long outputs = 0, bf16_mismatches = 0;
  long mism[kHyp + 1] = {};  // kHyp: rule 13 in descending chunk order (multi-step only)
  long zero_outputs = 0;
  std::vector<long> by_row = std::vector<long>(64, 0), by_col = std::vector<long>(256, 0);
  long by_prof[kProfiles] = {}, outs_by_prof[kProfiles] = {};
};

// Every output of bt against every hypothesis: the accumulator starts from C (c_from_registers)
// or from +0; K products (K <= Kp) per output. prof[tile] names the input mix (or -1).
// Mismatches of rule 13 are written to log (up to `show` of them).
void compare(const Batch& bt, int K, bool c_from_registers, bool multi, const std::vector<int>& prof, Tally& tally,
             FILE* log, const char* what, int show = 40) {
  const size_t outs = static_cast<size_t>(bt.tiles) * 64 * bt.N;
  std::vector<uint16_t> flags(outs, 0);
  std::vector<uint32_t> model0(outs, 0);
  parallel_for(outs, [&](size_t lo, size_t hi) {
    for (size_t o = lo; o < hi; ++o) {
      const int tile = static_cast<int>(o / (64 * bt.N)), m = static_cast<int>((o / bt.N) % 64),
                n = static_cast<int>(o % bt.N);
      const uint16_t* ap = &bt.A[(static_cast<size_t>(tile) * 64 + m) * bt.Kp];
      const uint16_t* bp = &bt.Bt[(static_cast<size_t>(tile) * bt.N + n) * bt.Kp];
      const uint32_t c = c_from_registers ? bt.C[o] : 0;
      uint16_t f = 0;
      for (int h = 0; h < kHyp; ++h) {
        const uint32_t want = chain(ap, bp, K, c, kHypotheses[h], false);
        if (h == 0) {
          model0[o] = want;
          if (bf16_rne(want) != bt.D16[o]) f |= 1u << 15;
        }
        if (want != bt.D[o]) f |= 1u << h;
      }
      if (multi && chain(ap, bp, K, c, kHypotheses[0], true) != bt.D[o]) f |= 1u << kHyp;
      flags[o] = f;
    }
  });
  int shown = 0;
  for (size_t o = 0; o < outs; ++o) {
    const int tile = static_cast<int>(o / (64 * bt.N)), m = static_cast<int>((o / bt.N) % 64),
              n = static_cast<int>(o % bt.N);
    const int p = prof.empty() ? -1 : prof[static_cast<size_t>(tile)];
    ++tally.outputs;
    if ((bt.D[o] & 0x7FFFFFFFu) == 0) ++tally.zero_outputs;
    if (p >= 0) ++tally.outs_by_prof[p];
    if (flags[o] & (1u << 15)) ++tally.bf16_mismatches;
    for (int h = 0; h <= kHyp; ++h)
      if (flags[o] & (1u << h)) ++tally.mism[h];
    if (flags[o] & 1u) {
      ++tally.by_row[static_cast<size_t>(m)];
      ++tally.by_col[static_cast<size_t>(n)];
      if (p >= 0) ++tally.by_prof[p];
      if (log && shown < show) {
        ++shown;
        const uint16_t* ap = &bt.A[(static_cast<size_t>(tile) * 64 + m) * bt.Kp];
        const uint16_t* bp = &bt.Bt[(static_cast<size_t>(tile) * bt.N + n) * bt.Kp];
        std::fprintf(log, "%s N=%d tile=%d m=%d n=%d K=%d prof=%d c=%08x hw=%08x rule13=%08x a=%s b=%s\n", what, bt.N,
                     tile, m, n, K, p, c_from_registers ? bt.C[o] : 0u, bt.D[o], model0[o], hex16(ap, K).c_str(),
                     hex16(bp, K).c_str());
      }
    }
  }
}

void print_tally(const char* what, const Tally& t, bool multi) {
  std::printf("%s: %ld outputs (%ld zero), bf16 mismatches vs rule 13: %ld\n", what, t.outputs, t.zero_outputs,
              t.bf16_mismatches);
  for (int h = 0; h < kHyp; ++h) std::printf("    %-40s %ld mismatches\n", kHypotheses[h].name, t.mism[h]);
  if (multi) std::printf("    %-40s %ld mismatches\n", "rule 13, chunks in descending k", t.mism[kHyp]);
  if (t.mism[0]) {
    std::printf("    rule-13 mismatches by row:");
    for (int m = 0; m < 64; ++m)
      if (t.by_row[static_cast<size_t>(m)]) std::printf(" %d:%ld", m, t.by_row[static_cast<size_t>(m)]);
    std::printf("\n    by column:");
    for (int n = 0; n < 256; ++n)
      if (t.by_col[static_cast<size_t>(n)]) std::printf(" %d:%ld", n, t.by_col[static_cast<size_t>(n)]);
    std::printf("\n");
  }
  bool any = false;
  for (int p = 0; p < kProfiles; ++p) any |= t.outs_by_prof[p] > 0;
  if (any) {
    std::printf("    rule-13 mismatches by mix:");
    for (int p = 0; p < kProfiles; ++p)
      if (t.outs_by_prof[p]) std::printf(" %d:%ld/%ld", p, t.by_prof[p], t.outs_by_prof[p]);
    std::printf("\n");
  }
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// The operand layout, with small integers (every sum exact in any order): D = C + A B.

uint16_t small_int(uint64_t& s) {
  const int n = static_cast<int>(splitmix64_next(s) % 17) - 8;
  return bf(static_cast<double>(n));
}

bool layout_check(bool verbose) {
  int chosen = -1;
  for (int swap = 0; swap < 2 && chosen < 0; ++swap) {
    g_swap = swap;
    long bad = 0, total = 0;
    for (int N : kWidths)
      for (int stage : {1, 3})
        for (int scale_first : {1, 0}) {
          Batch bt;
          const int K = 48;
          bt.resize(N, 3, K, true);
          uint64_t s = 77 + static_cast<uint64_t>(N) * 131 + static_cast<uint64_t>(stage);
          for (uint16_t& v : bt.A) v = small_int(s);
          for (uint16_t& v : bt.Bt) v = small_int(s);
          for (uint32_t& v : bt.C)
            v = f32_bits(static_cast<double>(static_cast<int>(splitmix64_next(s) % 2001) - 1000));
          bt.stage = stage;
          bt.scale_first = scale_first;
          run(bt);
          for (int t = 0; t < bt.tiles; ++t)
            for (int m = 0; m < 64; ++m)
              for (int n = 0; n < N; ++n) {
                double want = scale_first ? static_cast<double>(static_cast<int32_t>(0)) : 0.0;
                if (scale_first) {
                  float cf;
                  std::memcpy(&cf, &bt.c(t, m, n), 4);
                  want = cf;
                }
                for (int k = 0; k < K; ++k) want += static_cast<double>(bf2f(bt.a(t, m, k))) * bf2f(bt.b(t, k, n));
                float got;
                std::memcpy(&got, &bt.D[bt.out(t, m, n)], 4);
                ++total;
                if (static_cast<double>(got) != want) ++bad;
              }
        }
    std::printf("layout check (descriptor fields %s): %ld of %ld small-integer outputs differ from the exact product\n",
                swap ? "swapped" : "as documented: LBO = K step, SBO = M/N step", bad, total);
    if (bad == 0) chosen = swap;
  }
  if (chosen < 0) {
    // Which element lands where: A = identity on the first 16 rows, B[k][n] = k + 16 (n % 16).
    for (int swap = 0; swap < 2; ++swap) {
      g_swap = swap;
      Batch bt;
      bt.resize(8, 1, 16, false);
      for (int m = 0; m < 16; ++m) bt.a(0, m, m) = bf(1.0);
      for (int k = 0; k < 16; ++k)
        for (int n = 0; n < 8; ++n) bt.b(0, k, n) = bf(static_cast<double>(k + 16 * n));
      run(bt);
      std::printf("identity probe, swap %d: D[m][n] for m < 20 (want k + 16 n at m = k):\n", swap);
      for (int m = 0; m < 20; ++m) {
        std::printf("  m=%2d:", m);
        for (int n = 0; n < 8; ++n) {
          float f;
          std::memcpy(&f, &bt.D[bt.out(0, m, n)], 4);
          std::printf(" %4g", f);
        }
        std::printf("\n");
      }
    }
    return false;
  }
  g_swap = chosen;
  (void)verbose;
  return true;
}

void device_line(char* buf, size_t n, int& runtime, int& driver) {
#ifdef RECORD_WGMMA_EMULATE
  std::snprintf(buf, n, "none (emulated by the CPU model)");
  runtime = driver = 0;
  return;
#endif
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  CHECK(cudaRuntimeGetVersion(&runtime));
  CHECK(cudaDriverGetVersion(&driver));
  std::snprintf(buf, n, "%s", prop.name);
  std::printf("device %s (sm_%d%d, %d SMs), CUDA runtime %d, driver API %d\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, runtime, driver);
}

// ---------------------------------------------------------------------------------------------
// probe

int probe(const std::string& outdir, uint64_t seed) {
  char name[256];
  int runtime = 0, driver = 0;
  device_line(name, sizeof name, runtime, driver);
  if (!layout_check(true)) {
    std::printf("operand layout not understood: no further tests\n");
    return 1;
  }
  FILE* log = std::fopen((outdir + "/mismatches.txt").c_str(), "w");
  long all_outputs = 0, all_rule13 = 0, all_bf16 = 0;
  auto account = [&](const Tally& t) {
    all_outputs += t.outputs;
    all_rule13 += t.mism[0];
    all_bf16 += t.bf16_mismatches;
  };

  // 1. Directed single steps: test j of a tile at a distinct (row, column), every width; the other
  // outputs of the tile (cross terms, c = 0) are compared too.
  const std::vector<Directed1> dir = directed_single();
  std::printf("\n== directed single steps (%zu vectors), d = c + sum of 16 products, c from registers ==\n",
              dir.size());
  for (int N : kWidths) {
    const int per = std::min(64, N);
    const int tiles = static_cast<int>((dir.size() + per - 1) / per);
    Batch bt;
    bt.resize(N, tiles, 16, true);
    bt.stage = 1;
    for (size_t i = 0; i < dir.size(); ++i) {
      const int tile = static_cast<int>(i / per), j = static_cast<int>(i % per);
      int m = 0, n = 0;
      if (N >= 64) {
        m = j;
        n = j * (N / 64) + tile % (N / 64);
      } else {
        m = j * (64 / N) + tile % (64 / N);
        n = j;
      }
      for (int k = 0; k < 16; ++k) bt.a(tile, m, k) = dir[i].a[k], bt.b(tile, k, n) = dir[i].b[k];
      bt.c(tile, m, n) = dir[i].c;
    }
    run(bt);
    Tally t;
    compare(bt, 16, true, false, {}, t, log, "directed", 20);
    // the directed vectors themselves
    long dmis = 0;
    for (size_t i = 0; i < dir.size(); ++i) {
      const int tile = static_cast<int>(i / per), j = static_cast<int>(i % per);
      const int m = N >= 64 ? j : j * (64 / N) + tile % (64 / N), n = N >= 64 ? j * (N / 64) + tile % (N / 64) : j;
      const uint32_t want = step(dir[i].a, dir[i].b, dir[i].c, kHypotheses[0]);
      if (want != bt.D[bt.out(tile, m, n)]) {
        if (++dmis <= 10)
          std::printf("    directed mismatch N=%d '%s': hw %08x rule13 %08x\n", N, dir[i].label.c_str(),
                      bt.D[bt.out(tile, m, n)], want);
        if (log)
          std::fprintf(log, "directed N=%d '%s' hw=%08x rule13=%08x\n", N, dir[i].label.c_str(),
                       bt.D[bt.out(tile, m, n)], want);
      }
    }
    char what[64];
    std::snprintf(what, sizeof what, "directed N=%d (vectors mismatching rule 13: %ld)", N, dmis);
    print_tally(what, t, false);
    account(t);
  }

  // 2. Random single steps, the mma probe's 16 mixes, c from registers; then scale-d = 0 with
  // garbage in the registers (must act as c = +0).
  std::printf("\n== random single steps ==\n    mixes:");
  for (int p = 0; p < kProfiles; ++p) std::printf(" %d %s;", p, kProfileNames[p]);
  std::printf("\n");
  for (int N : kWidths) {
    const int outs_target = N == 8 ? 2 * 1024 * 1024 : (N == 256 ? 4 * 1024 * 1024 : 1024 * 1024);
    for (int mode = 0; mode < 2; ++mode) {
      const int tiles = (mode == 0 ? outs_target : outs_target / 8) / (64 * N);
      Batch bt;
      bt.resize(N, tiles, 16, true);
      bt.scale_first = mode == 0 ? 1 : 0;
      bt.stage = 1;
      std::vector<int> prof(static_cast<size_t>(tiles));
      for (int t = 0; t < tiles; ++t) {
        Rng r{seed * 0x100000001B3ull ^ (static_cast<uint64_t>(N) << 40) ^ (static_cast<uint64_t>(mode) << 36) ^
              static_cast<uint64_t>(t)};
        splitmix64_next(r.s);
        prof[static_cast<size_t>(t)] = t % kProfiles;
        gen_tile(r, t % kProfiles, 16, bt, t, 0);
      }
      run(bt);
      Tally t;
      compare(bt, 16, mode == 0, false, prof, t, log, mode == 0 ? "single" : "single-scale-d0");
      char what[96];
      std::snprintf(what, sizeof what, "random single steps N=%d, %s", N,
                    mode == 0 ? "c from registers, scale-d = 1" : "scale-d = 0 over garbage registers");
      print_tally(what, t, false);
      account(t);
    }
  }

  // 3. Random chains: K-chunks in ascending k, the accumulator in registers across them; the
  // first step from scale-d = 0, from +0 registers, or from random c; 1, 3 or 8 instructions in
  // flight per commit group.
  std::printf("\n== random chains of k16 steps ==\n");
  static const int kK[] = {17, 32, 33, 48, 64, 100, 128, 160, 256, 300, 512};
  for (int N : {8, 64, 256}) {
    Tally total;
    for (size_t ki = 0; ki < sizeof kK / sizeof kK[0]; ++ki) {
      const int K = kK[ki], Kp = (K + 15) / 16 * 16;
      const int mode = static_cast<int>(ki % 3), stage = (ki / 3) % 3 == 0 ? 1 : ((ki / 3) % 3 == 1 ? 3 : 8);
      const int tiles = N == 8 ? 64 : (N == 64 ? 16 : 4);
      Batch bt;
      bt.resize(N, tiles, Kp, mode != 1);
      bt.scale_first = mode == 0 ? 0 : 1;
      bt.stage = stage;
      std::vector<int> prof(static_cast<size_t>(tiles));
      for (int t = 0; t < tiles; ++t) {
        Rng r{seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(N) << 40) ^ (static_cast<uint64_t>(K) << 20) ^
              static_cast<uint64_t>(t)};
        splitmix64_next(r.s);
        prof[static_cast<size_t>(t)] = t % kProfiles;
        gen_tile(r, t % kProfiles, K, bt, t, t % 3);
      }
      run(bt);
      Tally t;
      char what[96];
      std::snprintf(what, sizeof what, "chain K=%d start=%s in-flight=%d", K,
                    mode == 0 ? "scale-d=0" : (mode == 1 ? "+0-registers" : "random-c"), stage);
      compare(bt, K, mode == 2, true, prof, t, log, what, 10);
      std::printf("  N=%d %s: %ld outputs, rule13 %ld, bf16 %ld, descending %ld, k8-steps %ld, kept24 %ld, rne %ld\n",
                  N, what, t.outputs, t.mism[0], t.bf16_mismatches, t.mism[kHyp], t.mism[4], t.mism[1], t.mism[3]);
      account(t);
      total.outputs += t.outputs;
      total.zero_outputs += t.zero_outputs;
      total.bf16_mismatches += t.bf16_mismatches;
      for (int h = 0; h <= kHyp; ++h) total.mism[h] += t.mism[h];
      for (int p = 0; p < kProfiles; ++p) total.by_prof[p] += t.by_prof[p], total.outs_by_prof[p] += t.outs_by_prof[p];
      for (int m = 0; m < 64; ++m) total.by_row[static_cast<size_t>(m)] += t.by_row[static_cast<size_t>(m)];
      for (int n = 0; n < 256; ++n) total.by_col[static_cast<size_t>(n)] += t.by_col[static_cast<size_t>(n)];
    }
    char what[64];
    std::snprintf(what, sizeof what, "chains N=%d, all K", N);
    print_tally(what, total, true);
  }
  if (log) std::fclose(log);
  std::printf("\nTOTAL: %ld fp32 outputs compared, %ld differ from rule 13 (fp32), %ld differ after bf16 rounding\n",
              all_outputs, all_rule13, all_bf16);
  return all_rule13 == 0 ? 0 : 3;
}

// ---------------------------------------------------------------------------------------------
// record: gemm cases (contract fixed_order) whose outputs are the instruction's. The value families
// are record_gemm.cu's.

// A bf16 with exponent uniform in [lo, hi] (below -126: a subnormal), random sign and mantissa.
uint16_t value(uint64_t& s, int lo, int hi) {
  const uint64_t r = splitmix64_next(s);
  const int e = lo + static_cast<int>((r >> 8) % static_cast<uint64_t>(hi - lo + 1));
  const uint16_t sign = (r & 1) ? 0x8000 : 0, mantissa = static_cast<uint16_t>((r >> 32) & 0x7F);
  if (e < -126) return static_cast<uint16_t>(sign | ((0x80 | mantissa) >> (1 + (-126 - e < 6 ? -126 - e : 6))) | 1);
  return static_cast<uint16_t>(sign | ((e + 127) << 7) | mantissa);
}

const char* const kFamilies[] = {"moderate", "spread", "tiny", "huge", "cancelling", "specials", "small_int"};

void fill(std::vector<uint16_t>& x, uint64_t& s, int family) {
  static const uint16_t kSpecials[] = {0x7FC0, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001, 0x807F, 0x7F7F, 0x0080};
  for (uint16_t& v : x) {
    switch (family) {
      case 0:
      case 4:
        v = value(s, -6, 6);
        break;
      case 1:
        v = value(s, -30, 30);
        break;
      case 2:
        v = value(s, -133, -40);
        break;
      case 3:
        v = value(s, 30, 127);
        break;
      case 5:
        v = splitmix64_next(s) % 8 == 0 ? kSpecials[splitmix64_next(s) % 9] : value(s, -6, 6);
        break;
      default:
        v = small_int(s);
    }
  }
}

std::string tensor(const std::vector<uint16_t>& x, int64_t r, int64_t c) {
  return "{\"dtype\": \"bf16\", \"shape\": [" + std::to_string(r) + ", " + std::to_string(c) + "], \"hex\": \"" +
         hex16(x.data(), static_cast<int>(x.size())) + "\"}";
}

struct Placement {
  int tile_n = 8, row = 0, col = 0, scale_first = 1, stage = 1;
};

// out = bf16(a @ b) with the case's [M, N] placed at (row, col) of 64 x tile_n tiles (spanning
// several when it does not fit one). Counts outputs whose fp32 or bf16 differs from rule 13's
// chain in ascending k from +0.
std::vector<uint16_t> compute_case(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, int M, int K, int N,
                                   const Placement& p, long& fp32_mismatches, long& bf16_mismatches) {
  const int Kp = (K + 15) / 16 * 16, tm = (p.row + M + 63) / 64, tn = (p.col + N + p.tile_n - 1) / p.tile_n;
  Batch bt;
  bt.resize(p.tile_n, tm * tn, Kp, false);
  bt.scale_first = p.scale_first;
  bt.stage = p.stage;
  for (int i = 0; i < tm; ++i)
    for (int j = 0; j < tn; ++j) {
      const int tile = i * tn + j;
      for (int r = 0; r < 64; ++r) {
        const int m = i * 64 + r - p.row;
        if (m >= 0 && m < M)
          for (int k = 0; k < K; ++k) bt.a(tile, r, k) = a[static_cast<size_t>(m) * K + k];
      }
      for (int c = 0; c < p.tile_n; ++c) {
        const int n = j * p.tile_n + c - p.col;
        if (n >= 0 && n < N)
          for (int k = 0; k < K; ++k) bt.b(tile, k, c) = b[static_cast<size_t>(k) * N + n];
      }
    }
  run(bt);
  std::vector<uint16_t> out(static_cast<size_t>(M) * N);
  std::vector<uint16_t> col(static_cast<size_t>(K));
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const int gm = m + p.row, gn = n + p.col;
      const size_t o = bt.out((gm / 64) * tn + gn / p.tile_n, gm % 64, gn % p.tile_n);
      out[static_cast<size_t>(m) * N + n] = bt.D16[o];
      for (int k = 0; k < K; ++k) col[static_cast<size_t>(k)] = b[static_cast<size_t>(k) * N + n];
      const uint32_t want =
          chain(K ? &a[static_cast<size_t>(m) * K] : nullptr, col.data(), K, 0, kHypotheses[0], false);
      if (want != bt.D[o]) ++fp32_mismatches;
      if (bf16_rne(want) != bt.D16[o]) ++bf16_mismatches;
    }
  return out;
}

int record(const char* path, int cases, uint64_t seed) {
  char name[256];
  int runtime = 0, driver = 0;
  device_line(name, sizeof name, runtime, driver);
  if (!layout_check(false)) return 1;
  FILE* f = std::fopen(path, "w");
  if (!f) return 1;
  long fp32_mismatches = 0, bf16_mismatches = 0, outputs = 0, bytes = 0;
  auto emit = [&](const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, int M, int K, int N,
                  const Placement& p, int index, const char* family) {
    const std::vector<uint16_t> out = compute_case(a, b, M, K, N, p, fp32_mismatches, bf16_mismatches);
    outputs += static_cast<long>(M) * N;
    const int n = std::fprintf(
        f,
        "{\"format\": \"bitparity-case/1\", \"op\": \"gemm\", \"attrs\": {}, \"direction\": \"fwd\", "
        "\"inputs\": {\"a\": %s, \"b\": %s}, \"outputs\": {\"out\": %s}, \"provenance\": {\"peer\": "
        "\"wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 (peers/hw/record_wgmma.cu), CUDA runtime %d, driver "
        "%d\", "
        "\"device\": \"%s\", \"contract\": \"fixed_order\", \"seed\": %llu, \"index\": %d, \"family\": \"%s\", "
        "\"tile\": \"64 x %d, the case at row %d, column %d\", \"accumulator\": \"%s\", \"in_flight\": %d, "
        "\"source\": \"peers/hw/WGMMA.md\"}}\n",
        tensor(a, M, K).c_str(), tensor(b, K, N).c_str(), tensor(out, M, N).c_str(), p.tile_n, runtime, driver, name,
        static_cast<unsigned long long>(seed), index, family, p.tile_n, p.row, p.col,
        p.scale_first ? "+0 registers, scale-d = 1" : "scale-d = 0 on the first k-chunk", p.stage);
    bytes += n;
  };
  uint64_t s = seed;
  static const int kInner[] = {0, 1, 7, 15, 16, 17, 31, 32, 33, 48, 64, 100, 160, 257, 300};
  for (int i = 0; i < cases; ++i) {
    Placement p;
    p.tile_n = (i % 2) ? 256 : 8;
    int M = 1 + static_cast<int>(splitmix64_next(s) % 40);
    int N = 1 + static_cast<int>(splitmix64_next(s) % (p.tile_n == 8 ? 20 : 40));
    int K = kInner[splitmix64_next(s) % (sizeof kInner / sizeof kInner[0])];
    const uint64_t shape = splitmix64_next(s) % 10;
    if (shape == 0) {  // past the tile's 64 rows
      M = 60 + static_cast<int>(splitmix64_next(s) % 13);
      N = std::min(N, 6);
      K = std::min(K, 33);
    } else if (shape == 1 && p.tile_n == 256) {  // across (and past) the tile's 256 columns
      M = 1 + static_cast<int>(splitmix64_next(s) % 2);
      N = 200 + static_cast<int>(splitmix64_next(s) % 100);
      K = std::min(K, 17);
    }
    if (K >= 100) M = std::min(M, 6), N = std::min(N, 6);
    if (K >= 48) M = std::min(M, 24), N = std::min(N, 24);
    const int family = static_cast<int>(splitmix64_next(s) % 7);
    std::vector<uint16_t> a(static_cast<size_t>(M) * K), b(static_cast<size_t>(K) * N);
    fill(a, s, family);
    fill(b, s, family == 2 ? 1 : family);
    if (family == 4) {
      for (int m = 0; m < M; ++m)
        for (int k = 1; k < K; k += 2)
          a[static_cast<size_t>(m) * K + k] = a[static_cast<size_t>(m) * K + k - 1] ^ 0x8000;
      for (int k = 1; k < K; k += 2)
        for (int n = 0; n < N; ++n)
          b[static_cast<size_t>(k) * N + n] = b[static_cast<size_t>(k - 1) * N + n] ^ (n % 3 == 0 ? 1 : 0);
    }
    if (M <= 64 && N <= p.tile_n) {
      p.row = static_cast<int>(splitmix64_next(s) % static_cast<uint64_t>(65 - M));
      p.col = static_cast<int>(splitmix64_next(s) % static_cast<uint64_t>(p.tile_n + 1 - N));
    }
    p.scale_first = static_cast<int>(splitmix64_next(s) % 2);
    p.stage = std::vector<int>{1, 4, 8}[splitmix64_next(s) % 3];
    emit(a, b, M, K, N, p, i, kFamilies[family]);
  }
  // Directed [1, K] @ [K, 1] cases: record_gemm.cu's at fp32's bottom, and two whose result shows
  // the order of the K-chunks: +1, -1, then 14 chunks of 2^-26 (ascending: 7 * 2^-25), and the
  // mirror, 14 chunks of 2^-26, then -1, then +1 (ascending: 2^-22; descending would swap them).
  constexpr uint16_t kThreeQuarters = 0x1A40, kTwoToMinus75 = 0x1A00, kTwoToMinus67 = 0x1E00, kOne = 0x3F80,
                     kMinusOne = 0xBF80, kTwoToMinus26 = 0x3280;
  struct D {
    const char* name;
    int K;
    std::vector<std::pair<int, std::pair<uint16_t, uint16_t>>> terms;
  };
  std::vector<D> dir = {
      {"two sub-2^-149 products, then 2^-134 in the next chunk",
       32,
       {{0, {kThreeQuarters, kTwoToMinus75}},
        {1, {kThreeQuarters, kTwoToMinus75}},
        {16, {kTwoToMinus67, kTwoToMinus67}}}},
      {"2^-134 and two sub-2^-149 products in one chunk",
       32,
       {{0, {kTwoToMinus67, kTwoToMinus67}},
        {1, {kThreeQuarters, kTwoToMinus75}},
        {2, {kThreeQuarters, kTwoToMinus75}}}},
      {"-2^-134 and two negative sub-2^-149 products in one chunk",
       32,
       {{0, {kTwoToMinus67 | 0x8000, kTwoToMinus67}},
        {1, {kThreeQuarters | 0x8000, kTwoToMinus75}},
        {2, {kThreeQuarters | 0x8000, kTwoToMinus75}}}},
      {"one negative sub-2^-149 product", 32, {{0, {kThreeQuarters | 0x8000, kTwoToMinus75}}}},
      {"two negative sub-2^-149 products summing past 2^-149",
       32,
       {{0, {kThreeQuarters | 0x8000, kTwoToMinus75}}, {1, {kThreeQuarters | 0x8000, kTwoToMinus75}}}},
  };
  {
    D up{"chunk order: +1, -1, then 14 chunks of 2^-26", 256, {{0, {kOne, kOne}}, {16, {kMinusOne, kOne}}}};
    D down{"chunk order: 14 chunks of 2^-26, then -1, then +1", 256, {{224, {kMinusOne, kOne}}, {240, {kOne, kOne}}}};
    for (int j = 0; j < 14; ++j) {
      up.terms.push_back({32 + 16 * j, {kTwoToMinus26, kOne}});
      down.terms.push_back({16 * j, {kTwoToMinus26, kOne}});
    }
    dir.push_back(up);
    dir.push_back(down);
  }
  int index = cases;
  for (const D& d : dir) {
    std::vector<uint16_t> a(static_cast<size_t>(d.K), 0), b(static_cast<size_t>(d.K), 0);
    for (const auto& [k, ab] : d.terms) a[static_cast<size_t>(k)] = ab.first, b[static_cast<size_t>(k)] = ab.second;
    for (int tile_n : {8, 256}) {
      Placement p;
      p.tile_n = tile_n;
      p.row = static_cast<int>(splitmix64_next(s) % 64);
      p.col = static_cast<int>(splitmix64_next(s) % static_cast<uint64_t>(tile_n));
      p.scale_first = static_cast<int>(splitmix64_next(s) % 2);
      p.stage = tile_n == 8 ? 8 : 1;
      emit(a, b, 1, d.K, 1, p, index++, "directed");
    }
  }
  std::fclose(f);
  std::printf(
      "record: wrote %d cases (%ld outputs, %ld bytes) to %s; against rule 13 from +0 in ascending k: %ld fp32 "
      "and %ld bf16 mismatches\n",
      index, outputs, bytes, path, fp32_mismatches, bf16_mismatches);
  return fp32_mismatches == 0 && bf16_mismatches == 0 ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "probe" && argc > 2) return probe(argv[2], argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1);
  if (mode == "record" && argc > 2)
    return record(argv[2], argc > 3 ? std::atoi(argv[3]) : 300, argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1);
  std::fprintf(stderr, "usage: %s probe OUTDIR [SEED] | record OUT.jsonl [CASES] [SEED]\n", argv[0]);
  return 2;
}
