// permute and unpermute (spec OP-2, OP-3): the routing index built on the device from the routing
// map, and the kernels that move token rows through it.
//
// The index (every launch rebuilds it in the caller's workspace, two or three small kernels; a tile
// is 128 tokens, a block of 4 warps with a lane per token):
//   1. count:  per tile and per group of 128 experts each warp loads its 32 rows' flags (16-byte
//      loads where rows allow) and turns them by 32 ballots per 32 experts into column masks; the
//      tile's column counts go to tile_count[e][tile] (expert-major), each token's first slot
//      within its tile to tok_off, the tile's true entries to tile_rows.
//   2. scan:   only where place does not sum the counts itself (more than 128 tiles, or more than
//      kIndexPlaceSumsCounts tile counts): one block scans tile_count flattened (e-major,
//      tile-minor) and tile_rows, each exclusive: tile_count[e][b] becomes off[e] + (column e's
//      count in tiles before b), and tile_rows[b] the first slot of tile b; tok_off[T] gets the total.
//   3. place:  per tile again: the column masks from ballots, the warps' column counts scanned over
//      the tile's warps in shared memory from the column's base in the tile (the scan's
//      tile_count[e][b], or, without the scan, summed by the block from the count kernel's
//      tile_count row e and scanned over the experts; the tile's first slot likewise from
//      tile_rows); each lane then walks only its own true flags: position = (its warp's base of
//      column e) + (flags of lower lanes in the column mask), slot j of t its j-th flag in
//      ascending e. Writes tok_off and slots; pos_token and pos_expert where the consumer takes a
//      position's token; for a weighted sum, slot_weight[s] = probs[t, e] of slot s.
// A map of one tile and at most 2048 experts (T <= 128: the small cases of a campaign) takes all
// three steps in one block, one launch (IndexOneTile). All integer sums, so the index is
// exact and deterministic. Each kernel after count, and the payload kernel after place, is a
// programmatic dependent launch: scheduled while its predecessor drains, it waits
// (griddepcontrol.wait) before it reads what the predecessor wrote, so that no
// launch gap separates the kernels. At T = 16384, E = 160 the map is
// 2.6 MB, the payload of a permute of H = 4096 bf16 rows with k = 8 some 1.2 GB.
//
// Every kernel is a body (gpu/common/launch.cuh, launch_body below): alone as above, or, while
// run_batch collects a staged batch of small cases (permute's and unpermute's records), one batched
// launch a kernel for up to 32 cases, the batched launches one after another (no programmatic
// dependence between them). A case that takes probs_backward's kernel of a block a row, which has
// no batched twin, makes all its launches directly (LaunchDirectly).
//
// The payload kernels (16-byte packets where the row allows; grid-stride loops but for copy_rows'
// block per token):
//   copy_rows:      one item per (token, packet): the token's packet is read once and written to
//                   each of its slots, as its bits (permute forward) or as dt(+0 + f32(x)) (unpermute
//                   backward without probs: the embedding backward's sum into zeros); a block per
//                   token where a row has at least 256 vectors (4 KB in packets).
//   gather_sum:     one item per (token, packet): the slots' values added in four accumulators
//                   a_{j mod 4}, j ascending (rule 7, middle dim); at the default ILP a token of at
//                   most 8 slots has all its loads in flight at once and is summed element by
//                   element from them, a token of more slots 4 slots at a time;
//                   with probs each value first times its slot's weight, read beside the slot's
//                   position (permute backward, unpermute forward of the aligned contracts, H > 1).
//   slot_row_sum:   the same sums at H == 1, where torch reduces the slots as the last dim of
//                   [T, k] (rule 7, last dim, rows T): one thread per token.
//   atomic_scatter: the order-of-arrival baselines (index_add_ / scatter_add_): one thread per
//                   (position, element pair) adding into its token's row with atomics.
//   probs_backward: one row team per position (rule 7, last dim: the lane plan of
//                   gpu/common/row_sum), for unpermute's backward with probs, the teams in token
//                   order (a token's k teams share its d_out row in cache); at H == 1 one thread
//                   per position and no sum.
#include "gpu/routing_kernels.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gpu/common/dtype_io.cuh"
#include "gpu/common/launch.cuh"
#include "gpu/common/row_sum.cuh"
#include "gpu/runtime.h"

namespace bitparity::gpu {
namespace {

using namespace device;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kScanThreads = 1024;          // the index's scan kernel (one block)
constexpr int kScanPerThread = 16;          // consecutive counts a scan thread takes per pass
constexpr int kTileWarps = 4;               // warps of a count / place block
constexpr int kTileTokens = kTileWarps * kWarpLanes;  // tokens of a tile, a lane each
constexpr int kGroupWords = 4;              // 32-expert words of flags a lane holds at once
constexpr int kGroupExperts = kGroupWords * kWarpLanes;
constexpr int kPlaceBatch = 4;  // flags a place thread takes at a time
constexpr int kTokenBlockVectors = kCopyRowsTokenBlockVectors;  // routing_kernels.h
constexpr int kOneKernelCounts = kIndexOneKernelExperts;  // routing_kernels.h
static_assert(kOneKernelCounts == kTileTokens * kScanPerThread, "one pass of the one-tile kernel's scan");

// --- programmatic dependent launch -------------------------------------------------------------
//
// The index's kernels and the payload run back to back on one stream. Each kernel after the first is
// launched with programmatic stream serialization: it is scheduled while its predecessor drains and
// waits (griddepcontrol.wait) for the predecessor's completion and memory before it reads anything
// the predecessor wrote. A kernel launched without the attribute passes the wait at once.

// Waits until the preceding kernel of the stream has completed and its writes are visible.
__device__ __forceinline__ void wait_for_predecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel of the stream be scheduled now (it still waits for this one's completion).
__device__ __forceinline__ void release_successor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Launches kernel<<<grid, block, shared, stream>>>(args...), as a programmatic dependent of the
// stream's preceding kernel where `dependent` (the preceding work must be a kernel of this file
// that releases it, or completes).
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), unsigned grid, unsigned block, size_t shared, void* stream, bool dependent,
            const char* what, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = shared;
  config.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute attribute[1] = {};
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = dependent ? 1 : 0;
  check_cuda(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), what);
  check_launch(what, stream);
}

// Launches Body (gpu/common/launch.cuh) on `grid` blocks as launch does, or, while the calling
// thread collects launches (run_batch), collects it, to run in one batched launch with the other
// cases' launches of Body (not as a programmatic dependent: the batched launches of a batch run one
// after another). A launcher whose case makes any other launch runs the case under LaunchDirectly.
template <class Body>
void launch_body(const typename Body::Args& args, unsigned grid, void* stream, bool dependent, const char* what) {
  if (collect_body<Body>(args, grid, stream, what)) return;
  launch(body_kernel<Body>, grid, Body::kBlock, 0, stream, dependent, what, args);
}

// --- workspace ------------------------------------------------------------------------------

int64_t micro_chunks(int64_t T) { return (T + kWarpLanes - 1) / kWarpLanes; }
int64_t tiles_of(int64_t T) { return (T + kTileTokens - 1) / kTileTokens; }

// Byte offsets of the workspace's regions (int32 arrays, then the optional fp32 rows).
struct Layout {
  size_t tile_count = 0;   // [E, tiles]: column counts of each tile (then, where the scan kernel runs, their
                           // flat exclusive scan)
  size_t tile_rows = 0;    // [tiles]: a tile's true entries (then, where the scan kernel runs, their exclusive scan)
  size_t tok_off = 0;      // [T + 1]: the first slot of each token (CSR)
  size_t slots = 0;        // [N]: the positions of token t's slots at tok_off[t] ..
  size_t pos_token = 0;    // [N]: the token of each position
  size_t pos_expert = 0;   // [N]: the expert of each position
  size_t slot_weight = 0;  // [N] fp32: probs[t, e] of slot s of t (only where the launch has probs)
  size_t rows32 = 0;       // [T, H] fp32 (only where asked)
  size_t total = 0;
};

Layout layout_of(const RoutingShape& s, bool fp32_rows) {
  if (s.T < 0 || s.E < 0 || s.N < 0 || s.H < 0) throw std::invalid_argument("routing: negative dimension");
  if (s.T >= INT_MAX || s.N >= INT_MAX || s.E >= INT_MAX || micro_chunks(s.T) * s.E >= INT_MAX)
    throw std::invalid_argument("routing: T = " + std::to_string(s.T) + ", E = " + std::to_string(s.E) +
                                ", N = " + std::to_string(s.N) + " exceed the index's 32-bit counts");
  Layout l;
  size_t at = 0;
  auto take = [&at](int64_t elements, size_t element_bytes) {
    const size_t offset = at;
    at += aligned_bytes(static_cast<size_t>(elements) * element_bytes);
    return offset;
  };
  const int64_t tiles = tiles_of(s.T);
  l.tile_count = take(tiles * s.E, sizeof(int));
  l.tile_rows = take(tiles, sizeof(int));
  l.tok_off = take(s.T + 1, sizeof(int));
  l.slots = take(s.N, sizeof(int));
  l.pos_token = take(s.N, sizeof(int));
  l.pos_expert = take(s.N, sizeof(int));
  l.slot_weight = take(s.N, sizeof(float));
  if (fp32_rows) l.rows32 = take(s.T * s.H, sizeof(float));
  l.total = at;
  return l;
}

