// Ceilings of permute forward's memory pattern on one GPU, in one run: the d2d copy, write-only and
// read-only streams, a copy kernel, and permute forward's payload (T = 16384 token rows of H = 4096
// bf16, each written to k = 8 slots) in several shapes of kernel: a thread per 16-byte packet (as
// gpu/routing.cu's copy_rows), a block per token, several tokens per block, persistent blocks, TMA
// bulk copies through shared memory; random slots, slots ascending per token and the expert-segment
// layout that permute's index produces; phased rounds (a block an SM reads its rows into shared
// memory, then writes them, with or without a grid barrier between the phases); permute backward's
// gather (each token's 8 slot rows read, one row written) as a thread per packet and phased. It
// measures the payloads without the index, so that the index's share of permute's time is known.
// Not a test and not part of the build: a probe whose results bench/NOTES.md records ("Issue 11,
// third pass" and the tenth entry of 2026-12-07).
//   nvcc -O3 -arch=sm_90a -std=c++17 bench/permute_ceiling.cu -o build/permute_ceiling && build/permute_ceiling
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <random>
#include <functional>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__global__ void write_only(uint4* __restrict__ d, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  uint4 z = make_uint4(threadIdx.x, 0, 0, 0);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) d[i] = z;
}
__global__ void write_only_cs(uint4* __restrict__ d, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  uint4 z = make_uint4(threadIdx.x, 0, 0, 0);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) __stcs(d + i, z);
}
template <int U>
__global__ void read_only(const uint4* __restrict__ s, size_t n, unsigned* out) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  unsigned acc = 0;
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldcs(s + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) { uint4 v = s[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x12345678u) *out = acc;
}
template <int U>
__global__ void copy_k(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = s[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) d[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) d[i] = s[i];
}
// permute: thread per packet (as shipped), ILP 2, grid-stride
template <int U>
__global__ void perm_packet(const uint4* __restrict__ x, uint4* __restrict__ out, const int* __restrict__ slots, int T, int P, int k) {
  uint32_t total = T * P, stride = gridDim.x * blockDim.x;
  for (uint32_t k0 = blockIdx.x * blockDim.x + threadIdx.x; k0 < total; k0 += stride * U) {
    uint4 v[U]; uint32_t r[U], c[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { uint32_t q = k0 + u * stride; r[u] = q / P; c[u] = q - r[u] * P; if (q < total) v[u] = x[q]; }
#pragma unroll
    for (int u = 0; u < U; ++u) { if (k0 + u * stride >= total) continue; for (int s = 0; s < k; ++s) out[(int64_t)slots[r[u] * k + s] * P + c[u]] = v[u]; }
  }
}
// permute: block per token, packets across threads, k writes
__global__ void perm_block(const uint4* __restrict__ x, uint4* __restrict__ out, const int* __restrict__ slots, int P, int k) {
  int t = blockIdx.x;
  for (int c = threadIdx.x; c < P; c += blockDim.x) {
    uint4 v = x[(int64_t)t * P + c];
    for (int s = 0; s < k; ++s) out[(int64_t)slots[t * k + s] * P + c] = v;
  }
}
__global__ void perm_block_cs(const uint4* __restrict__ x, uint4* __restrict__ out, const int* __restrict__ slots, int P, int k) {
  int t = blockIdx.x;
  for (int c = threadIdx.x; c < P; c += blockDim.x) {
    uint4 v = __ldcs(x + (int64_t)t * P + c);
    for (int s = 0; s < k; ++s) __stcs(out + (int64_t)slots[t * k + s] * P + c, v);
  }
}
template <int TPB>
__global__ void perm_block_multi(const uint4* __restrict__ x, uint4* __restrict__ out, const int* __restrict__ slots, int P, int k, int T) {
  // TPB tokens per block, each thread one packet of each token, loads first then stores
  int t0 = blockIdx.x * TPB;
  for (int c = threadIdx.x; c < P; c += blockDim.x) {
    uint4 v[TPB];
#pragma unroll
    for (int j = 0; j < TPB; ++j) v[j] = x[(int64_t)(t0 + j) * P + c];
#pragma unroll
    for (int j = 0; j < TPB; ++j) for (int s = 0; s < k; ++s) out[(int64_t)slots[(t0 + j) * k + s] * P + c] = v[j];
  }
}
__global__ void perm_persistent(const uint4* __restrict__ x, uint4* __restrict__ out, const int* __restrict__ slots, int P, int k, int T) {
  for (int t = blockIdx.x; t < T; t += gridDim.x)
    for (int c = threadIdx.x; c < P; c += blockDim.x) {
      uint4 v = x[(int64_t)t * P + c];
      for (int s = 0; s < k; ++s) out[(int64_t)slots[t * k + s] * P + c] = v;
    }
}
// scattered write only (same destinations, no read)
__global__ void scatter_write_only(uint4* __restrict__ out, const int* __restrict__ slots, int T, int P, int k) {
  uint32_t total = T * P, stride = gridDim.x * blockDim.x;
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < total; q += stride) {
    uint32_t r = q / P, c = q - r * P; uint4 v = make_uint4(q, 0, 0, 0);
    for (int s = 0; s < k; ++s) out[(int64_t)slots[r * k + s] * P + c] = v;
  }
}
// TMA bulk: block per token; row into smem via cp.async.bulk, then k bulk stores.
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__global__ void perm_tma(const char* __restrict__ x, char* __restrict__ out, const int* __restrict__ slots, int row_bytes, int k, int T) {
  extern __shared__ __align__(128) char buf[];
  __shared__ __align__(8) uint64_t bar;
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&bar)));
      asm volatile("fence.mbarrier_init.release.cluster;");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(&bar)), "r"(row_bytes));
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   :: "r"(smem_u32(buf)), "l"(x + (int64_t)t * row_bytes), "r"(row_bytes), "r"(smem_u32(&bar)) : "memory");
      asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0; @!p bra W; }" :: "r"(smem_u32(&bar)));
      for (int s = 0; s < k; ++s)
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(out + (int64_t)slots[t * k + s] * row_bytes), "r"(smem_u32(buf)), "r"(row_bytes) : "memory");
      asm volatile("cp.async.bulk.commit_group;");
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(smem_u32(&bar)));
    }
    __syncthreads();
  }
}
// TMA bulk, per block a window of 2 tokens in flight (double buffer)
__global__ void perm_tma2(const char* __restrict__ x, char* __restrict__ out, const int* __restrict__ slots, int row_bytes, int k, int T) {
  extern __shared__ __align__(128) char buf[];
  __shared__ __align__(8) uint64_t bar[2];
  if (threadIdx.x != 0) return;
  for (int b = 0; b < 2; ++b) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&bar[b])));
  asm volatile("fence.mbarrier_init.release.cluster;");
  int it = 0; uint32_t phase[2] = {0, 0};
  auto load = [&](int t, int b) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(&bar[b])), "r"(row_bytes));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(smem_u32(buf + b * row_bytes)), "l"(x + (int64_t)t * row_bytes), "r"(row_bytes), "r"(smem_u32(&bar[b])) : "memory");
  };
  int t = blockIdx.x;
  if (t < T) load(t, 0);
  for (; t < T; t += gridDim.x, ++it) {
    int b = it & 1, nb = b ^ 1;
    int tn = t + gridDim.x;
    if (tn < T) {
      // buffer nb must be free: its stores read done
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      load(tn, nb);
    }
    asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" :: "r"(smem_u32(&bar[b])), "r"(phase[b]));
    phase[b] ^= 1;
    for (int s = 0; s < k; ++s)
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(out + (int64_t)slots[t * k + s] * row_bytes), "r"(smem_u32(buf + b * row_bytes)), "r"(row_bytes) : "memory");
    asm volatile("cp.async.bulk.commit_group;");
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}


