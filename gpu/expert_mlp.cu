// expert_mlp's data movement (gpu/expert_mlp_kernels.h): a list of moves in one launch. Each block
// serves one move: 4 KB of a copy or zero fill, in 16-byte pieces of the destination (whole pieces
// as vectors where both sides are 16-byte aligned, the rest a byte at a time), or a 32 x 32 tile of
// a transpose through shared memory (the tile padded by one element against bank conflicts); past
// kMaxBlocksPerMove blocks a move's blocks take several ranges or tiles each.
#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "gpu/expert_mlp_kernels.h"
#include "gpu/runtime.h"

namespace bitparity::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kTile = 32, kRowsPerPass = kThreads / kTile;
constexpr int64_t kMaxBlocksPerMove = 2048;  // past it a move's blocks stride over its pieces or tiles

struct DeviceMove {
  const unsigned char* src;
  unsigned char* dst;
  int64_t src_bytes, dst_bytes;
  int64_t rows, cols, ld;
  int64_t tiles_x;       // kTranspose: tiles across dst's ld columns
  int64_t tiles;         // kTranspose: tiles in all
  int64_t first_block;   // the move's first block in the grid
  int32_t kind;
  int32_t aligned;       // kCopy: src and dst both 16-byte aligned
};

struct MoveList {
  DeviceMove m[kMaxMoves];
  int32_t count;
};

__device__ void copy_piece(const DeviceMove& mv, int64_t piece) {
  const int64_t begin = piece * 16;
  if (mv.aligned && begin + 16 <= mv.src_bytes) {
    *reinterpret_cast<uint4*>(mv.dst + begin) = *reinterpret_cast<const uint4*>(mv.src + begin);
  } else if (mv.aligned && begin >= mv.src_bytes && begin + 16 <= mv.dst_bytes) {
    *reinterpret_cast<uint4*>(mv.dst + begin) = make_uint4(0, 0, 0, 0);
  } else {
    const int64_t end = begin + 16 < mv.dst_bytes ? begin + 16 : mv.dst_bytes;
    for (int64_t b = begin; b < end; ++b) mv.dst[b] = b < mv.src_bytes ? mv.src[b] : 0;
  }
}

__device__ void transpose_tile(const DeviceMove& mv, int64_t tile, uint16_t (*smem)[kTile + 1]) {
  const auto* src = reinterpret_cast<const uint16_t*>(mv.src);
  auto* dst = reinterpret_cast<uint16_t*>(mv.dst);
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  const int64_t r0 = (tile % mv.tiles_x) * kTile;  // src rows = dst columns
  const int64_t c0 = (tile / mv.tiles_x) * kTile;  // src columns = dst rows
  for (int i = ty; i < kTile; i += kRowsPerPass) {
    const int64_t r = r0 + i, c = c0 + tx;
    smem[i][tx] = (r < mv.rows && c < mv.cols) ? src[r * mv.cols + c] : uint16_t{0};
  }
  __syncthreads();
  for (int i = ty; i < kTile; i += kRowsPerPass) {
    const int64_t c = c0 + i, r = r0 + tx;  // dst row c, column r
    if (c < mv.cols && r < mv.ld) dst[c * mv.ld + r] = smem[tx][i];
  }
  __syncthreads();  // the tile is read before the next pass overwrites it
}

// The list is read in place from the kernel's parameter space (__grid_constant__): a move is picked
// by an index only known at run time, which would otherwise copy the list into each thread's
// local memory.
__global__ void __launch_bounds__(kThreads) moves_kernel(const __grid_constant__ MoveList list) {
  __shared__ uint16_t smem[kTile][kTile + 1];
  int i = 0;
  while (i + 1 < list.count && static_cast<int64_t>(blockIdx.x) >= list.m[i + 1].first_block) ++i;
  const DeviceMove& mv = list.m[i];
  const int64_t block = static_cast<int64_t>(blockIdx.x) - mv.first_block;
  const int64_t next = i + 1 < list.count ? list.m[i + 1].first_block : static_cast<int64_t>(gridDim.x);
  const int64_t blocks = next - mv.first_block;
  if (mv.kind == Move::kTranspose) {
    for (int64_t t = block; t < mv.tiles; t += blocks) transpose_tile(mv, t, smem);
  } else {
    const int64_t pieces = (mv.dst_bytes + 15) / 16;
    for (int64_t p = block * kThreads + threadIdx.x; p < pieces; p += blocks * kThreads) copy_piece(mv, p);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void launch_moves(const std::vector<Move>& moves, void* stream) {
  if (moves.size() > kMaxMoves)
    throw std::invalid_argument("launch_moves: " + std::to_string(moves.size()) + " moves, at most " +
                                std::to_string(kMaxMoves));
  MoveList list{};
  int64_t blocks = 0;
  for (const Move& m : moves) {
    DeviceMove d{};
    d.src = static_cast<const unsigned char*>(m.src);
    d.dst = static_cast<unsigned char*>(m.dst);
    d.kind = m.kind;
    int64_t need = 0;
    if (m.kind == Move::kTranspose) {
      if (m.ld < m.rows) throw std::invalid_argument("launch_moves: a transpose's ld is below its rows");
      d.rows = m.rows;
      d.cols = m.cols;
      d.ld = m.ld;
      d.tiles_x = (m.ld + kTile - 1) / kTile;
      d.tiles = m.cols > 0 ? d.tiles_x * ((m.cols + kTile - 1) / kTile) : 0;
      need = d.tiles;
    } else {
      if (m.src_bytes > m.dst_bytes) throw std::invalid_argument("launch_moves: a copy's source is past its destination");
      d.src_bytes = static_cast<int64_t>(m.src_bytes);
      d.dst_bytes = static_cast<int64_t>(m.dst_bytes);
      d.aligned = aligned16(m.dst) && (m.src_bytes == 0 || aligned16(m.src));
      need = (d.dst_bytes + 16 * kThreads - 1) / (16 * kThreads);
    }
    if (need == 0) continue;  // nothing to write
    d.first_block = blocks;
    blocks += need < kMaxBlocksPerMove ? need : kMaxBlocksPerMove;
    list.m[list.count++] = d;
  }
  if (blocks == 0) return;
  moves_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(list);
  check_launch("expert_mlp moves_kernel", stream);
}

}  // namespace bitparity::gpu
