#include "ops/routing_map.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>
#include <stdexcept>
#include <utility>

#include <rapidcheck.h>

#include "core/error.h"
#include "core/rows.h"
#include "core/gen.h"
#include "core/random.h"
#include "core/sum_bound.h"

namespace bitparity::ops::routing_map {
namespace {

constexpr const char* kMap = "routing_map";
constexpr const char* kProbs = "probs";
// The inputs of the two ops by how they are indexed.
const char* const kTokenRowInputs[] = {"tokens", "d_out"};        // [T, H]
const char* const kSlotRowInputs[] = {"permuted", "d_permuted"};  // [N, H], expert-major

std::string dims(const Tensor& t) { return shape_string(t.shape()); }

bool is_data_dtype(DType d) { return d == DType::kBF16 || d == DType::kFP16 || d == DType::kFP32; }

// Rows `rows` of a [*, H] tensor, columns [h0, h0 + width).
Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& rows, int64_t h0, int64_t width) {
  const int64_t H = t.dim(1);
  Tensor out(t.dtype(), {static_cast<int64_t>(rows.size()), width});
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t h = 0; h < width; ++h) out.set_bits(static_cast<int64_t>(i) * width + h, t.bits(rows[i] * H + h0 + h));
  return out;
}

std::vector<int64_t> iota(int64_t from, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// The first of the case's data tensors of rank 2 (their width is H, their dtype the rows'), or nullptr.
const Tensor* data_tensor(const Case& c) {
  for (const char* name : {"tokens", "d_out", "permuted", "d_permuted"})
    if (const Tensor* t = c.input(name); t && t->rank() == 2) return t;
  return nullptr;
}

// The width H of the case's data tensors, or -1 when it has none of rank 2.
int64_t data_width(const Case& c) {
  const Tensor* t = data_tensor(c);
  return t ? t->dim(1) : -1;
}

}  // namespace

KRule k_rule(const ContractInfo& contract) {
  if (contract.name == "megatron_eager") return KRule::kSameAsRowZero;
  if (contract.name == "paddle_aligned") return KRule::kSameOverValidRows;
  if (contract.name == "baseline") return KRule::kAny;
  throw std::logic_error("routing_map: no rule on the experts per row for contract " + contract.name);
}

int64_t Routing::position(int64_t t, int64_t e) const {
  const Run s = slots(t);
  const int64_t* it = std::lower_bound(s.begin(), s.end(), e);
  if (it == s.end() || *it != e) return -1;
  return positions(t)[static_cast<size_t>(it - s.begin())];
}

namespace {

// RejectError naming routing_map when it is absent, not bool or not of rank 2.
void check_map(const std::string& who, const Tensor* map) {
  if (!map) throw RejectError("shape", who + ": routing_map is required");
  if (map->dtype() != DType::kBool)
    throw RejectError("dtype", who + ": routing_map must be bool; got " + std::string(dtype_name(map->dtype())));
  if (map->rank() != 2) throw RejectError("shape", who + ": routing_map must have shape [T, E]; got " + dims(*map));
}

}  // namespace

Counts read_counts(const std::string& who, const Tensor* map) {
  check_map(who, map);
  Counts k;
  k.tokens = map->dim(0);
  k.experts = map->dim(1);
  k.per_row.resize(static_cast<size_t>(k.tokens));
  const auto* m = static_cast<const uint8_t*>(map->data());  // bool is one byte an element
  for (int64_t t = 0; t < k.tokens; ++t) {
    const uint8_t* row = m + t * k.experts;
    int64_t n = 0;
    for (int64_t e = 0; e < k.experts; ++e) n += row[e] != 0;
    k.per_row[static_cast<size_t>(t)] = n;
    k.entries += n;
  }
  return k;
}

Routing read(const std::string& who, const Tensor* map) {
  // A case reads its map in each reference side and in its classes, so this allocates a few flat
  // arrays and nothing per token or (where experts outnumber the entries) per expert.
  const Counts k = read_counts(who, map);
  Routing r;
  r.tokens = k.tokens;
  r.experts = k.experts;
  r.first_slot.assign(static_cast<size_t>(r.tokens) + 1, 0);
  for (int64_t t = 0; t < r.tokens; ++t)
    r.first_slot[static_cast<size_t>(t) + 1] = r.first_slot[static_cast<size_t>(t)] + k.per_row[static_cast<size_t>(t)];
  r.expert_of_slot.resize(static_cast<size_t>(k.entries));
  const auto* m = static_cast<const uint8_t*>(map->data());  // bool is one byte an element
  size_t slot = 0;
  for (int64_t t = 0; t < r.tokens; ++t) {
    const uint8_t* row = m + t * r.experts;
    for (int64_t e = 0; e < r.experts; ++e)
      if (row[e] != 0) r.expert_of_slot[slot++] = e;
  }
  const size_t n = r.expert_of_slot.size();
  r.position_of_slot.resize(n);
  r.token_of_row.resize(n);
  // pos(t, e) = off[e] + #{t' < t : M[t', e]}: tokens in ascending order fill each expert's block,
  // i.e. a slot's position is its rank when the slots, in token order, are sorted stably by expert.
  if (r.experts <= static_cast<int64_t>(n) + kCountedExperts) {
    std::vector<int64_t> next(static_cast<size_t>(r.experts), 0);  // counts, then each expert's next row
    for (const int64_t e : r.expert_of_slot) ++next[static_cast<size_t>(e)];
    int64_t off = 0;
    for (int64_t& x : next) off += std::exchange(x, off);
    for (size_t s = 0; s < n; ++s) r.position_of_slot[s] = next[static_cast<size_t>(r.expert_of_slot[s])]++;
  } else {  // many more experts than entries (E >> T): sort the entries, not count every expert
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return r.expert_of_slot[static_cast<size_t>(a)] < r.expert_of_slot[static_cast<size_t>(b)];
    });
    for (size_t p = 0; p < n; ++p) r.position_of_slot[static_cast<size_t>(order[p])] = static_cast<int64_t>(p);
  }
  for (int64_t t = 0; t < r.tokens; ++t)
    for (const int64_t p : r.positions(t)) r.token_of_row[static_cast<size_t>(p)] = t;
  return r;
}

