// The embedding kernels (spec OP-9; launchers and contracts in gpu/embedding_kernels.h).
//
// Forward: one warp per position row at a time; lane l copies packets l, l + 32, ... of the row,
// kIlp of them loaded before any is stored. Backward: a prepare kernel writes each position's local
// row (the sort key; masked positions at row 0) and its position (bit 31 set where masked), CUB's
// radix sort orders them by row (stable: each row's positions ascend, as in ATen's sorts; up to
// 1024 positions one block does both, counting each position's place: sort_block), a table
// of run starts (one binary search a row, all rows in parallel) gives each row's run of sorted
// positions, and one warp per 32 columns (or 16-byte packets) of a d_weight row folds the
// gradients of each column over the row's run in order under the contract's rounding and stores
// them, +0 where no position names the row. The fold is a per-column state machine; every addition
// is a plain fp32 add (no product to contract).
#include <optional>

#include <cub/device/device_radix_sort.cuh>

#include "gpu/common/dtype_io.cuh"
#include "gpu/common/launch.cuh"
#include "gpu/embedding_kernels.h"
#include "gpu/runtime.h"

namespace bitparity::gpu {
namespace {

using namespace device;

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr uint32_t kMaskedBit = 0x80000000u;
constexpr int64_t kChunk = 32;     // embedding_backward_feature_kernel's positions per chunk
constexpr int kPartialRows = 10;   // EmbeddingBackwardKernel.cu's NROWS_PER_THREAD

__device__ __forceinline__ int64_t local_row(int64_t id, const EmbeddingRows& r) {
  if (!r.partition) return id;
  if (id < r.vocab_start) return -1;
  const int64_t local = id - r.vocab_start;
  return local < r.V ? local : -1;
}

int warps_grid(int64_t rows) {
  const int64_t resident = static_cast<int64_t>(multiprocessor_count()) * 2048 / kThreads;
  const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<int>(std::max<int64_t>(1, std::min(blocks, resident)));
}

// --- forward ---------------------------------------------------------------------------------

// Every kernel is a body (gpu/common/launch.cuh): launched alone, or, while run_batch collects a
// staged batch of small cases, one batched launch a kernel for up to 32 cases
// (launch_or_collect_body). A backward of more than kBlockSortMax positions takes CUB's radix sort,
// which has no batched twin: its case makes all its launches directly (LaunchDirectly).

// Rows of `per_row` units of type U (a 16-byte packet, or one element's storage).
template <class U, int kIlp>
struct ForwardRows {
  struct Args {
    const U* weight;
    const int64_t* ids;
    U* out;
    int64_t P, per_row;
    EmbeddingRows r;
  };
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const U* __restrict__ weight = a.weight;
    const int64_t* __restrict__ ids = a.ids;
    U* __restrict__ out = a.out;
    const int64_t per_row = a.per_row;
    const int lane = threadIdx.x % kWarp;
    const int64_t warps = static_cast<int64_t>(at.blocks) * kWarpsPerBlock;
    for (int64_t p = static_cast<int64_t>(at.block) * kWarpsPerBlock + threadIdx.x / kWarp; p < a.P; p += warps) {
      const int64_t row = local_row(ids[p], a.r);
      const U* src = weight + (row < 0 ? 0 : row) * per_row;
      U* dst = out + p * per_row;
      for (int64_t j0 = lane; j0 < per_row; j0 += static_cast<int64_t>(kWarp) * kIlp) {
        U v[kIlp];
#pragma unroll
        for (int i = 0; i < kIlp; ++i) {
          const int64_t j = j0 + static_cast<int64_t>(i) * kWarp;
          v[i] = U{};
          if (row >= 0 && j < per_row) v[i] = src[j];
        }
#pragma unroll
        for (int i = 0; i < kIlp; ++i) {
          const int64_t j = j0 + static_cast<int64_t>(i) * kWarp;
          if (j < per_row) dst[j] = v[i];
        }
      }
    }
  }
};

template <class U, int kIlp>
void launch_forward_as(const EmbeddingForward& a, int64_t per_row) {
  launch_or_collect_body<ForwardRows<U, kIlp>>({static_cast<const U*>(a.weight), static_cast<const int64_t*>(a.ids),
                                                static_cast<U*>(a.out), a.P, per_row, a.rows},
                                               warps_grid(a.P), a.stream, "embedding forward");
}

template <class U>
void dispatch_forward(const EmbeddingForward& a, int64_t per_row) {
  switch (a.ilp == kIlpDefault ? 4 : a.ilp) {
    case 1: return launch_forward_as<U, 1>(a, per_row);
    case 2: return launch_forward_as<U, 2>(a, per_row);
    case 4: return launch_forward_as<U, 4>(a, per_row);
    default: throw std::invalid_argument("embedding: ilp must be 1, 2 or 4; got " + std::to_string(a.ilp));
  }
}

// --- backward: the sort ------------------------------------------------------------------------

__global__ void prepare_keys(const int64_t* __restrict__ ids, uint32_t* __restrict__ keys,
                             uint32_t* __restrict__ vals, int64_t P, EmbeddingRows r) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < P;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = local_row(ids[p], r);
    keys[p] = static_cast<uint32_t>(row < 0 ? 0 : row);
    vals[p] = static_cast<uint32_t>(p) | (row < 0 ? kMaskedBit : 0u);
  }
}

