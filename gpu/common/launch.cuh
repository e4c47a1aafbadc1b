// Launch helpers of the op-generic kernel shapes: 32-bit index arithmetic (Divider), the
// pipelined grid-stride loop, row chunks indexed in 32 bits, grid sizing (a resident grid for
// grid-stride loops, row teams for persistent warps), and the dispatch of a launcher over the
// activation dtype and the ILP knob. Tuning only: nothing here changes a bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <cuda_runtime.h>

#include "core/dtype.h"
#include "gpu/common/batch_launch.h"
#include "gpu/common/dtype_io.cuh"
#include "gpu/common/ilp.h"
#include "gpu/common/shared_limit.h"
#include "gpu/runtime.h"

namespace bitparity::gpu::device {

// --- index arithmetic -------------------------------------------------------------------------

// n / d for 0 <= n < 2^31 as one multiply-high, an add and a shift (the magic-number division of
// Granlund and Montgomery), where a 64-bit division is a call of some 70 instructions.
struct Divider {
  uint32_t d = 1, magic = 0, shift = 0;
  Divider() = default;
  explicit Divider(uint32_t divisor) : d(divisor) {
    while (shift < 32 && (uint64_t{1} << shift) < divisor) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - divisor)) / divisor + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    return (__umulhi(n, magic) + n) >> shift;
#else
    return static_cast<uint32_t>(((uint64_t{n} * magic >> 32) + n) >> shift);
#endif
  }
};

// A grid-stride loop over the work items [first, total) in groups (a group's items are k0,
// k0 + stride, ...; `step` is the stride times the group's size): the next group's loads are issued
// before the current group's arithmetic, so that a thread keeps loads in flight while it computes.
// load(Group&, k0) issues a group's loads; compute(const Group&, k0) does the rest.
template <class Group, class Load, class Compute>
__device__ __forceinline__ void pipelined_grid_stride(uint32_t first, uint32_t total, uint32_t step, Load&& load,
                                                      Compute&& compute) {
  Group current;
  if (first < total) load(current, first);
  for (uint32_t k0 = first; k0 < total; k0 += step) {
    Group next;
    if (k0 + step < total) load(next, k0 + step);
    compute(current, k0);
    current = next;
  }
}

// Row chunks whose work items (rows x items_per_row) number less than 2^31, so that a kernel
// indexes them in 32 bits; calls launch(first_row, rows) for each.
template <class Launch>
void for_each_row_chunk(int64_t rows, int64_t items_per_row, Launch&& launch) {
  const int64_t max_rows = std::max<int64_t>(1, ((int64_t{1} << 31) - 1) / std::max<int64_t>(1, items_per_row));
  for (int64_t first = 0; first < rows; first += max_rows) launch(first, std::min(max_rows, rows - first));
}

// --- launch helpers (host) -------------------------------------------------------------------

inline constexpr int kThreads = 256;

// Blocks of kThreads that a kernel is compiled to keep resident per multiprocessor
// (__launch_bounds__'s second argument: at most 65536 / (256 n) registers a thread), by the
// registers its loads in flight need. Unbounded, ptxas interleaves a packet's eight independent
// elements with up to 120 registers and leaves too few warps to keep the loads in flight; bounded
// too tightly, it spills. bench/NOTES.md has the measurements behind the numbers.
constexpr int blocks_per_sm(int loads_per_item, int ilp) {
  const int live = loads_per_item * ilp;  // 16-byte packets held per thread
  return live <= 2 ? 6 : live <= 4 ? 4 : live <= 6 ? 3 : 2;
}

inline int multiprocessor_count() {
  static const int sms = [] {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return count > 0 ? count : 1;
  }();
  return sms;
}

// Blocks for a grid-stride loop of kKernel over `items` (one per thread per pass): as many as
// are resident at once on the whole device, so that no partial wave is left at the end, and no
// more than the work needs.
template <auto kKernel>
unsigned resident_grid(int64_t items) {
  static const int per_sm = [] {
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, kThreads, 0) != cudaSuccess || blocks < 1) {
      cudaGetLastError();
      blocks = 1;
    }
    return blocks;
  }();
  const int64_t needed = (items + kThreads - 1) / kThreads;
  const int64_t resident = int64_t{per_sm} * multiprocessor_count();
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(needed, resident)));
}