// The gather's value of packet c of a token whose 8 slot rows are sl[0..8): their 32-bit lanes added
// as integers (a stand-in for the sum, whose cost is not what is measured), all 8 loads in flight.
__device__ __forceinline__ uint4 slot_lanes_sum(const uint4* __restrict__ in, const int* sl, int P, uint32_t c) {
  uint4 v[8];
#pragma unroll
  for (int s = 0; s < 8; ++s) v[s] = in[(int64_t)sl[s] * P + c];
  uint4 a = v[0];
#pragma unroll
  for (int s = 1; s < 8; ++s) { a.x += v[s].x; a.y += v[s].y; a.z += v[s].z; a.w += v[s].w; }
  return a;
}
// Phased rounds: one block of 1024 threads an SM; each round every block takes `rows` tokens,
// fills shared memory with one packet an item of them (the first phase), then empties it (the
// second), so that the memory sees the two phases apart. kSync: the phases are aligned over the
// whole grid by a grid barrier (a cooperative launch); otherwise each block drifts on its own.
// fill(first, i, buf) and drain(first, i, buf) take item i (token first + i / P, packet i % P);
// kFillUnroll: the fill loop's unroll.
template <bool kSync, int kFillUnroll, class Fill, class Drain>
__device__ __forceinline__ void phased_rounds(int P, int T, int rows, uint4* buf, Fill fill, Drain drain) {
  const int per_round = gridDim.x * rows;
  for (int t0 = 0; t0 < T; t0 += per_round) {
    const int first = t0 + blockIdx.x * rows;
    const int n = max(0, min(rows, T - first)) * P;
#pragma unroll kFillUnroll
    for (int i = threadIdx.x; i < n; i += blockDim.x) fill(first, i, buf);
    __syncthreads();
    if (kSync) cg::this_grid().sync();
    for (int i = threadIdx.x; i < n; i += blockDim.x) drain(first, i, buf);
    if (kSync) cg::this_grid().sync(); else __syncthreads();
  }
}
// Permute phased: a round reads its tokens' rows (the read phase), then writes each to its k slots.
template <bool kSync>
__global__ void __launch_bounds__(1024, 1) perm_phased(const uint4* __restrict__ x, uint4* __restrict__ out, const int* __restrict__ slots, int P, int k, int T, int rows) {
  extern __shared__ uint4 pbuf[];
  phased_rounds<kSync, 4>(
      P, T, rows, pbuf, [&](int first, int i, uint4* buf) { buf[i] = x[(int64_t)first * P + i]; },
      [&](int first, int i, uint4* buf) {
        const int r = i / P, c = i - r * P;
        const int* sl = slots + (int64_t)(first + r) * k;
        for (int s = 0; s < k; ++s) out[(int64_t)sl[s] * P + c] = buf[i];
      });
}
// Gather phased (permute backward's pattern, 8 slots a token): a round puts each token's
// slot_lanes_sum into shared memory, then writes the tokens' rows.
template <bool kSync>
__global__ void __launch_bounds__(1024, 1) gather_phased(const uint4* __restrict__ in, uint4* __restrict__ out, const int* __restrict__ slots, int P, int k, int T, int rows) {
  extern __shared__ uint4 pbuf[];
  phased_rounds<kSync, 1>(
      P, T, rows, pbuf,
      [&](int first, int i, uint4* buf) {
        const int r = i / P, c = i - r * P;
        buf[i] = slot_lanes_sum(in, slots + (int64_t)(first + r) * k, P, c);
      },
      [&](int first, int i, uint4* buf) { out[(int64_t)first * P + i] = buf[i]; });
}
// The gather as a thread per packet (gather_sum's shape, without the index): reads and the write mixed.
__global__ void gather_packet(const uint4* __restrict__ in, uint4* __restrict__ out, const int* __restrict__ slots, int T, int P) {
  uint32_t total = T * P, stride = gridDim.x * blockDim.x;
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < total; q += stride) {
    const uint32_t r = q / P, c = q - r * P;
    out[q] = slot_lanes_sum(in, slots + (int64_t)r * 8, P, c);
  }
}

