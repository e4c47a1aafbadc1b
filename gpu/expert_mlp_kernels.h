// The data movement of expert_mlp's composed record (gpu/expert_mlp_records.cpp): zero fills,
// zero-padded row prefixes and transposes of 16-bit matrices, several of them in one launch. No
// arithmetic: the GEMMs and the activation are the gemm and swiglu records'. Host code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bitparity::gpu {

// One move of a launch_moves list. Every move writes its own destination and reads only tensors
// that no move of the same list writes, so that the moves of one list run at once.
struct Move {
  // kCopy: dst[0, src_bytes) = src[0, src_bytes) and dst[src_bytes, dst_bytes) = 0 (src null and
  // src_bytes 0: a zero fill).
  // kTranspose: src [rows, cols] of 16-bit elements; dst [cols, ld] with dst[c, r] = src[r, c] for
  // r < rows and 0 for rows <= r < ld (a transpose of src zero-padded to ld rows). Bit patterns
  // are moved, never converted.
  enum Kind { kCopy, kTranspose };
  Kind kind = kCopy;
  const void* src = nullptr;
  void* dst = nullptr;
  size_t src_bytes = 0, dst_bytes = 0;  // kCopy
  int64_t rows = 0, cols = 0, ld = 0;   // kTranspose
};

// The most moves one launch takes.
constexpr size_t kMaxMoves = 16;

// Every move of `moves` in one kernel launch on `stream` (a cudaStream_t; nullptr: the calling
// thread's default stream); nothing launched when no move has bytes to write. Throws
// std::invalid_argument past kMaxMoves, for a transpose's ld < rows or a copy's src_bytes > dst_bytes.
void launch_moves(const std::vector<Move>& moves, void* stream);

}  // namespace bitparity::gpu