std::optional<Routing> try_read(const Case& c) {
  try {
    return read(c.op, c.input(kMap));
  } catch (const RejectError&) {
    return std::nullopt;
  }
}

void check_counts(const std::string& who, const Counts& k, const ContractInfo& contract) {
  const KRule rule = k_rule(contract);
  if (rule == KRule::kAny) return;
  if (rule == KRule::kSameAsRowZero && k.tokens == 0)
    throw RejectError("shape", who + ": routing_map has no rows; " + contract.name +
                                   " reads k from row 0 (T = 0 is an index error in Megatron's aligned permute)");
  int64_t first = -1;  // the row whose count the others must match
  for (int64_t t = 0; t < k.tokens; ++t) {
    const int64_t n = k.per_row[static_cast<size_t>(t)];
    if (rule == KRule::kSameOverValidRows && n == 0) continue;  // padding
    if (first < 0) {
      first = t;
      continue;
    }
    const int64_t expected = k.per_row[static_cast<size_t>(first)];
    if (n != expected)
      throw RejectError("shape", who + ": routing_map: every " +
                                     (rule == KRule::kSameOverValidRows ? "row that is not padding" : "row") +
                                     " must route to the same number of experts; row " + std::to_string(t) + " has " +
                                     std::to_string(n) + ", row " + std::to_string(first) + " has " +
                                     std::to_string(expected));
  }
}

const Tensor& required(const std::string& who, const Case& c, const std::string& name) {
  const Tensor* t = c.input(name);
  if (!t) throw RejectError("shape", who + ": " + name + " is required");
  return *t;
}

int64_t check_data(const std::string& who, const Tensor& t, const std::string& name, int64_t rows,
                   const std::string& rows_meaning) {
  if (!is_data_dtype(t.dtype()))
    throw RejectError("dtype", who + ": " + name + " must be bf16, fp16 or fp32; got " + std::string(dtype_name(t.dtype())));
  if (t.rank() != 2 || t.dim(0) != rows)
    throw RejectError("shape", who + ": " + name + " must have shape [" + std::to_string(rows) + ", H] (" +
                                   rows_meaning + "); got " + dims(t));
  return t.dim(1);
}

void check_probs(const std::string& who, const Tensor& probs, const Counts& k) {
  if (probs.dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": probs must be fp32; got " + std::string(dtype_name(probs.dtype())));
  if (probs.shape() != Shape{k.tokens, k.experts})
    throw RejectError("shape", who + ": probs must have routing_map's shape " + shape_string({k.tokens, k.experts}) +
                                   "; got " + dims(probs));
}

// --- cuts ----------------------------------------------------------------------------------------

Cut tokens_cut(int64_t r0, int64_t n) {
  Cut k;
  k.r0 = r0;
  k.n = n;
  return k;
}

Case cut(const Case& c, const Cut& k) {
  const Routing r = read(c.op, c.input(kMap));
  if (!rows_within(k.r0, k.n, r.tokens)) throw std::logic_error("routing_map::cut: rows out of range");
  const std::vector<int64_t> experts = k.experts.empty() ? iota(0, r.experts) : k.experts;
  const int64_t E = static_cast<int64_t>(experts.size());
  Tensor map(DType::kBool, {k.n, E});
  for (int64_t i = 0; i < k.n; ++i) {
    const int64_t t = k.r0 + i;
    const Routing::Run s = r.slots(t);
    for (int64_t j = 0; j < E; ++j) {
      const auto it = std::lower_bound(s.begin(), s.end(), experts[static_cast<size_t>(j)]);
      if (it == s.end() || *it != experts[static_cast<size_t>(j)]) continue;
      if (k.keep_slot && !k.keep_slot(t, it - s.begin())) continue;
      map.set_bits(i * E + j, 1);
    }
  }
  // The kept pairs' old positions in the cut map's expert-major order.
  std::vector<int64_t> rows;
  for (int64_t j = 0; j < E; ++j)
    for (int64_t i = 0; i < k.n; ++i)
      if (map.bits(i * E + j)) rows.push_back(r.position(k.r0 + i, experts[static_cast<size_t>(j)]));

  Case out = c;
  out.inputs[kMap] = map;
  auto window = [&](const Tensor& t) { return k.width < 0 ? t.dim(1) - k.h0 : k.width; };
  for (const char* name : kSlotRowInputs)
    if (const Tensor* t = c.input(name); t && t->rank() == 2 && t->dim(0) == r.rows())
      out.inputs[name] = gather_rows(*t, rows, k.h0, window(*t));
  for (const char* name : kTokenRowInputs)
    if (const Tensor* t = c.input(name); t && t->rank() == 2 && t->dim(0) == r.tokens)
      out.inputs[name] = gather_rows(*t, iota(k.r0, k.n), k.h0, window(*t));
  if (const Tensor* p = c.input(kProbs); p && p->shape() == Shape{r.tokens, r.experts}) {
    Tensor probs(p->dtype(), {k.n, E});
    for (int64_t i = 0; i < k.n; ++i)
      for (int64_t j = 0; j < E; ++j) probs.set_bits(i * E + j, p->bits((k.r0 + i) * r.experts + experts[static_cast<size_t>(j)]));
    out.inputs[kProbs] = probs;
  }
  return out;
}