// prepare_keys and the sort in one block for P <= kBlockSortMax positions (the small cases of a
// campaign, where CUB's radix sort is several launches): a position's place is the number of
// positions whose row is lower, or the same with a lower position. That is the stable sort by row,
// so keys_out and vals_out hold the radix sort's words exactly.
constexpr int kBlockSortMax = static_cast<int>(kEmbeddingBlockSortMax);

// One block of kBlockSortMax threads (the threads past P idle).
struct SortBlock {
  struct Args {
    const int64_t* ids;
    uint32_t* keys_out;
    uint32_t* vals_out;
    int P;
    EmbeddingRows r;
  };
  static constexpr int kBlock = kBlockSortMax, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos) {
    __shared__ uint32_t keys[kBlockSortMax];
    const int64_t* __restrict__ ids = a.ids;
    uint32_t* __restrict__ keys_out = a.keys_out;
    uint32_t* __restrict__ vals_out = a.vals_out;
    const int p = static_cast<int>(threadIdx.x);
    uint32_t key = 0, val = 0;
    if (p < a.P) {
      const int64_t row = local_row(ids[p], a.r);
      key = static_cast<uint32_t>(row < 0 ? 0 : row);
      val = static_cast<uint32_t>(p) | (row < 0 ? kMaskedBit : 0u);
      keys[p] = key;
    }
    __syncthreads();
    if (p >= a.P) return;
    int place = 0;
    for (int q = 0; q < a.P; ++q) {
      const uint32_t other = keys[q];
      place += other < key || (other == key && q < p) ? 1 : 0;
    }
    keys_out[place] = key;
    vals_out[place] = val;
  }
};

int key_bits(int64_t V) {
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) < V) ++bits;
  return bits;
}

struct SortLayout {
  size_t keys_in = 0, keys_out = 0, vals_in = 0, vals_out = 0, starts = 0, temp = 0, temp_bytes = 0, total = 0;
};

SortLayout sort_layout(int64_t P, int64_t V) {
  SortLayout l;
  const size_t words = aligned_bytes(static_cast<size_t>(P) * sizeof(uint32_t));
  if (P > 0)
    check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, l.temp_bytes, static_cast<const uint32_t*>(nullptr),
                                               static_cast<uint32_t*>(nullptr), static_cast<const uint32_t*>(nullptr),
                                               static_cast<uint32_t*>(nullptr), static_cast<int>(P), 0, key_bits(V)),
               "cub::DeviceRadixSort::SortPairs (size query)");
  l.keys_in = 0;
  l.keys_out = words;
  l.vals_in = 2 * words;
  l.vals_out = 3 * words;
  l.starts = 4 * words;  // V + 1 run starts
  l.temp = l.starts + aligned_bytes(static_cast<size_t>(V + 1) * sizeof(uint32_t));
  l.total = l.temp + aligned_bytes(l.temp_bytes);
  return l;
}

// --- backward: the fold ----------------------------------------------------------------------------

