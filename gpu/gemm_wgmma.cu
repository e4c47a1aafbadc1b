// bitparity's warpgroup-MMA GEMM for the H200 (sm_90a), contract fixed_order of the gemm op (spec
// OP-10, rule 13; gpu/gemm_kernels.h): out[M, N] = bf16_rn(acc), acc one fp32 accumulator per output
// that starts at +0 and takes the K products in chunks of 16, ascending in k, one
// wgmma.mma_async.m64nNk16.f32.bf16.bf16 step a chunk. The same bits as gpu/gemm.cu's mma.sync
// kernel, 2.6 to 4.7 times faster on the shapes timed below.
//
// Why the order is the contract's: peers/hw/WGMMA.md shows that on the H200 one wgmma k16
// instruction is exactly rule 13's step (the 16 exact products and the incoming accumulator in one
// fused sum, each term truncated below 2^(Emax-25), rounded toward zero), with no dependence on N or
// on the output's place in the tile, and that successive instructions on one accumulator enter in
// issue order however many are in flight. Here every output lives in one accumulator register of one
// consumer warpgroup, which issues the chunks of its tile in ascending k: the tile shape, the
// pipeline depth and the grid decide only which registers hold which outputs, never the order of an
// output's steps, so the bits depend on nothing but a[m, :] and b[:, n] (no split-K, whatever M, N or
// the tile). The accumulators start from registers holding +0. A last chunk shorter than 16, and the
// chunks of a last K-tile that lie wholly beyond K, see zeros from the copy engine's out-of-bounds
// fill: zero products, which rule 13's step ignores (a step whose 16 products are all zero returns
// its accumulator unchanged, +0 stays +0), so the order is still the ceil(K / 16) chunks of the
// contract. Rows of a beyond M and columns of b beyond N are zero-filled (or left stale: they reach
// only outputs that are never stored).
//
// Layouts: a [M, K] is K-major as stored; b [K, N] is N-major ("MN-major"), read by the instruction
// through its transpose bit, so neither operand is copied or transposed outside the kernel. Both are
// staged in shared memory by the bulk tensor copy engine (cp.async.bulk.tensor, one tensor map per
// operand) with the 128-byte swizzle (a: 64-element K-slices of the tile, 128 bytes a row; b:
// 64-column N-slices, 128 bytes a k-row; tiles 16 or 32 columns wide use the 32- or 64-byte swizzle
// of their width). WGMMA.md probed only the unswizzled K-major form; a harness
// checked these layouts on the device, bit for bit, against gpu/gemm.cu and the CPU model of rule 13
// (every tile configuration below, with b MN-major and, as a cross-check, K-major from a transposed
// copy: 0 mismatches on the H200). For MN-major b the descriptor's leading byte offset is the step
// between column slices and the stride byte offset the step between groups of 8 k-rows; the
// exchanged convention gives wrong bits at 128 x 256 tiles and a CUDA error at 16- and 32-wide ones
// (an illegal address at 32).
//
// Pipeline: one CTA computes a BM x BN tile of out. Warpgroup 0 is the producer (one thread issues
// the copies); warpgroups 1..BM/64 are consumers, each the owner of 64 rows x BN columns (m64nBNk16).
// K advances in BK-wide stages through a ring of `Stages` buffers, each guarded by a "full" mbarrier
// (the copy engine's transaction count) and an "empty" one (one arrival per consumer warp once its
// MMAs on that stage have completed: a consumer keeps one stage's MMAs in flight while it waits on
// the next). The epilogue rounds each accumulator to bf16 and stores it straight from registers.
//
// Fast path: K and N multiples of 8 (16-byte rows for the tensor maps), a and b 16-byte aligned, out
// 4-byte aligned, M, N, K below 2^31. Anything else goes to gpu/gemm.cu's mma.sync kernel
// (launch_gemm_fixed_order_mma: the same contract, the same bits). K = 0 writes +0 (a memset); M or
// N = 0 launches nothing. Compiled for sm_90a only (gpu/CMakeLists.txt); gpu/gemm.cu's
// launch_gemm_fixed_order takes this path on devices of compute capability 9.0.

#include <algorithm>
#include <cstdint>
#include <string>

#include <cuda.h>  // CUtensorMap and its enums only: the encoder is reached through the runtime
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "gpu/common/shared_limit.h"
#include "gpu/gemm_kernels.h"
#include "gpu/runtime.h"