Case take_rows(const Case& c, int64_t r0, int64_t n) {
  if (try_read(c)) return cut(c, tokens_cut(r0, n));
  // A map that cannot be read indexes nothing: cut the rows-first inputs, keep the rest.
  Case out = c;
  for (const char* name : {"tokens", "d_out", kMap, kProbs}) {
    const Tensor* t = c.input(name);
    if (!t || t->rank() == 0 || !rows_within(r0, n, t->dim(0))) continue;
    Shape shape = t->shape();
    const size_t row_bytes = shape[0] > 0 ? t->nbytes() / static_cast<size_t>(shape[0]) : 0;
    shape[0] = n;
    Tensor rows(t->dtype(), shape);
    if (rows.nbytes() > 0) std::memcpy(rows.data(), t->data() + static_cast<size_t>(r0) * row_bytes, rows.nbytes());
    out.inputs[name] = rows;
  }
  return out;
}

std::vector<Case> shrink_shape(const Case& c) {
  constexpr int64_t kMaxSingleTokens = 8, kMaxWindows = 16, kVector = 4;  // rule 7 vectorizes by 4
  const std::optional<Routing> r = try_read(c);
  if (!r) return {};
  const int64_t T = r->tokens;
  std::vector<Case> out;
  auto add = [&](Cut k) {
    try {
      out.push_back(cut(c, k));
    } catch (const std::exception&) {
      // a cut the case's other inputs do not follow is no candidate
    }
  };
  if (c.inputs.count(kProbs)) {
    Case plain = c;
    plain.inputs.erase(kProbs);
    if (c.direction == Direction::kBackward) plain.inputs.erase("permuted");  // only d_probs reads it
    out.push_back(plain);
  }
  if (T > 1) {
    for (int64_t t = 0; t < std::min(T, kMaxSingleTokens); ++t) add(tokens_cut(t, 1));
    add(tokens_cut(0, T / 2));
    add(tokens_cut(T / 2, T - T / 2));
  }
  std::vector<int64_t> used = r->expert_of_slot;  // the experts in use, ascending
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  if (!used.empty() && static_cast<int64_t>(used.size()) < r->experts) {
    Cut k = tokens_cut(0, T);
    k.experts = used;
    add(k);
  }
  int64_t max_slots = 0;
  for (int64_t t = 0; t < T; ++t) max_slots = std::max(max_slots, r->slot_count(t));
  if (max_slots >= 2)
    for (int64_t j = 0; j < max_slots; ++j) {
      Cut k = tokens_cut(0, T);
      k.keep_slot = [j](int64_t, int64_t slot) { return slot != j; };
      add(k);
    }
  const int64_t H = data_width(c);
  auto add_windows = [&](int64_t width, int64_t max_windows) {
    if (width <= 0 || width >= H) return;
    for (int64_t w = 0; w < std::min((H + width - 1) / width, max_windows); ++w) {
      Cut k = tokens_cut(0, T);
      k.h0 = std::min(w * width, H - width);
      k.width = width;
      add(k);
    }
  };
  add_windows(H / 2, 3);
  add_windows(H / 2 / kVector * kVector, 3);
  for (int64_t width : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}, int64_t{16}}) add_windows(width, kMaxWindows);
  return out;
}

// --- generation ----------------------------------------------------------------------------------

namespace {

constexpr int64_t kMinElements = 4096, kElementsPerSize = 1024;  // elements of a case by RapidCheck size
constexpr int64_t kMaxK = 8;                     // GLM-4.5's top-k
constexpr int64_t kManyExperts[] = {64, 128, 160};  // GLM-4.5-Air has 128 experts, GLM-4.5 160
constexpr int64_t kMaxTokensWithManyExperts = 8;
constexpr int64_t kMaxExtraExperts = 12;
constexpr int64_t kSmallHMax = 33;
constexpr int64_t kModelH = 4096;                // GLM-4.5's hidden size
// Experts whose map rows the CUDA index reads in 4-byte words (a multiple of 4, not of 16), the
// last in two groups of 128 experts; and experts enough that one tile's counts (a tile of 128
// tokens times E) are more than the index's place sums itself (32768), so that its three kernels
// run, their scan more than one pass of 16384, for one token (the smallest such map).
constexpr int64_t kWordExperts[] = {12, 20, 36, 132};
constexpr int64_t kThreeKernelExperts = kPlaceSumsCounts + 1;
// Tokens of two of the index's 128-token tiles (its two kernels), with rows narrow enough that the
// bound on a case's elements keeps them; and of four tiles (the two kernels' place sums its column
// counts in 16-byte loads), in rows of one element, four tiles still at RapidCheck size 0 (455
// tokens). Either with two groups of 128 experts at times (place carries the first's total).
constexpr int64_t kMultiTileTokens = 129;
constexpr int64_t kMultiTileMaxH = 3;
constexpr int64_t kFourTileTokens = 500;
constexpr int64_t kTwoGroupExperts = 132;
// A token of a row this wide has its k d_probs sums span more than a warp (one block each), and
// 16-bit rows end in a 4-element group (H % 8 == 4).
constexpr int64_t kOneWideTokenH = 516;
// Spec OP-2: an fp32 sum of bf16 slot values is exact, so order-independent, while their exponent
// spread is at most 13 binades; beyond it the order can show.
constexpr int kExactSpreadBinades = 13;

enum class MapKind { kUniform, kPadding, kAllPadding, kRagged };

rc::Gen<DType> data_dtype() {
  return rc::gen::weightedElement<DType>({{6, DType::kBF16}, {2, DType::kFP32}, {1, DType::kFP16}});
}

// Widths that reach the kernels' paths at every RapidCheck size, where inRange's widths shrink
// with it: 1 (the slot row sums), odd (2- or 4-byte copies, single atomics), 8k + 4 for small and
// large k (8-byte copies of 16-bit rows; d_probs' lanes of 4-element groups from H = 128), the
// largest wide enough that a few rows' d_probs sums span more than a warp.
rc::Gen<int64_t> kernel_path_H() {
  return rc::gen::weightedElement<int64_t>({{1, 1}, {1, 3}, {1, 4}, {1, 12}, {3, 132}, {2, 516}});
}

rc::Gen<int64_t> hidden_H() {
  return rc::gen::weightedOneOf<int64_t>({
      {4, rc::gen::inRange<int64_t>(1, kSmallHMax + 1)},
      {4, rc::gen::map(rc::gen::inRange<int64_t>(1, 33), [](int64_t m) { return 8 * m; })},
      {1, rc::gen::just(kModelH)},
      {4, kernel_path_H()},
  });
}

template <size_t N>
int64_t element_of(const int64_t (&values)[N]) {
  return *rc::gen::elementOf(std::vector<int64_t>(std::begin(values), std::end(values)));
}

// k distinct experts of E, ascending (a partial Fisher-Yates shuffle of rc draws, no retries).
std::vector<int64_t> draw_experts(int64_t E, int64_t k) {
  std::vector<int64_t> pool = iota(0, E);
  for (int64_t j = 0; j < k; ++j) std::swap(pool[static_cast<size_t>(j)], pool[static_cast<size_t>(*rc::gen::inRange<int64_t>(j, E))]);
  pool.resize(static_cast<size_t>(k));
  std::sort(pool.begin(), pool.end());
  return pool;
}

Tensor map_tensor(const std::vector<std::vector<int64_t>>& rows, int64_t E) {
  Tensor map(DType::kBool, {static_cast<int64_t>(rows.size()), E});
  for (size_t t = 0; t < rows.size(); ++t)
    for (int64_t e : rows[t]) map.set_bits(static_cast<int64_t>(t) * E + e, 1);
  return map;
}

std::vector<std::vector<int64_t>> draw_rows(MapKind kind, int64_t T, int64_t E, int64_t k) {
  const int64_t max_ragged = std::min(E, kMaxK);
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(T));
  for (auto& row : rows) {
    int64_t n = k;
    if (kind == MapKind::kPadding) n = *rc::gen::weightedElement<bool>({{2, true}, {1, false}}) ? k : 0;
    if (kind == MapKind::kAllPadding) n = 0;
    if (kind == MapKind::kRagged) n = *rc::gen::inRange<int64_t>(0, max_ragged + 1);
    row = draw_experts(E, n);
  }
  auto all_same = [&] {
    return std::all_of(rows.begin(), rows.end(), [&](const auto& row) { return row.size() == rows[0].size(); });
  };
  if (kind == MapKind::kPadding && T > 0 &&
      std::none_of(rows.begin(), rows.end(), [](const auto& row) { return row.empty(); }))
    rows[static_cast<size_t>(*rc::gen::inRange<int64_t>(0, T))].clear();
  if (kind == MapKind::kRagged && T >= 2 && all_same())
    rows[0] = draw_experts(E, (static_cast<int64_t>(rows[0].size()) + 1) % (max_ragged + 1));
  return rows;
}

