// embedding (spec OP-9). Forward: a bit copy of each position's row (+0 where the partition masks
// the id), every contract alike. Backward: each vocabulary row's positions in ascending order (the
// stable sort of both PyTorch paths), folded under the contract's rounding; a masked position adds
// a +0 gradient to local row 0 in its place (Megatron's masked_input = 0 with the output row zeroed).
#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/embedding.h"
#include "reference/embedding.h"
#include "reference/numerics.h"

namespace bitparity::ref {
namespace {

using ops::EmbeddingAttrs;

// The fold of one row's values x (ascending position; pos[i] the position of x[i]) to the value
// stored in d_weight, under a contract. `dt` is the weight dtype, P the case's positions and H its
// width (both pick PyTorch's kernel).
using Fold = float (*)(std::span<const float> x, std::span<const int64_t> pos, DType dt, int64_t P, int64_t H);

// megatron_eager: index_put_(accumulate=True) of PyTorch 2.11 on CUDA (cuda/Indexing.cu).
float fold_index(std::span<const float> x, std::span<const int64_t>, DType dt, int64_t, int64_t H) {
  const int64_t n = static_cast<int64_t>(x.size());
  if (H > ops::kEmbeddingSmallStrideMax) return sequential_sum(x, dt);  // indexing_backward_kernel
  if (H > 1 || n < ops::kEmbeddingWarp) return round_to(dt, 0.0f + sequential_sum(x, DType::kFP32));
  // indexing_backward_kernel_stride_1: lane l sums positions l, l + 32, ... of the first
  // 32 * floor(n / 32), each lane from +0; WARP_SHFL_DOWN by 16, 8, 4, 2, 1 leaves lane 0 with the
  // halving tree; lane 0 adds the remaining positions in order; the row (+0) plus that, rounded.
  constexpr int64_t kW = ops::kEmbeddingWarp;
  const int64_t passes = n / kW;
  float lane[kW] = {};
  for (int64_t i = 0; i < passes; ++i)
    for (int64_t l = 0; l < kW; ++l) lane[l] += x[static_cast<size_t>(i * kW + l)];
  for (int64_t off = kW / 2; off > 0; off /= 2)
    for (int64_t l = 0; l < off; ++l) lane[l] += lane[l + off];
  float s = lane[0];
  for (int64_t i = passes * kW; i < n; ++i) s += x[static_cast<size_t>(i)];
  return round_to(dt, 0.0f + s);
}

// baseline: F.embedding's backward of PyTorch 2.11 on CUDA (cuda/Embedding.cu).
float fold_embedding(std::span<const float> x, std::span<const int64_t> pos, DType dt, int64_t P, int64_t) {
  const size_t n = x.size();
  if (P <= ops::kEmbeddingFeatureKernelMaxP) {
    // embedding_backward_feature_kernel: blocks of 32 positions in turn; the first of a row's
    // positions in a block sums the others into its fp32 value (ascending), and adds that sum, cast
    // to the dtype, to the row: grad_weight += scalar_t(sum), one more rounding.
    float acc = 0.0f;
    for (size_t i = 0; i < n;) {
      const int64_t chunk = pos[i] / ops::kEmbeddingFeatureChunk;
      float s = x[i++];
      while (i < n && pos[i] / ops::kEmbeddingFeatureChunk == chunk) s += x[i++];
      acc = round_to(dt, acc + round_to(dt, s));
    }
    return acc;
  }
  // embedding_backward_cuda_kernel: partial sums of NROWS_PER_THREAD = 10 positions (compute_grad_weight,
  // fp32 from +0), added in order from +0 (sum_and_scatter), cast to the dtype once.
  float total = 0.0f;
  for (size_t i = 0; i < n; i += ops::kEmbeddingPartialRows) {
    float partial = 0.0f;
    for (size_t j = i; j < std::min(n, i + ops::kEmbeddingPartialRows); ++j) partial += x[j];
    total += partial;
  }
  return round_to(dt, total);
}

// atomic_fp32: the order the reference fixes for an order of arrival: ascending position, fp32
// atomic adds from +0 (subnormals flushed, atomic_sum), rounded once.
float fold_atomic(std::span<const float> x, std::span<const int64_t>, DType dt, int64_t, int64_t) {
  return round_to(dt, atomic_sum(x, DType::kFP32));
}

TensorMap forward(const Case& c) {
  const Tensor& ids = *c.input("ids");
  const Tensor& w = *c.input("weight");
  const EmbeddingAttrs a = ops::embedding_attrs(c);
  const int64_t P = ids.numel(), H = w.dim(1);
  Tensor out(w.dtype(), {P, H});  // zero bits: +0
  for (int64_t p = 0; p < P; ++p) {
    const int64_t row = ops::embedding_local_row(static_cast<int64_t>(ids.bits(p)), a);
    if (row < 0) continue;
    for (int64_t h = 0; h < H; ++h) out.set_bits(p * H + h, w.bits(row * H + h));
  }
  return {{"out", out}};
}

TensorMap backward(const Case& c, Fold fold) {
  const Tensor& ids = *c.input("ids");
  const Tensor& g = *c.input("g");
  const EmbeddingAttrs a = ops::embedding_attrs(c);
  const int64_t P = ids.numel(), H = g.dim(1);
  // (row, position) of every position, sorted: each row's positions in ascending order, in time
  // proportional to P, whatever the vocabulary (masked positions fold into row 0 as zeros).
  std::vector<std::pair<int64_t, int64_t>> named(static_cast<size_t>(P));
  std::vector<bool> masked(static_cast<size_t>(P), false);
  for (int64_t p = 0; p < P; ++p) {
    const int64_t row = ops::embedding_local_row(static_cast<int64_t>(ids.bits(p)), a);
    masked[static_cast<size_t>(p)] = row < 0;
    named[static_cast<size_t>(p)] = {row < 0 ? 0 : row, p};
  }
  std::sort(named.begin(), named.end());
  Tensor d_weight(g.dtype(), {a.V, H});  // zero bits: +0 for rows no position names
  std::vector<int64_t> ps;
  std::vector<float> x;
  for (size_t i = 0; i < named.size();) {
    const int64_t v = named[i].first;
    ps.clear();
    for (; i < named.size() && named[i].first == v; ++i) ps.push_back(named[i].second);
    for (int64_t h = 0; h < H; ++h) {
      x.clear();
      for (int64_t p : ps) x.push_back(masked[static_cast<size_t>(p)] ? 0.0f : g.f32(p * H + h));
      d_weight.set_f32(v * H + h, fold(x, ps, g.dtype(), P, H));
    }
    canonicalize_nans(d_weight, v * H, H);  // every stored value is an addition's result
  }
  TensorMap out;
  out.emplace("d_weight", std::move(d_weight));  // moved: an initializer list would copy [V, H]
  return out;
}

Impl impl(Fold fold) {
  return [fold](const Case& c, const ContractInfo&) {
    return c.direction == Direction::kForward ? forward(c) : backward(c, fold);
  };
}

}  // namespace

std::vector<ImplEntry> embedding_impls() {
  return {{"embedding", "megatron_eager", impl(fold_index)},
          {"embedding", "baseline", impl(fold_embedding)},
          {"embedding", "atomic_fp32", impl(fold_atomic)}};
}

}  // namespace bitparity::ref
