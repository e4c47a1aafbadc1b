// embedding: the vocabulary-parallel embedding lookup (spec OP-9). Forward: out[p] = weight[ids[p]],
// a row copy (a row that the partition masks is +0). Backward: d_weight[v] = the sum of g[p] over the
// positions p with ids[p] = v, folded in ascending position under the contract's rounding.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <Eigen/Dense>
#include <rapidcheck.h>
#include <unsupported/Eigen/MPRealSupport>

#include "core/error.h"
#include "core/gen.h"
#include "core/random.h"
#include "core/sum_bound.h"
#include "ops/embedding.h"

namespace bitparity::ops {
namespace {

const char* const kMegatronFrom =
    "Megatron-LM #5335 tensor_parallel/layers.py VocabParallelEmbedding forced to weight[masked_input] under "
    "is_bit_exact(); backward = autograd of index = index_put_(accumulate=True): PyTorch 2.11 cuda/Indexing.cu "
    "index_put_with_sort_kernel (stable radix sort; indexing_backward_kernel_stride_1 for H = 1, "
    "_small_stride for H <= 32, indexing_backward_kernel above), CUDA 13.0, sm_90 (rule 8)";
const char* const kBaselineFrom =
    "Megatron-LM VocabParallelEmbedding without deterministic mode: F.embedding(masked_input, weight); backward "
    "PyTorch 2.11 cuda/Embedding.cu embedding_dense_backward_cuda (embedding_backward_feature_kernel for up to "
    "3072 positions, else cuda/EmbeddingBackwardKernel.cu: partial sums of NROWS_PER_THREAD = 10), CUDA 13.0, "
    "sm_90 (rule 8)";
const char* const kAtomicFrom =
    "an fp32 atomicAdd scatter of g's rows into a zeroed fp32 table (index_add_ into an fp32 buffer), then one "
    "rounding to the weight dtype: the unordered scatter the deterministic contracts are benchmarked against";

constexpr int64_t kModelH = 4096;       // GLM-4.5's hidden size
constexpr int64_t kModelV = 151552;     // GLM-4.5's (padded) vocabulary
constexpr int64_t kSmallHMax = 33;      // widths 1..33 cross the width-32 boundary
constexpr int64_t kMinElements = 4096, kElementsPerSize = 1024;
constexpr int64_t kWarpPassPositions = 4 * kEmbeddingWarp;  // kFewIds's at most 4 ids: one named >= 32 times

std::string dt_name(DType d) { return std::string(dtype_name(d)); }

bool float_dtype(DType d) { return d == DType::kBF16 || d == DType::kFP16 || d == DType::kFP32; }

std::optional<int64_t> int_attr(const Case& c, const std::string& name) {
  const auto it = c.attrs.find(name);
  if (it == c.attrs.end()) return std::nullopt;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return *v;
  throw RejectError("attr", "embedding: attribute " + name + " must be an integer");
}

// --- validate ----------------------------------------------------------------------------------

const Tensor& check_ids(const Case& c) {
  const Tensor* ids = c.input("ids");
  if (!ids) throw RejectError("shape", "embedding: missing input ids");
  if (ids->dtype() != DType::kI64) throw RejectError("dtype", "embedding: ids must be i64; got " + dt_name(ids->dtype()));
  if (ids->rank() != 1) throw RejectError("shape", "embedding: ids must have shape [P]; got " + shape_string(ids->shape()));
  return *ids;
}

// Without a partition every id must index the table.
void check_id_range(const Tensor& ids, const EmbeddingAttrs& a, const std::string& table) {
  if (a.vocab_start) return;
  for (int64_t p = 0; p < ids.numel(); ++p) {
    const int64_t id = static_cast<int64_t>(ids.bits(p));
    if (id < 0 || id >= a.V)
      throw RejectError("shape", "embedding: ids[" + std::to_string(p) + "] = " + std::to_string(id) +
                                     " is outside the vocabulary [0, " + std::to_string(a.V) + ") of " + table +
                                     " (give vocab_start for a partition of a larger vocabulary)");
  }
}

OutputMetas validate(const Case& c, const ContractInfo&) {
  const Tensor& ids = check_ids(c);
  const int64_t P = ids.dim(0);
  const EmbeddingAttrs a = embedding_attrs(c);
  if (c.direction == Direction::kForward) {
    const Tensor* weight = c.input("weight");
    if (!weight) throw RejectError("shape", "embedding: missing input weight");
    if (!float_dtype(weight->dtype()))
      throw RejectError("dtype", "embedding: weight must be bf16, fp16 or fp32; got " + dt_name(weight->dtype()));
    if (weight->rank() != 2)
      throw RejectError("shape", "embedding: weight must have shape [V, H]; got " + shape_string(weight->shape()));
    check_id_range(ids, a, "weight " + shape_string(weight->shape()));
    return {{"out", {{P, weight->dim(1)}, weight->dtype()}}};
  }
  const Tensor* g = c.input("g");
  if (!g) throw RejectError("shape", "embedding: missing input g");
  if (!float_dtype(g->dtype()))
    throw RejectError("dtype", "embedding: g must be bf16, fp16 or fp32 (the weight's dtype); got " + dt_name(g->dtype()));
  if (g->rank() != 2 || g->dim(0) != P)
    throw RejectError("shape", "embedding: g must have shape [P, H] with P = " + std::to_string(P) +
                                   " (ids' length); got " + shape_string(g->shape()));
  check_id_range(ids, a, "num_embeddings");
  return {{"d_weight", {{a.V, g->dim(1)}, g->dtype()}}};
}

// --- generation ------------------------------------------------------------------------------

rc::Gen<int64_t> width() {
  return rc::gen::weightedOneOf<int64_t>({
      {6, rc::gen::inRange<int64_t>(1, kSmallHMax + 1)},
      {2, rc::gen::element<int64_t>(1, 32, 33)},
      {2, rc::gen::map(rc::gen::inRange<int64_t>(5, 33), [](int64_t m) { return 8 * m; })},
      {1, rc::gen::just(kModelH)},
  });
}

enum class Dups { kDistinct, kUniform, kAllSame, kFewIds, kZipf };

// P ids over the table's V rows (local ids; the caller shifts them by the partition).
std::vector<int64_t> draw_ids(int64_t P, int64_t V, Dups mode) {
  std::vector<int64_t> ids(static_cast<size_t>(P));
  if (P == 0) return ids;
  switch (mode) {
    case Dups::kDistinct: {
      // A stride walk through [0, V): distinct while P <= V.
      const int64_t start = *rc::gen::inRange<int64_t>(0, V);
      int64_t stride = *rc::gen::inRange<int64_t>(1, std::max<int64_t>(2, V));
      while (std::gcd(stride, V) != 1) ++stride;
      for (int64_t p = 0; p < P; ++p) ids[static_cast<size_t>(p)] = (start + p * stride) % V;
      break;
    }
    case Dups::kUniform:
      for (auto& id : ids) id = *rc::gen::inRange<int64_t>(0, V);
      break;
    case Dups::kAllSame: {
      const int64_t id = *rc::gen::inRange<int64_t>(0, V);
      std::fill(ids.begin(), ids.end(), id);
      break;
    }
    case Dups::kFewIds: {
      const int64_t n = *rc::gen::inRange<int64_t>(1, 5);
      std::vector<int64_t> pool;
      for (int64_t i = 0; i < n; ++i) pool.push_back(*rc::gen::inRange<int64_t>(0, V));
      for (auto& id : ids) id = pool[static_cast<size_t>(*rc::gen::inRange<int64_t>(0, n))];
      break;
    }
    case Dups::kZipf: {
      // Rank r with probability about 1/(r+1) (log-uniform), ranks scattered over the table.
      const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
      for (int64_t p = 0; p < P; ++p) {
        const double u = static_cast<double>(splitmix64_mix(seed + static_cast<uint64_t>(p)) >> 11) * 0x1p-53;
        const int64_t r = std::min<int64_t>(V - 1, static_cast<int64_t>(std::pow(static_cast<double>(V), u)) - 1);
        ids[static_cast<size_t>(p)] = static_cast<int64_t>((static_cast<uint64_t>(r) * 40503u + 7u) % static_cast<uint64_t>(V));
      }
      break;
    }
  }
  return ids;
}

rc::Gen<Case> generate(Direction d) {
  return rc::gen::exec([d] {
    Case c;
    c.op = "embedding";
    c.direction = d;
    const DType dt = *rc::gen::weightedElement<DType>({{6, DType::kBF16}, {2, DType::kFP32}, {2, DType::kFP16}});
    int64_t H = *width();
    // Positions: the rows classes, now and then more than F.embedding's 3072 (its sorted path), and
    // now and then a width-1 table with a row that a warp's 32 positions or more name (the index
    // backward's warp tree takes them in passes of 32): 32 positions, or 4 x 32 over at most 4 ids.
    enum Positions { kRows, kMany, kWarpPasses };
    const Positions positions =
        *rc::gen::weightedElement<Positions>({{12, kRows}, {1, kMany}, {1, kWarpPasses}});
    const bool many = positions == kMany;
    int64_t P = 0;
    switch (positions) {
      case kRows: P = *gen::rows(); break;
      case kMany:
        P = *rc::gen::inRange<int64_t>(kEmbeddingFeatureKernelMaxP + 1, 4400);
        H = *rc::gen::element<int64_t>(1, 2, 8, 33);
        break;
      case kWarpPasses:  // a single pass of exactly 32 (the smallest count the tree takes), or 4
        P = *rc::gen::element(kEmbeddingWarp, kWarpPassPositions);
        H = 1;
        break;
    }
    const int64_t max_elements =
        kMinElements + int64_t{*rc::gen::withSize([](int size) { return rc::gen::just(size); })} * kElementsPerSize;
    if (!many && P > 1 && P * H > max_elements) P = std::max<int64_t>(1, max_elements / H);
    // The vocabulary: a single row, a few, a few thousand, or GLM-4.5's whole table (narrow rows).
    int64_t V = *rc::gen::weightedOneOf<int64_t>({{8, rc::gen::just<int64_t>(1)},
                                                  {24, rc::gen::inRange<int64_t>(2, 65)},
                                                  {6, rc::gen::inRange<int64_t>(65, 4097)},
                                                  {1, rc::gen::just(kModelV)}});
    if (V == kModelV) H = std::min<int64_t>(H, 2);
    else if (V * H > (int64_t{1} << 16)) V = std::max<int64_t>(1, (int64_t{1} << 16) / H);
    const rc::Gen<Dups> dups = rc::gen::weightedElement<Dups>(
        {{2, Dups::kDistinct}, {3, Dups::kUniform}, {2, Dups::kAllSame}, {2, Dups::kFewIds}, {2, Dups::kZipf}});
    const Dups mode = positions == kWarpPasses ? *rc::gen::element(Dups::kAllSame, Dups::kFewIds) : *dups;
    std::vector<int64_t> local = draw_ids(P, V, mode);
    // A partition now and then: the table is rows [vocab_start, vocab_start + V) of a larger
    // vocabulary, and some ids fall outside it.
    if (*rc::gen::weightedElement<bool>({{3, false}, {1, true}})) {
      const int64_t start = *rc::gen::element<int64_t>(0, V, 3 * V + 5);
      c.attrs["vocab_start"] = start;
      const int64_t masked_every = *rc::gen::element<int64_t>(0, 2, 5);
      for (size_t p = 0; p < local.size(); ++p) {
        local[p] += start;
        if (masked_every && p % static_cast<size_t>(masked_every) == 0)
          local[p] = *rc::gen::element<int64_t>(start - 1, start + V, -1, start + 2 * V + 1);
      }
    }
    Tensor ids(DType::kI64, {P});
    for (int64_t p = 0; p < P; ++p) ids.set_bits(p, static_cast<uint64_t>(local[static_cast<size_t>(p)]));
    c.inputs["ids"] = ids;
    if (d == Direction::kForward) {
      c.inputs["weight"] = *gen::tensor(dt, {V, H}, *gen::value_family());
    } else {
      c.attrs["num_embeddings"] = V;
      c.inputs["g"] = *gen::tensor(dt, {P, H}, *gen::value_family());
    }
    return c;
  });
}

// --- classes ---------------------------------------------------------------------------------

std::string width_class(int64_t H) {
  if (H == 1) return "H=1";
  if (H < 32) return "H=2..31";
  if (H == 32) return "H=32";
  if (H == 33) return "H=33";
  if (H == kModelH) return "H=4096";
  return "H=other";
}

// The CUDA kernels' paths (KernelRecord::paths; gpu/embedding.cu): the forward copies rows in
// 16-byte packets where a row's bytes allow, else element by element, and nothing without
// positions; the backward folds d_weight's rows (every row, positions or not) in packets or
// elements, and at H == 1 the index backward's warp tree, whose lanes take 32 of a row's positions
// a pass. The backward sorts up to 1024 positions in one block, more with CUB's radix sort.
void add_kernel_paths(const Case& c, const Tensor& data, int64_t most, std::vector<std::string>& tags) {
  constexpr int64_t kPacketBytes = 16;
  const int64_t H = data.rank() == 2 ? data.dim(1) : 0;
  const bool fwd = c.direction == Direction::kForward;
  const int64_t P = c.input("ids")->numel();
  if (!fwd && P > 0) tags.push_back(P <= kEmbeddingBlockSortMax ? "sort:block" : "sort:radix");
  if (H == 0 || (fwd && P == 0)) return;
  const int64_t bytes = H * static_cast<int64_t>(dtype_size(data.dtype()));
  tags.push_back(bytes % kPacketBytes == 0 ? "row_bytes%16=0" : "row_bytes%16!=0");
  if (!fwd && H == 1 && most >= kEmbeddingWarp) tags.push_back("H=1&dups>=32");
  if (!fwd && H == 1 && most == kEmbeddingWarp) tags.push_back("H=1&dups=32");  // one whole pass, no remainder
}

CaseClasses classes(const Case& c) {
  CaseClasses k;
  const Tensor& ids = *c.input("ids");
  const bool fwd = c.direction == Direction::kForward;
  const Tensor& data = *c.input(fwd ? "weight" : "g");
  const int64_t H = data.rank() == 2 ? data.dim(1) : 0;
  EmbeddingAttrs a;
  try {
    a = embedding_attrs(c);
  } catch (const RejectError&) {
    a.V = fwd && data.rank() == 2 ? data.dim(0) : 0;
  }
  // How often each local row occurs (masked positions count toward row 0, as they add there).
  std::map<int64_t, int64_t> count;
  bool masked = false;
  for (int64_t p = 0; p < ids.numel(); ++p) {
    const int64_t row = embedding_local_row(static_cast<int64_t>(ids.bits(p)), a);
    masked = masked || row < 0;
    ++count[row < 0 ? 0 : row];
  }
  int64_t most = 0;
  for (const auto& [row, n] : count) most = std::max(most, n);
  const int64_t P = ids.numel();
  const std::string dups = P == 0 ? "dups=none"
                           : count.size() == 1 && P > 1 ? "dups=all_same"
                           : most == 1                  ? "dups=none"
                                                        : "dups=some";
  bool nan = false;
  for (const std::string& v : gen::value_tags(data)) nan = nan || v == "nan";
  k.shape_class = width_class(H) + (P > kEmbeddingFeatureKernelMaxP ? ",P>3072" : "");
  k.value_class = dups + (most >= kEmbeddingWarp ? ",dups>=32" : "") + (nan ? ",nan" : "");
  k.tags = {gen::rows_class(P), width_class(H), dups, "dtype=" + dt_name(data.dtype()),
            !a.vocab_start ? "partition=none" : masked ? "partition=masked" : "partition=all_inside",
            a.V == 1 ? "V=1" : a.V == kModelV ? "V=151552" : "V=other"};
  if (most >= kEmbeddingWarp) k.tags.push_back("dups>=32");
  if (P > kEmbeddingFeatureKernelMaxP) k.tags.push_back("P>3072");
  add_kernel_paths(c, data, most, k.tags);
  const std::string name = fwd ? "weight" : "g";
  for (const std::string& v : gen::value_tags(data)) k.tags.push_back(name + ":" + v);
  return k;
}

// How many positions the backward adds into each local row it names (a masked position adds +0 to
// row 0, as the atomic kernel's masked_input = 0 does), with the case's attributes; nothing where
// ids are absent or the attributes are refused.
struct RowAddends {
  EmbeddingAttrs attrs;
  std::map<int64_t, int64_t> count;
};
std::optional<RowAddends> row_addends(const Case& c) {
  const Tensor* ids = c.input("ids");
  if (!ids) return std::nullopt;
  RowAddends r;
  try {
    r.attrs = embedding_attrs(c);
  } catch (const RejectError&) {
    return std::nullopt;
  }
  for (int64_t p = 0; p < ids->numel(); ++p)
    ++r.count[std::max<int64_t>(0, embedding_local_row(static_cast<int64_t>(ids->bits(p)), r.attrs))];
  return r;
}

// The atomic backward adds each position's row into its local row: where no local row is named
// twice every sum has one addend. The forward copies.
bool arrival_order_free(const Case& c) {
  if (c.direction == Direction::kForward) return true;
  const std::optional<RowAddends> r = row_addends(c);
  if (!r) return false;
  for (const auto& [row, n] : r->count)
    if (n > 1) return false;
  return true;
}

// d_weight's rows named at most once (counted as arrival_order_free counts them): one addend an element.
std::map<std::string, std::vector<bool>> arrival_order_fixed(const Case& c) {
  std::map<std::string, std::vector<bool>> fixed;
  const Tensor* g = c.input("g");
  const std::optional<RowAddends> r = c.direction == Direction::kBackward ? row_addends(c) : std::nullopt;
  if (!g || g->rank() != 2 || !r) return fixed;
  const int64_t V = r->attrs.V;
  const auto H = static_cast<size_t>(g->dim(1));
  std::vector<bool> one(static_cast<size_t>(std::max<int64_t>(0, V)) * H, true);
  for (const auto& [row, n] : r->count)
    if (n > 1 && row < V) std::fill_n(one.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(row) * H), H, false);
  fixed["d_weight"] = std::move(one);
  return fixed;
}

// The bound every order of the fp32 atomic adds keeps d_weight within (core/sum_bound.h): each row
// element the sum of its positions' g (a masked position adds +0 to row 0), in fp32 from +0 in any
// order, flushing subnormals, then rounded once to g's dtype.
std::map<std::string, ElementBounds> arrival_order_bound(const Case& c) {
  std::map<std::string, ElementBounds> bounds;
  const Tensor* ids = c.input("ids");
  const Tensor* g = c.input("g");
  const std::optional<RowAddends> r = c.direction == Direction::kBackward ? row_addends(c) : std::nullopt;
  if (!g || g->rank() != 2 || !r || ids->numel() != g->dim(0)) return bounds;
  const int64_t V = std::max<int64_t>(0, r->attrs.V), H = g->dim(1);
  if (!r->count.empty() && r->count.rbegin()->first >= V) return bounds;  // an id the op refuses
  const auto n = static_cast<size_t>(V * H);
  std::vector<double> S(n, 0.0);
  ElementBounds& d = bounds["d_weight"];
  d.truth.assign(n, 0.0);
  d.bound.assign(n, 0.0);
  for (int64_t p = 0; p < ids->numel(); ++p) {
    const int64_t row = embedding_local_row(static_cast<int64_t>(ids->bits(p)), r->attrs);
    if (row < 0) continue;  // +0
    for (int64_t h = 0; h < H; ++h) {
      const double x = g->f64(p * H + h);
      const auto i = static_cast<size_t>(row * H + h);
      d.truth[i] += x;
      if (std::isfinite(x)) S[i] += std::fabs(x);
    }
  }
  const AnyOrderSum arithmetic{.rounded_addends = false, .step = DType::kFP32, .out = g->dtype()};
  for (const auto& [row, addends] : r->count)
    for (int64_t h = 0; h < H; ++h) {
      const auto i = static_cast<size_t>(row * H + h);
      d.bound[i] = any_order_bound(arithmetic, addends, S[i], d.truth[i]);
    }
  return bounds;
}

std::vector<std::string> required_tags(Direction d) {
  std::vector<std::string> tags = {"rows=0", "rows=1..16", "rows=17", "rows=32", "rows=large", "P>3072",
                                   "H=1", "H=2..31", "H=32", "H=33", "H=4096", "H=other",
                                   "dups=none", "dups=some", "dups=all_same", "dups>=32",
                                   "partition=none", "partition=masked", "partition=all_inside",
                                   "V=1", "V=other", "V=151552", "dtype=bf16", "dtype=fp16", "dtype=fp32",
                                   "row_bytes%16=0", "row_bytes%16!=0"};
  if (d == Direction::kBackward) tags.insert(tags.end(), {"H=1&dups>=32", "H=1&dups=32", "sort:block", "sort:radix"});
  const std::string name = d == Direction::kForward ? "weight" : "g";
  for (const char* value : {"nan", "inf", "-0", "subnormal"}) tags.push_back(name + ":" + value);
  return tags;
}

// --- error inputs --------------------------------------------------------------------------------

constexpr int64_t kErrV = 4, kErrP = 3, kErrH = 8;

Case small_case(Direction d) {
  Case c;
  c.op = "embedding";
  c.direction = d;
  Tensor ids(DType::kI64, {kErrP});
  for (int64_t p = 0; p < kErrP; ++p) ids.set_bits(p, static_cast<uint64_t>(p));
  c.inputs["ids"] = ids;
  if (d == Direction::kForward) {
    c.inputs["weight"] = Tensor(DType::kBF16, {kErrV, kErrH});
  } else {
    c.inputs["g"] = Tensor(DType::kBF16, {kErrP, kErrH});
    c.attrs["num_embeddings"] = kErrV;
  }
  return c;
}

void set_id(Case& c, int64_t p, int64_t id) { c.inputs["ids"].set_bits(p, static_cast<uint64_t>(id)); }

std::vector<ErrorInput> error_inputs(Direction d) {
  std::vector<ErrorInput> out;
  auto add = [&](std::string name, auto edit, std::string error_class, std::string field) {
    Case c = small_case(d);
    edit(c);
    out.push_back({std::move(name), std::move(c), std::move(error_class), std::move(field), {}});
  };
  add("id_equal_to_V", [](Case& c) { set_id(c, 1, kErrV); }, "shape", "ids[1] = 4");
  add("id_negative", [](Case& c) { set_id(c, 2, -1); }, "shape", "ids[2] = -1");
  add("ids_i32", [](Case& c) { c.inputs["ids"] = Tensor(DType::kI32, {kErrP}); }, "dtype", "ids");
  add("ids_rank2", [](Case& c) { c.inputs["ids"] = Tensor(DType::kI64, {kErrP, 1}); }, "shape", "ids");
  add("vocab_start_negative", [](Case& c) { c.attrs["vocab_start"] = int64_t{-1}; }, "attr", "vocab_start");
  add("vocab_start_float", [](Case& c) { c.attrs["vocab_start"] = 2.0; }, "attr", "vocab_start");
  if (d == Direction::kForward) {
    add("weight_i32", [](Case& c) { c.inputs["weight"] = Tensor(DType::kI32, {kErrV, kErrH}); }, "dtype", "weight");
    add("weight_rank1", [](Case& c) { c.inputs["weight"] = Tensor(DType::kBF16, {kErrV}); }, "shape", "weight");
    add("partition_of_no_rows", [](Case& c) {
          c.inputs["weight"] = Tensor(DType::kBF16, {0, kErrH});
          c.attrs["vocab_start"] = int64_t{0};
        }, "shape", "vocab_start");
  } else {
    add("num_embeddings_missing", [](Case& c) { c.attrs.erase("num_embeddings"); }, "attr", "num_embeddings");
    add("num_embeddings_negative", [](Case& c) { c.attrs["num_embeddings"] = int64_t{-2}; }, "attr", "num_embeddings");
    add("num_embeddings_float", [](Case& c) { c.attrs["num_embeddings"] = 4.0; }, "attr", "num_embeddings");
    add("g_rows_differ", [](Case& c) { c.inputs["g"] = Tensor(DType::kBF16, {kErrP + 1, kErrH}); }, "shape", "g");
    add("g_fp64", [](Case& c) { c.inputs["g"] = Tensor(DType::kFP64, {kErrP, kErrH}); }, "dtype", "g");
    add("g_rank1", [](Case& c) { c.inputs["g"] = Tensor(DType::kBF16, {kErrP}); }, "shape", "g");
  }
  return out;
}

// --- reference inputs ----------------------------------------------------------------------------

// Token ids of natural text: a word's frequency falls about as 1/rank (Zipf), so the most frequent
// ids repeat hundreds of times in 16384 positions and most ids once or never. Rank r with
// probability about 1/(r+1) (log-uniform), the ranks scattered over the table by an odd stride.
Tensor zipf_ids(int64_t P, int64_t V, uint64_t seed) {
  Tensor ids(DType::kI64, {P});
  for (int64_t p = 0; p < P; ++p) {
    const double u = static_cast<double>(splitmix64_mix(seed * 0x100000001b3ull + static_cast<uint64_t>(p)) >> 11) * 0x1p-53;
    const int64_t r = std::min<int64_t>(V - 1, static_cast<int64_t>(std::pow(static_cast<double>(V), u)) - 1);
    ids.set_bits(p, (static_cast<uint64_t>(r) * 40503u + 7u) % static_cast<uint64_t>(V));
  }
  return ids;
}

struct ReferenceShape {
  int64_t P, H, V;
  bool bench_only;
};
// Benchmarks: 16384 positions of GLM-4.5's width; the backward over GLM-4.5's whole vocabulary
// (d_weight is written whole: 1.2 GB). The forward's table is held on the host, whose tensors stop
// at 2^26 elements, so its benchmark table has 16384 rows: the forward reads only the P rows it
// copies, so the bytes it moves do not depend on V. GPU tests: 2048 positions at H = 4096, and 4096
// positions at H = 64 (F.embedding's sorted path, beyond 3072 positions).
constexpr ReferenceShape kForwardShapes[] = {{16384, kModelH, 16384, true}, {2048, kModelH, 4096, false}};
constexpr ReferenceShape kBackwardShapes[] = {
    {16384, kModelH, kModelV, true}, {2048, kModelH, 8192, false}, {4096, 64, 1000, false}};

std::vector<ReferenceInput> reference_inputs(Direction d) {
  std::vector<ReferenceInput> out;
  const bool fwd = d == Direction::kForward;
  for (const ReferenceShape& s : fwd ? std::span<const ReferenceShape>(kForwardShapes)
                                     : std::span<const ReferenceShape>(kBackwardShapes)) {
    ReferenceInput in;
    in.name = "positions" + std::to_string(s.P) + "_H" + std::to_string(s.H) + "_V" + std::to_string(s.V);
    in.bench_only = s.bench_only;
    in.make = [s, d, fwd] {
      Case c;
      c.op = "embedding";
      c.direction = d;
      c.inputs["ids"] = zipf_ids(s.P, s.V, 31);
      if (fwd) {
        c.inputs["weight"] = gen::large_tensor(DType::kBF16, {s.V, s.H}, 32);
      } else {
        c.attrs["num_embeddings"] = s.V;
        c.inputs["g"] = gen::large_tensor(DType::kBF16, {s.P, s.H}, 33);
      }
      return c;
    };
    // The forward moves the ids, the P rows it reads and the P rows it writes, not the whole table.
    if (fwd) in.bytes = static_cast<size_t>(s.P) * (8 + 2 * 2 * static_cast<size_t>(s.H));
    out.push_back(std::move(in));
  }
  return out;
}

// --- shrinking -------------------------------------------------------------------------------

// Positions [p0, p0 + np) and columns [h0, h0 + nh).
Case window(const Case& c, int64_t p0, int64_t np, int64_t h0, int64_t nh) {
  Case out = c;
  const Tensor& ids = *c.input("ids");
  Tensor w(DType::kI64, {np});
  for (int64_t p = 0; p < np; ++p) w.set_bits(p, ids.bits(p0 + p));
  out.inputs["ids"] = w;
  const bool fwd = c.direction == Direction::kForward;
  const char* name = fwd ? "weight" : "g";
  const Tensor& t = *c.input(name);
  const int64_t r0 = fwd ? 0 : p0, nr = fwd ? t.dim(0) : np;
  Tensor cut(t.dtype(), {nr, nh});
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t h = 0; h < nh; ++h) cut.set_bits(r * nh + h, t.bits((r0 + r) * t.dim(1) + h0 + h));
  out.inputs[name] = cut;
  return out;
}