// Slot values whose sum depends on the order (OP-2: more than 13 binades apart): for some tokens,
// in every column, one slot holds a large B, another -B, the others small values (each exact in
// every data dtype), so that where B and -B meet in the summation tree decides what survives of the
// small ones. With probs, the two slots share one prob, so that the products still cancel.
void make_order_sensitive(Case& c, const std::string& name, const Routing& r, DType dt) {
  constexpr uint64_t kColumnStride = 0x100000001b3ull;  // FNV's prime: seeds apart per column
  const bool fp16 = dt == DType::kFP16;
  const int big_lo = fp16 ? 13 : 24, big_hi = fp16 ? 14 : 30;  // fp16's largest finite is below 2^16
  constexpr int kSmallMaxExp = -1, kSmallExps = 6;
  Tensor& x = c.inputs.at(name);
  Tensor* probs = c.inputs.count(kProbs) ? &c.inputs.at(kProbs) : nullptr;
  const int64_t H = x.dim(1);
  for (int64_t t = 0; t < r.tokens; ++t) {
    const int64_t k = r.slot_count(t);
    if (k < 2 || !*rc::gen::arbitrary<bool>()) continue;
    const int64_t a = *rc::gen::inRange<int64_t>(0, k);
    int64_t b = *rc::gen::inRange<int64_t>(0, k - 1);
    if (b >= a) ++b;
    const int big_exp = *rc::gen::inRange(big_lo, big_hi + 1);
    const double sign = *rc::gen::arbitrary<bool>() ? -1.0 : 1.0;
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    for (int64_t h = 0; h < H; ++h) {
      const uint64_t u = splitmix64_mix(seed + static_cast<uint64_t>(h) * kColumnStride);
      const double big = sign * std::ldexp(1.0 + static_cast<double>(u & 7) / 8.0, big_exp);
      for (int64_t j = 0; j < k; ++j) {
        const uint64_t v = splitmix64_mix(u + static_cast<uint64_t>(j) + 1);
        const double small = ((v >> 10) & 1 ? -1.0 : 1.0) *
                             std::ldexp(1.0 + static_cast<double>((v >> 3) & 127) / 128.0,
                                        kSmallMaxExp - static_cast<int>(v % kSmallExps));
        const double value = j == a ? big : j == b ? -big : small;
        x.set_bits(r.positions(t)[static_cast<size_t>(j)] * H + h, from_double(dt, value));
      }
    }
    if (probs) {
      const Routing::Run s = r.slots(t);
      probs->set_bits(t * r.experts + s[static_cast<size_t>(b)], probs->bits(t * r.experts + s[static_cast<size_t>(a)]));
    }
  }
}

std::string map_class(const Routing& r) {
  if (r.tokens == 0) return "map=empty";
  std::vector<int64_t> valid;
  for (int64_t t = 0; t < r.tokens; ++t)
    if (r.slot_count(t) > 0) valid.push_back(r.slot_count(t));
  if (valid.empty()) return "map=all_padding";
  if (std::any_of(valid.begin(), valid.end(), [&](int64_t n) { return n != valid[0]; })) return "map=ragged";
  return static_cast<int64_t>(valid.size()) < r.tokens ? "map=padding" : "map=uniform";
}