// One column's fold. x: the gradient (as fp32), pos: its position.
template <class T, EmbeddingFold kFold>
struct ColumnFold {
  float acc = 0.0f, s = 0.0f;
  int64_t chunk = -1;
  int count = 0;
  __device__ __forceinline__ void add(float x, int64_t pos) {
    if constexpr (kFold == EmbeddingFold::kPerStep) {
      acc = round_as<T>(__fadd_rn(acc, x));
    } else if constexpr (kFold == EmbeddingFold::kOnce) {
      s = __fadd_rn(s, x);
    } else if constexpr (kFold == EmbeddingFold::kChunks) {
      const int64_t c = pos / kChunk;
      if (c != chunk) {
        if (chunk >= 0) acc = round_as<T>(__fadd_rn(acc, round_as<T>(s)));
        chunk = c;
        s = x;  // the chunk's first position holds its own value; the others are added to it
      } else {
        s = __fadd_rn(s, x);
      }
    } else if constexpr (kFold == EmbeddingFold::kPartials) {
      s = __fadd_rn(s, x);
      if (++count == kPartialRows) {
        acc = __fadd_rn(acc, s);
        s = 0.0f;
        count = 0;
      }
    }
  }
  __device__ __forceinline__ float result() const {
    if constexpr (kFold == EmbeddingFold::kPerStep) return acc;
    if constexpr (kFold == EmbeddingFold::kOnce) return round_as<T>(__fadd_rn(0.0f, s));
    if constexpr (kFold == EmbeddingFold::kChunks)
      return chunk < 0 ? 0.0f : round_as<T>(__fadd_rn(acc, round_as<T>(s)));
    if constexpr (kFold == EmbeddingFold::kPartials) return round_as<T>(count ? __fadd_rn(acc, s) : acc);
    return 0.0f;
  }
};

// The run [begin, end) of row v in the sorted keys.
__device__ __forceinline__ uint32_t lower_bound(const uint32_t* keys, uint32_t n, uint32_t v) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (__ldg(keys + mid) < v) lo = mid + 1;  // read-only (ld.global.nc): no kernel writes keys while it reads
    else hi = mid;
  }
  return lo;
}

// starts[v] = the first sorted position of row v or a later row, v = 0..V (starts[V] = P): row v's
// run is [starts[v], starts[v + 1]). One binary search a row, all in parallel, so that the fold's
// warps find a row's run with two loads instead of two searches each.
struct RunStarts {
  struct Args {
    const uint32_t* keys;
    uint32_t* starts;
    int64_t P, V;
  };
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const uint32_t* __restrict__ keys = a.keys;
    uint32_t* __restrict__ starts = a.starts;
    const int64_t P = a.P, V = a.V;
    for (int64_t v = static_cast<int64_t>(at.block) * kBlock + threadIdx.x; v <= V;
         v += static_cast<int64_t>(at.blocks) * kBlock)
      starts[v] = P ? lower_bound(keys, static_cast<uint32_t>(P), static_cast<uint32_t>(v)) : 0;
  }
};

// The gradient units (one element, or an N-element packet) of position val's row at unit j, as fp32;
// +0 where the position is masked.
template <class T, int N>
__device__ __forceinline__ void load_unit(const typename T::Storage* g, uint32_t val, int64_t H, int64_t j, float* x) {
  if (val & kMaskedBit) {
#pragma unroll
    for (int e = 0; e < N; ++e) x[e] = 0.0f;
    return;
  }
  const int64_t pos = val & ~kMaskedBit;
  if constexpr (N == 1) x[0] = T::load(g[pos * H + j]);
  else load_chunk<T, N>(g + pos * H + j * N, x);
}