namespace bitparity::gpu {
namespace wgmma_gemm {

constexpr int kChunk = 16;  // K of one wgmma step

// ---------------------------------------------------------------------------------------------
// The instructions.

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void barrier_expect_bytes(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void barrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void barrier_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// One box of a 2-D tensor map into shared memory, completing on `bar` (elements outside the tensor
// arrive as zeros and count towards the transaction bytes).
__device__ __forceinline__ void copy_box(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void mma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void mma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void mma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving accesses to the accumulators across the asynchronous MMAs.
template <int kRegs>
__device__ __forceinline__ void fence_accumulators(float (&d)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

template <int kRegs>
__device__ __forceinline__ void set_registers_down() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void set_registers_up() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// A shared-memory matrix descriptor: start address, leading and stride byte offsets, layout (1:
// 128-byte swizzle, 2: 64-byte, 3: 32-byte). K-major operands: SBO = the step between 8-row groups,
// LBO unused. MN-major operands: LBO = the step between swizzle-wide column slices, SBO = the step
// between groups of 8 k-rows.
__device__ __forceinline__ uint64_t descriptor(uint32_t address, uint32_t lbo, uint32_t sbo, uint32_t layout) {
  return static_cast<uint64_t>((address & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (static_cast<uint64_t>(layout) << 62);
}

// wgmma.mma_async m64nNk16, fp32 accumulators d += A B: A K-major, B K-major (kTransB = 0) or
// MN-major (1), both from shared memory; scale-d = 1 (the accumulators start at +0 in registers).
template <int N>
struct Wgmma;

template <>
struct Wgmma<16> {
  template <int kTransB>
  static __device__ __forceinline__ void mma(float (&d)[8], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7"
      "}, %8, %9, p, 1, 1, 0, %11;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

template <>
struct Wgmma<32> {
  template <int kTransB>
  static __device__ __forceinline__ void mma(float (&d)[16], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, p, 1, 1, 0, %19;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

template <>
struct Wgmma<64> {
  template <int kTransB>
  static __device__ __forceinline__ void mma(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, %35;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

template <>
struct Wgmma<88> {
  template <int kTransB>
  static __device__ __forceinline__ void mma(float (&d)[44], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %46, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n88k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43"
      "}, %44, %45, p, 1, 1, 0, %47;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

template <>
struct Wgmma<96> {
  template <int kTransB>
  static __device__ __forceinline__ void mma(float (&d)[48], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
      "}, %48, %49, p, 1, 1, 0, %51;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

template <>
struct Wgmma<128> {
  template <int kTransB>
  static __device__ __forceinline__ void mma(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, %67;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

template <>
struct Wgmma<176> {
  template <int kTransB>
  static __device__ __forceinline__ void mma(float (&d)[88], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87"
      "}, %88, %89, p, 1, 1, 0, %91;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

template <>
struct Wgmma<192> {
  template <int kTransB>
  static __device__ __forceinline__ void mma(float (&d)[96], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
      "}, %96, %97, p, 1, 1, 0, %99;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

template <>
struct Wgmma<256> {
  template <int kTransB>
  static __device__ __forceinline__ void mma(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, %131;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

// ---------------------------------------------------------------------------------------------
// Tile configurations.

// A CTA's tile of out (BM x BN; BM / 64 consumer warpgroups of 64 rows each), the K of one stage
// (BK, a multiple of 64: a's tile is BK / 64 slices of BM rows x 128 bytes), the stages of the ring,
// the CTAs an SM is meant to hold (the launch bound), and b's layout in shared memory: MN-major as
// stored (slices of BW = min(BN, 64) columns, BK k-rows of 2 BW bytes each, swizzled over 2 BW
// bytes), or K-major (BK / 64 slices of BN rows x 128 bytes, from a transposed copy of b: the layout
// WGMMA.md probed, kept as the harness's cross-check of the MN-major form; the launcher never uses
// it). Every buffer starts on a 1024-byte boundary, as the swizzled layouts want.
template <int BM, int BN, int BK, int Stages, int MinBlocks = 1, bool BKMajor = false>
struct Tiles {
  static constexpr int kBlockM = BM, kBlockN = BN, kBlockK = BK, kStages = Stages, kMinBlocks = MinBlocks;
  static constexpr bool kBKMajor = BKMajor;
  static constexpr int kConsumers = BM / 64, kThreads = 128 * (kConsumers + 1);
  static constexpr int kSlicesK = BK / 64;
  static constexpr int kBWidth = BN <= 32 ? BN : 64, kBRowBytes = 2 * kBWidth;
  static constexpr int kBSlices = (BN + kBWidth - 1) / kBWidth;
  static constexpr uint32_t kBLayout = kBRowBytes == 128 ? 1 : (kBRowBytes == 64 ? 2 : 3);
  static constexpr int kStageABytes = BM * BK * 2;
  static constexpr int kStageBBytes = BKMajor ? BN * BK * 2 : kBSlices * BK * kBRowBytes;
  static constexpr size_t kSharedBytes = size_t{Stages} * (kStageABytes + kStageBBytes) + 16 * Stages + 1024;
  // Two consumers of 64 x BN with BN > 128 hold more accumulators than a third of the register file
  // allows each thread: the producer gives registers up (setmaxnreg) and the consumers take them.
  static constexpr bool kRebalance = kConsumers == 2 && BN > 128;
  static constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;
  static_assert(BM == 64 || BM == 128, "one or two consumer warpgroups");
  static_assert(BN % 8 == 0 && BN >= 16 && BN <= 256 && (BN <= 32 ? (BN == 16 || BN == 32) : true));
  static_assert(BK % 64 == 0 && BK <= 256 && Stages >= 2);
  static_assert(kStageABytes % 1024 == 0 && kStageBBytes % 1024 == 0);
  static_assert(kSharedBytes <= 227 * 1024, "more shared memory than an SM has");
};

// ---------------------------------------------------------------------------------------------
// The kernel.

template <class T>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocks)
    fixed_order_wgmma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                             __nv_bfloat16* __restrict__ out, int M, int N, int K) {
  extern __shared__ uint8_t shared_raw[];
  const uint32_t base = (shared_address(shared_raw) + 1023) & ~1023u;
  const uint32_t tiles_a = base;                                   // [stage][slice][BM][128 B]
  const uint32_t tiles_b = base + T::kStages * T::kStageABytes;    // [stage][slice][BK][2 BW B]
  const uint32_t full = tiles_b + T::kStages * T::kStageBBytes;    // [stage] mbarriers
  const uint32_t empty = full + 8 * T::kStages;                    // [stage] mbarriers
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const int m0 = static_cast<int>(blockIdx.y) * T::kBlockM, n0 = static_cast<int>(blockIdx.x) * T::kBlockN;
  const int k_tiles = (K + T::kBlockK - 1) / T::kBlockK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < T::kStages; ++s) {
      barrier_init(full + 8 * s, 1);
      barrier_init(empty + 8 * s, 4 * T::kConsumers);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    // The producer: one thread issues every copy.
    if constexpr (T::kRebalance) set_registers_down<T::kProducerRegisters>();
    if (threadIdx.x == 0) {
      // b's column slices that reach N (a slice wholly beyond N is not copied: it would feed only
      // outputs that are never stored).
      int b_slices = T::kBSlices;
      if constexpr (!T::kBKMajor) b_slices = min(T::kBSlices, (N - n0 + T::kBWidth - 1) / T::kBWidth);
      const uint32_t bytes =
          T::kStageABytes + (T::kBKMajor ? T::kStageBBytes : b_slices * T::kBlockK * T::kBRowBytes);
      for (int t = 0; t < k_tiles; ++t) {
        const int s = t % T::kStages;
        if (t >= T::kStages) barrier_wait(empty + 8 * s, ((t / T::kStages) + 1) & 1);
        const uint32_t bar = full + 8 * s;
        barrier_expect_bytes(bar, bytes);
        const int k0 = t * T::kBlockK;
        const uint32_t sa = tiles_a + s * T::kStageABytes, sb = tiles_b + s * T::kStageBBytes;
#pragma unroll
        for (int i = 0; i < T::kSlicesK; ++i) copy_box(sa + i * T::kBlockM * 128, &map_a, k0 + 64 * i, m0, bar);
        if constexpr (T::kBKMajor) {
#pragma unroll
          for (int i = 0; i < T::kSlicesK; ++i) copy_box(sb + i * T::kBlockN * 128, &map_b, k0 + 64 * i, n0, bar);
        } else {
          for (int j = 0; j < b_slices; ++j)
            copy_box(sb + j * T::kBlockK * T::kBRowBytes, &map_b, n0 + j * T::kBWidth, k0, bar);
        }
      }
    }
  } else {
    // A consumer: rows [m0 + 64 c, m0 + 64 c + 64) x columns [n0, n0 + BN), one accumulator register
    // per output, the K-chunks issued in ascending k.
    if constexpr (T::kRebalance) set_registers_up<T::kConsumerRegisters>();
    const int consumer = warpgroup - 1;
    const int tid = static_cast<int>(threadIdx.x) % 128, warp = tid / 32, lane = tid % 32;
    float d[T::kBlockN / 2];
#pragma unroll
    for (int i = 0; i < T::kBlockN / 2; ++i) d[i] = 0.0f;
    fence_accumulators(d);
    for (int t = 0; t < k_tiles; ++t) {
      const int s = t % T::kStages;
      barrier_wait(full + 8 * s, (t / T::kStages) & 1);
      const uint32_t sa = tiles_a + s * T::kStageABytes + consumer * 64 * 128;
      const uint32_t sb = tiles_b + s * T::kStageBBytes;
      mma_fence();
#pragma unroll
      for (int c = 0; c < T::kBlockK / kChunk; ++c) {
        // a: chunk c is 32 bytes into the rows of K-slice c / 4 (the swizzle is on the address).
        const uint64_t da = descriptor(sa + (c / 4) * T::kBlockM * 128 + (c % 4) * 32, 16, 1024, 1);
        uint64_t db;
        if constexpr (T::kBKMajor) {
          db = descriptor(sb + (c / 4) * T::kBlockN * 128 + (c % 4) * 32, 16, 1024, 1);
        } else {
          db = descriptor(sb + c * kChunk * T::kBRowBytes, T::kBlockK * T::kBRowBytes, 8 * T::kBRowBytes, T::kBLayout);
        }
        Wgmma<T::kBlockN>::template mma<T::kBKMajor ? 0 : 1>(d, da, db);
      }
      mma_commit();
      // The MMAs of stage t - 1 have completed (those of t may still run): its buffers are free.
      mma_wait<1>();
      if (t > 0 && lane == 0) barrier_arrive(empty + 8 * ((t - 1) % T::kStages));
    }
    mma_wait<0>();
    fence_accumulators(d);

    // The accumulator fragment of m64nNk16: register 4 j + 2 h + e holds row 16 warp + lane / 4 + 8 h,
    // column 8 j + 2 (lane % 4) + e.
    const int row0 = m0 + consumer * 64 + warp * 16 + lane / 4, col0 = n0 + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < T::kBlockN / 8; ++j) {
      const int col = col0 + 8 * j;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row < M && col < N) {
          const __nv_bfloat16 lo = __float2bfloat16_rn(d[4 * j + 2 * h]), hi = __float2bfloat16_rn(d[4 * j + 2 * h + 1]);
          const uint32_t pair = static_cast<uint32_t>(__bfloat16_as_ushort(lo)) |
                                (static_cast<uint32_t>(__bfloat16_as_ushort(hi)) << 16);
          *reinterpret_cast<uint32_t*>(out + static_cast<int64_t>(row) * N + col) = pair;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

// cuTensorMapEncodeTiled, reached through the runtime (no link against the driver library).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check_cuda(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found),
               "gemm fixed_order wgmma: cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    if (found != cudaDriverEntryPointSuccess || fn == nullptr)
      throw CudaError(cudaErrorSymbolNotFound, "gemm fixed_order wgmma: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A row-major bf16 matrix of `rows` x `columns` (row pitch columns * 2 bytes) read in boxes of
// box_rows x box_columns, out-of-bounds elements as zeros.
inline CUtensorMap tensor_map(const void* base, int64_t rows, int64_t columns, int box_rows, int box_columns,
                              CUtensorMapSwizzle swizzle) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(columns), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(columns) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_columns), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims,
                                          strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw CudaError(cudaErrorInvalidValue, "gemm fixed_order wgmma: cuTensorMapEncodeTiled failed (CUresult " +
                                               std::to_string(static_cast<int>(r)) + ")");
  return map;
}

inline CUtensorMapSwizzle swizzle_of(int row_bytes) {
  return row_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                          : (row_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_32B);
}

// Whether the tensor-map path takes this product (see the top of the file); K = 0 included.
inline bool fast_path(const Gemm& g) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  return g.K % 8 == 0 && g.N % 8 == 0 && reinterpret_cast<uintptr_t>(g.a) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(g.b) % 16 == 0 && reinterpret_cast<uintptr_t>(g.out) % 4 == 0 && g.M < kLimit &&
         g.N < kLimit && g.K < kLimit && (g.M + 63) / 64 <= 65535;
}

// One launch of tile configuration T on a fast-path product with M, N, K > 0. With T::kBKMajor, g.b
// must hold b transposed ([N, K], row-major).
template <class T>
void launch_tiles(const Gemm& g) {
  constexpr auto kernel = fixed_order_wgmma_kernel<T>;
  raise_shared_limit<kernel>(T::kSharedBytes, "gemm fixed_order wgmma: cudaFuncSetAttribute");
  const CUtensorMap map_a = tensor_map(g.a, g.M, g.K, T::kBlockM, 64, CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap map_b = T::kBKMajor
                                ? tensor_map(g.b, g.N, g.K, T::kBlockN, 64, CU_TENSOR_MAP_SWIZZLE_128B)
                                : tensor_map(g.b, g.K, g.N, T::kBlockK, T::kBWidth, swizzle_of(T::kBRowBytes));
  const dim3 grid(static_cast<unsigned>((g.N + T::kBlockN - 1) / T::kBlockN),
                  static_cast<unsigned>((g.M + T::kBlockM - 1) / T::kBlockM));
  kernel<<<grid, T::kThreads, T::kSharedBytes, static_cast<cudaStream_t>(g.stream)>>>(
      map_a, map_b, static_cast<__nv_bfloat16*>(g.out), static_cast<int>(g.M), static_cast<int>(g.N),
      static_cast<int>(g.K));
  check_launch("gemm fixed_order wgmma", g.stream);
}

// The launcher's tile configurations, by M (median µs on one H200 beside cuBLASLt's first heuristic
// algorithm, bf16 with fp32 compute, inputs rotated over four sets; bench/NOTES.md has kernel_bench's):
// - M <= 64: 64 x 64 tiles, K-stages of 64, 8 stages (N / 64 CTAs stream b; the m64 instruction
//   computes 64 - M rows of zeros). K = 4096, N = 2816: 15.7 µs at M = 16 and 15.1 at M = 32 against
//   cuBLASLt's 12.7 and 12.9 (which splits K in 3); 64 x 32 tiles 19.1 / 17.8, 64 x 16 26.4, 64 x 128
//   21.6. K = 1408, N = 4096: 9.4 and 8.9 against 7.9 and 8.1.
// - M <= 256: 128 x 64 tiles (two consumers), 8 stages. K = 4096, N = 2816, M = 256: 20.4 µs against
//   cuBLASLt's 15.9 (64 x 128: 22.8, 64 x 64: 26.8, 128 x 128: 31.5); K = 1408, N = 4096: 12.0
//   against 10.7.
// - Larger M: 128 x 256 tiles (two consumers of 128 accumulators each, registers moved to them from
//   the producer), 4 stages of 48 KB. M = 4096, K = 4096, N = 2816: 147 µs (641 TFLOP/s) against
//   cuBLASLt's 132 and gpu/gemm.cu's 458 (128 x 192: 155, 128 x 176: 160, 128 x 128: 178); K = 1408,
//   N = 4096: 89.2 against 67.6 (the non-persistent grid pays each tile's pipeline fill and epilogue:
//   22 K-stages a tile).
using SmallTiles = Tiles<64, 64, 64, 8>;
using MediumTiles = Tiles<128, 64, 64, 8>;
using LargeTiles = Tiles<128, 256, 64, 4>;

}  // namespace wgmma_gemm

// out = a @ b in the fixed_order contract (gpu/gemm_kernels.h); g.ilp changes nothing here.
void launch_gemm_fixed_order_wgmma(const Gemm& g) {
  if (g.M == 0 || g.N == 0) return;
  if (!wgmma_gemm::fast_path(g)) {
    launch_gemm_fixed_order_mma(g);  // gpu/gemm.cu: the same contract, element loads
    return;
  }
  if (g.K == 0) {
    check_cuda(cudaMemsetAsync(g.out, 0, static_cast<size_t>(g.M) * static_cast<size_t>(g.N) * 2,
                               static_cast<cudaStream_t>(g.stream)),
               "gemm fixed_order wgmma: cudaMemsetAsync");
    return;
  }
  if (g.M <= 64) {
    wgmma_gemm::launch_tiles<wgmma_gemm::SmallTiles>(g);
  } else if (g.M <= 256) {
    wgmma_gemm::launch_tiles<wgmma_gemm::MediumTiles>(g);
  } else {
    wgmma_gemm::launch_tiles<wgmma_gemm::LargeTiles>(g);
  }
}

}  // namespace bitparity::gpu