// Whether some token's slot values in some column are more than 13 binades apart.
bool slot_spread(const Case& c, const Routing& r) {
  const std::string name = slot_sum_input(c.op, c.direction);
  const Tensor* x = name.empty() ? nullptr : c.input(name);
  if (!x || x->rank() != 2 || x->dim(0) != r.rows() || !is_floating(x->dtype())) return false;
  const int64_t H = x->dim(1);
  for (int64_t t = 0; t < r.tokens; ++t) {
    if (r.slot_count(t) < 2) continue;
    for (int64_t h = 0; h < H; ++h) {
      int lo = INT32_MAX, hi = INT32_MIN;
      for (int64_t p : r.positions(t)) {
        const double v = x->f64(p * H + h);
        if (!std::isfinite(v) || v == 0) continue;
        lo = std::min(lo, std::ilogb(v));
        hi = std::max(hi, std::ilogb(v));
      }
      if (hi != INT32_MIN && hi - lo > kExactSpreadBinades) return true;
    }
  }
  return false;
}

// --- kernel paths (KernelRecord::paths; gpu/routing.cu) ------------------------------------------

constexpr int64_t kTileTokens = 128;    // tokens of a tile: a block of the index's count and place kernels
constexpr int64_t kGroupExperts = 128;  // experts of a tile's row read at once
constexpr int64_t kScanPass = 16384;    // counts the index's one-block scan takes a pass
constexpr int64_t kPlaceSumsTiles = 128;  // the most tiles whose counts the index's place sums itself
constexpr int64_t kVectorBytes = 16;
constexpr int64_t kWarpLanes = 32;

// Rule 7's plan of a row sum (the spec's rule 7; the backends keep their own, gpu/common/row_sum.h
// and reference/numerics.h, and ops/swiglu_family.cpp the same for its tags): whether the lanes
// load vectors, how many share a row, and whether the rule models the row (else: rejected).
struct Rule7Lanes {
  bool modelled = false, vectorized = false;
  int64_t lanes = 1;
};
constexpr int64_t kRule7VectorizeFrom = 128, kRule7MaxThreads = 512, kRule7MaxWidth = 8192;

int64_t rule7_pow2(int64_t n) {  // P2(n): the largest power of two <= n, capped at 512
  int64_t p = 1;
  while (p * 2 <= n && p * 2 <= kRule7MaxThreads) p *= 2;
  return p;
}

// The plan of rows of fp32 values (the only ones whose plan a routing kernel takes).
Rule7Lanes rule7_lanes_fp32(int64_t width, int64_t rows) {
  constexpr int64_t kVector = kVectorBytes / static_cast<int64_t>(sizeof(float));
  Rule7Lanes r;
  r.vectorized = width >= kRule7VectorizeFrom;
  r.modelled = width >= 1 && width <= kRule7MaxWidth && (!r.vectorized || width % kVector == 0);
  if (!r.modelled) return r;
  const int64_t dim0 = r.vectorized ? width / kVector : width;
  const int64_t first_lanes = std::min(rule7_pow2(dim0), kWarpLanes);
  const int64_t height = std::min(rule7_pow2(std::max<int64_t>(rows, 1)), kRule7MaxThreads / first_lanes);
  r.lanes = std::min(rule7_pow2(dim0), kRule7MaxThreads / height);
  return r;
}

// The index, which every launch with tokens builds: a lane reads a map row's flags in 16-byte
// vectors (E % 16 == 0), 4-byte words (E % 4 == 0) or bytes; rows of more than one group of
// experts; one kernel for a map of one tile and at most kOneKernelExperts experts, two (count, and
// place summing the tile counts itself, in 16-byte loads where tiles % 4 == 0, the experts' totals
// carried from group to group) for the others of at most kPlaceSumsTiles tiles and
// kPlaceSumsCounts tile counts, three (count, scan, place) for the rest; maps of more than one
// tile, and tile counts that take the scan more than one pass.
void add_index_paths(const Routing& r, std::vector<std::string>& tags) {
  const int64_t E = r.experts;
  if (r.tokens == 0 || E == 0) return;
  tags.push_back(E % 16 == 0 ? "E%16=0" : E % 4 == 0 ? "E%16=4|8|12" : "E%4!=0");
  if (E > kGroupExperts) tags.push_back("E>128");
  const int64_t tiles = (r.tokens + kTileTokens - 1) / kTileTokens;
  if (tiles > 1) tags.push_back("T>128");
  if (tiles == 1 && E <= kOneKernelExperts) {
    tags.push_back("index:one_kernel");
  } else if (tiles <= kPlaceSumsTiles && tiles * E <= kPlaceSumsCounts) {
    tags.push_back("index:two_kernels");
    if (tiles % 4 == 0) tags.push_back("index:two_kernels:tiles%4=0");  // 16-byte loads of the column counts
    if (E > kGroupExperts) tags.push_back("index:two_kernels:E>128");   // totals carried across groups
  } else {
    tags.push_back("index:three_kernels");
    if (tiles * E > kScanPass) tags.push_back("tile_counts>16384");
  }
}

// The payload kernels, where a row is moved: copy_rows in 16-, 8-, 4- or 2-byte vectors by the
// row's bytes; gather_sum in 16-byte packets (half packets at ILP 4), else single elements, a token
// of more than 8 slots (which generated maps do not have: the reference inputs of k = 12 reach it)
// 4 slots at a time; at H == 1 the slot row sum
// (and unpermute's backward with probs its product kernel); the order-of-arrival atomics in
// 16-bit pairs where H is even.
// The vectors copy_rows moves a row of `bytes` in: 16, 8, 4 or 2 bytes, the widest that divides it.
int64_t copy_vector_bytes(int64_t bytes) { return bytes % 16 == 0 ? 16 : bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : 2; }