std::vector<Case> shrink_shape(const Case& c) {
  constexpr int64_t kMaxSingles = 8;
  const Tensor& ids = *c.input("ids");
  const Tensor& t = *c.input(c.direction == Direction::kForward ? "weight" : "g");
  if (t.rank() != 2 || ids.rank() != 1) return {};
  const int64_t P = ids.dim(0), H = t.dim(1);
  std::vector<Case> out;
  if (P > 1) {
    out.push_back(window(c, 0, P / 2, 0, H));
    out.push_back(window(c, P / 2, P - P / 2, 0, H));
    for (int64_t p = 0; p < std::min(P, kMaxSingles); ++p) out.push_back(window(c, p, 1, 0, H));
  }
  if (H > 1) {
    out.push_back(window(c, 0, P, 0, H / 2));
    out.push_back(window(c, 0, P, H / 2, H - H / 2));
    for (int64_t h = 0; h < std::min(H, 2 * kMaxSingles); ++h) out.push_back(window(c, 0, P, h, 1));
  }
  return out;
}

// --- oracle: the exact values ----------------------------------------------------------------------

constexpr int kExactBits = 640;  // holds any sum of up to 2^32 fp32 values exactly (277 bits of range)

// Forward: the row itself (+0 where masked). Backward: the exact sum of each row's gradients, in fp64
// where every addition is exact (TwoSum's error is 0) and in MPFR where one is not.
std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const Tensor& ids = *c.input("ids");
  const EmbeddingAttrs a = embedding_attrs(c);
  const int64_t P = ids.numel();
  if (c.direction == Direction::kForward) {
    const Tensor& w = *c.input("weight");
    const int64_t H = w.dim(1);
    std::vector<double> out(static_cast<size_t>(P * H), 0.0);
    for (int64_t p = 0; p < P; ++p) {
      const int64_t row = embedding_local_row(static_cast<int64_t>(ids.bits(p)), a);
      if (row >= 0)
        for (int64_t h = 0; h < H; ++h) out[static_cast<size_t>(p * H + h)] = w.f64(row * H + h);
    }
    return {{"out", out}};
  }
  const Tensor& g = *c.input("g");
  const int64_t H = g.dim(1);
  std::vector<std::vector<int64_t>> positions(static_cast<size_t>(a.V));
  for (int64_t p = 0; p < P; ++p) {
    const int64_t row = embedding_local_row(static_cast<int64_t>(ids.bits(p)), a);
    if (row >= 0) positions[static_cast<size_t>(row)].push_back(p);  // a masked +0 adds nothing
  }
  std::vector<double> d_weight(static_cast<size_t>(a.V * H), 0.0);
  for (int64_t v = 0; v < a.V; ++v) {
    const std::vector<int64_t>& ps = positions[static_cast<size_t>(v)];
    if (ps.empty()) continue;
    Eigen::ArrayXXd terms(static_cast<Eigen::Index>(ps.size()), H);
    for (size_t i = 0; i < ps.size(); ++i)
      for (int64_t h = 0; h < H; ++h) terms(static_cast<Eigen::Index>(i), h) = g.f64(ps[i] * H + h);
    for (int64_t h = 0; h < H; ++h) {
      double s = 0, err = 0;
      for (Eigen::Index i = 0; i < terms.rows(); ++i) {
        const double x = terms(i, h), t = s + x, bb = t - s;
        err = err != 0 || !std::isfinite(t) ? err : (s - (t - bb)) + (x - bb);
        s = t;
      }
      if (err != 0 && std::isfinite(s)) {
        mpfr::mpreal exact(0, kExactBits);
        for (Eigen::Index i = 0; i < terms.rows(); ++i) exact += mpfr::mpreal(terms(i, h), kExactBits);
        s = exact.toDouble();
      }
      d_weight[static_cast<size_t>(v * H + h)] = s;
    }
  }
  return {{"d_weight", d_weight}};
}

}  // namespace

