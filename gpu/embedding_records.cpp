// The kernel records of embedding (spec OP-9): each binds a launcher (gpu/embedding_kernels.h) to
// device tensors. The op's validate has checked the inputs (every id in the table where there is no
// partition) and fixed the output shapes; what is left here is reading the attributes and each
// contract's choice of fold: the index backward's kernel by width, F.embedding's by position count.
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "core/case.h"
#include "gpu/common/device_tensor.h"
#include "gpu/embedding_kernels.h"
#include "gpu/records.h"
#include "gpu/runtime.h"
#include "ops/embedding.h"

namespace bitparity::gpu {
namespace {

static_assert(kEmbeddingBlockSortMax == ops::kEmbeddingBlockSortMax,
              "the op's sort:block tag names the backwards the CUDA kernels sort in one block");

constexpr int64_t kSmallStrideMax = 32;     // ATen's index_put_ takes the small-stride kernel up to a warp
constexpr int64_t kFeatureKernelMaxP = 3072;  // F.embedding's feature kernel up to 3072 positions

std::optional<int64_t> int_attr(const Case& c, const char* name) {
  const auto it = c.attrs.find(name);
  if (it == c.attrs.end()) return std::nullopt;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return *v;
  throw std::logic_error(std::string("embedding: a non-integer ") + name + " passed validate");
}

EmbeddingRows rows_of(const Case& c, int64_t V) {
  EmbeddingRows r;
  r.V = V;
  if (const std::optional<int64_t> start = int_attr(c, "vocab_start")) {
    r.partition = true;
    r.vocab_start = *start;
  }
  return r;
}

BoundLaunch bind_forward(const KernelArgs& k) {
  const DeviceTensor& weight = required(k.inputs, "weight");
  const DeviceTensor& ids = required(k.inputs, "ids");
  EmbeddingForward p;
  p.dtype = weight.dtype;
  p.P = ids.shape.at(0);
  p.H = weight.shape.at(1);
  p.rows = rows_of(k.c, weight.shape.at(0));
  p.weight = weight.data();
  p.ids = ids.data();
  p.out = required(k.outputs, "out").data();
  p.ilp = k.ilp;
  p.stream = k.stream;
  return [p] { launch_embedding_forward(p); };
}

EmbeddingFold fold_of(const std::string& contract, int64_t P, int64_t H) {
  if (contract == "megatron_eager")
    return H == 1 ? EmbeddingFold::kWarpTree : H <= kSmallStrideMax ? EmbeddingFold::kOnce : EmbeddingFold::kPerStep;
  if (contract == "baseline") return P <= kFeatureKernelMaxP ? EmbeddingFold::kChunks : EmbeddingFold::kPartials;
  return EmbeddingFold::kAtomic;
}

BoundLaunch bind_backward(const KernelArgs& k) {
  const DeviceTensor& ids = required(k.inputs, "ids");
  const DeviceTensor& g = required(k.inputs, "g");
  const DeviceTensor& d_weight = required(k.outputs, "d_weight");
  EmbeddingBackward p;
  p.dtype = g.dtype;
  p.P = ids.shape.at(0);
  p.H = g.shape.at(1);
  p.rows = rows_of(k.c, d_weight.shape.at(0));
  p.fold = fold_of(k.contract.name, p.P, p.H);
  p.ids = ids.data();
  p.g = g.data();
  p.d_weight = d_weight.data();
  p.ilp = k.ilp;
  p.stream = k.stream;
  // The workspace is taken here (the thread's, or allocated), so that a launch allocates nothing;
  // the launch holds it.
  const auto ws = launch_workspace(embedding_backward_workspace_bytes(p), k.stream);
  p.workspace = ws->get();
  return [p, ws] { launch_embedding_backward(p); };
}

BoundLaunch bind(const KernelArgs& k) {
  return k.c.direction == Direction::kForward ? bind_forward(k) : bind_backward(k);
}

// --- the kernels' paths (KernelRecord::paths; the tags of ops/embedding.cpp) ------------------------

// Every contract: the forward's packets or elements (launch_embedding_forward), nothing without
// positions, a masked position's zero row; the dtype a template parameter.
const std::vector<std::string> kForwardPaths = {"row_bytes%16=0", "row_bytes%16!=0", "rows=0", "partition=masked",
                                                "dtype=bf16", "dtype=fp16", "dtype=fp32"};

std::vector<std::string> with_forward(std::vector<std::string> backward) {
  backward.insert(backward.end(), kForwardPaths.begin(), kForwardPaths.end());
  return backward;
}

}  // namespace

std::vector<KernelRecord> embedding_kernels() {
  // fold_of: the index backward's warp tree at H == 1 (its passes of 32 positions), one rounding up
  // to a warp's width, a rounding every addition above (fold_rows in packets or elements).
  // Both sort the positions: one block up to 1024 of them, CUB's radix sort above.
  const std::vector<std::string> megatron =
      with_forward({"H=1", "H=1&dups>=32", "H=2..31", "H=32", "H=33", "sort:block", "sort:radix"});
  // F.embedding's backward: chunks of 32 positions up to 3072 positions, partial sums of 10 above.
  const std::vector<std::string> baseline =
      with_forward({"rows=1..16", "rows=large", "P>3072", "sort:block", "sort:radix"});
  // The atomic scatter, then the rounding of the fp32 table (also without positions).
  const std::vector<std::string> atomic = with_forward({"rows=1..16"});
  // Every contract's launches go into a staged batch's batched launches (gpu/embedding.cu's bodies; a
  // backward of more than 1024 positions, CUB's radix sort, runs its launches directly).
  // CaseBatches.EachCaseGetsWhatItGetsAlone holds atomic_fp32's batched cases to their runs alone
  // where no row is named twice (ContractInfo::arrival_order_free), elsewhere to their shapes.
  const std::vector<Direction> both = {Direction::kForward, Direction::kBackward};
  return {{"embedding", "megatron_eager", bind, megatron, {}, both},
          {"embedding", "baseline", bind, baseline, {}, both},
          {"embedding", "atomic_fp32", bind, atomic, {}, both}};
}

}  // namespace bitparity::gpu