__global__ void iota(unsigned* p, size_t n) { for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (unsigned)i * 2654435761u; }
float timeit(std::function<void()> f, int reps = 15) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  f(); f(); CK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float m; cudaEventElapsedTime(&m, a, b); ms.push_back(m); }
  CK(cudaGetLastError());
  std::sort(ms.begin(), ms.end()); return ms[reps / 2];
}
int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int T = 16384, H = 4096, k = 8; const int row_bytes = H * 2, P = row_bytes / 16;
  const size_t xb = (size_t)T * row_bytes, ob = xb * k, tot = xb + ob;  // permute traffic
  char *x, *o, *s2; unsigned* flag; int* slots;
  CK(cudaMalloc(&x, xb)); CK(cudaMalloc(&o, ob)); CK(cudaMalloc(&s2, ob)); CK(cudaMalloc(&flag, 4)); CK(cudaMalloc(&slots, T * k * 4));
  iota<<<1024, 256>>>((unsigned*)x, xb / 4); CK(cudaMemset(o, 2, ob)); CK(cudaMemset(s2, 3, ob));
  std::vector<int> perm(T * k); for (int i = 0; i < T * k; ++i) perm[i] = i;
  std::mt19937 g(1); std::shuffle(perm.begin(), perm.end(), g);
  CK(cudaMemcpy(slots, perm.data(), T * k * 4, cudaMemcpyHostToDevice));
  // expert-sorted-like slots: token t's slot for expert e lands in expert segment; emulate by sorting each token's slots.
  auto rep = [&](const char* name, size_t bytes, float ms, float copy_gbs) {
    double gbs = bytes / (ms * 1e-3) * 1e-9;
    printf("%-48s %9.1f us %8.1f GB/s %6.1f%% of copy\n", name, ms * 1e3, gbs, 100 * gbs / copy_gbs);
  };
  const size_t half = tot / 2;  // copy of the same traffic: read half, write half
  float mc = timeit([&] { cudaMemcpyAsync(s2, o, half, cudaMemcpyDeviceToDevice); });
  float copy_gbs = 2.0 * half / (mc * 1e-3) * 1e-9;
  rep("memcpy d2d (read+write = permute bytes)", 2 * half, mc, copy_gbs);
  float mcb = timeit([&] { cudaMemcpyAsync(s2, o, ob, cudaMemcpyDeviceToDevice); });
  rep("memcpy d2d of 1073 MB (2146 MB traffic)", 2 * ob, mcb, copy_gbs);
  for (int blocks : {sms, 2 * sms, 4 * sms, 8 * sms, 16 * sms}) {
    char nm[96];
    snprintf(nm, 96, "copy kernel ilp4 grid %d", blocks);
    rep(nm, 2 * half, timeit([&] { copy_k<4><<<blocks, 512>>>((const uint4*)o, (uint4*)s2, half / 16); }), copy_gbs);
  }
  rep("memset (write-only, permute bytes)", tot, timeit([&] { cudaMemsetAsync(s2, 0, tot > ob ? ob : tot); }) * (tot > ob ? (double)tot / ob : 1.0), copy_gbs);
  for (int blocks : {sms, 4 * sms, 16 * sms, 64 * sms}) {
    char nm[96];
    snprintf(nm, 96, "write-only kernel grid %d (1073 MB)", blocks);
    rep(nm, ob, timeit([&] { write_only<<<blocks, 512>>>((uint4*)s2, ob / 16); }), copy_gbs);
    snprintf(nm, 96, "write-only .cs grid %d (1073 MB)", blocks);
    rep(nm, ob, timeit([&] { write_only_cs<<<blocks, 512>>>((uint4*)s2, ob / 16); }), copy_gbs);
  }
  for (int blocks : {sms, 4 * sms, 16 * sms}) {
    char nm[96];
    snprintf(nm, 96, "read-only kernel ilp4 grid %d (1073 MB)", blocks);
    rep(nm, ob, timeit([&] { read_only<4><<<blocks, 512>>>((const uint4*)o, ob / 16, flag); }), copy_gbs);
  }
  // permute variants, random slots
  for (int blocks : {sms * 4, sms * 8}) {
    char nm[96];
    snprintf(nm, 96, "permute packet ilp2 grid %d", blocks);
    rep(nm, tot, timeit([&] { perm_packet<2><<<blocks, 256>>>((const uint4*)x, (uint4*)o, slots, T, P, k); }), copy_gbs);
  }
  rep("permute block-per-token 512 thr", tot, timeit([&] { perm_block<<<T, 512>>>((const uint4*)x, (uint4*)o, slots, P, k); }), copy_gbs);
  rep("permute block-per-token 256 thr", tot, timeit([&] { perm_block<<<T, 256>>>((const uint4*)x, (uint4*)o, slots, P, k); }), copy_gbs);
  rep("permute block-per-token 512 thr .cs", tot, timeit([&] { perm_block_cs<<<T, 512>>>((const uint4*)x, (uint4*)o, slots, P, k); }), copy_gbs);
  rep("permute block-per-token 1024 thr", tot, timeit([&] { perm_block<<<T, 1024>>>((const uint4*)x, (uint4*)o, slots, P, k); }), copy_gbs);
  rep("permute block-per-token 128 thr", tot, timeit([&] { perm_block<<<T, 128>>>((const uint4*)x, (uint4*)o, slots, P, k); }), copy_gbs);
  rep("permute 2 tokens/block 512 thr", tot, timeit([&] { perm_block_multi<2><<<T / 2, 512>>>((const uint4*)x, (uint4*)o, slots, P, k, T); }), copy_gbs);
  rep("permute 4 tokens/block 256 thr", tot, timeit([&] { perm_block_multi<4><<<T / 4, 256>>>((const uint4*)x, (uint4*)o, slots, P, k, T); }), copy_gbs);
  for (int per_sm : {2, 4, 8}) { char nm[96]; snprintf(nm, 96, "permute persistent 512 thr, %d blocks/SM", per_sm);
    rep(nm, tot, timeit([&] { perm_persistent<<<sms * per_sm, 512>>>((const uint4*)x, (uint4*)o, slots, P, k, T); }), copy_gbs); }
  {
    std::vector<int> sorted(perm); for (int t = 0; t < T; ++t) std::sort(sorted.begin() + t * k, sorted.begin() + t * k + k);
    int* ss; CK(cudaMalloc(&ss, T * k * 4)); CK(cudaMemcpy(ss, sorted.data(), T * k * 4, cudaMemcpyHostToDevice));
    rep("permute block-per-token 512, slots ascending", tot, timeit([&] { perm_block<<<T, 512>>>((const uint4*)x, (uint4*)o, ss, P, k); }), copy_gbs);
    // expert-segment layout: slot = off[e] + rank, tokens ascending inside each segment (as permute's index makes)
    std::vector<int> seg(T * k); std::vector<int> cnt(128, 0); std::mt19937 g2(5);
    std::vector<std::vector<int>> te(T);
    for (int t = 0; t < T; ++t) { std::vector<int> e(128); for (int i = 0; i < 128; ++i) e[i] = i; std::shuffle(e.begin(), e.end(), g2); e.resize(k); std::sort(e.begin(), e.end()); te[t] = e; for (int x2 : e) cnt[x2]++; }
    std::vector<int> off(129, 0); for (int e = 0; e < 128; ++e) off[e + 1] = off[e] + cnt[e];
    std::vector<int> fill(128, 0);
    for (int t = 0; t < T; ++t) for (int j = 0; j < k; ++j) { int e = te[t][j]; seg[t * k + j] = off[e] + fill[e]++; }
    CK(cudaMemcpy(ss, seg.data(), T * k * 4, cudaMemcpyHostToDevice));
    rep("permute block-per-token 512, expert segments", tot, timeit([&] { perm_block<<<T, 512>>>((const uint4*)x, (uint4*)o, ss, P, k); }), copy_gbs);
    rep("permute packet ilp2 grid 528, expert segments", tot, timeit([&] { perm_packet<2><<<sms * 4, 256>>>((const uint4*)x, (uint4*)o, ss, T, P, k); }), copy_gbs);
  }
  rep("scatter write-only (same slots, 1073 MB)", ob, timeit([&] { scatter_write_only<<<sms * 8, 256>>>((uint4*)o, slots, T, P, k); }), copy_gbs);
  CK(cudaFuncSetAttribute(perm_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, row_bytes));
  CK(cudaFuncSetAttribute(perm_tma2, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * row_bytes));
  for (int per_sm : {8, 16, 24}) {
    char nm[96]; snprintf(nm, 96, "permute TMA 1 buf, %d blocks/SM", per_sm);
    rep(nm, tot, timeit([&] { perm_tma<<<sms * per_sm, 32, row_bytes>>>(x, o, slots, row_bytes, k, T); }), copy_gbs);
  }
  for (int per_sm : {4, 8, 12}) {
    char nm[96]; snprintf(nm, 96, "permute TMA 2 buf, %d blocks/SM", per_sm);
    rep(nm, tot, timeit([&] { perm_tma2<<<sms * per_sm, 32, 2 * row_bytes>>>(x, o, slots, row_bytes, k, T); }), copy_gbs);
  }
  // check TMA output equals packet output
  std::vector<char> a(ob), b(ob);
  perm_packet<2><<<sms * 4, 256>>>((const uint4*)x, (uint4*)o, slots, T, P, k); CK(cudaMemcpy(a.data(), o, ob, cudaMemcpyDeviceToHost));
  CK(cudaMemset(o, 0, ob)); perm_tma2<<<sms * 8, 32, 2 * row_bytes>>>(x, o, slots, row_bytes, k, T); CK(cudaMemcpy(b.data(), o, ob, cudaMemcpyDeviceToHost));
  printf("tma2 output %s packet output\n", a == b ? "equals" : "DIFFERS from");

  // Phased rounds (reads apart from writes), one block of 1024 threads an SM.
  {
    const int max_rows = (227 * 1024) / row_bytes;  // rows of shared memory a block
    for (int rows : {8, 16, max_rows}) {
      const size_t sh = (size_t)rows * row_bytes;
      CK(cudaFuncSetAttribute(perm_phased<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh));
      CK(cudaFuncSetAttribute(perm_phased<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh));
      CK(cudaFuncSetAttribute(gather_phased<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh));
      CK(cudaFuncSetAttribute(gather_phased<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh));
      char nm[96];
      const uint4* xa = (const uint4*)x; uint4* oa = (uint4*)o; int Pa = P, ka = k, Ta = T, ra = rows;
      void* args[] = {&xa, &oa, &slots, &Pa, &ka, &Ta, &ra};
      snprintf(nm, 96, "permute phased, grid barrier, %d rows a round", rows);
      rep(nm, tot, timeit([&] { CK(cudaLaunchCooperativeKernel((void*)perm_phased<true>, sms, 1024, args, sh)); }), copy_gbs);
      snprintf(nm, 96, "permute phased, no barrier, %d rows a round", rows);
      rep(nm, tot, timeit([&] { perm_phased<false><<<sms, 1024, sh>>>(xa, oa, slots, P, k, T, rows); }), copy_gbs);
      const uint4* ia = (const uint4*)o; uint4* ga = (uint4*)s2;
      void* gargs[] = {&ia, &ga, &slots, &Pa, &ka, &Ta, &ra};
      snprintf(nm, 96, "gather phased, grid barrier, %d rows a round", rows);
      rep(nm, tot, timeit([&] { CK(cudaLaunchCooperativeKernel((void*)gather_phased<true>, sms, 1024, gargs, sh)); }), copy_gbs);
      snprintf(nm, 96, "gather phased, no barrier, %d rows a round", rows);
      rep(nm, tot, timeit([&] { gather_phased<false><<<sms, 1024, sh>>>(ia, ga, slots, P, k, T, rows); }), copy_gbs);
    }
    for (int blocks : {sms * 4, sms * 8})  {
      char nm[96]; snprintf(nm, 96, "gather packet grid %d", blocks);
      rep(nm, tot, timeit([&] { gather_packet<<<blocks, 256>>>((const uint4*)o, (uint4*)s2, slots, T, P); }), copy_gbs);
    }
    std::vector<char> a(ob), b(ob);
    perm_packet<2><<<sms * 4, 256>>>((const uint4*)x, (uint4*)o, slots, T, P, k); CK(cudaMemcpy(a.data(), o, ob, cudaMemcpyDeviceToHost));
    CK(cudaMemset(o, 0, ob)); perm_phased<false><<<sms, 1024, 8 * row_bytes>>>((const uint4*)x, (uint4*)o, slots, P, k, T, 8);
    CK(cudaMemcpy(b.data(), o, ob, cudaMemcpyDeviceToHost));
    printf("phased output %s packet output\n", a == b ? "equals" : "DIFFERS from");
  }
  rep("memcpy d2d again", 2 * half, timeit([&] { cudaMemcpyAsync(s2, o, half, cudaMemcpyDeviceToDevice); }), copy_gbs);
  return 0;
}