// Blocks for a kernel whose teams (teams_per_block to a block, `shared` bytes of dynamic shared
// memory) walk rows team, team + T, ...: no more teams T than are resident at once, and no more
// than give each team the same number of rows, so that no last round of rows runs on a few teams
// while the rest wait. Raises the kernel's shared-memory limit on the current device where it needs
// more than 48 KiB (once a device: raise_shared_limit).
template <auto kKernel>
unsigned row_team_grid(int64_t rows, int teams_per_block, size_t shared) {
  if (shared > size_t{48} << 10) raise_shared_limit<kKernel>(shared, "row_team_grid: cudaFuncSetAttribute");
  static const int per_sm = [shared] {
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, kThreads, shared) != cudaSuccess ||
        blocks < 1) {
      cudaGetLastError();
      blocks = 1;
    }
    return blocks;
  }();
  const int64_t resident = int64_t{per_sm} * multiprocessor_count() * teams_per_block;
  const int64_t rows_per_team = (rows + resident - 1) / resident;
  const int64_t teams = (rows + rows_per_team - 1) / rows_per_team;
  return static_cast<unsigned>(std::max<int64_t>(1, (teams + teams_per_block - 1) / teams_per_block));
}

// p moved by `bytes` (nullptr stays nullptr).
template <class T>
T* advanced(T* p, int64_t bytes) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return p ? reinterpret_cast<T*>(reinterpret_cast<Byte*>(p) + bytes) : p;
}

// --- row-chunk kernels, alone or batched -----------------------------------------------------
//
// An elementwise kernel is a body, a struct with
//   using Args = ...;                       // the launcher's arguments: trivially copyable, with `rows`
//                                           // and `stream`
//   static constexpr int kMinBlocks = ...;  // __launch_bounds__'s second argument
//   static __device__ void run(const Args&, Divider per_row, GridPos at);
// that walks its work items with at.block and at.blocks where a kernel alone uses blockIdx.x and
// gridDim.x. row_chunk_kernel<Body> runs it alone; row_chunk_batch_kernel<Body> runs the bodies of
// several cases in one launch, case blockIdx.y on blocks [0, its own grid) of blockIdx.x, at the
// grid position it has alone, so that every case's items go to the threads they go to alone and
// each element is computed by the same code (gpu/common/batch_launch.h).

// Where a body works: its block among its case's blocks.
struct GridPos {
  uint32_t block, blocks;
};

// One case's launch in a batched launch: its arguments, and the grid it has alone.
template <class Args>
struct RowChunk {
  Args args;
  Divider per_row;
  uint32_t blocks;
};

// Kernel parameters a batched launch passes: under the 4 KiB that every CUDA launch takes.
inline constexpr size_t kBatchParamBytes = 4000;

// A batched launch's parameter: as many cases' items as fit kBatchParamBytes, at most 32.
template <class ItemType>
struct BatchOf {
  using Item = ItemType;
  static constexpr int kItems = static_cast<int>(std::min<size_t>(32, kBatchParamBytes / sizeof(Item)));
  static_assert(kItems >= 2, "a batched launch of fewer than two cases");
  static_assert(std::is_trivially_copyable_v<Item>, "a batched launch copies its cases' arguments as bytes");
  Item item[kItems];
};

template <class Body>
using RowChunkBatch = BatchOf<RowChunk<typename Body::Args>>;

#if defined(__CUDACC__)
template <class Body>
__global__ void __launch_bounds__(kThreads, Body::kMinBlocks)
    row_chunk_kernel(typename Body::Args args, Divider per_row) {
  Body::run(args, per_row, GridPos{blockIdx.x, gridDim.x});
}

template <class Body>
__global__ void __launch_bounds__(kThreads, Body::kMinBlocks) row_chunk_batch_kernel(RowChunkBatch<Body> batch) {
  const typename RowChunkBatch<Body>::Item& c = batch.item[blockIdx.y];
  if (blockIdx.x < c.blocks) Body::run(c.args, c.per_row, GridPos{blockIdx.x, c.blocks});
}