// The index's arrays in a workspace.
struct Index {
  int* tile_count;
  int* tile_rows;
  int* tok_off;
  int* slots;
  int* pos_token;
  int* pos_expert;
  float* slot_weight;
  float* rows32;
};

Index index_in(void* workspace, const Layout& l) {
  char* base = static_cast<char*>(workspace);
  auto at = [base](size_t offset) { return reinterpret_cast<int*>(base + offset); };
  return {at(l.tile_count),
          at(l.tile_rows),
          at(l.tok_off),
          at(l.slots),
          at(l.pos_token),
          at(l.pos_expert),
          reinterpret_cast<float*>(base + l.slot_weight),
          reinterpret_cast<float*>(base + l.rows32)};
}

// The four accumulators of rule 7's sums combined left to right: ((a0 + a1) + a2) + a3.
__device__ __forceinline__ float sum_of_four(float a0, float a1, float a2, float a3) {
  return __fadd_rn(__fadd_rn(__fadd_rn(a0, a1), a2), a3);
}

// --- the routing index ------------------------------------------------------------------------

__device__ __forceinline__ int warp_inclusive_scan(int v) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
#pragma unroll
  for (int d = 1; d < kWarpLanes; d *= 2) {
    const int other = __shfl_up_sync(kFullMask, v, d);
    if (lane >= d) v += other;
  }
  return v;
}

// How a lane reads 32 flags of its row: 16-byte vectors where rows are 16-byte aligned (E % 16 == 0),
// 4-byte words where E % 4 == 0, else bytes.
enum FlagLoad : int { kFlagBytes = 1, kFlagWords = 4, kFlagVectors = 16 };

int flag_load_of(const void* map, int64_t E) {
  const auto address = reinterpret_cast<uintptr_t>(map);
  if (E % 16 == 0 && address % 16 == 0) return kFlagVectors;
  if (E % 4 == 0 && address % 4 == 0) return kFlagWords;
  return kFlagBytes;
}

__device__ __forceinline__ uint32_t nonzero_bytes(uint32_t w) {  // bit i: byte i of w is nonzero
  uint32_t bits = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) bits |= ((w >> (8 * i)) & 0xffu) != 0 ? 1u << i : 0u;
  return bits;
}

// Bit b: row[e0 + b] != 0, for b < width (e0 a multiple of 32); 0 for an invalid lane. All loads
// issued before any is used, so that a chunk of columns costs one memory latency.
__device__ __forceinline__ uint32_t row_flags(const uint8_t* row, int e0, int width, bool valid, int load) {
  uint32_t flags = 0;
  if (!valid) return flags;
  const uint8_t* p = row + e0;
  if (load == kFlagVectors) {
    uint4 v[2] = {};
    v[0] = *reinterpret_cast<const uint4*>(p);
    if (width > 16) v[1] = *reinterpret_cast<const uint4*>(p + 16);
#pragma unroll
    for (int h = 0; h < 2; ++h)
      flags |= (nonzero_bytes(v[h].x) | nonzero_bytes(v[h].y) << 4 | nonzero_bytes(v[h].z) << 8 |
                nonzero_bytes(v[h].w) << 12)
               << (16 * h);
  } else if (load == kFlagWords) {
    uint32_t w[8];
#pragma unroll
    for (int q = 0; q < 8; ++q) w[q] = 4 * q < width ? *reinterpret_cast<const uint32_t*>(p + 4 * q) : 0u;
#pragma unroll
    for (int q = 0; q < 8; ++q) flags |= nonzero_bytes(w[q]) << (4 * q);
  } else {
    uint8_t b[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) b[i] = i < width ? p[i] : 0;
#pragma unroll
    for (int i = 0; i < 32; ++i) flags |= b[i] != 0 ? 1u << i : 0u;
  }
  return flags;
}

// A warp's flags of one group of experts [g0, g0 + kGroupExperts): bit b of flags[w] is
// row[g0 + 32 w + b] != 0 (0 past E and for an invalid lane), and lane b's column[w] has bit l set
// where lane l's flag for expert g0 + 32 w + b is (32 ballots a word). All the group's loads are
// issued before any is used.
__device__ __forceinline__ void group_flags(const uint8_t* row, int g0, int E, bool valid, int load,
                                            uint32_t (&flags)[kGroupWords], uint32_t (&column)[kGroupWords]) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
#pragma unroll
  for (int w = 0; w < kGroupWords; ++w) {
    const int e0 = g0 + w * kWarpLanes;
    flags[w] = e0 < E ? row_flags(row, e0, min(kWarpLanes, E - e0), valid, load) : 0u;
  }
#pragma unroll
  for (int w = 0; w < kGroupWords; ++w) {
    column[w] = 0u;
    if (g0 + w * kWarpLanes >= E) continue;  // the whole warp
#pragma unroll
    for (int b = 0; b < kWarpLanes; ++b) {
      const unsigned mask = __ballot_sync(kFullMask, (flags[w] >> b) & 1u);
      if (lane == b) column[w] = mask;
    }
  }
}

static_assert(kTileTokens == kGroupExperts, "a thread of a tile's block owns one column of a group");

// The exclusive scan of v over a tile's block (kTileTokens threads, in thread order); `total` gets
// the block's sum. Every thread of the block must call it.
__device__ __forceinline__ int tile_exclusive_scan(int v, int& total) {
  __shared__ int warp_sums[kTileWarps];
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
  const int inclusive = warp_inclusive_scan(v);
  if (lane == kWarpLanes - 1) warp_sums[warp] = inclusive;
  __syncthreads();
  int before = 0;
  total = 0;
#pragma unroll
  for (int w = 0; w < kTileWarps; ++w) {
    const int sum = warp_sums[w];
    if (w < warp) before += sum;
    total += sum;
  }
  __syncthreads();  // warp_sums is rewritten by the next call
  return before + inclusive - v;
}

// Tile `tile` (a block of kTileTokens threads): its column counts into tile_count[e][tile], each
// token's first slot within the tile into tok_off[t], the tile's true entries into tile_rows[tile].
__device__ __forceinline__ void count_tile(const uint8_t* map, int T, int E, int tiles, int tile, int load, Index ix) {
  __shared__ int warp_count[kTileWarps][kGroupExperts];
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
  const int t = tile * kTileTokens + static_cast<int>(threadIdx.x);
  const bool valid = t < T;
  const uint8_t* row = map + static_cast<int64_t>(valid ? t : 0) * E;
  int row_count = 0;
  for (int g0 = 0; g0 < E; g0 += kGroupExperts) {
    uint32_t flags[kGroupWords], column[kGroupWords];
    group_flags(row, g0, E, valid, load, flags, column);
#pragma unroll
    for (int w = 0; w < kGroupWords; ++w) {
      row_count += __popc(flags[w]);
      warp_count[warp][w * kWarpLanes + lane] = __popc(column[w]);
    }
    __syncthreads();
    const int i = static_cast<int>(threadIdx.x);  // this thread's column of the group
    if (g0 + i < E) {
      int sum = 0;
#pragma unroll
      for (int v = 0; v < kTileWarps; ++v) sum += warp_count[v][i];
      ix.tile_count[static_cast<int64_t>(g0 + i) * tiles + tile] = sum;
    }
    __syncthreads();  // warp_count is rewritten by the next group
  }
  int total = 0;
  const int before = tile_exclusive_scan(row_count, total);
  if (valid) ix.tok_off[t] = before;
  if (threadIdx.x == 0) ix.tile_rows[tile] = total;
}

// The index kernels' arguments (each reads the ones it needs).
struct IndexArgs {
  const uint8_t* map;
  const float* probs;  // [T, E] or nullptr: slot_weight is written where given
  int T, E, tiles, N, load;
  bool positions;  // pos_token and pos_expert are written
  Index ix;
};

struct IndexCount {
  using Args = IndexArgs;
  static constexpr int kBlock = kTileTokens, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    release_successor();
    count_tile(a.map, a.T, a.E, a.tiles, static_cast<int>(at.block), a.load, a.ix);
  }
};

