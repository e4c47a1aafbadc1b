// Records the H200 tensor core's own answers for the gemm op's fixed_order contract: cases of every
// value family the contract's model must get right (spread exponents, cancellation, subnormals,
// overflow, NaN and Inf, small integers), each output computed by mma.sync m16n8k16 steps in
// ascending k straight from global memory, one warp a 16 x 8 tile: no shared memory, no ldmatrix,
// none of bitparity's GEMM kernel. The lines are bitparity-case/1 with their outputs, which the
// reference must reproduce bit for bit (reference/peer_replay_test.cpp), so the model of the step
// (spec rule 13) is pinned to the hardware independently of the kernel it checks.
//
//   record_gemm_hw OUT.jsonl [CASES] [SEED]     then gzip OUT.jsonl into peers/hw/gemm.jsonl.gz
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/random.h"

namespace {

using bitparity::splitmix64_next;

#define CHECK(x)                                                                          \
  do {                                                                                    \
    const cudaError_t e = (x);                                                            \
    if (e != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e));     \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

__device__ uint16_t at(const uint16_t* p, int64_t rows, int64_t cols, int64_t r, int64_t c) {
  return r < rows && c < cols ? p[r * cols + c] : uint16_t{0};
}

// One warp per 16 x 8 tile of out; fragments read from global memory (zero outside the matrices).
__global__ void tile_kernel(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t M, int64_t K, int64_t N) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t tiles_n = (N + 7) / 8;
  const int64_t tile = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (tile >= ((M + 15) / 16) * tiles_n) return;
  const int64_t m0 = (tile / tiles_n) * 16, n0 = (tile % tiles_n) * 8;
  auto pack = [](uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16); };
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t k0 = 0; k0 < K; k0 += 16) {
    const uint32_t a0 = pack(at(a, M, K, m0 + g, k0 + 2 * t), at(a, M, K, m0 + g, k0 + 2 * t + 1));
    const uint32_t a1 = pack(at(a, M, K, m0 + g + 8, k0 + 2 * t), at(a, M, K, m0 + g + 8, k0 + 2 * t + 1));
    const uint32_t a2 = pack(at(a, M, K, m0 + g, k0 + 2 * t + 8), at(a, M, K, m0 + g, k0 + 2 * t + 9));
    const uint32_t a3 = pack(at(a, M, K, m0 + g + 8, k0 + 2 * t + 8), at(a, M, K, m0 + g + 8, k0 + 2 * t + 9));
    const uint32_t b0 = pack(at(b, K, N, k0 + 2 * t, n0 + g), at(b, K, N, k0 + 2 * t + 1, n0 + g));
    const uint32_t b1 = pack(at(b, K, N, k0 + 2 * t + 8, n0 + g), at(b, K, N, k0 + 2 * t + 9, n0 + g));
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  for (int r = 0; r < 4; ++r) {
    const int64_t m = m0 + g + (r / 2) * 8, n = n0 + 2 * t + r % 2;
    if (m < M && n < N) {
      const __nv_bfloat16 v = __float2bfloat16_rn(d[r]);
      out[m * N + n] = *reinterpret_cast<const uint16_t*>(&v);
    }
  }
}

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
      case 0: case 4: v = value(s, -6, 6); break;
      case 1: v = value(s, -30, 30); break;
      case 2: v = value(s, -133, -40); break;
      case 3: v = value(s, 30, 127); break;
      case 5: v = splitmix64_next(s) % 8 == 0 ? kSpecials[splitmix64_next(s) % 9] : value(s, -6, 6); break;
      default: {  // small integers: every sum exact
        const int n = static_cast<int>(splitmix64_next(s) % 17) - 8;
        const float f = static_cast<float>(n);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        v = static_cast<uint16_t>(bits >> 16);
      }
    }
  }
}

std::string hex(const std::vector<uint16_t>& x) {
  std::string s;
  char buf[8];
  for (uint16_t v : x) {
    std::snprintf(buf, sizeof buf, "%04x", v);
    s += buf;
  }
  return s;
}

std::string tensor(const std::vector<uint16_t>& x, int64_t r, int64_t c) {
  return "{\"dtype\": \"bf16\", \"shape\": [" + std::to_string(r) + ", " + std::to_string(c) + "], \"hex\": \"" +
         hex(x) + "\"}";
}


// Runs one case through tile_kernel and writes its line.
void emit(FILE* f, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, int64_t M, int64_t K, int64_t N,
          uint64_t seed, int i, const char* family, int runtime, const char* device) {
  std::vector<uint16_t> out(static_cast<size_t>(M * N));
  uint16_t *da = nullptr, *db = nullptr, *dout = nullptr;
  CHECK(cudaMalloc(&da, a.size() * 2 + 2));
  CHECK(cudaMalloc(&db, b.size() * 2 + 2));
  CHECK(cudaMalloc(&dout, out.size() * 2 + 2));
  CHECK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  const int64_t tiles = ((M + 15) / 16) * ((N + 7) / 8);
  tile_kernel<<<static_cast<unsigned>((tiles + 3) / 4), 128>>>(da, db, dout, M, K, N);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dout));
  std::fprintf(f,
               "{\"format\": \"bitparity-case/1\", \"op\": \"gemm\", \"attrs\": {}, \"direction\": \"fwd\", "
               "\"inputs\": {\"a\": %s, \"b\": %s}, \"outputs\": {\"out\": %s}, \"provenance\": {\"peer\": "
               "\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (peers/hw/record_gemm.cu), CUDA runtime %d\", "
               "\"device\": \"%s\", \"contract\": \"fixed_order\", \"seed\": %llu, \"index\": %d, \"family\": \"%s\", "
               "\"source\": \"spec rule 13\"}}\n",
               tensor(a, M, K).c_str(), tensor(b, K, N).c_str(), tensor(out, M, N).c_str(), runtime, device,
               static_cast<unsigned long long>(seed), i, family);
}