void add_payload_paths(const Routing& r, const Tensor& data, std::vector<std::string>& tags) {
  const int64_t H = data.dim(1);
  if (r.tokens == 0 || r.rows() == 0 || H == 0) return;
  const int64_t bytes = H * static_cast<int64_t>(dtype_size(data.dtype()));
  switch (copy_vector_bytes(bytes)) {
    case 16: tags.push_back("row_bytes%16=0"); break;
    case 8: tags.push_back("row_bytes%16=8"); break;
    case 4: tags.push_back("row_bytes%8=4"); break;
    default: tags.push_back("row_bytes%4=2"); break;
  }
  if (bytes % 16 != 0) tags.push_back("row_bytes%16!=0");
  if (H == 1) tags.push_back("H=1");
  tags.push_back(H % 2 == 0 ? "H%2=0" : "H%2=1");
}

// unpermute's backward with probs at H > 1 (ProbsBackwardBody in gpu/routing.cu): d_probs is rule 7's sum of
// fp32 products over h in a tensor of N rows; a thread holds two lanes of 16-bit rows (one packet
// an iteration; each lane's 4-element group alone where H % 8 == 4), and a row's threads meet in
// warp shuffles or, above a warp, in one block's shared memory.
void add_d_probs_paths(const Routing& r, const Tensor& data, std::vector<std::string>& tags) {
  const int64_t H = data.dim(1);
  if (r.tokens == 0 || r.rows() == 0 || H <= 1) return;
  const Rule7Lanes plan = rule7_lanes_fp32(H, r.rows());
  if (!plan.modelled) return;
  const int64_t lanes_per_thread = dtype_size(data.dtype()) == 2 ? 2 : 1;
  tags.push_back(plan.vectorized ? "d_probs:vectorized" : "d_probs:strided");
  if (plan.vectorized && lanes_per_thread == 2 && H % 8 == 4) tags.push_back("d_probs:H%8=4");
  tags.push_back(plan.lanes / lanes_per_thread > kWarpLanes ? "d_probs:block_tree" : "d_probs:warp_tree");
}

// copy_rows (permute's forward, unpermute's backward without probs): a block per token where a row
// has at least kCopyRowsTokenBlockVectors vectors, a thread per vector otherwise.
void add_copy_paths(const Routing& r, const Tensor& data, std::vector<std::string>& tags) {
  const int64_t bytes = data.dim(1) * static_cast<int64_t>(dtype_size(data.dtype()));
  if (r.tokens == 0 || r.rows() == 0 || bytes == 0) return;
  if (bytes / copy_vector_bytes(bytes) >= kCopyRowsTokenBlockVectors) tags.push_back("copy_rows:token_blocks");
}

void add_kernel_paths(const Case& c, const Routing& r, std::vector<std::string>& tags) {
  add_index_paths(r, tags);
  const Tensor* data = data_tensor(c);
  if (!data) return;
  add_payload_paths(r, *data, tags);
  const bool probs = c.input(kProbs) != nullptr;
  if ((c.op == "permute" && c.direction == Direction::kForward) ||
      (c.op == "unpermute" && c.direction == Direction::kBackward && !probs))
    add_copy_paths(r, *data, tags);
  if (c.op == "unpermute" && c.direction == Direction::kBackward && c.input(kProbs)) add_d_probs_paths(r, *data, tags);
}

// The tags add_kernel_paths emits for the op's direction.
std::vector<std::string> kernel_path_tags(const std::string& op, Direction d) {
  std::vector<std::string> tags = {"E%16=0", "E%16=4|8|12", "E%4!=0", "E>128", "index:one_kernel",
                                   "index:two_kernels", "index:two_kernels:tiles%4=0", "index:two_kernels:E>128",
                                   "index:three_kernels", "T>128", "tile_counts>16384",
                                   "row_bytes%16=0", "row_bytes%16=8", "row_bytes%8=4", "row_bytes%4=2",
                                   "row_bytes%16!=0", "H=1", "H%2=0", "H%2=1"};
  if ((op == "permute" && d == Direction::kForward) || (op == "unpermute" && d == Direction::kBackward))
    tags.push_back("copy_rows:token_blocks");
  if (op == "unpermute" && d == Direction::kBackward)
    tags.insert(tags.end(), {"d_probs:vectorized", "d_probs:strided", "d_probs:H%8=4", "d_probs:block_tree",
                             "d_probs:warp_tree"});
  return tags;
}

std::vector<std::string> floating_inputs(const std::string& op, Direction d) {
  if (op == "permute") return {d == Direction::kForward ? "tokens" : "d_permuted"};
  if (d == Direction::kForward) return {"permuted", "probs"};
  return {"d_out", "probs", "permuted"};
}

}  // namespace

std::string slot_sum_input(const std::string& op, Direction d) {
  if (op == "permute" && d == Direction::kBackward) return "d_permuted";
  if (op == "unpermute" && d == Direction::kForward) return "permuted";
  return "";
}