// A warp per 32 units of a d_weight row (so a row that many positions name is spread over as many
// warps as it has 32-unit blocks); lane l folds unit 32 b + l of row v over the row's run of
// positions, kIlp positions' loads in flight before their additions, which stay in order.
template <class T, int N, EmbeddingFold kFold, int kIlp>
struct FoldRows {
  using S = typename T::Storage;
  struct Args {
    const S* g;
    const uint32_t* starts;
    const uint32_t* vals;
    S* d_weight;
    int64_t H, V;
  };
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const S* __restrict__ g = a.g;
    const uint32_t* __restrict__ starts = a.starts;
    const uint32_t* __restrict__ vals = a.vals;
    S* __restrict__ d_weight = a.d_weight;
    const int64_t H = a.H, V = a.V;
    const int lane = threadIdx.x % kWarp;
    const int64_t warps = static_cast<int64_t>(at.blocks) * kWarpsPerBlock;
    const int64_t units = H / N, blocks = (units + kWarp - 1) / kWarp;
    for (int64_t w = static_cast<int64_t>(at.block) * kWarpsPerBlock + threadIdx.x / kWarp; w < V * blocks;
         w += warps) {
      const int64_t v = w / blocks, j = (w - v * blocks) * kWarp + lane;
      const uint32_t begin = starts[v], end = starts[v + 1];
      if (j >= units) continue;
      ColumnFold<T, kFold> f[N];
      for (uint32_t i0 = begin; i0 < end; i0 += kIlp) {
        uint32_t val[kIlp];
        float x[kIlp][N];
#pragma unroll
        for (int k = 0; k < kIlp; ++k) val[k] = i0 + k < end ? vals[i0 + k] : kMaskedBit;
#pragma unroll
        for (int k = 0; k < kIlp; ++k) load_unit<T, N>(g, val[k], H, j, x[k]);
#pragma unroll
        for (int k = 0; k < kIlp; ++k)
          if (i0 + k < end)
#pragma unroll
            for (int e = 0; e < N; ++e) f[e].add(x[k][e], val[k] & ~kMaskedBit);
      }
      float out[N];
#pragma unroll
      for (int e = 0; e < N; ++e) out[e] = f[e].result();
      typename T::Storage* row = d_weight + v * H;
      if constexpr (N == 1) row[j] = T::store(out[0]);
      else store_chunk<T, N>(row + j * N, out);
    }
  }
};

// The index backward at H = 1 (indexing_backward_kernel_stride_1): one thread per row emulates the
// warp: lane l sums positions l, l + 32, ... of the first 32 floor(n / 32) from +0; the lanes are
// combined by WARP_SHFL_DOWN's halving tree (lane l += lane l + o for o = 16, 8, 4, 2, 1); the rest
// of the positions are added in order; the row's +0 plus that, rounded once.
template <class T>
struct FoldWarpTree {
  using S = typename T::Storage;
  struct Args {
    const S* g;
    const uint32_t* keys;
    const uint32_t* vals;
    S* d_weight;
    int64_t P, V;
  };
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const S* __restrict__ g = a.g;
    const uint32_t* __restrict__ keys = a.keys;
    const uint32_t* __restrict__ vals = a.vals;
    S* __restrict__ d_weight = a.d_weight;
    const int64_t P = a.P, V = a.V;
    for (int64_t v = static_cast<int64_t>(at.block) * kBlock + threadIdx.x; v < V;
         v += static_cast<int64_t>(at.blocks) * kBlock) {
      const uint32_t begin = P ? lower_bound(keys, static_cast<uint32_t>(P), static_cast<uint32_t>(v)) : 0;
      const uint32_t end = P ? lower_bound(keys, static_cast<uint32_t>(P), static_cast<uint32_t>(v) + 1) : 0;
      auto value = [&](uint32_t i) {  // read-only loads (ld.global.nc), which the lambda hides from the compiler
        const uint32_t val = __ldg(vals + i);
        return (val & kMaskedBit) ? 0.0f : T::load(__ldg(g + (val & ~kMaskedBit)));
      };
      const uint32_t n = end - begin, passes = n / kWarp;
      float lane[kWarp];
#pragma unroll
      for (int l = 0; l < kWarp; ++l) lane[l] = 0.0f;
      for (uint32_t i = 0; i < passes; ++i)
#pragma unroll
        for (int l = 0; l < kWarp; ++l) lane[l] = __fadd_rn(lane[l], value(begin + i * kWarp + l));
#pragma unroll
      for (int o = kWarp / 2; o > 0; o /= 2)
#pragma unroll
        for (int l = 0; l < o; ++l) lane[l] = __fadd_rn(lane[l], lane[l + o]);
      float s = lane[0];
      for (uint32_t i = passes * kWarp; i < n; ++i) s = __fadd_rn(s, value(begin + i));
      d_weight[v] = T::store(__fadd_rn(0.0f, s));
    }
  }
};

