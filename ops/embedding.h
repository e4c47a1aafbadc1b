// The embedding lookup of the vocabulary-parallel embedding (spec OP-9): forward a row copy
// (`weight[masked_input]`), backward the rows' gradients folded per vocabulary row in one of the
// contracts' orders. What the reference and the op tests share with the spec: the attributes and
// which local row each position reads or accumulates into.
#pragma once

#include <cstdint>
#include <optional>

#include "core/registry.h"

namespace bitparity::ops {

OpInfo embedding();  // ops/embedding.cpp

// The width from which the index backward (megatron_eager) rounds to the weight dtype after every
// addition: ATen's index_put_ with accumulate takes indexing_backward_kernel_small_stride for rows
// of up to a warp (32) and indexing_backward_kernel above.
inline constexpr int64_t kEmbeddingSmallStrideMax = 32;
// F.embedding's backward (baseline) takes embedding_backward_feature_kernel (chunks of 32 positions,
// each chunk's sum rounded to the dtype and added) for up to this many positions, and the sorted
// path (partial sums of 10 positions, fp32 throughout, rounded once) above.
inline constexpr int64_t kEmbeddingFeatureKernelMaxP = 3072;
inline constexpr int64_t kEmbeddingFeatureChunk = 32;
inline constexpr int64_t kEmbeddingPartialRows = 10;
// The index backward's stride-1 kernel (H = 1) splits a row's duplicates over a warp's 32 lanes.
inline constexpr int64_t kEmbeddingWarp = 32;
// The CUDA backward (gpu/embedding.cu) sorts up to this many positions in one block, more with
// CUB's radix sort (the kernel paths sort:block, sort:radix).
inline constexpr int64_t kEmbeddingBlockSortMax = 1024;

// The case's attributes for a case that validate accepted. V is weight's rows in the forward and
// num_embeddings in the backward; vocab_start, where present, makes the table the partition
// [vocab_start, vocab_start + V) of a larger vocabulary (Megatron's VocabParallelEmbedding with
// TP > 1): an id outside it is masked.
struct EmbeddingAttrs {
  int64_t V = 0;
  std::optional<int64_t> vocab_start;
};
EmbeddingAttrs embedding_attrs(const Case& c);

// The local row of an id, or -1 where the partition masks it. A masked position reads nothing (its
// output row is +0) and, as in Megatron (masked_input = 0, the output row zeroed in place), adds a
// gradient of +0 to local row 0 in the backward, in its place among row 0's positions.
inline int64_t embedding_local_row(int64_t id, const EmbeddingAttrs& a) {
  if (!a.vocab_start) return id;
  if (id < *a.vocab_start) return -1;
  const int64_t local = id - *a.vocab_start;  // no overflow: id >= vocab_start >= 0
  return local < a.V ? local : -1;
}

}  // namespace bitparity::ops