rc::Gen<Case> generate(const std::string& op, Direction direction) {
  return rc::gen::exec([op, direction] {
    Case c;
    c.op = op;
    c.direction = direction;
    const DType dt = *data_dtype();
    int64_t H = *hidden_H();
    const int64_t k = *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(1)}, {6, rc::gen::inRange<int64_t>(2, kMaxK + 1)}});
    int64_t T = *gen::rows();
    int64_t E = k;  // E = k: every token routes to every expert
    // The last four are fixed shapes, so that the CUDA kernels' rarer paths occur at every size.
    enum Shape { kEvery, kMany, kSomeMore, kWordRows, kThreeKernelIndex, kMultiTile, kOneWideToken };
    switch (*rc::gen::weightedElement<Shape>({{2, kEvery},
                                              {2, kMany},
                                              {8, kSomeMore},
                                              {2, kWordRows},
                                              {2, kThreeKernelIndex},
                                              {2, kMultiTile},
                                              {2, kOneWideToken}})) {
      case kMany:  // E >> T
        E = element_of(kManyExperts);
        T = std::min(T, kMaxTokensWithManyExperts);
        break;
      case kSomeMore: E = k + *rc::gen::inRange<int64_t>(0, kMaxExtraExperts + 1); break;
      case kWordRows: E = element_of(kWordExperts); break;
      case kThreeKernelIndex:
        E = kThreeKernelExperts;
        T = std::min<int64_t>(T, 1);
        break;
      case kMultiTile:
        T = *rc::gen::elementOf(std::vector<int64_t>{kMultiTileTokens, kFourTileTokens});
        H = T == kMultiTileTokens ? *rc::gen::inRange<int64_t>(1, kMultiTileMaxH + 1) : 1;
        if (*rc::gen::weightedElement<bool>({{2, false}, {1, true}})) E = kTwoGroupExperts;
        break;
      case kOneWideToken:
        T = 1;
        H = kOneWideTokenH;
        break;
      case kEvery: break;
    }
    const MapKind kind = *rc::gen::weightedElement<MapKind>(
        {{6, MapKind::kUniform}, {2, MapKind::kPadding}, {1, MapKind::kAllPadding}, {1, MapKind::kRagged}});
    // RapidCheck's size (0..100) bounds the elements of the data tensors: few tokens when H is wide.
    const int64_t max_elements =
        kMinElements + int64_t{*rc::gen::withSize([](int size) { return rc::gen::just(size); })} * kElementsPerSize;
    const int64_t per_token = H * (std::max(k, kMaxK) + 1);
    if (T > 1 && T * per_token > max_elements) T = std::max<int64_t>(1, max_elements / per_token);

    const Tensor map = map_tensor(draw_rows(kind, T, E, k), E);
    c.inputs[kMap] = map;
    const Routing r = read(op, &map);
    auto data = [&](int64_t rows) { return *gen::tensor(dt, {rows, H}, *gen::value_family()); };
    if (op == "permute") {
      if (direction == Direction::kForward) c.inputs["tokens"] = data(T);
      else c.inputs["d_permuted"] = data(r.rows());
    } else {
      const bool with_probs = *rc::gen::arbitrary<bool>();
      if (with_probs) c.inputs[kProbs] = *gen::tensor(DType::kFP32, {T, E}, *gen::value_family());
      if (direction == Direction::kForward) {
        c.inputs["permuted"] = data(r.rows());
      } else {
        c.inputs["d_out"] = data(T);
        if (with_probs) c.inputs["permuted"] = data(r.rows());
      }
    }
    const std::string slot = slot_sum_input(op, direction);
    if (!slot.empty() && *rc::gen::weightedElement<bool>({{3, false}, {1, true}})) make_order_sensitive(c, slot, r, dt);
    return c;
  });
}

std::vector<std::string> required_tags(const std::string& op, Direction direction) {
  std::vector<std::string> tags = {"rows=0",         "rows=1..16",      "map=uniform", "map=padding",
                                   "map=all_padding", "map=ragged",     "E=k",         "E>>T",
                                   "k=1",            "H=small",         "H=multiple_of_8", "H=4096",
                                   "dtype=bf16",     "dtype=fp32",      "dtype=fp16"};
  if (!slot_sum_input(op, direction).empty()) tags.push_back("slots:spread>13");
  if (op == "unpermute") tags.insert(tags.end(), {"probs", "no_probs"});
  const std::vector<std::string> paths = kernel_path_tags(op, direction);
  tags.insert(tags.end(), paths.begin(), paths.end());
  for (const std::string& input : floating_inputs(op, direction))
    for (const char* value : {"nan", "inf", "-0", "subnormal"}) tags.push_back(input + ":" + value);
  return tags;
}

CaseClasses classes(const Case& c) {
  CaseClasses k;
  const std::optional<Routing> r = try_read(c);
  const bool probs = c.input(kProbs) != nullptr;
  if (!r) {
    k.shape_class = "map=unreadable";
    k.value_class = "plain";
    return k;
  }
  const std::string shape = map_class(*r);
  // The signature keeps the map's class (padding, ragged: where contracts' rules differ), probs,
  // and whether a slot sum is order-sensitive or holds a NaN; finer value tags stay in `tags`.
  k.shape_class = shape + (probs ? ",probs" : "");
  bool nan = false;
  for (const auto& [name, t] : c.inputs)
    if (is_floating(t.dtype()))
      for (const std::string& v : gen::value_tags(t)) {
        nan = nan || v == "nan";
        k.tags.push_back(name + ":" + v);
      }
  const bool spread = slot_spread(c, *r);
  k.value_class = std::string(spread ? "order_sensitive" : "plain") + (nan ? ",nan" : "");
  k.tags.insert(k.tags.end(), {gen::rows_class(r->tokens), shape});
  if (spread) k.tags.push_back("slots:spread>13");
  if (c.op == "unpermute") k.tags.push_back(probs ? "probs" : "no_probs");
  if (shape == "map=uniform" || shape == "map=padding") {
    int64_t kk = 0;
    for (int64_t t = 0; t < r->tokens; ++t) kk = std::max(kk, r->slot_count(t));
    if (kk == 1) k.tags.push_back("k=1");
    if (kk == r->experts) k.tags.push_back("E=k");
  }
  if (r->experts >= 8 * std::max<int64_t>(r->tokens, 1) && r->experts >= 4 * kMaxK) k.tags.push_back("E>>T");
  const int64_t H = data_width(c);
  if (H >= 0)
    k.tags.push_back(H == kModelH ? "H=4096" : H <= kSmallHMax ? "H=small" : H % 8 == 0 ? "H=multiple_of_8" : "H=other");
  for (const char* name : {"tokens", "d_out", "permuted", "d_permuted"})
    if (const Tensor* t = c.input(name)) {
      k.tags.push_back("dtype=" + std::string(dtype_name(t->dtype())));
      break;
    }
  add_kernel_paths(c, *r, k.tags);
  return k;
}