// atomic_fp32: every gradient element added to a zeroed fp32 table with atomicAdd, in whatever
// order the adds arrive; then the table rounded to the dtype.
template <class T>
struct ScatterAtomic {
  struct Args {
    const typename T::Storage* g;
    const int64_t* ids;
    float* table;
    int64_t P, H;
    EmbeddingRows r;
  };
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const typename T::Storage* __restrict__ g = a.g;
    const int64_t* __restrict__ ids = a.ids;
    float* __restrict__ table = a.table;
    const int64_t P = a.P, H = a.H;
    const int lane = threadIdx.x % kWarp;
    const int64_t warps = static_cast<int64_t>(at.blocks) * kWarpsPerBlock;
    for (int64_t p = static_cast<int64_t>(at.block) * kWarpsPerBlock + threadIdx.x / kWarp; p < P; p += warps) {
      // Read-only loads (ld.global.nc) stated: beside the atomics the compiler does not infer them.
      const int64_t row = local_row(static_cast<int64_t>(__ldg(reinterpret_cast<const long long*>(ids + p))), a.r);
      if (row < 0) continue;  // a masked position adds +0
      for (int64_t h = lane; h < H; h += kWarp) atomicAdd(table + row * H + h, T::load(__ldg(g + p * H + h)));
    }
  }
};

template <class T>
struct RoundTable {
  struct Args {
    const float* table;
    typename T::Storage* out;
    int64_t n;
  };
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const float* __restrict__ table = a.table;
    typename T::Storage* __restrict__ out = a.out;
    const int64_t n = a.n;
    for (int64_t i = static_cast<int64_t>(at.block) * kBlock + threadIdx.x; i < n;
         i += static_cast<int64_t>(at.blocks) * kBlock)
      out[i] = T::store(table[i]);
  }
};

int flat_grid(int64_t n) {
  const int64_t resident = static_cast<int64_t>(multiprocessor_count()) * 2048 / kThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min((n + kThreads - 1) / kThreads, resident)));
}

template <class T, EmbeddingFold kFold, int kIlp>
void launch_fold_ilp(const EmbeddingBackward& a, const uint32_t* starts, const uint32_t* vals) {
  using S = typename T::Storage;
  const S* g = static_cast<const S*>(a.g);
  S* dw = static_cast<S*>(a.d_weight);
  const bool packets = a.H % kPacket<T> == 0;
  const int64_t units = packets ? a.H / kPacket<T> : a.H;
  const int grid = warps_grid(a.rows.V * ((units + kWarp - 1) / kWarp));
  if (packets)
    launch_or_collect_body<FoldRows<T, kPacket<T>, kFold, kIlp>>({g, starts, vals, dw, a.H, a.rows.V}, grid, a.stream,
                                                                  "embedding backward fold");
  else
    launch_or_collect_body<FoldRows<T, 1, kFold, kIlp>>({g, starts, vals, dw, a.H, a.rows.V}, grid, a.stream,
                                                         "embedding backward fold");
}

template <class T, EmbeddingFold kFold>
void launch_fold(const EmbeddingBackward& a, const uint32_t* starts, const uint32_t* vals) {
  switch (a.ilp == kIlpDefault ? 4 : a.ilp) {
    case 1: return launch_fold_ilp<T, kFold, 1>(a, starts, vals);
    case 2: return launch_fold_ilp<T, kFold, 2>(a, starts, vals);
    case 4: return launch_fold_ilp<T, kFold, 4>(a, starts, vals);
    default: throw std::invalid_argument("embedding: ilp must be 1, 2 or 4; got " + std::to_string(a.ilp));
  }
}