// Exclusive scan of data[0, n) in place by one block of kBlockThreads, each thread taking
// kScanPerThread consecutive elements a pass (16-byte accesses where they are whole and aligned); returns
// the total.
template <int kBlockThreads>
__device__ int block_exclusive_scan(int* data, int64_t n) {
  constexpr int kWarps = kBlockThreads / kWarpLanes;
  __shared__ int sums[kWarpLanes];
  static_assert(kBlockThreads % kWarpLanes == 0 && kWarps <= kWarpLanes && kScanPerThread % 4 == 0, "scan shape");
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
  constexpr int64_t kPass = static_cast<int64_t>(kBlockThreads) * kScanPerThread;
  int carry = 0;
  for (int64_t pass = 0; pass < n; pass += kPass) {
    const int64_t i0 = pass + static_cast<int64_t>(threadIdx.x) * kScanPerThread;
    const bool whole = i0 + kScanPerThread <= n && reinterpret_cast<uintptr_t>(data) % 16 == 0;
    int v[kScanPerThread];
    if (whole) {
#pragma unroll
      for (int q = 0; q < kScanPerThread / 4; ++q) {
        const int4 x = reinterpret_cast<const int4*>(data + i0)[q];
        v[4 * q] = x.x;
        v[4 * q + 1] = x.y;
        v[4 * q + 2] = x.z;
        v[4 * q + 3] = x.w;
      }
    } else {
#pragma unroll
      for (int q = 0; q < kScanPerThread; ++q) v[q] = i0 + q < n ? data[i0 + q] : 0;
    }
    int local = 0;
#pragma unroll
    for (int q = 0; q < kScanPerThread; ++q) local += v[q];
    const int inclusive = warp_inclusive_scan(local);
    if (lane == kWarpLanes - 1) sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) sums[lane] = warp_inclusive_scan(lane < kWarps ? sums[lane] : 0);
    __syncthreads();
    int run = carry + (warp > 0 ? sums[warp - 1] : 0) + inclusive - local;
#pragma unroll
    for (int q = 0; q < kScanPerThread; ++q) {
      const int x = v[q];
      v[q] = run;
      run += x;
    }
    if (whole) {
#pragma unroll
      for (int q = 0; q < kScanPerThread / 4; ++q)
        reinterpret_cast<int4*>(data + i0)[q] = make_int4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    } else {
#pragma unroll
      for (int q = 0; q < kScanPerThread; ++q)
        if (i0 + q < n) data[i0 + q] = v[q];
    }
    carry += sums[kWarps - 1];
    __syncthreads();  // sums is rewritten by the next pass
  }
  return carry;
}

// tile_count flattened expert-major is scanned exclusively, so that tile_count[e][b] becomes
// off[e] + #{t in tiles before b : M[t, e]}; tile_rows[b] becomes the first slot of tile b, and
// tok_off[T] the number of true entries.
struct IndexScan {
  using Args = IndexArgs;
  static constexpr int kBlock = kScanThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos) {
    release_successor();
    wait_for_predecessor();
    block_exclusive_scan<kScanThreads>(a.ix.tile_count, static_cast<int64_t>(a.E) * a.tiles);
    const int total = block_exclusive_scan<kScanThreads>(a.ix.tile_rows, a.tiles);
    if (threadIdx.x == 0) a.ix.tok_off[a.T] = total;
  }
};

// Column e's true entries in the tiles before `tile` (prefix) and in every tile (total): the sums
// of the count kernel's row tile_count[e][0, tiles), in 16-byte loads where the row is 16-byte
// aligned (tiles % 4 == 0 in a 16-byte aligned workspace: launch_workspace's are).
__device__ __forceinline__ void column_sums(const int* column, int tiles, int tile, int& prefix, int& total) {
  prefix = 0;
  total = 0;
  if (tiles % 4 == 0 && reinterpret_cast<uintptr_t>(column) % 16 == 0) {
    const int4* v = reinterpret_cast<const int4*>(column);
#pragma unroll 8
    for (int q = 0; q < tiles / 4; ++q) {
      const int4 x = v[q];
      const int b = 4 * q;
      total += x.x + x.y + x.z + x.w;
      prefix += (b < tile ? x.x : 0) + (b + 1 < tile ? x.y : 0) + (b + 2 < tile ? x.z : 0) + (b + 3 < tile ? x.w : 0);
    }
  } else {
#pragma unroll 8
    for (int b = 0; b < tiles; ++b) {
      const int x = column[b];
      total += x;
      prefix += b < tile ? x : 0;
    }
  }
}

// Positions: token t's flag for expert e goes to (the base of column e in its tile) + (the column's
// count in earlier warps of the tile) + (flags of lower lanes in its warp's column mask); slot j of
// t is its j-th flag in ascending e. The column's base in tile b is off[e] + (column e's count in
// tiles before b): the scan kernel's tile_count[e][b], or (kSums) summed here from the count
// kernel's tile_count and tile_rows, so that no scan kernel runs (every block reads the whole
// tile_count: tiles <= kTileTokens). Writes slots and, where `positions`, pos_token and pos_expert
// (the kernels that take a position's token: the atomic baselines, unpermute's probs backward).
// With probs, slot_weight[s] = probs[t, e] of slot s (so that a weighted sum reads a slot's weight
// beside its position, not through it). Writes are guarded by N, so that a map with more true
// entries than the caller's N cannot write past the arrays.
template <bool kSums>
__device__ __forceinline__ void place_tile(const uint8_t* map, const float* probs, int T, int E, int tiles, int tile,
                                           int N, int load, bool positions, Index ix) {
  __shared__ int base[kTileWarps][kGroupExperts];
  __shared__ uint32_t masks[kTileWarps][kGroupExperts];
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
  const int i = static_cast<int>(threadIdx.x);  // this thread's column of a group
  const int t = tile * kTileTokens + i;
  const bool valid = t < T;
  const uint8_t* row = map + static_cast<int64_t>(valid ? t : 0) * E;
  int tile_first = 0;  // the tile's first slot
  if constexpr (kSums) {
    tile_exclusive_scan(i < tile ? ix.tile_rows[i] : 0, tile_first);
    if (tile == tiles - 1 && i == 0) ix.tok_off[T] = tile_first + ix.tile_rows[tile];  // the true entries
  } else {
    tile_first = ix.tile_rows[tile];
  }
  const int first_slot = valid ? tile_first + ix.tok_off[t] : 0;
  if (valid) ix.tok_off[t] = first_slot;
  const unsigned lower_lanes = (1u << lane) - 1u;
  int j = 0;
  int experts_before = 0;  // kSums: the true entries of the groups before g0
  for (int g0 = 0; g0 < E; g0 += kGroupExperts) {
    const bool owned = g0 + i < E;
    int column_base = 0;
    if constexpr (kSums) {
      int prefix = 0, total = 0;
      if (owned) column_sums(ix.tile_count + static_cast<int64_t>(g0 + i) * tiles, tiles, tile, prefix, total);
      int group_total = 0;
      column_base = experts_before + tile_exclusive_scan(total, group_total) + prefix;
      experts_before += group_total;
    } else {
      column_base = owned ? ix.tile_count[static_cast<int64_t>(g0 + i) * tiles + tile] : 0;
    }
    uint32_t flags[kGroupWords], column[kGroupWords];
    group_flags(row, g0, E, valid, load, flags, column);
#pragma unroll
    for (int w = 0; w < kGroupWords; ++w) {
      base[warp][w * kWarpLanes + lane] = __popc(column[w]);
      masks[warp][w * kWarpLanes + lane] = column[w];
    }
    __syncthreads();
    if (owned) {
      int run = column_base;
#pragma unroll
      for (int v = 0; v < kTileWarps; ++v) {
        const int count = base[v][i];
        base[v][i] = run;
        run += count;
      }
    }
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kGroupWords; ++w) {
      uint32_t f = flags[w];
      while (f != 0u) {  // the flags kPlaceBatch at a time, their weights' loads issued together
        int c[kPlaceBatch];  // the flags' columns in the group, -1 past the last
        float weight[kPlaceBatch];
#pragma unroll
        for (int q = 0; q < kPlaceBatch; ++q) {
          c[q] = f != 0u ? w * kWarpLanes + __ffs(f) - 1 : -1;
          f &= f - 1u;
          weight[q] = probs && c[q] >= 0 ? probs[static_cast<int64_t>(t) * E + g0 + c[q]] : 0.0f;
        }
#pragma unroll
        for (int q = 0; q < kPlaceBatch; ++q) {
          if (c[q] < 0) continue;
          const int pos = base[warp][c[q]] + __popc(masks[warp][c[q]] & lower_lanes);
          const int s = first_slot + j++;
          if (pos < N && s < N) {
            ix.slots[s] = pos;
            if (positions) {
              ix.pos_token[pos] = t;
              ix.pos_expert[pos] = g0 + c[q];
            }
            if (probs) ix.slot_weight[s] = weight[q];
          }
        }
      }
    }
    __syncthreads();  // base and masks are rewritten by the next group
  }
}

// At least 8 blocks an SM, that is at most 64 registers: left to itself, ptxas has held the kSums
// kernel to 32 and spilled, or not, by the code around it.
template <bool kSums>
struct IndexPlace {
  using Args = IndexArgs;
  static constexpr int kBlock = kTileTokens, kMinBlocks = 8;
  static __device__ void run(const Args& a, GridPos at) {
    release_successor();
    wait_for_predecessor();
    place_tile<kSums>(a.map, a.probs, a.T, a.E, a.tiles, static_cast<int>(at.block), a.N, a.load, a.positions, a.ix);
  }
};

// The whole index of a map of one tile (T <= kTileTokens, E <= kOneKernelCounts: one pass of the
// scan) in one block: count, the scan of its E column counts, place. The same index as the other
// paths', in one launch where a small case would pay two.
struct IndexOneTile {
  using Args = IndexArgs;
  static constexpr int kBlock = kTileTokens, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos) {
    release_successor();
    count_tile(a.map, a.T, a.E, 1, 0, a.load, a.ix);
    __syncthreads();  // tile_count, tok_off and tile_rows are read by other threads below
    block_exclusive_scan<kTileTokens>(a.ix.tile_count, a.E);
    if (threadIdx.x == 0) {
      a.ix.tok_off[a.T] = a.ix.tile_rows[0];  // the true entries
      a.ix.tile_rows[0] = 0;                  // the tile's first slot
    }
    __syncthreads();
    place_tile<false>(a.map, a.probs, a.T, a.E, 1, 0, a.N, a.load, a.positions, a.ix);
  }
};