// A batched launch's parameter from `count` collected items (LaunchBatch's bytes).
template <class Batch>
Batch batch_of(const unsigned char* items, int count) {
  Batch batch;
  std::memcpy(static_cast<void*>(batch.item), items, static_cast<size_t>(count) * sizeof(typename Batch::Item));
  return batch;
}

// BatchFlush of row_chunk_batch_kernel<Body>: `count` RowChunk items, grid (blocks, count).
template <class Body>
void launch_row_chunk_batch(const unsigned char* items, int count, unsigned blocks, void* stream, const char* what) {
  const dim3 grid(blocks, static_cast<unsigned>(count));
  row_chunk_batch_kernel<Body><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      batch_of<RowChunkBatch<Body>>(items, count));
  check_launch(what, stream);
}

// Launches Body on each row chunk of `args` (for_each_row_chunk), on a resident grid, and checks
// the launch; advance(chunk, first_row) moves the chunk's tensors to its first row. While the
// calling thread collects launches (run_batch), each chunk is collected instead, to be launched
// with the other cases' launches of the same body.
template <class Body, class Advance>
void launch_row_chunks(const typename Body::Args& args, int64_t per_row, const char* what, Advance&& advance) {
  using Args = typename Body::Args;
  constexpr auto kKernel = row_chunk_kernel<Body>;
  LaunchBatch* batch = collecting_launches();
  for_each_row_chunk(args.rows, per_row, [&](int64_t first, int64_t rows) {
    Args chunk = args;
    chunk.rows = rows;
    advance(chunk, first);
    const unsigned grid = resident_grid<kKernel>(rows * per_row);
    const Divider divider(static_cast<uint32_t>(per_row));
    if (batch) {
      const RowChunk<Args> item{chunk, divider, grid};
      batch->add(&launch_row_chunk_batch<Body>, RowChunkBatch<Body>::kItems, &item, sizeof item, grid, args.stream,
                 what);
      return;
    }
    kKernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(args.stream)>>>(chunk, divider);
    check_launch(what, args.stream);
  });
}
#endif

// --- kernel bodies of a block size of their own, alone or batched ------------------------------
//
// A kernel whose launcher chooses its grid and block (not the row-chunk shape above) is a body, a
// struct with
//   using Args = ...;                       // trivially copyable
//   static constexpr int kBlock = ...;      // threads a block
//   static constexpr int kMinBlocks = ...;  // __launch_bounds__'s second argument (0: none)
//   static __device__ void run(const Args&, GridPos at);
// that uses at.block and at.blocks where a kernel alone uses blockIdx.x and gridDim.x (one
// dimension). body_kernel<Body> runs it alone; body_batch_kernel<Body> runs the bodies of several
// cases in one launch, case blockIdx.y on blocks [0, its own grid) of blockIdx.x, at the grid
// position it has alone (gpu/common/batch_launch.h).

template <class Body>
struct BodyItem {
  typename Body::Args args;
  uint32_t blocks;
};

template <class Body>
using BodyBatch = BatchOf<BodyItem<Body>>;

#if defined(__CUDACC__)
template <class Body>
__global__ void __launch_bounds__(Body::kBlock, Body::kMinBlocks) body_kernel(typename Body::Args args) {
  Body::run(args, GridPos{blockIdx.x, gridDim.x});
}

// Half the blocks an SM that the kernel alone is bound to keep: a batch of small cases does not fill
// the device, and the batch's own arithmetic then fits beside the body's without a spill.
template <class Body>
__global__ void __launch_bounds__(Body::kBlock, Body::kMinBlocks / 2) body_batch_kernel(BodyBatch<Body> batch) {
  const uint32_t blocks = batch.item[blockIdx.y].blocks;
  if (blockIdx.x >= blocks) return;
  const typename Body::Args args = batch.item[blockIdx.y].args;
  Body::run(args, GridPos{blockIdx.x, blocks});
}

// BatchFlush of body_batch_kernel<Body>: `count` BodyItem items, grid (blocks, count).
template <class Body>
void launch_body_batch(const unsigned char* items, int count, unsigned blocks, void* stream, const char* what) {
  const dim3 grid(blocks, static_cast<unsigned>(count));
  body_batch_kernel<Body><<<grid, Body::kBlock, 0, static_cast<cudaStream_t>(stream)>>>(
      batch_of<BodyBatch<Body>>(items, count));
  check_launch(what, stream);
}