template <class T>
void launch_backward_as(const EmbeddingBackward& a) {
  using S = typename T::Storage;
  const auto stream = static_cast<cudaStream_t>(a.stream);
  const int64_t V = a.rows.V;
  if (a.fold == EmbeddingFold::kAtomic) {
    float* table = static_cast<float*>(a.workspace);
    zero_bytes(table, static_cast<size_t>(V * a.H) * sizeof(float), a.stream, "embedding backward table");
    if (a.P > 0)
      launch_or_collect_body<ScatterAtomic<T>>(
          {static_cast<const S*>(a.g), static_cast<const int64_t*>(a.ids), table, a.P, a.H, a.rows}, warps_grid(a.P),
          a.stream, "embedding backward atomic scatter");
    launch_or_collect_body<RoundTable<T>>({table, static_cast<S*>(a.d_weight), V * a.H}, flat_grid(V * a.H), a.stream,
                                          "embedding backward rounding");
    return;
  }
  // CUB's radix sort has no batched twin: its case makes all its launches directly.
  std::optional<LaunchDirectly> direct;
  if (a.P > kBlockSortMax) direct.emplace();
  const SortLayout l = sort_layout(a.P, V);
  char* ws = static_cast<char*>(a.workspace);
  auto* keys_in = reinterpret_cast<uint32_t*>(ws + l.keys_in);
  auto* keys_out = reinterpret_cast<uint32_t*>(ws + l.keys_out);
  auto* vals_in = reinterpret_cast<uint32_t*>(ws + l.vals_in);
  auto* vals_out = reinterpret_cast<uint32_t*>(ws + l.vals_out);
  if (a.P > 0 && a.P <= kBlockSortMax) {
    launch_or_collect_body<SortBlock>({static_cast<const int64_t*>(a.ids), keys_out, vals_out, static_cast<int>(a.P), a.rows},
                                      1, a.stream, "embedding backward block sort");
  } else if (a.P > 0) {
    prepare_keys<<<flat_grid(a.P), kThreads, 0, stream>>>(static_cast<const int64_t*>(a.ids), keys_in, vals_in, a.P,
                                                         a.rows);
    check_launch("embedding backward keys", a.stream);
    size_t temp_bytes = l.temp_bytes;
    check_cuda(cub::DeviceRadixSort::SortPairs(ws + l.temp, temp_bytes, keys_in, keys_out, vals_in, vals_out,
                                               static_cast<int>(a.P), 0, key_bits(V), stream),
               "cub::DeviceRadixSort::SortPairs");
  }
  auto* starts = reinterpret_cast<uint32_t*>(ws + l.starts);
  if (a.fold != EmbeddingFold::kWarpTree)
    launch_or_collect_body<RunStarts>({keys_out, starts, a.P, V}, flat_grid(V + 1), a.stream,
                                      "embedding backward run starts");
  switch (a.fold) {
    case EmbeddingFold::kPerStep: return launch_fold<T, EmbeddingFold::kPerStep>(a, starts, vals_out);
    case EmbeddingFold::kOnce: return launch_fold<T, EmbeddingFold::kOnce>(a, starts, vals_out);
    case EmbeddingFold::kChunks: return launch_fold<T, EmbeddingFold::kChunks>(a, starts, vals_out);
    case EmbeddingFold::kPartials: return launch_fold<T, EmbeddingFold::kPartials>(a, starts, vals_out);
    case EmbeddingFold::kWarpTree:
      return launch_or_collect_body<FoldWarpTree<T>>(
          {static_cast<const S*>(a.g), keys_out, vals_out, static_cast<S*>(a.d_weight), a.P, V}, flat_grid(V), a.stream,
          "embedding backward warp tree");
    case EmbeddingFold::kAtomic: break;
  }
}

}  // namespace

void launch_embedding_forward(const EmbeddingForward& a) {
  if (a.P == 0 || a.H == 0) return;
  const int64_t bytes = a.H * static_cast<int64_t>(dtype_size(a.dtype));
  if (bytes % 16 == 0) return dispatch_forward<uint4>(a, bytes / 16);
  switch (dtype_size(a.dtype)) {
    case 2: return dispatch_forward<uint16_t>(a, a.H);
    case 4: return dispatch_forward<uint32_t>(a, a.H);
    default: throw std::invalid_argument("embedding: no forward kernel for dtype " + std::string(dtype_name(a.dtype)));
  }
}

size_t embedding_backward_workspace_bytes(const EmbeddingBackward& a) {
  if (a.fold == EmbeddingFold::kAtomic) return static_cast<size_t>(a.rows.V * a.H) * sizeof(float);
  return sort_layout(a.P, a.rows.V).total;
}

void launch_embedding_backward(const EmbeddingBackward& a) {
  if (a.rows.V == 0 || a.H == 0) return;
  if (a.fold == EmbeddingFold::kWarpTree && a.H != 1)
    throw std::invalid_argument("embedding: the warp-tree fold is the width-1 kernel's");
  switch (a.dtype) {
    case DType::kBF16: return launch_backward_as<BF16>(a);
    case DType::kFP16: return launch_backward_as<FP16>(a);
    case DType::kFP32: return launch_backward_as<FP32>(a);
    default: throw std::invalid_argument("embedding: no backward kernel for dtype " + std::string(dtype_name(a.dtype)));
  }
}

}  // namespace bitparity::gpu