// Whether place sums the count kernel's tile counts itself (no scan kernel): every block reads all
// tiles x E of them, so at most kTileTokens tiles (a thread each) and kIndexPlaceSumsCounts counts.
bool place_sums(int64_t tiles, int64_t E) { return tiles <= kTileTokens && tiles * E <= kIndexPlaceSumsCounts; }

// Builds the index of `map` in the workspace on `stream`: all of it in one kernel where the map is
// one tile of at most kOneKernelCounts experts; else count and place, with the scan between them
// where place does not sum the counts itself (place_sums); each kernel a programmatic dependent of
// the one before (scheduled while it drains), and the kernel that consumes the index launched as a
// dependent of the last. `positions`: place also writes pos_token and pos_expert. With `probs`
// ([T, E] fp32) place also writes slot_weight.
Index build_index(const RoutingCommon& r, const Layout& l, bool positions, const float* probs = nullptr) {
  const RoutingShape& s = r.shape;
  const Index ix = index_in(r.workspace, l);
  if (s.T == 0) return ix;  // the launchers return before: nothing is routed
  const auto map = static_cast<const uint8_t*>(r.routing_map);
  const int T = static_cast<int>(s.T), E = static_cast<int>(s.E), N = static_cast<int>(s.N);
  const int tiles = static_cast<int>(tiles_of(s.T));
  const IndexArgs a{map, probs, T, E, tiles, N, flag_load_of(map, s.E), positions, ix};
  if (tiles == 1 && E <= kOneKernelCounts) {
    launch_body<IndexOneTile>(a, 1, r.stream, false, "routing index");
    return ix;
  }
  const auto grid = static_cast<unsigned>(tiles);
  launch_body<IndexCount>(a, grid, r.stream, false, "routing index count");
  if (place_sums(tiles, E)) {
    launch_body<IndexPlace<true>>(a, grid, r.stream, true, "routing index place");
    return ix;
  }
  launch_body<IndexScan>(a, 1, r.stream, true, "routing index scan");
  launch_body<IndexPlace<false>>(a, grid, r.stream, true, "routing index place");
  return ix;
}

void require_workspace(const RoutingCommon& r, bool fp32_rows, const char* who) {
  if (!r.workspace && layout_of(r.shape, fp32_rows).total > 0)
    throw std::invalid_argument(std::string(who) + ": no workspace (routing_workspace_bytes)");
}

// --- copy_rows: a token's row to each of its slots ------------------------------------------------

// A payload kernel's arguments: its launcher's, and the items of a token row (a Divider).
template <class P>
struct RowsArgs {
  P p;
  Divider per_row;
};

struct CopyRows {
  int64_t rows = 0;  // tokens of this chunk
  const void* src = nullptr;  // [rows, per_row] vectors, at the chunk's first token
  void* dst = nullptr;        // [N, per_row] vectors
  const int* tok_off = nullptr;  // at the chunk's first token
  const int* slots = nullptr;
  void* stream = nullptr;
};

// How copy_rows moves a vector of elements. RawBits: the bits (permute forward, a copy).
struct RawBits {
  static constexpr int kElementBytes = 2;  // the narrowest vector it moves
  template <class Vec>
  __device__ __forceinline__ static Vec apply(Vec v) {
    return v;
  }
};

// PlusZero: dt(+0 + f32(x)) each element, in fp32 with one rounding to the dtype (unpermute's
// backward without probs: F.embedding's backward adds d_out into zeros, so that a -0 becomes +0
// and a NaN the canonical NaN of the fp32 unit, then rounded to the dtype).
template <class Act>
struct PlusZero {
  using S = typename Act::Storage;
  static constexpr int kElementBytes = static_cast<int>(sizeof(S));
  template <class Vec>
  __device__ __forceinline__ static Vec apply(Vec v) {
    constexpr int kN = static_cast<int>(sizeof(Vec) / sizeof(S));
    union {
      Vec raw;
      S e[kN];
    } c;
    c.raw = v;
#pragma unroll
    for (int i = 0; i < kN; ++i) c.e[i] = Act::store(__fadd_rn(0.0f, Act::load(c.e[i])));
    return c.raw;
  }
};

template <class Vec, class Move, int kIlp>
struct CopyRowsBody {
  using Args = RowsArgs<CopyRows>;
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const CopyRows& p = a.p;
    const Divider per_row = a.per_row;
    wait_for_predecessor();
    const Vec* src = static_cast<const Vec*>(p.src);
    Vec* dst = static_cast<Vec*>(p.dst);
    const uint32_t total = static_cast<uint32_t>(p.rows) * per_row.d;
    const uint32_t stride = at.blocks * blockDim.x;
    for (uint32_t k0 = at.block * blockDim.x + threadIdx.x; k0 < total; k0 += stride * kIlp) {
      Vec x[kIlp];
      uint32_t col[kIlp];
      int begin[kIlp], end[kIlp];
#pragma unroll
      for (int u = 0; u < kIlp; ++u) {
        const uint32_t k = k0 + u * stride;
        x[u] = Vec{};
        col[u] = 0;
        begin[u] = end[u] = 0;
        if (k >= total) continue;
        const uint32_t r = per_row.div(k);
        col[u] = k - r * per_row.d;
        begin[u] = p.tok_off[r];
        end[u] = p.tok_off[r + 1];
        if (begin[u] < end[u]) x[u] = src[static_cast<int64_t>(r) * per_row.d + col[u]];
      }
#pragma unroll
      for (int u = 0; u < kIlp; ++u) {
        const Vec y = Move::apply(x[u]);  // once a token packet, written to each of its slots
        for (int s = begin[u]; s < end[u]; ++s) dst[static_cast<int64_t>(p.slots[s]) * per_row.d + col[u]] = y;
      }
    }
  }
};

// Rows of at least kTokenBlockVectors vectors (permute's 8 KB bf16 rows: 512): a block per token,
// its threads over the row's vectors, kIlp of them a thread in flight; the token's offsets and slots
// are the same address for every thread of the block (one broadcast load a warp), where the
// thread-per-vector kernel reads them for each vector's own token.
//
// The row's first vectors are loaded before the wait for the index: the row is the op's input, not
// the index's, and it was written before the index's first kernel started (that kernel is launched
// after every earlier kernel of the stream has completed, and this one only once that one runs), so
// the blocks that the index's last kernel lets in early fetch their rows while it drains. A token
// without slots (a padding row) reads its first vectors for nothing.
template <class Vec, class Move, int kIlp>
struct CopyRowsTokenBody {
  struct Args {
    CopyRows p;
    int per_row;
  };
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const CopyRows& p = a.p;
    const int per_row = a.per_row;
    const int64_t r = at.block;
    const Vec* row = static_cast<const Vec*>(p.src) + r * per_row;
    Vec x[kIlp];
    const auto load = [&](int c0) {
#pragma unroll
      for (int u = 0; u < kIlp; ++u) {
        const int c = c0 + u * kThreads;
        x[u] = c < per_row ? row[c] : Vec{};
      }
    };
    load(static_cast<int>(threadIdx.x));
    wait_for_predecessor();
    const int begin = p.tok_off[r], end = p.tok_off[r + 1];
    if (begin >= end) return;
    Vec* dst = static_cast<Vec*>(p.dst);
    for (int c0 = static_cast<int>(threadIdx.x); c0 < per_row; c0 += kThreads * kIlp) {
      if (c0 != static_cast<int>(threadIdx.x)) load(c0);
#pragma unroll
      for (int u = 0; u < kIlp; ++u) x[u] = Move::apply(x[u]);  // once a token vector, written to each of its slots
      for (int s = begin; s < end; ++s) {
        Vec* out = dst + static_cast<int64_t>(p.slots[s]) * per_row;
#pragma unroll
        for (int u = 0; u < kIlp; ++u)
          if (c0 + u * kThreads < per_row) out[c0 + u * kThreads] = x[u];
      }
    }
  }
};

template <class Vec, class Move, int kIlp>
void launch_copy_rows(const CopyRows& args, int64_t per_row) {
  for_each_row_chunk(args.rows, per_row, [&](int64_t first, int64_t rows) {
    CopyRows chunk = args;
    chunk.rows = rows;
    chunk.src = advanced(args.src, first * per_row * static_cast<int64_t>(sizeof(Vec)));
    chunk.tok_off = args.tok_off + first;
    if (per_row >= kTokenBlockVectors) {
      using Body = CopyRowsTokenBody<Vec, Move, kIlp>;
      launch_body<Body>({chunk, static_cast<int>(per_row)}, static_cast<unsigned>(rows), args.stream, true,
                        "routing copy_rows");
      return;
    }
    using Body = CopyRowsBody<Vec, Move, kIlp>;
    launch_body<Body>({chunk, Divider(static_cast<uint32_t>(per_row))}, resident_grid<body_kernel<Body>>(rows * per_row),
                      args.stream, true, "routing copy_rows");
  });
}

