// Metamorphic properties of permute and unpermute (spec OP-2, OP-3): transformations of a case
// whose effect the spec fixes exactly. (a) unpermute(permute(x)) sums each token's k copies in
// the contract's slot order; (b) permute's backward is unpermute's forward without probs; (c)
// renaming experts moves permute's expert blocks, and changes unpermute's out only where a token's
// slot sum depends on the order; (d) a token's outputs are those of the case cut to that token;
// (e) megatron_eager and baseline differ only where the order shows, and do there (a hand-built
// case with its bits derived below); (f) paddle_aligned's padding rows are +0. The slot orders are
// stated here from the spec, independently of reference/.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/dtype.h"
#include "ops/routing_map.h"
#include "properties/harness.h"
#include "properties/rows.h"
#include "reference/numerics.h"

namespace bitparity::ops {
namespace {

using namespace props;

constexpr uint32_t kCanonicalNan = 0x7FFFFFFFu;  // every fp32 NaN result of an NVIDIA GPU

// --- the spec's slot orders and positions, restated --------------------------------------------

bool is_routing(const Target& t) { return t.op == "permute" || t.op == "unpermute"; }
bool four_accumulators(const std::string& contract) { return contract != "baseline"; }

int significand_bits(DType dt) { return dt == DType::kBF16 ? 8 : dt == DType::kFP16 ? 11 : 24; }

// One token's slot values x (fp32, slot order) summed as `contract` does, stored in `dt`: rule 7's
// four accumulators (megatron_eager, paddle_aligned; with H = 1 the slots are torch's innermost
// dimension, a last-dim row sum of [T, k]), or the baseline's ascending order from +0 with the
// accumulator rounded to `dt` after every addition (fp32 when probs are applied).
uint64_t model_sum(const std::vector<float>& x, const std::string& contract, DType dt, bool fp32_accumulator,
                   int64_t H, int64_t T) {
  float s = 0.0f;
  if (four_accumulators(contract) && H == 1) {
    s = ref::torch_row_sum(x, T);
  } else if (four_accumulators(contract)) {
    float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (size_t j = 0; j < x.size(); ++j) a[j % 4] = a[j % 4] + x[j];
    s = ((a[0] + a[1]) + a[2]) + a[3];
  } else {  // the baseline's atomic adds (fp32's flush subnormals)
    s = ref::atomic_sum(x, fp32_accumulator ? DType::kFP32 : dt);
  }
  // CUDA writes a computed NaN canonically: fp32 0x7FFFFFFF, bf16 and fp16 0x7FFF (eager PyTorch's
  // recorded outputs carry these).
  if (std::isnan(s)) return dt == DType::kFP32 ? kCanonicalNan : 0x7FFFu;
  Tensor t(dt, {1});
  t.set_f32(0, s);
  return t.bits(0);
}

// Each token's experts ascending and pos(t, e) of each, counted from the map (OP-2).
struct Slots {
  std::vector<std::vector<int64_t>> experts, rows;
  std::vector<int64_t> offset, count;
};
Slots slots_of(const Tensor& map) {
  const int64_t T = map.dim(0), E = map.dim(1);
  Slots s;
  s.experts.resize(static_cast<size_t>(T));
  s.rows.resize(static_cast<size_t>(T));
  s.count.assign(static_cast<size_t>(E), 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e)
      if (map.bits(t * E + e)) s.experts[static_cast<size_t>(t)].push_back(e), ++s.count[static_cast<size_t>(e)];
  s.offset.assign(static_cast<size_t>(E), 0);
  for (int64_t e = 1; e < E; ++e) s.offset[static_cast<size_t>(e)] = s.offset[static_cast<size_t>(e - 1)] + s.count[static_cast<size_t>(e - 1)];
  std::vector<int64_t> seen(static_cast<size_t>(E), 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e : s.experts[static_cast<size_t>(t)])
      s.rows[static_cast<size_t>(t)].push_back(s.offset[static_cast<size_t>(e)] + seen[static_cast<size_t>(e)]++);
  return s;
}

// routing_map::read against slots_of on random maps, small and wide: read counts the experts in an
// array where they are few and sorts the entries where experts far outnumber them (E >> T), and both
// must give every slot its expert-major position; read_counts (what validate reads) must give the
// same rows and entries.
TEST(RoutingMap, ReadGivesEverySlotItsPositionWhetherItCountsOrSortsTheExperts) {
  std::mt19937_64 random(20261206);
  int counted = 0, sorted = 0;
  for (int round = 0; round < 400; ++round) {
    const bool wide = round % 2 == 1;
    // Up to 40 tokens of up to 6 experts: enough entries that an unstable sort would reorder them.
    const int64_t T = static_cast<int64_t>(random() % (round % 4 < 2 ? 7 : 41));
    const int64_t E = wide ? routing_map::kCountedExperts + 300 + static_cast<int64_t>(random() % 3000) : 1 + static_cast<int64_t>(random() % 12);
    Tensor map(DType::kBool, {T, E});
    for (int64_t t = 0; t < T; ++t) {
      const int64_t k = static_cast<int64_t>(random() % static_cast<uint64_t>(std::min<int64_t>(E, 6) + 1));
      for (int64_t j = 0; j < k; ++j) map.set_bits(t * E + static_cast<int64_t>(random() % static_cast<uint64_t>(E)), 1);
    }
    const Slots want = slots_of(map);
    const routing_map::Routing got = routing_map::read("permute", &map);
    const routing_map::Counts counts = routing_map::read_counts("permute", &map);
    int64_t n = 0;
    for (const auto& e : want.experts) n += static_cast<int64_t>(e.size());
    (E <= n + routing_map::kCountedExperts ? counted : sorted) += 1;
    ASSERT_EQ(got.tokens, T);
    ASSERT_EQ(got.rows(), n);
    ASSERT_EQ(counts.entries, n);
    ASSERT_EQ(counts.tokens, T);
    ASSERT_EQ(counts.experts, E);
    std::vector<int64_t> token_of_row(static_cast<size_t>(n), -1);
    for (int64_t t = 0; t < T; ++t) {
      const auto& experts = want.experts[static_cast<size_t>(t)];
      const auto& rows = want.rows[static_cast<size_t>(t)];
      ASSERT_EQ(got.slot_count(t), static_cast<int64_t>(experts.size())) << "token " << t;
      ASSERT_EQ(counts.per_row[static_cast<size_t>(t)], static_cast<int64_t>(experts.size())) << "token " << t;
      EXPECT_EQ(std::vector<int64_t>(got.slots(t).begin(), got.slots(t).end()), experts) << "token " << t << ", E " << E;
      EXPECT_EQ(std::vector<int64_t>(got.positions(t).begin(), got.positions(t).end()), rows) << "token " << t << ", E " << E;
      for (size_t j = 0; j < experts.size(); ++j) {
        EXPECT_EQ(got.position(t, experts[j]), rows[j]);
        token_of_row[static_cast<size_t>(rows[j])] = t;
      }
      const int64_t absent = static_cast<int64_t>(random() % static_cast<uint64_t>(E));
      if (std::find(experts.begin(), experts.end(), absent) == experts.end()) EXPECT_EQ(got.position(t, absent), -1);
    }
    EXPECT_EQ(got.token_of_row, token_of_row) << "E " << E;
  }
  EXPECT_GT(counted, 100);
  EXPECT_GT(sorted, 100);
}

// Whether every order of summing x gives the same result in a p-bit accumulator: a NaN makes any
// order NaN; otherwise all finite, each a multiple of 2^q, and sum |x| < 2^(q + p), so that every
// partial sum of every order is exact. (Sufficient, not necessary: an Inf is counted sensitive.)
// An accumulator that flushes subnormals (fp32 atomics) also needs q >= -126: no partial sum of
// any order is then subnormal.
bool order_insensitive(const std::vector<float>& x, int p, bool flushes = false) {
  if (std::any_of(x.begin(), x.end(), [](float v) { return std::isnan(v); })) return true;
  int q = INT32_MAX;
  double total = 0;
  for (float v : x) {
    if (!std::isfinite(v)) return false;
    if (v == 0) continue;
    int e = 0;
    double m = std::frexp(static_cast<double>(v), &e);  // v = m * 2^e, 0.5 <= |m| < 1
    int lowest = e;
    while (m != std::trunc(m)) m *= 2, --lowest;         // v = integer * 2^lowest
    q = std::min(q, lowest);
    total += std::fabs(static_cast<double>(v));
  }
  if (flushes && q != INT32_MAX && q < -126) return false;
  return q == INT32_MAX || total < std::ldexp(1.0, q + p);
}

// The fp32 slot values of token t at column h of an unpermute forward case (times probs).
std::vector<float> slot_values(const Case& c, const Slots& s, int64_t t, int64_t h) {
  const Tensor& z = *c.input("permuted");
  const Tensor* probs = c.input("probs");
  const int64_t H = z.dim(1), E = c.input("routing_map")->dim(1);
  std::vector<float> x;
  for (size_t j = 0; j < s.rows[static_cast<size_t>(t)].size(); ++j) {
    float v = z.f32(s.rows[static_cast<size_t>(t)][j] * H + h);
    if (probs) v = v * probs->f32(t * E + s.experts[static_cast<size_t>(t)][j]);
    x.push_back(v);
  }
  return x;
}

std::string hex(DType dt, uint64_t bits) { return describe_bits(dt, bits); }

Target other(const Target& t, const std::string& op, Direction d) { return {op, d, t.impl}; }
bool has_impl(const std::string& op, const std::string& impl) {
  const auto impls = harness_registry().impls_of(op);
  return std::find(impls.begin(), impls.end(), impl) != impls.end();
}

// --- (a) unpermute(permute(x)) -------------------------------------------------------------------

bool permute_forward_with_unpermute(const Target& t) {
  return t.op == "permute" && t.direction == Direction::kForward && has_impl("unpermute", t.impl);
}

class RoundTrip : public testing::TestWithParam<Target> {};

// With probs absent or all 1.0, unpermute(permute(x))[t] is the contract's sum of k_t copies of
// x[t]: with four accumulators ((v+v)+(v+v)) for k = 4, ((2v+2v)+v)+v for k = 6; the baseline's
// v, dt(2v), dt(dt(2v)+v), ... without probs and the fp32 running sum rounded once with them.
TEST_P(RoundTrip, UnpermuteOfPermuteSumsKCopiesInTheContractsOrder) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  BITPARITY_SKIP_IF_ARRIVAL_ORDER(target);
  check_property([&] {
    const Case c = *op_info("permute").generate(Direction::kForward);
    reproduce_with(c, "invariance_violation");
    const Outcome p = run(target, c);
    if (p.rejected()) {
      RC_CLASSIFY(true, "permute rejects (" + p.reject_class + ")");
      return;
    }
    const bool unit_probs = *rc::gen::arbitrary<bool>();
    const Tensor& map = *c.input("routing_map");
    Case u;
    u.op = "unpermute";
    u.inputs["permuted"] = p.outputs->at("permuted");
    u.inputs["routing_map"] = map;
    if (unit_probs) {
      Tensor ones(DType::kFP32, map.shape());
      for (int64_t i = 0; i < ones.numel(); ++i) ones.set_f32(i, 1.0f);
      u.inputs["probs"] = ones;
    }
    const Outcome o = run(other(target, "unpermute", Direction::kForward), u);
    RC_ASSERT(!o.rejected());
    const Tensor& x = *c.input("tokens");
    const Tensor& out = o.outputs->at("out");
    const Slots s = slots_of(map);
    const int64_t H = x.dim(1);
    for (int64_t t = 0; t < x.dim(0); ++t)
      for (int64_t h = 0; h < H; ++h) {
        const std::vector<float> copies(s.rows[static_cast<size_t>(t)].size(), x.f32(t * H + h));
        const uint64_t want = model_sum(copies, target.contract(), x.dtype(), unit_probs, H, x.dim(0));
        if (out.bits(t * H + h) != want)
          RC_FAIL("out[" + std::to_string(t) + ", " + std::to_string(h) + "] of " + std::to_string(copies.size()) +
                  " copies of " + hex(x.dtype(), x.bits(t * H + h)) + ": got " + hex(x.dtype(), out.bits(t * H + h)) +
                  ", want " + hex(x.dtype(), want));
      }
    RC_TAG(unit_probs ? "probs all 1.0" : "no probs", op_info("permute").classes(c).shape_class);
  });
}

INSTANTIATE_TEST_SUITE_P(Metamorphic, RoundTrip, testing::ValuesIn(targets_where(permute_forward_with_unpermute)),
                         target_name);

// --- (b) permute's backward is unpermute's forward ----------------------------------------------

bool permute_backward_with_unpermute(const Target& t) {
  return t.op == "permute" && t.direction == Direction::kBackward && has_impl("unpermute", t.impl);
}

class SameSum : public testing::TestWithParam<Target> {};

// d_tokens = permute_bwd(d_permuted) and out = unpermute_fwd(permuted = d_permuted) without probs
// are one gather and one slot sum: bit-identical, rejected alike.
TEST_P(SameSum, PermuteBackwardIsUnpermuteForwardWithoutProbs) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  BITPARITY_SKIP_IF_ARRIVAL_ORDER(target);
  check_property([&] {
    const Case c = *op_info("permute").generate(Direction::kBackward);
    reproduce_with(c, "invariance_violation");
    Case u;
    u.op = "unpermute";
    u.inputs["permuted"] = *c.input("d_permuted");
    u.inputs["routing_map"] = *c.input("routing_map");
    const Outcome a = run(target, c), b = run(other(target, "unpermute", Direction::kForward), u);
    RC_ASSERT(a.rejected() == b.rejected());
    RC_TAG(op_info("permute").classes(c).value_class);
    if (a.rejected()) {
      RC_ASSERT(a.reject_class == b.reject_class);
      return;
    }
    RC_ASSERT(bit_identical(a.outputs->at("d_tokens"), b.outputs->at("out")));
  });
}