EmbeddingAttrs embedding_attrs(const Case& c) {
  EmbeddingAttrs a;
  a.vocab_start = int_attr(c, "vocab_start");
  if (a.vocab_start && *a.vocab_start < 0)
    throw RejectError("attr", "embedding: vocab_start must be >= 0; got " + std::to_string(*a.vocab_start));
  if (c.direction == Direction::kForward) {
    const Tensor* w = c.input("weight");
    a.V = w && w->rank() == 2 ? w->dim(0) : 0;
  } else {
    const std::optional<int64_t> n = int_attr(c, "num_embeddings");
    if (!n) throw RejectError("attr", "embedding: the backward needs the integer attribute num_embeddings (V)");
    if (*n < 0) throw RejectError("attr", "embedding: num_embeddings must be >= 0; got " + std::to_string(*n));
    a.V = *n;
  }
  if (a.vocab_start && a.V == 0)
    throw RejectError("shape", "embedding: a partition (vocab_start) of no rows: masked positions add to local row 0");
  return a;
}

OpInfo embedding() {
  OpInfo op;
  op.name = "embedding";
  op.doc = "embedding lookup of a vocabulary partition (Megatron VocabParallelEmbedding): a row copy, and the "
           "rows' gradients folded per vocabulary row";
  op.inputs[Direction::kForward] = {{"weight", "[V, H] bf16, fp16 or fp32: the table (a partition's rows)", false, false},
                                    {"ids", "[P] i64 token ids", false, true}};
  op.inputs[Direction::kBackward] = {{"ids", "[P] i64 token ids", false, true},
                                     {"g", "[P, H] gradient of out, in the weight's dtype", false, true}};
  op.outputs[Direction::kForward] = {{"out", "[P, H] in weight's dtype: weight[ids[p]], +0 where masked", false, true}};
  op.outputs[Direction::kBackward] = {
      {"d_weight", "[V, H] in g's dtype: per row the sum of g over its positions, in the contract's order; +0 for "
                   "rows no position names", false, false}};
  op.attrs = {{"num_embeddings", AttrType::kInt, "V, the table's rows (backward; required there)"},
              {"vocab_start", AttrType::kInt,
               "first vocabulary id of the table's partition (Megatron's vocab_start_index with TP > 1): ids outside "
               "[vocab_start, vocab_start + V) are masked (out row +0; in the backward a +0 gradient added to local "
               "row 0 in its place, as masked_input = 0 does). Absent: no partition, and an id outside [0, V) is "
               "refused"}};
  op.contracts = {
      {"megatron_eager",
       "forward a row copy; backward the index backward of weight[masked_input]: each row's positions in "
       "ascending order (stable sort); H > 32: acc = dt(f32(acc) + f32(g[p])) from +0, rounded to the dtype after "
       "every addition; 2 <= H <= 32: an fp32 sum from +0 rounded once; H = 1: a row of n >= 32 positions is split "
       "over 32 lanes (lane l sums positions 32i + l of its first 32 floor(n/32) in fp32 from +0), the lanes "
       "combined by the halving tree (16, 8, 4, 2, 1), the rest added in order, rounded once",
       kMegatronFrom},
      {"baseline",
       "forward a row copy; backward F.embedding's: P <= 3072: per 32-position chunk (positions 32c .. 32c + 31) "
       "the row's values in the chunk summed in fp32 in ascending order, that sum rounded to the dtype and added "
       "to the row, acc = dt(f32(acc) + f32(dt(s))); P > 3072: the row's positions in ascending order summed in "
       "partial sums of 10 (fp32 from +0), the partial sums added in order in fp32 from +0, rounded once",
       kBaselineFrom},
      {"atomic_fp32",
       "forward a row copy; backward fp32 atomicAdd of every g element into a zeroed fp32 table (a subnormal "
       "addend or result flushed to a zero of its sign), then one rounding to the dtype: its order is the order "
       "of arrival; the reference adds in ascending position",
       kAtomicFrom, ClampGate::kNone, true}};
  for (ContractInfo& contract : op.contracts)
    if (contract.order_of_arrival) {
      contract.arrival_order_free = arrival_order_free;
      contract.arrival_order_fixed = arrival_order_fixed;
      contract.arrival_order_bound = arrival_order_bound;
      contract.bound_doc = std::string("d_weight's row elements, each the sum of its positions' g in fp32 then "
                                       "rounded once to g's dtype: ") + kAnyOrderBoundDoc;
    }
  op.validate = validate;
  op.generate = generate;
  op.required_tags = required_tags;
  op.classes = classes;
  op.error_inputs = error_inputs;
  op.reference_inputs = reference_inputs;
  op.shrink_shape = shrink_shape;
  op.oracle = oracle;
  return op;
}

}  // namespace bitparity::ops