template <class Vec, class Move>
void copy_rows_at_ilp(const CopyRows& args, int64_t per_row, int ilp) {
  switch (ilp == kIlpDefault ? 2 : ilp) {
    case 1: return launch_copy_rows<Vec, Move, 1>(args, per_row);
    case 2: return launch_copy_rows<Vec, Move, 2>(args, per_row);
    case 4: return launch_copy_rows<Vec, Move, 4>(args, per_row);
    default: throw std::invalid_argument("routing: ilp must be 1, 2 or 4; got " + std::to_string(ilp));
  }
}

// 16-byte vectors where the row's bytes allow, else 8, 4 or 2 (never narrower than an element).
template <class Move>
void copy_rows_by_width(const CopyRows& c, int64_t row_bytes, int ilp) {
  if (row_bytes % 16 == 0) return copy_rows_at_ilp<uint4, Move>(c, row_bytes / 16, ilp);
  if (row_bytes % 8 == 0) return copy_rows_at_ilp<uint2, Move>(c, row_bytes / 8, ilp);
  if (row_bytes % 4 == 0) return copy_rows_at_ilp<uint32_t, Move>(c, row_bytes / 4, ilp);
  if constexpr (Move::kElementBytes <= 2) return copy_rows_at_ilp<uint16_t, Move>(c, row_bytes / 2, ilp);
  throw std::invalid_argument("routing copy_rows: rows of " + std::to_string(row_bytes) + " bytes");
}

enum class CopyMode { kBits, kPlusZero };

// Row t of `src` ([T, H] of the shape's dtype) to row slots[s] of `dst` for each of its slots s:
// the bits, or (kPlusZero) each element as dt(+0 + f32(x)).
void copy_token_rows(const RoutingCommon& r, const Index& ix, const void* src, void* dst, CopyMode mode) {
  const RoutingShape& s = r.shape;
  const int64_t row_bytes = s.H * dtype_size(s.dtype);
  if (s.T == 0 || row_bytes == 0 || s.N == 0) return;
  CopyRows c;
  c.rows = s.T;
  c.src = src;
  c.dst = dst;
  c.tok_off = ix.tok_off;
  c.slots = ix.slots;
  c.stream = r.stream;
  if (mode == CopyMode::kBits) return copy_rows_by_width<RawBits>(c, row_bytes, r.ilp);
  switch (s.dtype) {
    case DType::kBF16: return copy_rows_by_width<PlusZero<BF16>>(c, row_bytes, r.ilp);
    case DType::kFP16: return copy_rows_by_width<PlusZero<FP16>>(c, row_bytes, r.ilp);
    case DType::kFP32: return copy_rows_by_width<PlusZero<FP32>>(c, row_bytes, r.ilp);
    default: throw std::invalid_argument(std::string("routing: no kernel for rows of dtype ") + std::string(dtype_name(s.dtype)));
  }
}

// --- gather_sum: the four-accumulator sum over a token's slots -------------------------------------

struct GatherSum {
  int64_t rows = 0;  // tokens of this chunk
  int64_t H = 0, E = 0;
  const void* src = nullptr;          // [N, H]
  const float* slot_weight = nullptr;  // [N]: the weight of each slot (indexed as slots), or nullptr
  const int* tok_off = nullptr;        // at the chunk's first token
  const int* slots = nullptr;
  void* dst = nullptr;  // [rows, H] at the chunk's first token
  void* stream = nullptr;
};

// kN elements an item (a 16-byte packet or half of one, or 1 where H is not a multiple of it). Slot
// j goes to accumulator j mod 4 (each from +0, slots in ascending j), and the item's value is
// ((a0 + a1) + a2) + a3. A token of at most kBatch slots (8 at the default ILP: every token of a
// routing with k <= 8) has all its slots' loads in flight at once and is summed element by element
// from them, so that no accumulators for the whole item are held beside the loaded packets; a token
// of more slots takes them 4 at a time, kSub elements of the item a pass. Both paths add the same
// values in the same order: the registers they need, not the bits, differ (the kernel's register
// count sets how many threads an SM keeps, and so the loads in flight).
template <class Act, int kN, int kBatch>
struct GatherSumBody {
  using Args = RowsArgs<GatherSum>;
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const GatherSum& p = a.p;
    const Divider per_row = a.per_row;
    wait_for_predecessor();
    using S = typename Act::Storage;
    constexpr int kWide = 4;                    // slots a step of the path for more than kBatch slots
    constexpr int kSub = kN >= 4 ? kN / 4 : 1;  // elements a pass of that path
    const S* src = static_cast<const S*>(p.src);
    S* dst = static_cast<S*>(p.dst);
    const int64_t H = p.H;
    const uint32_t total = static_cast<uint32_t>(p.rows) * per_row.d;
    const uint32_t stride = at.blocks * blockDim.x;
    for (uint32_t k = at.block * blockDim.x + threadIdx.x; k < total; k += stride) {
      const uint32_t r = per_row.div(k);
      const int64_t c = static_cast<int64_t>(k - r * per_row.d) * kN;
      const int begin = p.tok_off[r], end = p.tok_off[r + 1];
      float out[kN];
      if (end - begin <= kBatch) {
        Chunk<Act, kN> v[kBatch];
        float weight[kBatch];
#pragma unroll
        for (int q = 0; q < kBatch; ++q) {
          weight[q] = 1.0f;
          if (begin + q >= end) continue;
          const int pos = p.slots[begin + q];
          v[q] = load_raw<Act, kN>(src + static_cast<int64_t>(pos) * H + c);
          if (p.slot_weight) weight[q] = p.slot_weight[begin + q];
        }
#pragma unroll
        for (int i = 0; i < kN; ++i) {
          float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int q = 0; q < kBatch; ++q) {
            if (begin + q >= end) continue;
            float x = Act::load(v[q].e[i]);
            if (p.slot_weight) x = __fmul_rn(x, weight[q]);
            a[q % 4] = __fadd_rn(a[q % 4], x);
          }
          out[i] = sum_of_four(a[0], a[1], a[2], a[3]);
        }
      } else {
        // kSub elements a pass (a quarter of a 16-byte item, else one element), so that its
        // accumulators and loads need fewer registers than the single-batch path above.
#pragma unroll
        for (int i0 = 0; i0 < kN; i0 += kSub) {
          float acc[4][kSub];
#pragma unroll
          for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int i = 0; i < kSub; ++i) acc[a][i] = 0.0f;
          for (int s0 = begin; s0 < end; s0 += kWide) {  // a step starts at a multiple of 4: slot q's accumulator is q
            Chunk<Act, kSub> v[kWide];
            float weight[kWide];
#pragma unroll
            for (int q = 0; q < kWide; ++q) {
              weight[q] = 1.0f;
              if (s0 + q >= end) continue;
              const int pos = p.slots[s0 + q];
              v[q] = load_raw<Act, kSub>(src + static_cast<int64_t>(pos) * H + c + i0);
              if (p.slot_weight) weight[q] = p.slot_weight[s0 + q];
            }
#pragma unroll
            for (int q = 0; q < kWide; ++q) {
              if (s0 + q >= end) continue;
#pragma unroll
              for (int i = 0; i < kSub; ++i) {
                float x = Act::load(v[q].e[i]);
                if (p.slot_weight) x = __fmul_rn(x, weight[q]);
                acc[q][i] = __fadd_rn(acc[q][i], x);
              }
            }
          }
#pragma unroll
          for (int i = 0; i < kSub; ++i)
            out[i0 + i] = sum_of_four(acc[0][i], acc[1][i], acc[2][i], acc[3][i]);
        }
      }
      store_chunk<Act, kN>(dst + static_cast<int64_t>(r) * H + c, out);
    }
  }
};

template <class Act, int kN, int kBatch>
void launch_gather_sum(const GatherSum& args) {
  const int64_t per_row = args.H / kN;
  for_each_row_chunk(args.rows, per_row, [&](int64_t first, int64_t rows) {
    GatherSum chunk = args;
    chunk.rows = rows;
    chunk.tok_off = args.tok_off + first;
    chunk.dst = advanced(args.dst, first * args.H * static_cast<int64_t>(sizeof(typename Act::Storage)));
    using Body = GatherSumBody<Act, kN, kBatch>;
    launch_body<Body>({chunk, Divider(static_cast<uint32_t>(per_row))}, resident_grid<body_kernel<Body>>(rows * per_row),
                      args.stream, true, "routing gather_sum");
  });
}

// Items of kItem elements where H is a multiple of it, else of 1.
template <class Act, int kItem, int kBatch>
void gather_sum_items(const GatherSum& args) {
  if (args.H % kItem == 0) return launch_gather_sum<Act, kItem, kBatch>(args);
  launch_gather_sum<Act, 1, kBatch>(args);
}

// The ILP variants (each the same sums in the same order; the GPU tests compare their bits), not
// ILPs by name: 2 (the default) 16-byte items with 8 slots' loads in flight; 1 the same with 4 (a
// token of 5 or more slots takes the path of more slots); 4 half-packet items (8 bytes) with 8.
template <class Act>
void gather_sum_at_ilp(const GatherSum& args, int ilp) {
  switch (ilp == kIlpDefault ? 2 : ilp) {
    case 1: return gather_sum_items<Act, kPacket<Act>, 4>(args);
    case 2: return gather_sum_items<Act, kPacket<Act>, 8>(args);
    case 4: return gather_sum_items<Act, kPacket<Act> / 2, 8>(args);
    default: throw std::invalid_argument("routing: ilp must be 1, 2 or 4; got " + std::to_string(ilp));
  }
}