// Where the calling thread collects launches (run_batch), collects Body on `grid` blocks, to run in
// one batched launch with the other cases' launches of Body, and returns true; else false.
template <class Body>
bool collect_body(const typename Body::Args& args, unsigned grid, void* stream, const char* what) {
  LaunchBatch* batch = collecting_launches();
  if (!batch) return false;
  const BodyItem<Body> item{args, grid};
  batch->add(&launch_body_batch<Body>, BodyBatch<Body>::kItems, &item, sizeof item, grid, stream, what);
  return true;
}

// Body on `grid` blocks, collected (collect_body) or launched now and checked.
template <class Body>
void launch_or_collect_body(const typename Body::Args& args, unsigned grid, void* stream, const char* what) {
  if (collect_body<Body>(args, grid, stream, what)) return;
  body_kernel<Body><<<grid, Body::kBlock, 0, static_cast<cudaStream_t>(stream)>>>(args);
  check_launch(what, stream);
}

// Zeros as a kernel, for a case whose launches a batch collects: a memset would be a device call
// of its own a case. 4-byte words where the range allows (fp32 rows, rows of even length).
struct ZeroBytes {
  struct Args {
    void* p;
    int64_t bytes;
  };
  static constexpr int kBlock = kThreads, kMinBlocks = 0;
  static __device__ void run(const Args& a, GridPos at) {
    const int64_t first = static_cast<int64_t>(at.block) * kBlock + threadIdx.x;
    const int64_t stride = static_cast<int64_t>(at.blocks) * kBlock;
    if ((reinterpret_cast<uintptr_t>(a.p) | static_cast<uintptr_t>(a.bytes)) % 4 == 0) {
      for (int64_t i = first; i < a.bytes / 4; i += stride) static_cast<uint32_t*>(a.p)[i] = 0;
      return;
    }
    for (int64_t i = first; i < a.bytes; i += stride) static_cast<unsigned char*>(a.p)[i] = 0;
  }
};

// `bytes` zero bytes at p: ZeroBytes collected where the thread collects launches, else a memset.
inline void zero_bytes(void* p, size_t bytes, void* stream, const char* what) {
  if (bytes == 0) return;
  const auto n = static_cast<int64_t>(bytes);
  if (collect_body<ZeroBytes>({p, n}, resident_grid<body_kernel<ZeroBytes>>(n), stream, what)) return;
  check_cuda(cudaMemsetAsync(p, 0, bytes, static_cast<cudaStream_t>(stream)), what);
}
#endif

// Work items of an elementwise kernel: 16-byte packets where F allows, else single elements.
inline int64_t elementwise_items(int64_t rows, int64_t F, int packet) {
  return F % packet == 0 ? rows * (F / packet) : rows * F;
}

// Calls Launch<Act, kIlp>::run(args) for the activation dtype and ILP of `args` (kIlpDefault:
// `default_ilp`, the kernel's measured best); kWithFp16 instantiates the fp16 kernels (Paddle's
// kernels have none).
template <template <class, int> class Launch, class Act, class Args>
void dispatch_ilp(const Args& args, int default_ilp) {
  switch (args.ilp == kIlpDefault ? default_ilp : args.ilp) {
    case 1: return Launch<Act, 1>::run(args);
    case 2: return Launch<Act, 2>::run(args);
    case 4: return Launch<Act, 4>::run(args);
    default: throw std::invalid_argument("kernels: ilp must be 1, 2 or 4; got " + std::to_string(args.ilp));
  }
}

template <template <class, int> class Launch, bool kWithFp16, class Args>
void dispatch_activation(const Args& args, int default_ilp) {
  switch (args.act) {
    case DType::kBF16: return dispatch_ilp<Launch, BF16>(args, default_ilp);
    case DType::kFP32: return dispatch_ilp<Launch, FP32>(args, default_ilp);
    case DType::kFP16:
      if constexpr (kWithFp16) return dispatch_ilp<Launch, FP16>(args, default_ilp);
      [[fallthrough]];
    default:
      throw std::invalid_argument(std::string("kernels: no kernel for activations of dtype ") +
                                  std::string(dtype_name(args.act)));
  }
}

}  // namespace bitparity::gpu::device