// Directed cases at fp32's bottom, where the step's result depends on where the alignment window
// ends: products below 2^-149 beside a product of 2^-134 (half of bf16's smallest subnormal, so the
// output's bf16 rounding tie shows whether they were kept), in one chunk or the next, and alone
// (the sign of a result truncated to zero). Each is a [1, 32] @ [32, 1] with the terms placed at k.
struct Directed {
  const char* name;
  std::vector<std::pair<int, std::pair<uint16_t, uint16_t>>> terms;  // k, (a[k], b[k])
};

const std::vector<Directed>& directed() {
  constexpr uint16_t kThreeQuarters = 0x1A40, kTwoToMinus75 = 0x1A00;  // 1.5 * 2^-75 times 2^-75 = 0.75 * 2^-149
  constexpr uint16_t kTwoToMinus67 = 0x1E00;                            // squared: 2^-134
  static const std::vector<Directed> cases = {
      {"two sub-2^-149 products, then 2^-134 in the next chunk",
       {{0, {kThreeQuarters, kTwoToMinus75}}, {1, {kThreeQuarters, kTwoToMinus75}}, {16, {kTwoToMinus67, kTwoToMinus67}}}},
      {"2^-134 and two sub-2^-149 products in one chunk",
       {{0, {kTwoToMinus67, kTwoToMinus67}}, {1, {kThreeQuarters, kTwoToMinus75}}, {2, {kThreeQuarters, kTwoToMinus75}}}},
      {"-2^-134 and two negative sub-2^-149 products in one chunk",
       {{0, {kTwoToMinus67 | 0x8000, kTwoToMinus67}}, {1, {kThreeQuarters | 0x8000, kTwoToMinus75}},
        {2, {kThreeQuarters | 0x8000, kTwoToMinus75}}}},
      {"one negative sub-2^-149 product", {{0, {kThreeQuarters | 0x8000, kTwoToMinus75}}}},
      {"two negative sub-2^-149 products summing past 2^-149",
       {{0, {kThreeQuarters | 0x8000, kTwoToMinus75}}, {1, {kThreeQuarters | 0x8000, kTwoToMinus75}}}},
  };
  return cases;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.jsonl [CASES] [SEED]\n", argv[0]);
    return 2;
  }
  const int cases = argc > 2 ? std::atoi(argv[2]) : 400;
  const uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0;
  CHECK(cudaRuntimeGetVersion(&runtime));
  FILE* f = std::fopen(argv[1], "w");
  if (!f) return 1;
  uint64_t s = seed;
  static const int64_t kInner[] = {0, 1, 7, 15, 16, 17, 31, 32, 33, 48, 64, 100, 160};
  for (int i = 0; i < cases; ++i) {
    const int64_t M = 1 + static_cast<int64_t>(splitmix64_next(s) % 40), N = 1 + static_cast<int64_t>(splitmix64_next(s) % 24);
    const int64_t K = kInner[splitmix64_next(s) % (sizeof kInner / sizeof kInner[0])];
    const int family = static_cast<int>(splitmix64_next(s) % 7);
    std::vector<uint16_t> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N));
    fill(a, s, family);
    fill(b, s, family == 2 ? 1 : family);  // tiny a times spread b: products near fp32's subnormals
    if (family == 4) {                      // pairs of products that cancel (every third column inexactly)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 1; k < K; k += 2) a[m * K + k] = a[m * K + k - 1] ^ 0x8000;
      for (int64_t k = 1; k < K; k += 2)
        for (int64_t n = 0; n < N; ++n) b[k * N + n] = b[(k - 1) * N + n] ^ (n % 3 == 0 ? 1 : 0);
    }
    emit(f, a, b, M, K, N, seed, i, kFamilies[family], runtime, prop.name);
  }
  int index = cases;
  for (const Directed& d : directed()) {
    std::vector<uint16_t> a(32, 0), b(32, 0);
    for (const auto& [k, ab] : d.terms) a[k] = ab.first, b[k] = ab.second;
    for (int copy = 0; copy < 2; ++copy)  // each as [1, 32] @ [32, 1] and its 16 x 8 tile's last output
      if (copy == 0) {
        emit(f, a, b, 1, 32, 1, seed, index++, "directed", runtime, prop.name);
      } else {
        std::vector<uint16_t> a16(16 * 32, 0), b8(32 * 8, 0);
        for (int k = 0; k < 32; ++k) a16[15 * 32 + k] = a[k], b8[k * 8 + 7] = b[k];
        emit(f, a16, b8, 16, 32, 8, seed, index++, "directed", runtime, prop.name);
      }
  }
  std::fclose(f);
  std::printf("wrote %d cases to %s (%s)\n", index, argv[1], prop.name);
  return 0;
}