INSTANTIATE_TEST_SUITE_P(Metamorphic, SameSum, testing::ValuesIn(targets_where(permute_backward_with_unpermute)),
                         target_name);

// --- (c) renaming experts ----------------------------------------------------------------------------

bool routing_forward(const Target& t) { return is_routing(t) && t.direction == Direction::kForward; }

// A random renaming: new expert e' is old expert old_of[e'].
std::vector<int64_t> draw_renaming(int64_t E) {
  std::vector<int64_t> old_of(static_cast<size_t>(E));
  std::iota(old_of.begin(), old_of.end(), 0);
  for (int64_t i = E - 1; i > 0; --i) std::swap(old_of[static_cast<size_t>(i)], old_of[static_cast<size_t>(*rc::gen::inRange<int64_t>(0, i + 1))]);
  return old_of;
}

class Renaming : public testing::TestWithParam<Target> {};

// permute: renaming the map's columns moves each expert's block of permuted to the block of its
// new id, bit for bit. unpermute: a token's slots are its experts in ascending id, so renaming
// reorders its slot sum: out[t, h] is the contract's sum in the new order, and equals the old out
// wherever that sum cannot depend on the order (order_insensitive); where it can, it may change.
TEST_P(Renaming, RenamingExpertsMovesBlocksAndReordersSlotSums) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  BITPARITY_SKIP_IF_ARRIVAL_ORDER(target);
  check_property([&] {
    const Case c = *op_info(target.op).generate(Direction::kForward);
    const Tensor& map = *c.input("routing_map");
    const std::vector<int64_t> old_of = draw_renaming(map.dim(1));
    routing_map::Cut rename = routing_map::tokens_cut(0, map.dim(0));
    rename.experts = old_of;
    const Case renamed = routing_map::cut(c, rename);
    reproduce_with(c, "invariance_violation");
    const Outcome a = run(target, c), b = run(target, renamed);
    RC_ASSERT(a.rejected() == b.rejected());  // the counts per row do not change
    if (a.rejected()) return;
    const Slots s = slots_of(map), s2 = slots_of(*renamed.input("routing_map"));
    if (target.op == "permute") {
      const Tensor &p = a.outputs->at("permuted"), &p2 = b.outputs->at("permuted");
      const int64_t H = p.dim(1);
      for (size_t e2 = 0; e2 < old_of.size(); ++e2) {
        const size_t e = static_cast<size_t>(old_of[e2]);
        RC_ASSERT(s2.count[e2] == s.count[e]);
        for (int64_t i = 0; i < s.count[e] * H; ++i)
          RC_ASSERT(p2.bits(s2.offset[e2] * H + i) == p.bits(s.offset[e] * H + i));
      }
      return;
    }
    const Tensor &out = a.outputs->at("out"), &out2 = b.outputs->at("out");
    const DType dt = out.dtype();
    const bool probs = c.input("probs") != nullptr;
    const int p_bits = four_accumulators(target.contract()) || probs ? 24 : significand_bits(dt);
    const int64_t H = out.dim(1);
    bool changed = false, sensitive = false;
    for (int64_t t = 0; t < out.dim(0); ++t)
      for (int64_t h = 0; h < H; ++h) {
        const std::vector<float> x2 = slot_values(renamed, s2, t, h);
        RC_ASSERT(out2.bits(t * H + h) == model_sum(x2, target.contract(), dt, probs, H, out.dim(0)));
        const bool insensitive = order_insensitive(x2, p_bits, !four_accumulators(target.contract()) && p_bits == 24);
        sensitive = sensitive || !insensitive;
        if (out2.bits(t * H + h) == out.bits(t * H + h)) continue;
        changed = true;
        if (insensitive)
          RC_FAIL("out[" + std::to_string(t) + ", " + std::to_string(h) + "] changed under renaming although its slot "
                  "sum cannot depend on the order: " + hex(dt, out.bits(t * H + h)) + " -> " + hex(dt, out2.bits(t * H + h)));
      }
    RC_CLASSIFY(sensitive, "some slot sum may depend on the order");
    RC_CLASSIFY(changed, "renaming changed out");
  });
}