// The output an op's atomic slot sums write: permute's d_tokens (backward), unpermute's out (forward).
std::string slot_sum_output(const std::string& op) { return op == "permute" ? "d_tokens" : "out"; }

// The bound every order of the atomic slot sums keeps the summed output within (core/sum_bound.h):
// each token's row element the sum of its slot rows' elements, or with probs their exact products
// with probs[t, e] rounded to fp32. Empty for a direction that sums no slots or a case the op refuses.
std::map<std::string, ElementBounds> arrival_order_bound(const std::string& name, const Case& c) {
  std::map<std::string, ElementBounds> bounds;
  const std::string slot = slot_sum_input(name, c.direction);
  const Tensor* rows = slot.empty() ? nullptr : c.input(slot);
  const std::optional<Routing> r = try_read(c);
  if (!rows || rows->rank() != 2 || !r || rows->dim(0) != r->rows()) return bounds;
  const Tensor* probs = name == "unpermute" ? c.input("probs") : nullptr;
  if (probs && (probs->rank() != 2 || probs->dim(0) != r->tokens || probs->dim(1) != r->experts)) return bounds;
  const int64_t H = rows->dim(1);
  const AnyOrderSum arithmetic{.rounded_addends = probs != nullptr,
                               .step = probs ? DType::kFP32 : rows->dtype(),
                               .out = rows->dtype()};
  ElementBounds& b = bounds[slot_sum_output(name)];
  b.truth.assign(static_cast<size_t>(r->tokens * H), 0.0);
  b.bound.assign(b.truth.size(), 0.0);
  for (int64_t t = 0; t < r->tokens; ++t) {
    const Routing::Run pos = r->positions(t), experts = r->slots(t);
    for (int64_t h = 0; h < H; ++h) {
      double truth = 0, S = 0;
      for (size_t j = 0; j < pos.size(); ++j) {
        const double x = rows->f64(pos[j] * H + h) * (probs ? probs->f64(t * r->experts + experts[j]) : 1.0);  // exact
        truth += x;
        if (std::isfinite(x)) S += std::fabs(x);
      }
      const auto i = static_cast<size_t>(t * H + h);
      b.truth[i] = truth;
      b.bound[i] = any_order_bound(arithmetic, static_cast<int64_t>(pos.size()), S, truth);
    }
  }
  return bounds;
}

void add_routing_generators(OpInfo& op) {
  const std::string name = op.name;
  op.generate = [name](Direction d) { return generate(name, d); };
  op.required_tags = [name](Direction d) { return required_tags(name, d); };
  op.classes = classes;
  op.take_rows = take_rows;
  op.shrink_shape = shrink_shape;
  // The atomic sums add a token's slot rows: with at most one slot a token every sum has one addend.
  // The directions that sum no slots (the copies, unpermute's d_probs) are the same in any order.
  // Elsewhere the row of a token of at most one slot is one addend an element.
  for (ContractInfo& contract : op.contracts)
    if (contract.order_of_arrival) {
      contract.arrival_order_free = [name](const Case& c) {
        if (slot_sum_input(name, c.direction).empty()) return true;
        const std::optional<Routing> r = try_read(c);
        if (!r) return false;
        for (int64_t t = 0; t < r->tokens; ++t)
          if (r->slot_count(t) > 1) return false;
        return true;
      };
      contract.arrival_order_fixed = [name](const Case& c) {
        std::map<std::string, std::vector<bool>> fixed;
        const std::string slot = slot_sum_input(name, c.direction);
        const Tensor* rows = slot.empty() ? nullptr : c.input(slot);
        const std::optional<Routing> r = try_read(c);
        if (!rows || rows->rank() != 2 || !r) return fixed;
        const auto H = static_cast<size_t>(rows->dim(1));
        std::vector<bool> one(static_cast<size_t>(r->tokens) * H, false);
        for (int64_t t = 0; t < r->tokens; ++t)
          if (r->slot_count(t) <= 1) std::fill_n(one.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(t) * H), H, true);
        fixed[slot_sum_output(name)] = std::move(one);
        return fixed;
      };
      contract.arrival_order_bound = [name](const Case& c) { return arrival_order_bound(name, c); };
      contract.bound_doc = std::string("each token's row element the sum of its slot rows (with probs: their fp32 "
                                       "products with probs, summed in fp32 and rounded once to the dtype; "
                                       "without: every addition rounded to the dtype): ") +
                           kAnyOrderBoundDoc;
    }
}

Tensor small_routing_map(int64_t tokens, int64_t experts, int64_t k, const std::vector<int64_t>& counts) {
  Tensor m(DType::kBool, {tokens, experts});
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t n = counts.empty() ? k : counts.at(static_cast<size_t>(t));
    for (int64_t j = 0; j < n; ++j) m.set_bits(t * experts + (t + j) % experts, 1);
  }
  return m;
}

Tensor large_routing_map(int64_t tokens, int64_t experts, int64_t k, uint64_t seed) {
  constexpr uint64_t kTokenStride = 0x100000001b3ull;
  Tensor map(DType::kBool, {tokens, experts});
  std::vector<int64_t> pool;
  for (int64_t t = 0; t < tokens; ++t) {
    pool = iota(0, experts);
    uint64_t state = seed * kTokenStride + static_cast<uint64_t>(t);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t pick = j + static_cast<int64_t>(splitmix64_next(state) % static_cast<uint64_t>(experts - j));
      std::swap(pool[static_cast<size_t>(j)], pool[static_cast<size_t>(pick)]);
      map.set_bits(t * experts + pool[static_cast<size_t>(j)], 1);
    }
  }
  return map;
}

std::string reference_name(const ReferenceShape& s) {
  return "tokens" + std::to_string(s.tokens) + "_H" + std::to_string(s.H) + "_E" + std::to_string(s.E) + "_k" +
         std::to_string(s.k);
}

}  // namespace bitparity::ops::routing_map