// --- slot_row_sum: H == 1, the slots as the last dim of a [T, k] tensor ----------------------------
//
// With H == 1 the slot dimension of [T, k, 1] is the innermost one, and torch sums it as rule 7's
// last-dim row sum of [T, k] (rows T), not the middle-dim reduce above. One thread per token
// plays the plan's lanes one after the other: H == 1 moves a few values a token.

// The plan's lanes are at most 512: the halving tree has at most 9 levels.
constexpr int kMaxTreeLevels = 9;

// Rule 7, last-dim sum of x(0) .. x(width - 1) by one thread (`plan`: rule7_row_sum_plan(width,
// rows)). Lane l has four accumulators from +0 (vectorized: acc[i] takes x(4 (l + L it) + i); else
// acc[it % 4] takes x(l + L it)) and the value ((a0 + a1) + a2) + a3. The halving tree (stride L/2
// down to 1, lane l += lane l + stride) is the pairwise sum of the lane values in bit-reversed lane
// order, left operand first; a stack of one partial sum per level forms it with lanes taken in that
// order m = 0 .. L - 1, combining as a binary counter carries.
template <class X>
__device__ float serial_rule7_row_sum(int width, const RowSumPlan& plan, X&& x) {
  const int L = plan.lanes;
  int levels = 0;
  while ((1 << levels) < L) ++levels;
  float stack[kMaxTreeLevels + 1];
  int top = 0;
  for (int m = 0; m < L; ++m) {
    const int l = levels == 0 ? 0 : static_cast<int>(__brev(static_cast<unsigned>(m)) >> (32 - levels));
    float a[kRuleVector] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (plan.vectorized) {
      for (int g = l; kRuleVector * g < width; g += L)
        for (int i = 0; i < kRuleVector; ++i) a[i] = __fadd_rn(a[i], x(kRuleVector * g + i));
    } else {
      int it = 0;
      for (int j = l; j < width; j += L, ++it) a[it % kRuleVector] = __fadd_rn(a[it % kRuleVector], x(j));
    }
    float v = sum_of_four(a[0], a[1], a[2], a[3]);
    for (int carry = m; carry & 1; carry >>= 1) v = __fadd_rn(stack[--top], v);
    stack[top++] = v;
  }
  return stack[0];
}

struct SlotRowSum {
  int64_t T = 0, E = 0;
  const void* src = nullptr;           // [N, 1]
  const float* slot_weight = nullptr;  // [N]: the weight of each slot (indexed as slots), or nullptr
  const int* tok_off = nullptr;
  const int* slots = nullptr;
  RowSumPlan plan;       // rule7_row_sum_plan(k, T)
  void* dst = nullptr;   // [T, 1]
  void* stream = nullptr;
};

// dst[t] = dt(the rule-7 row sum of x_j over t's slots), x_j = f32(src[slot j]) or, with probs,
// f32(src[slot j]) * probs[t, e_j]; +0 for a token without slots.
template <class Act>
struct SlotRowSumBody {
  using Args = SlotRowSum;
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const SlotRowSum& p = a;
    wait_for_predecessor();
    using S = typename Act::Storage;
    const S* src = static_cast<const S*>(p.src);
    S* dst = static_cast<S*>(p.dst);
    const int64_t stride = static_cast<int64_t>(at.blocks) * blockDim.x;
    for (int64_t t = static_cast<int64_t>(at.block) * blockDim.x + threadIdx.x; t < p.T; t += stride) {
      const int begin = p.tok_off[t];
      const int width = p.tok_off[t + 1] - begin;
      const auto x = [&](int j) {
        const int pos = p.slots[begin + j];
        const float v = Act::load(src[pos]);
        return p.slot_weight ? __fmul_rn(v, p.slot_weight[begin + j]) : v;
      };
      dst[t] = Act::store(width > 0 ? serial_rule7_row_sum(width, p.plan, x) : 0.0f);
    }
  }
};

template <class Act>
void launch_slot_row_sum(const SlotRowSum& args) {
  using Body = SlotRowSumBody<Act>;
  launch_body<Body>(args, resident_grid<body_kernel<Body>>(args.T), args.stream, true, "routing slot_row_sum");
}

// dst[t] = the sum over t's slots of `src` ([N, H]), each value times probs[t, e_j] first where
// probs is given; the aligned contracts' order: H == 1 rule 7's last-dim row sum (slot_plan),
// else dt(((a0 + a1) + a2) + a3). Writes every row of dst, +0 for a token without slots.
void gather_token_sums(const RoutingCommon& r, const Index& ix, const void* src, const float* probs,
                       const RowSumPlan& slot_plan, void* dst) {
  const RoutingShape& s = r.shape;
  if (s.T == 0 || s.H == 0) return;
  if (s.H == 1) {
    if (slot_plan.lanes < 1 || slot_plan.lanes > (1 << kMaxTreeLevels))
      throw std::invalid_argument("routing slot_row_sum: a rule-7 plan of 1 to 512 lanes");
    SlotRowSum a;
    a.T = s.T;
    a.E = s.E;
    a.src = src;
    a.slot_weight = probs ? ix.slot_weight : nullptr;
    a.tok_off = ix.tok_off;
    a.slots = ix.slots;
    a.plan = slot_plan;
    a.dst = dst;
    a.stream = r.stream;
    switch (s.dtype) {
      case DType::kBF16: return launch_slot_row_sum<BF16>(a);
      case DType::kFP16: return launch_slot_row_sum<FP16>(a);
      case DType::kFP32: return launch_slot_row_sum<FP32>(a);
      default: throw std::invalid_argument(std::string("routing: no kernel for rows of dtype ") + std::string(dtype_name(s.dtype)));
    }
  }
  GatherSum g;
  g.rows = s.T;
  g.H = s.H;
  g.E = s.E;
  g.src = src;
  g.slot_weight = probs ? ix.slot_weight : nullptr;
  g.tok_off = ix.tok_off;
  g.slots = ix.slots;
  g.dst = dst;
  g.stream = r.stream;
  switch (s.dtype) {
    case DType::kBF16: return gather_sum_at_ilp<BF16>(g, r.ilp);
    case DType::kFP16: return gather_sum_at_ilp<FP16>(g, r.ilp);
    case DType::kFP32: return gather_sum_at_ilp<FP32>(g, r.ilp);
    default: throw std::invalid_argument(std::string("routing: no kernel for rows of dtype ") + std::string(dtype_name(s.dtype)));
  }
}

// --- atomic_scatter: the order-of-arrival baselines ---------------------------------------------------

struct AtomicScatter {
  int64_t rows = 0;  // positions of this chunk
  int64_t H = 0, E = 0;
  const void* src = nullptr;        // [rows, H] at the chunk's first position
  const int* pos_token = nullptr;   // at the chunk's first position
  const int* pos_expert = nullptr;  // at the chunk's first position
  const float* probs = nullptr;     // [T, E]: with kProducts
  void* dst = nullptr;              // [T, H]: the dtype, or fp32 with kProducts
  void* stream = nullptr;
};

// One atomic addition in the dtype, rounded to it (the hardware's bf16 and fp16 atomics).
__device__ __forceinline__ void atomic_add_to(BF16, uint16_t* p, const uint16_t* x) {
  atomicAdd(reinterpret_cast<__nv_bfloat16*>(p), __ushort_as_bfloat16(*x));
}
__device__ __forceinline__ void atomic_add_to(FP16, uint16_t* p, const uint16_t* x) {
  atomicAdd(reinterpret_cast<__half*>(p), __ushort_as_half(*x));
}
__device__ __forceinline__ void atomic_add_to(FP32, float* p, const float* x) { atomicAdd(p, *x); }

// Two neighbouring elements (4-byte aligned): each half its own addition, rounded to the dtype.
__device__ __forceinline__ void atomic_add_pair_to(BF16, uint16_t* p, const uint16_t* x) {
  atomicAdd(reinterpret_cast<__nv_bfloat162*>(p), *reinterpret_cast<const __nv_bfloat162*>(x));
}
__device__ __forceinline__ void atomic_add_pair_to(FP16, uint16_t* p, const uint16_t* x) {
  atomicAdd(reinterpret_cast<__half2*>(p), *reinterpret_cast<const __half2*>(x));
}

// kPair elements an item (2 for 16-bit dtypes where H is even). kProducts: adds the fp32 product
// f32(x) * probs[t, e] into fp32 rows; otherwise x in the dtype.
template <class Act, int kPair, bool kProducts>
struct AtomicScatterBody {
  using Args = RowsArgs<AtomicScatter>;
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const AtomicScatter& p = a.p;
    const Divider per_row = a.per_row;
    wait_for_predecessor();
    using S = typename Act::Storage;
    const S* src = static_cast<const S*>(p.src);
    const uint32_t total = static_cast<uint32_t>(p.rows) * per_row.d;
    const uint32_t stride = at.blocks * blockDim.x;
    for (uint32_t k = at.block * blockDim.x + threadIdx.x; k < total; k += stride) {
      const uint32_t r = per_row.div(k);
      const int64_t c = static_cast<int64_t>(k - r * per_row.d) * kPair;
      const int64_t t = p.pos_token[r];
      const S* x = src + static_cast<int64_t>(r) * p.H + c;
      if constexpr (kProducts) {
        const float w = p.probs[t * p.E + p.pos_expert[r]];
        float* row = static_cast<float*>(p.dst) + t * p.H + c;
#pragma unroll
        for (int i = 0; i < kPair; ++i) atomicAdd(row + i, __fmul_rn(Act::load(x[i]), w));
      } else {
        S* row = static_cast<S*>(p.dst) + t * p.H + c;
        if constexpr (kPair == 2) {
          atomic_add_pair_to(Act{}, row, x);
        } else {
          atomic_add_to(Act{}, row, x);
        }
      }
    }
  }
};