INSTANTIATE_TEST_SUITE_P(Metamorphic, Renaming, testing::ValuesIn(targets_where(routing_forward)), target_name);

// --- (d) a token alone -------------------------------------------------------------------------------

class TokenAlone : public testing::TestWithParam<Target> {};

bool is_output_rows_first(const Target& t, const std::string& name, bool* count_dependent) {
  for (const TensorSpec& spec : op_info(t.op).output_specs(t.direction))
    if (spec.name == name) {
      *count_dependent = spec.row_count_dependent;
      return spec.rows_first;
    }
  return false;
}

// A token's outputs in a batch are those of the case cut to it (OpInfo::take_rows): its rows of the
// [T, ...] outputs, and its slots' rows of the [N, H] outputs (pos(t, e_j) in the batch, row j
// alone), bit for bit. d_probs sums over H with rule 7's lanes set by N, so it may change
// (classified). A case the contract refuses as a whole (megatron_eager's one k, paddle_aligned's
// one k over valid rows) is a batch-level rule, not a token's: it is classified and skipped.
TEST_P(TokenAlone, ATokensOutputsAreThoseOfTheTokenAlone) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  BITPARITY_SKIP_IF_ARRIVAL_ORDER(target);
  check_property([&] {
    const Case c = *rc::gen::suchThat(op_info(target.op).generate(target.direction),
                                      [](const Case& c) { return c.input("routing_map")->dim(0) >= 1; });
    const Tensor& map = *c.input("routing_map");
    const int64_t t = *rc::gen::inRange<int64_t>(0, map.dim(0));
    reproduce_with(c, "invariance_violation");
    const Outcome whole = run(target, c);
    if (whole.rejected()) {
      RC_CLASSIFY(true, "the contract refuses the batch (" + whole.reject_class + ")");
      return;
    }
    const Case single = take_rows(c, t, 1);
    const Outcome alone = run(target, single);
    RC_ASSERT(!alone.rejected());
    const Slots s = slots_of(map);
    for (const auto& [name, w] : *whole.outputs) {
      const Tensor& a = alone.outputs->at(name);
      const int64_t width = w.dim(0) == 0 ? 0 : w.numel() / w.dim(0);
      auto same_row = [&](int64_t wr, int64_t ar) {
        for (int64_t i = 0; i < width; ++i)
          if (w.bits(wr * width + i) != a.bits(ar * width + i)) return false;
        return true;
      };
      bool count_dependent = false;
      if (is_output_rows_first(target, name, &count_dependent)) {
        if (count_dependent) {
          RC_CLASSIFY(!same_row(t, 0), name + " changes with the number of routed pairs");
          continue;
        }
        RC_ASSERT(same_row(t, 0));
        continue;
      }
      const std::vector<int64_t>& rows = s.rows[static_cast<size_t>(t)];
      RC_ASSERT(a.dim(0) == static_cast<int64_t>(rows.size()));
      for (size_t j = 0; j < rows.size(); ++j) RC_ASSERT(same_row(rows[j], static_cast<int64_t>(j)));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Metamorphic, TokenAlone, testing::ValuesIn(targets_where(is_routing)), target_name);

// --- (e) megatron_eager vs baseline ---------------------------------------------------------------

// One token routed to every expert; H = 2, both columns alike (H = 1 would make the slots torch's
// innermost dimension, a last-dim reduce).
Case unpermute_case(DType dt, const std::vector<double>& slots) {
  const int64_t k = static_cast<int64_t>(slots.size());
  Case c;
  c.op = "unpermute";
  Tensor map(DType::kBool, {1, k}), z(dt, {k, 2});
  for (int64_t j = 0; j < k; ++j) {
    map.set_bits(j, 1);
    z.set_bits(2 * j, from_double(dt, slots[static_cast<size_t>(j)]));
    z.set_bits(2 * j + 1, from_double(dt, slots[static_cast<size_t>(j)]));
  }
  c.inputs["routing_map"] = map;
  c.inputs["permuted"] = z;
  return c;
}

// The bits of element `i` of output `name` under `impl`.
uint64_t out_bits(const std::string& impl, const Case& c, const std::string& name = "out", int64_t i = 0) {
  const Outcome o = run_outcome(harness_registry(), impl, c);
  if (o.rejected()) throw std::runtime_error(impl + " rejects: " + o.message);
  return o.outputs->at(name).bits(i);
}

// One token routed to experts 0, 1, 2 (k = 3), H = 2, bf16 slot values 1, 2^-8, 2^-8.
// megatron_eager: fp32 accumulators a0 = 1, a1 = 2^-8, a2 = 2^-8, a3 = +0; ((1 + 2^-8) + 2^-8) + 0
// = 1 + 2^-7 exactly in fp32, which is a bf16 value: 0x3f81 (1.0078125).
// baseline: bf(0 + 1) = 1; bf(1 + 2^-8) is the tie between 0x3f80 and 0x3f81, to even: 0x3f80;
// again 0x3f80: the result is 0x3f80 (1.0). With probs all 1.0 the baseline sums in fp32 and
// rounds once: 0x3f81, like megatron_eager.
// fp32, k = 5, slots 2^30, 1, 0, 0, -2^30: megatron_eager a0 = 2^30 + -2^30 = 0, a1 = 1, so the
// result is 1.0 (0x3f800000); baseline 0 + 2^30 = 2^30, + 1 = 2^30 (an ulp of 2^30 is 128), + 0,
// + 0, + -2^30 = +0 (0x00000000).
TEST(MegatronVsBaseline, HandBuiltCasesDifferAsDerived) {
  const Case bf = unpermute_case(DType::kBF16, {1.0, 0x1p-8, 0x1p-8});
  if (const auto why = unavailable("ref:megatron_eager")) GTEST_SKIP() << *why;
  EXPECT_EQ(out_bits("ref:megatron_eager", bf), 0x3f81u);
  EXPECT_EQ(out_bits("ref:paddle_aligned", bf), 0x3f81u);
  EXPECT_EQ(out_bits("ref:baseline", bf), 0x3f80u);
  Case with_probs = bf;
  Tensor ones(DType::kFP32, {1, 3});
  for (int64_t i = 0; i < 3; ++i) ones.set_f32(i, 1.0f);
  with_probs.inputs["probs"] = ones;
  EXPECT_EQ(out_bits("ref:baseline", with_probs), 0x3f81u);
  const Case f32 = unpermute_case(DType::kFP32, {0x1p30, 1.0, 0.0, 0.0, -0x1p30});
  EXPECT_EQ(out_bits("ref:megatron_eager", f32), 0x3f800000u);
  EXPECT_EQ(out_bits("ref:baseline", f32), 0x00000000u);
}

// unpermute's products with probs are fp32 (bf16 × fp32 → fp32) and summed before the one rounding
// to the dtype (OP-3). One token routed to experts 0 and 1, H = 2, bf16 permuted rows of ones, probs
// [1 + 2^-8, 2^-10]: x = [1 + 2^-8, 2^-10] in fp32; ((x0 + x1) + 0) + 0 = 1 + 1.25 · 2^-8 exactly,
// which is 0.625 of bf16's 2^-7 step above 1: 0x3f81. (Products rounded to bf16 first would give
// bf(1 + 2^-8) = 1, a tie to even, and bf(1 + 2^-10) = 1: 0x3f80.)
TEST(UnpermuteOrders, HandBuiltProductsWithProbsStayFp32UntilTheSum) {
  if (const auto why = unavailable("ref:megatron_eager")) GTEST_SKIP() << *why;
  Case c = unpermute_case(DType::kBF16, {1.0, 1.0});
  Tensor probs(DType::kFP32, {1, 2});
  probs.set_f32(0, 1.0f + 0x1p-8f);
  probs.set_f32(1, 0x1p-10f);
  c.inputs["probs"] = probs;
  EXPECT_EQ(out_bits("ref:megatron_eager", c), 0x3f81u);
  EXPECT_EQ(out_bits("ref:paddle_aligned", c), 0x3f81u);
  EXPECT_EQ(out_bits("ref:baseline", c), 0x3f81u);  // fp32 from +0 in slot order: the same sum
}

// unpermute's d_probs[t, e] is rule 7's last-dim row sum over H of f32(d_out[t, h]) ·
// f32(permuted[pos, h]) in a tensor of N = T·k rows (OP-3). One token, one expert, H = 5, fp32,
// permuted ones, d_out [1, 1, 1, 2^-23, 3 · 2^-24], N = 1: rule 7 takes 4 lanes (the largest power
// of two up to 5), lane 0 holding h = 0 and 4, then halves: ((x0 + x4) + x2) + (x1 + x3).
// x0 + x4 = 1 + 1.5 · 2^-23, a tie, to even: 1 + 2^-22; + 1 = 2 + 2^-22 (exact); x1 + x3 = 1 + 2^-23;
// their sum 3 + 1.5 · 2^-22 is a tie, to even: 3 + 2^-21 = 0x40400002. (Left to right: 3, then
// 3 + 2^-23 ties to 3, then + 3 · 2^-24 gives 3 + 2^-22 = 0x40400001.)
TEST(UnpermuteOrders, HandBuiltDProbsIsRule7sRowSumOverH) {
  if (const auto why = unavailable("ref:megatron_eager")) GTEST_SKIP() << *why;
  Case c;
  c.op = "unpermute";
  c.direction = Direction::kBackward;
  Tensor map(DType::kBool, {1, 1}), probs(DType::kFP32, {1, 1}), d_out(DType::kFP32, {1, 5}), permuted(DType::kFP32, {1, 5});
  map.set_bits(0, 1);
  probs.set_f32(0, 1.0f);
  const float g[5] = {1.0f, 1.0f, 1.0f, 0x1p-23f, 3 * 0x1p-24f};
  for (int64_t h = 0; h < 5; ++h) {
    d_out.set_f32(h, g[h]);
    permuted.set_f32(h, 1.0f);
  }
  c.inputs["routing_map"] = map;
  c.inputs["probs"] = probs;
  c.inputs["d_out"] = d_out;
  c.inputs["permuted"] = permuted;
  for (const char* impl : {"ref:megatron_eager", "ref:paddle_aligned", "ref:baseline"})
    EXPECT_EQ(out_bits(impl, c, "d_probs"), 0x40400002u) << impl;
}

// unpermute's backward is F.embedding's backward, which accumulates d_out into each position from
// +0 in fp32 (OP-3): a -0 gradient comes back +0. One token, one expert, H = 2, bf16 d_out
// [-0, -1] gives d_permuted [+0, -1] = [0x0000, 0xbf80] under every contract.
TEST(UnpermuteOrders, HandBuiltMinusZeroGradientComesBackPositive) {
  if (const auto why = unavailable("ref:megatron_eager")) GTEST_SKIP() << *why;
  Case c;
  c.op = "unpermute";
  c.direction = Direction::kBackward;
  Tensor map(DType::kBool, {1, 1}), d_out(DType::kBF16, {1, 2});
  map.set_bits(0, 1);
  d_out.set_bits(0, 0x8000);
  d_out.set_bits(1, 0xbf80);
  c.inputs["routing_map"] = map;
  c.inputs["d_out"] = d_out;
  for (const char* impl : {"ref:megatron_eager", "ref:paddle_aligned", "ref:baseline"}) {
    EXPECT_EQ(out_bits(impl, c, "d_permuted", 0), 0x0000u) << impl;
    EXPECT_EQ(out_bits(impl, c, "d_permuted", 1), 0xbf80u) << impl;
  }
}

bool megatron_target_with_baseline(const Target& t) {
  return !routing_map::slot_sum_input(t.op, t.direction).empty() && t.contract() == "megatron_eager" &&
         has_impl(t.op, split_backend_name(t.impl).first + ":baseline");
}

class MegatronVsBaseline : public testing::TestWithParam<Target> {};

// The two contracts sum the same slot values in different orders (and the baseline rounds to the
// dtype after every addition without probs): where a token's slot sum cannot depend on the order,
// they agree bit for bit; where they differ, the sum is order-sensitive (classified).
TEST_P(MegatronVsBaseline, DifferOnlyWhereTheSlotOrderShows) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const std::string baseline = split_backend_name(target.impl).first + ":baseline";
  check_property([&] {
    const Case c = *op_info(target.op).generate(target.direction);
    reproduce_with(c, "bit_mismatch", corpus::BackendPair{target.impl, baseline});
    const Outcome m = run(target, c), b = run({target.op, target.direction, baseline}, c);
    if (m.rejected() || b.rejected()) return;
    // The slot values as unpermute's forward reads them (permute's backward sums d_permuted alike).
    Case u = c;
    if (c.op == "permute") u.inputs["permuted"] = *c.input("d_permuted");
    const Tensor& mo = m.outputs->begin()->second;
    const Tensor& bo = b.outputs->begin()->second;
    const Slots s = slots_of(*c.input("routing_map"));
    const int p_bits = std::min(24, c.input("probs") ? 24 : significand_bits(mo.dtype()));
    const int64_t H = mo.dim(1);
    bool differ = false;
    for (int64_t t = 0; t < mo.dim(0); ++t)
      for (int64_t h = 0; h < H; ++h) {
        if (mo.bits(t * H + h) == bo.bits(t * H + h)) continue;
        differ = true;
        if (order_insensitive(slot_values(u, s, t, h), p_bits, p_bits == 24))  // the baseline's fp32 atomics flush
          RC_FAIL("megatron_eager and baseline differ at [" + std::to_string(t) + ", " + std::to_string(h) +
                  "] where the slot sum cannot depend on the order");
      }
    RC_CLASSIFY(differ, "the contracts differ");
  });
}

INSTANTIATE_TEST_SUITE_P(Metamorphic, MegatronVsBaseline, testing::ValuesIn(targets_where(megatron_target_with_baseline)),
                         target_name);

// The generator's order-sensitive values do make the contracts differ: in 200 cases of unpermute's
// forward from a fixed seed, some output differs between megatron_eager and baseline.
TEST(MegatronVsBaseline, GeneratedCasesShowTheDifference) {
  if (const auto why = unavailable("ref:megatron_eager")) GTEST_SKIP() << *why;
  constexpr int kCases = 200, kMaxSize = 100;
  const rc::Gen<Case> generator = op_info("unpermute").generate(Direction::kForward);
  rc::Random random(0x0de7'a11);
  int differing = 0;
  for (int i = 0; i < kCases; ++i) {
    const Case c = generator(random.split(), i % (kMaxSize + 1)).value();
    const Outcome m = run_outcome(harness_registry(), "ref:megatron_eager", c);
    const Outcome b = run_outcome(harness_registry(), "ref:baseline", c);
    if (!m.rejected() && !b.rejected() && !bit_identical(m.outputs->at("out"), b.outputs->at("out"))) ++differing;
  }
  std::cout << differing << " of " << kCases << " cases differ between megatron_eager and baseline\n";
  EXPECT_GT(differing, 0);
}

// --- (f) paddle_aligned's padding rows -----------------------------------------------------------

bool paddle_target(const Target& t) { return is_routing(t) && t.contract() == "paddle_aligned"; }

class PaddlePadding : public testing::TestWithParam<Target> {};

// A row with no expert is padding: its rows of every [T, ...] output (d_tokens, out, d_probs) are
// +0, bit for bit; megatron_eager refuses the same case when it also has a routed row.
TEST_P(PaddlePadding, PaddingRowsArePositiveZero) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = *op_info(target.op).generate(target.direction);
    reproduce_with(c, "invariance_violation");
    const Outcome o = run(target, c);
    if (o.rejected()) return;
    const Slots s = slots_of(*c.input("routing_map"));
    int64_t padding = 0;
    for (const auto& e : s.experts) padding += e.empty();
    RC_CLASSIFY(padding > 0, "padding rows");
    if (padding > 0 && padding < static_cast<int64_t>(s.experts.size()) && has_impl(target.op, "ref:megatron_eager"))
      RC_ASSERT(run({target.op, target.direction, "ref:megatron_eager"}, c).rejected());
    for (const auto& [name, out] : *o.outputs) {
      bool count_dependent = false;
      if (!is_output_rows_first(target, name, &count_dependent)) continue;
      const int64_t width = out.dim(0) == 0 ? 0 : out.numel() / out.dim(0);
      for (size_t t = 0; t < s.experts.size(); ++t)
        if (s.experts[t].empty())
          for (int64_t i = 0; i < width; ++i) RC_ASSERT(out.bits(static_cast<int64_t>(t) * width + i) == 0u);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Metamorphic, PaddlePadding, testing::ValuesIn(targets_where(paddle_target)), target_name);

}  // namespace
}  // namespace bitparity::ops
