// Launchers of the embedding kernels (spec OP-9), in gpu/embedding.cu; the kernel records
// (gpu/embedding_records.cpp) bind them. No CUDA types here, so that host code compiled by g++ can
// call them, and nothing of C++20, which nvcc compiles as C++17.
//
// Forward: out[p] = weight[row(p)], a bit copy (16-byte packets where a row is a whole number of
// them), +0 where the partition masks the id. Backward: the positions sorted by local row (a stable
// radix sort, so each row's positions ascend), then one warp per row of d_weight that folds the
// row's gradients under the contract's rounding and writes the row whole (+0 where no position
// names it); a masked position adds +0 to local row 0 in its place. Every pointer is device memory.
// A launcher launches nothing for zero elements, checks its launches (runtime.h) and throws
// gpu::CudaError on failure; it never validates a case (the op's validate has) and writes every
// element of its outputs. Streams are cudaStream_t values passed as void*.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "gpu/common/ilp.h"

namespace bitparity::gpu {

// The backward sorts up to this many positions in one block, more with CUB's radix sort.
inline constexpr int64_t kEmbeddingBlockSortMax = 1024;

// The local row of an id: with a partition, id - vocab_start where that is in [0, V), else masked.
struct EmbeddingRows {
  int64_t V = 0;               // the table's rows
  bool partition = false;      // vocab_start given: ids outside [vocab_start, vocab_start + V) masked
  int64_t vocab_start = 0;
};

struct EmbeddingForward {
  DType dtype = DType::kBF16;  // weight's and out's: bf16, fp16 or fp32
  int64_t P = 0, H = 0;
  EmbeddingRows rows;
  const void* weight = nullptr;  // [V, H]
  const void* ids = nullptr;     // [P] int64
  void* out = nullptr;           // [P, H]
  int ilp = kIlpDefault;  // kIlpDefault: the kernel's own; or 1, 2, 4 packets a lane loads together (same bits)
  void* stream = nullptr;
};
void launch_embedding_forward(const EmbeddingForward& args);

// How a row's gradients g_0, g_1, ... (ascending position) become its d_weight value.
enum class EmbeddingFold {
  kPerStep,    // index backward, H > 32: acc = dt(acc + g) from +0, rounded after every addition
  kOnce,       // index backward, 2 <= H <= 32 (and H = 1 below 32 positions): fp32 sum from +0, dt once
  kWarpTree,   // index backward, H = 1: the stride-1 kernel's 32 lane sums, halving tree, tail in order
  kChunks,     // F.embedding, P <= 3072: per 32-position chunk s = fp32 sum, acc = dt(acc + dt(s))
  kPartials,   // F.embedding, P > 3072: fp32 partial sums of 10 positions added in fp32, dt once
  kAtomic,     // fp32 atomicAdd into a zeroed fp32 table, dt once: order of arrival
};

struct EmbeddingBackward {
  DType dtype = DType::kBF16;  // g's and d_weight's: bf16, fp16 or fp32
  int64_t P = 0, H = 0;
  EmbeddingRows rows;
  EmbeddingFold fold = EmbeddingFold::kPerStep;
  const void* ids = nullptr;  // [P] int64
  const void* g = nullptr;    // [P, H]
  void* d_weight = nullptr;   // [V, H]
  void* workspace = nullptr;  // embedding_backward_workspace_bytes of the same arguments
  int ilp = kIlpDefault;
  void* stream = nullptr;
};
size_t embedding_backward_workspace_bytes(const EmbeddingBackward& args);
void launch_embedding_backward(const EmbeddingBackward& args);

}  // namespace bitparity::gpu