template <class Act, int kPair, bool kProducts>
void launch_atomic_scatter(const AtomicScatter& args) {
  const int64_t per_row = args.H / kPair;
  const int64_t act = sizeof(typename Act::Storage);
  for_each_row_chunk(args.rows, per_row, [&](int64_t first, int64_t rows) {
    AtomicScatter chunk = args;
    chunk.rows = rows;
    chunk.src = advanced(args.src, first * args.H * act);
    chunk.pos_token = args.pos_token + first;
    chunk.pos_expert = args.pos_expert + first;
    using Body = AtomicScatterBody<Act, kPair, kProducts>;
    launch_body<Body>({chunk, Divider(static_cast<uint32_t>(per_row))}, resident_grid<body_kernel<Body>>(rows * per_row),
                      args.stream, true, "routing atomic_scatter");
  });
}

template <class Act>
void atomic_scatter_as(const AtomicScatter& args, bool products) {
  if (products) return launch_atomic_scatter<Act, 1, true>(args);
  if constexpr (sizeof(typename Act::Storage) == 2) {
    if (args.H % 2 == 0) return launch_atomic_scatter<Act, 2, false>(args);
  }
  launch_atomic_scatter<Act, 1, false>(args);
}

// Every row r of `src` ([N, H]) added into dst row pos_token[r] with atomics: in the dtype, or (with
// probs) the fp32 products into fp32 rows. dst must hold +0 first.
void atomic_scatter_rows(const RoutingCommon& r, const Index& ix, const void* src, const float* probs, void* dst) {
  const RoutingShape& s = r.shape;
  if (s.N == 0 || s.H == 0) return;
  AtomicScatter a;
  a.rows = s.N;
  a.H = s.H;
  a.E = s.E;
  a.src = src;
  a.pos_token = ix.pos_token;
  a.pos_expert = ix.pos_expert;
  a.probs = probs;
  a.dst = dst;
  a.stream = r.stream;
  const bool products = probs != nullptr;
  switch (s.dtype) {
    case DType::kBF16: return atomic_scatter_as<BF16>(a, products);
    case DType::kFP16: return atomic_scatter_as<FP16>(a, products);
    case DType::kFP32: return atomic_scatter_as<FP32>(a, products);
    default: throw std::invalid_argument(std::string("routing: no kernel for rows of dtype ") + std::string(dtype_name(s.dtype)));
  }
}

// fp32 rows rounded once to the dtype.
template <class Act>
struct RoundRowsBody {
  struct Args {
    const float* src;
    typename Act::Storage* dst;
    int64_t n;
  };
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const float* src = a.src;
    typename Act::Storage* dst = a.dst;
    const int64_t n = a.n;
    wait_for_predecessor();
    const int64_t stride = static_cast<int64_t>(at.blocks) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(at.block) * blockDim.x + threadIdx.x; i < n; i += stride)
      dst[i] = Act::store(src[i]);
  }
};

template <class Act>
void launch_round_rows(const float* src, void* dst, int64_t n, void* stream) {
  using Body = RoundRowsBody<Act>;
  launch_body<Body>({src, static_cast<typename Act::Storage*>(dst), n}, resident_grid<body_kernel<Body>>(n), stream, true,
                    "routing round_rows");
}

// --- probs_backward: unpermute's backward with probs --------------------------------------------
//
// One row team per position pos (t, e): d_permuted[pos] = dt((+0 + f32(d_out[t])) * p) (the
// embedding backward's sum into zeros, then the product's backward) and d_probs[t, e] = the
// rule-7 row sum of f32(d_out[t, h]) * f32(permuted[pos, h]) over h, p = probs[t, e]. As
// swiglu_scale's weighted backward: a thread owns V consecutive lanes of the plan (V = 2 for
// 16-bit rows, one 16-byte packet an iteration), G = L / V threads share a row. With H == 1 the
// broadcast's reduction is over a dim of size 1, which autograd's sum_to leaves alone: d_probs is
// the product itself (a -0 kept), one thread per position (probs_backward_single).
template <class Act>
inline constexpr int kLanesPerThread = sizeof(typename Act::Storage) == 2 ? 2 : 1;

struct ProbsBackward {
  int64_t N = 0, H = 0, E = 0;
  const void* d_out = nullptr;     // [T, H]
  const void* permuted = nullptr;  // [N, H]
  const float* probs = nullptr;    // [T, E]
  const int* pos_token = nullptr;
  const int* pos_expert = nullptr;
  const int* slots = nullptr;  // the teams take the positions in token order: slots[0], slots[1], ...
  RowSumPlan plan;  // rule7_row_sum_plan(H, N); H > 1
  void* d_permuted = nullptr;  // [N, H]
  float* d_probs = nullptr;    // [T, E], +0 where the map is false (zeroed first)
  void* stream = nullptr;
};

template <class Act, int kBlockThreads>
struct ProbsBackwardBody {
  struct Args {
    ProbsBackward p;
    int group;
  };
  static constexpr int kBlock = kBlockThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const ProbsBackward& p = a.p;
    const int group = a.group;
    wait_for_predecessor();
    using S = typename Act::Storage;
    constexpr int V = kLanesPerThread<Act>;
    extern __shared__ float tree[];
    const int L = p.plan.lanes;
    const int64_t H = p.H;
    int64_t row;
    int t;
    if (group <= kWarpLanes) {
      row = static_cast<int64_t>(at.block) * (blockDim.x / group) + threadIdx.x / group;
      t = static_cast<int>(threadIdx.x) % group;
    } else {
      row = at.block;
      t = static_cast<int>(threadIdx.x);
    }
    const bool live = row < p.N;
    float acc[V][kRuleVector];
#pragma unroll
    for (int q = 0; q < V; ++q)
#pragma unroll
      for (int i = 0; i < kRuleVector; ++i) acc[q][i] = 0.0f;

    int64_t token = 0, expert = 0;
    if (live) {
      // Team `row` takes slot `row` of the token-major slot list, so that the teams of a token's
      // slots run together and read its d_out row from cache.
      const int64_t pos = p.slots[row];
      token = p.pos_token[pos];
      expert = p.pos_expert[pos];
      const float w = p.probs[token * p.E + expert];
      const S* g_row = static_cast<const S*>(p.d_out) + token * H;
      const S* z_row = static_cast<const S*>(p.permuted) + pos * H;
      S* dz_row = static_cast<S*>(p.d_permuted) + pos * H;
      // kN contiguous elements at column c: d_permuted stored, each product added to lane_acc0[i],
      // which is acc[i / 4][i % 4] of this thread's lanes.
      auto compute_chunk = [&](auto kN_tag, int64_t c, float* lane_acc0) {
        constexpr int kN = decltype(kN_tag)::value;
        const Chunk<Act, kN> g = load_raw<Act, kN>(g_row + c);
        const Chunk<Act, kN> z = load_raw<Act, kN>(z_row + c);
        float dz[kN];
#pragma unroll
        for (int i = 0; i < kN; ++i) {
          const float gi = Act::load(g.e[i]);
          dz[i] = __fmul_rn(__fadd_rn(0.0f, gi), w);
          lane_acc0[i] = __fadd_rn(lane_acc0[i], __fmul_rn(gi, Act::load(z.e[i])));
        }
        store_chunk<Act, kN>(dz_row + c, dz);
      };
      if (p.plan.vectorized) {
        constexpr int kUnit = kRuleVector * V;  // V lanes' 4-element groups
        if (V == 1 || H % kUnit == 0) {
          for (int64_t c = int64_t{kUnit} * t; c < H; c += int64_t{kRuleVector} * L)
            compute_chunk(std::integral_constant<int, kUnit>{}, c, &acc[0][0]);
        } else {
          // 16-bit rows with H % 8 == 4: each lane's 4-element group alone.
          for (int64_t start = int64_t{kUnit} * t; start < H; start += int64_t{kRuleVector} * L) {
#pragma unroll
            for (int q = 0; q < V; ++q) {
              const int64_t c = start + kRuleVector * q;
              if (c < H) compute_chunk(std::integral_constant<int, kRuleVector>{}, c, acc[q]);
            }
          }
        }
      } else {
        // Lane l = V * t + q reads element l + L * it into acc[q][it % 4].
        for (int64_t it0 = 0; int64_t{V} * t + int64_t{L} * it0 < H; it0 += kRuleVector) {
#pragma unroll
          for (int k = 0; k < kRuleVector; ++k)
#pragma unroll
            for (int q = 0; q < V; ++q) {
              const int lane = V * t + q;
              const int64_t j = lane + int64_t{L} * (it0 + k);
              if (lane >= L || j >= H) continue;
              const float gi = Act::load(g_row[j]);
              dz_row[j] = Act::store(__fmul_rn(__fadd_rn(0.0f, gi), w));
              acc[q][k] = __fadd_rn(acc[q][k], __fmul_rn(gi, Act::load(z_row[j])));
            }
        }
      }
    }
    const float total = rule7_row_total<V>(acc, L, group, t, tree);
    if (live && t == 0) p.d_probs[token * p.E + expert] = total;
  }
};

// H == 1: d_permuted[pos] = dt((+0 + f32(d_out[t])) * p), d_probs[t, e] = f32(d_out[t]) *
// f32(permuted[pos]), no sum.
template <class Act>
struct ProbsBackwardSingleBody {
  using Args = ProbsBackward;
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const ProbsBackward& p = a;
    wait_for_predecessor();
    using S = typename Act::Storage;
    const S* d_out = static_cast<const S*>(p.d_out);
    const S* permuted = static_cast<const S*>(p.permuted);
    S* d_permuted = static_cast<S*>(p.d_permuted);
    const int64_t stride = static_cast<int64_t>(at.blocks) * blockDim.x;
    for (int64_t row = static_cast<int64_t>(at.block) * blockDim.x + threadIdx.x; row < p.N; row += stride) {
      const int64_t token = p.pos_token[row], expert = p.pos_expert[row];
      const float g = Act::load(d_out[token]);
      d_permuted[row] = Act::store(__fmul_rn(__fadd_rn(0.0f, g), p.probs[token * p.E + expert]));
      p.d_probs[token * p.E + expert] = __fmul_rn(g, Act::load(permuted[row]));
    }
  }
};

// Threads a row of probs_backward: the plan's lanes over the elements each thread takes.
template <class Act>
int probs_backward_group(const RowSumPlan& plan) {
  if (plan.lanes > kReduceMaxThreads)
    throw std::invalid_argument("routing probs_backward: a rule-7 plan of more than 512 lanes");
  return std::max(1, plan.lanes / kLanesPerThread<Act>);
}

template <class Act>
void launch_probs_backward(const ProbsBackward& p) {
  if (p.H == 1) {
    using Body = ProbsBackwardSingleBody<Act>;
    return launch_body<Body>(p, resident_grid<body_kernel<Body>>(p.N), p.stream, true, "unpermute probs_backward");
  }
  const int group = probs_backward_group<Act>(p.plan);
  if (group <= kWarpLanes) {
    const int64_t rows_per_block = kThreads / group;
    const auto grid = static_cast<unsigned>((p.N + rows_per_block - 1) / rows_per_block);
    launch_body<ProbsBackwardBody<Act, kThreads>>({p, group}, grid, p.stream, true, "unpermute probs_backward");
  } else {
    // A block of `group` threads a row, its tree in dynamic shared memory: no batched twin, so its
    // case runs under LaunchDirectly (probs_backward_by_blocks), which the check below holds.
    if (collecting_launches())
      throw std::logic_error("routing probs_backward: a case of the block-a-row kernel while launches are collected");
    const size_t shared = sizeof(float) * static_cast<size_t>(group) * kLanesPerThread<Act>;
    launch(body_kernel<ProbsBackwardBody<Act, kReduceMaxThreads>>, static_cast<unsigned>(p.N),
           static_cast<unsigned>(group), shared, p.stream, true, "unpermute probs_backward",
           typename ProbsBackwardBody<Act, kReduceMaxThreads>::Args{p, group});
  }
}

// Whether unpermute's backward with probs takes probs_backward's kernel of a block a row.
bool probs_backward_by_blocks(const UnpermuteBackward& args) {
  const RoutingShape& s = args.r.shape;
  if (!args.probs || s.N == 0 || s.H <= 1) return false;
  switch (s.dtype) {
    case DType::kBF16: return probs_backward_group<BF16>(args.plan) > kWarpLanes;
    case DType::kFP16: return probs_backward_group<FP16>(args.plan) > kWarpLanes;
    default: return probs_backward_group<FP32>(args.plan) > kWarpLanes;
  }
}

}  // namespace

size_t routing_workspace_bytes(const RoutingShape& shape, bool fp32_rows) { return layout_of(shape, fp32_rows).total; }

void launch_permute_forward(const PermuteForward& args) {
  const RoutingShape& s = args.r.shape;
  if (s.T == 0) return;
  require_workspace(args.r, false, "permute forward");
  const Index ix = build_index(args.r, layout_of(s, false), false);
  copy_token_rows(args.r, ix, args.tokens, args.permuted, CopyMode::kBits);
}

void launch_permute_backward(const PermuteBackward& args) {
  const RoutingShape& s = args.r.shape;
  if (s.T == 0) return;
  require_workspace(args.r, false, "permute backward");
  if (args.order_of_arrival)  // before the index, so that the index's kernels and the sum run back to back
    zero_bytes(args.d_tokens, static_cast<size_t>(s.T * s.H) * dtype_size(s.dtype), args.r.stream, "permute d_tokens");
  const Index ix = build_index(args.r, layout_of(s, false), args.order_of_arrival);
  if (!args.order_of_arrival) return gather_token_sums(args.r, ix, args.d_permuted, nullptr, args.slot_plan, args.d_tokens);
  atomic_scatter_rows(args.r, ix, args.d_permuted, nullptr, args.d_tokens);
}

void launch_unpermute_forward(const UnpermuteForward& args) {
  const RoutingShape& s = args.r.shape;
  if (s.T == 0) return;
  const auto probs = static_cast<const float*>(args.probs);
  // The order-of-arrival sum with probs accumulates fp32 rows, in the output itself when it is fp32.
  const bool fp32_rows = args.order_of_arrival && probs && s.dtype != DType::kFP32;
  require_workspace(args.r, fp32_rows, "unpermute forward");
  const Layout l = layout_of(s, fp32_rows);
  const Index ix = index_in(args.r.workspace, l);
  // The atomic sums' zeros first, so that the index's kernels and the sum run back to back.
  if (args.order_of_arrival && !fp32_rows)
    zero_bytes(args.out, static_cast<size_t>(s.T * s.H) * dtype_size(s.dtype), args.r.stream, "unpermute out");
  if (fp32_rows) zero_bytes(ix.rows32, static_cast<size_t>(s.T * s.H) * sizeof(float), args.r.stream, "unpermute fp32 rows");
  build_index(args.r, l, args.order_of_arrival, args.order_of_arrival ? nullptr : probs);
  if (!args.order_of_arrival) return gather_token_sums(args.r, ix, args.permuted, probs, args.slot_plan, args.out);
  if (!fp32_rows) return atomic_scatter_rows(args.r, ix, args.permuted, probs, args.out);
  atomic_scatter_rows(args.r, ix, args.permuted, probs, ix.rows32);
  if (s.H == 0) return;
  switch (s.dtype) {
    case DType::kBF16: return launch_round_rows<BF16>(ix.rows32, args.out, s.T * s.H, args.r.stream);
    case DType::kFP16: return launch_round_rows<FP16>(ix.rows32, args.out, s.T * s.H, args.r.stream);
    default: throw std::invalid_argument(std::string("routing: no kernel for rows of dtype ") + std::string(dtype_name(s.dtype)));
  }
}

void launch_unpermute_backward(const UnpermuteBackward& args) {
  const RoutingShape& s = args.r.shape;
  if (s.T == 0) return;
  require_workspace(args.r, false, "unpermute backward");
  std::optional<LaunchDirectly> direct;  // a case of probs_backward's block-a-row kernel: no batched twin
  if (probs_backward_by_blocks(args)) direct.emplace();
  // d_probs zeroed before the index, so that the index's kernels and the products run back to back.
  if (args.probs) zero_bytes(args.d_probs, static_cast<size_t>(s.T * s.E) * sizeof(float), args.r.stream, "unpermute d_probs");
  const Index ix = build_index(args.r, layout_of(s, false), args.probs != nullptr);
  if (!args.probs) return copy_token_rows(args.r, ix, args.d_out, args.d_permuted, CopyMode::kPlusZero);
  if (s.N == 0 || s.H == 0) return;  // d_probs: the empty sums, +0
  if (!args.permuted) throw std::invalid_argument("unpermute backward with probs: no permuted rows");
  ProbsBackward p;
  p.N = s.N;
  p.H = s.H;
  p.E = s.E;
  p.d_out = args.d_out;
  p.permuted = args.permuted;
  p.probs = static_cast<const float*>(args.probs);
  p.pos_token = ix.pos_token;
  p.pos_expert = ix.pos_expert;
  p.slots = ix.slots;
  p.plan = args.plan;
  p.d_permuted = args.d_permuted;
  p.d_probs = static_cast<float*>(args.d_probs);
  p.stream = args.r.stream;
  switch (s.dtype) {
    case DType::kBF16: return launch_probs_backward<BF16>(p);
    case DType::kFP16: return launch_probs_backward<FP16>(p);
    case DType::kFP32: return launch_probs_backward<FP32>(p);
    default: throw std::invalid_argument(std::string("routing: no kernel for rows of dtype ") + std::string(dtype_name(s.dtype)));
  }
}

}  // namespace bitparity::gpu
