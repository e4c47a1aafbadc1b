// Properties of embedding (spec OP-9) that its contracts fix exactly, on every implementation:
// (a) the forward copies each position's row bit for bit (NaN payloads kept) and writes +0 where
// the partition masks the id; (b) in the backward a row that no position names is +0 and a row of
// one unmasked position is that gradient plus +0 (so -0 becomes +0, NaN canonical); (c) where every
// partial sum is exact (small integers, few duplicates) every contract equals the Eigen oracle;
// (d) elsewhere each contract stays within the bound its roundings allow around the oracle; and
// directed cases that separate the contracts at the width-32 boundary and F.embedding's chunks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/dtype.h"
#include "core/gen.h"
#include "ops/embedding.h"
#include "properties/harness.h"

namespace bitparity::ops {
namespace {

using namespace props;

bool embedding_dir(const Target& t, Direction d) { return t.op == "embedding" && t.direction == d; }
bool forward(const Target& t) { return embedding_dir(t, Direction::kForward); }
bool backward(const Target& t) { return embedding_dir(t, Direction::kBackward); }

Case generated(Direction d) { return *op_info("embedding").generate(d); }

// Each position's local row, -1 where masked.
std::vector<int64_t> local_rows(const Case& c) {
  const Tensor& ids = *c.input("ids");
  const EmbeddingAttrs a = embedding_attrs(c);
  std::vector<int64_t> rows;
  for (int64_t p = 0; p < ids.numel(); ++p) rows.push_back(embedding_local_row(static_cast<int64_t>(ids.bits(p)), a));
  return rows;
}

uint64_t canonical_nan(DType dt) { return dt == DType::kFP32 ? 0x7FFFFFFFu : 0x7FFFu; }

class ForwardCopy : public testing::TestWithParam<Target> {};

TEST_P(ForwardCopy, EachPositionGetsItsRowBitForBitAndMaskedPositionsPlusZero) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = generated(Direction::kForward);
    reproduce_with(c, "invariance_violation");
    const Outcome o = run(target, c);
    RC_ASSERT(!o.rejected());
    const Tensor& w = *c.input("weight");
    const Tensor& out = o.outputs->at("out");
    const int64_t H = w.dim(1);
    const std::vector<int64_t> rows = local_rows(c);
    bool masked = false;
    for (size_t p = 0; p < rows.size(); ++p)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t i = static_cast<int64_t>(p) * H + h;
        RC_ASSERT(out.bits(i) == (rows[p] < 0 ? 0u : w.bits(rows[p] * H + h)));
        masked = masked || rows[p] < 0;
      }
    RC_TAG(masked ? "masked positions" : "no masked position");
  });
}

INSTANTIATE_TEST_SUITE_P(Embedding, ForwardCopy, testing::ValuesIn(targets_where(forward)), target_name);

class BackwardSingles : public testing::TestWithParam<Target> {};

TEST_P(BackwardSingles, UnnamedRowsArePlusZeroAndARowOfOnePositionIsItsGradient) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = generated(Direction::kBackward);
    reproduce_with(c, "invariance_violation");
    const Outcome o = run(target, c);
    RC_ASSERT(!o.rejected());
    const Tensor& g = *c.input("g");
    const Tensor& dw = o.outputs->at("d_weight");
    const int64_t H = g.dim(1);
    std::map<int64_t, std::vector<int64_t>> named;  // row -> positions (masked ones at row 0)
    const std::vector<int64_t> rows = local_rows(c);
    for (size_t p = 0; p < rows.size(); ++p) named[rows[p] < 0 ? 0 : rows[p]].push_back(static_cast<int64_t>(p));
    // The fp32 atomic add (the order-of-arrival contract) flushes a subnormal addend: +0 + a
    // subnormal is +0 there.
    const bool flushes = target.contract_info().order_of_arrival;
    bool single = false;
    for (int64_t v = 0; v < dw.dim(0); ++v) {
      const auto it = named.find(v);
      if (it == named.end()) {
        for (int64_t h = 0; h < H; ++h) RC_ASSERT(dw.bits(v * H + h) == 0u);
        continue;
      }
      if (it->second.size() != 1 || rows[static_cast<size_t>(it->second[0])] < 0) continue;
      single = true;
      const int64_t p = it->second[0];
      for (int64_t h = 0; h < H; ++h) {
        const uint64_t gb = g.bits(p * H + h), got = dw.bits(v * H + h);
        if (is_nan_bits(g.dtype(), gb)) RC_ASSERT(got == canonical_nan(g.dtype()));
        else if (g.f64(p * H + h) == 0) RC_ASSERT(got == 0u);  // +0 + -0 = +0
        else if (flushes && std::fabs(g.f64(p * H + h)) < 0x1p-126) RC_ASSERT(got == 0u);
        else RC_ASSERT(got == gb);
      }
    }
    RC_TAG(single ? "rows of one position" : "no row of one position");
  });
}

INSTANTIATE_TEST_SUITE_P(Embedding, BackwardSingles, testing::ValuesIn(targets_where(backward)), target_name);

// A backward case whose every partial sum is exact in every dtype: integers in [-8, 8] and at most
// 16 positions a row (|sums| <= 128, within fp16's and bf16's 2^8 and 2^11 exact integers).
Case exact_case() {
  Case c = generated(Direction::kBackward);
  Tensor& g = c.inputs["g"];
  g = *gen::tensor(g.dtype(), g.shape(), gen::ValueFamily::kSmallInt);
  std::map<int64_t, int64_t> count;
  const std::vector<int64_t> rows = local_rows(c);
  Tensor& ids = c.inputs["ids"];
  const EmbeddingAttrs a = embedding_attrs(c);
  for (size_t p = 0; p < rows.size(); ++p) {
    const int64_t row = rows[p] < 0 ? 0 : rows[p];
    if (++count[row] > 16) {  // spread the rest over the table (an id of the partition, or a plain one)
      const int64_t spread = static_cast<int64_t>(p) % std::max<int64_t>(a.V, 1);
      ids.set_bits(static_cast<int64_t>(p), static_cast<uint64_t>(spread + a.vocab_start.value_or(0)));
    }
  }
  return c;
}

class BackwardExact : public testing::TestWithParam<Target> {};

TEST_P(BackwardExact, WhereEverySumIsExactEveryContractIsTheOracle) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = exact_case();
    std::map<int64_t, int64_t> count;
    for (int64_t row : local_rows(c)) ++count[row < 0 ? 0 : row];
    for (const auto& [row, n] : count) RC_PRE(n <= 16);
    reproduce_with(c, "invariance_violation");
    const Outcome o = run(target, c);
    RC_ASSERT(!o.rejected());
    const Tensor& dw = o.outputs->at("d_weight");
    const std::vector<double> exact = op_info("embedding").oracle(c).at("d_weight");
    for (int64_t i = 0; i < dw.numel(); ++i) {
      RC_ASSERT(dw.f64(i) == exact[static_cast<size_t>(i)]);
      if (exact[static_cast<size_t>(i)] == 0) RC_ASSERT(dw.bits(i) == 0u);  // sums start from +0
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Embedding, BackwardExact, testing::ValuesIn(targets_where(backward)), target_name);

// The unit roundoff of a dtype (half its ulp at 1) and half its smallest subnormal.
double unit_roundoff(DType dt) { return dt == DType::kBF16 ? 0x1p-8 : dt == DType::kFP16 ? 0x1p-11 : 0x1p-24; }
double half_subnormal(DType dt) { return dt == DType::kBF16 ? 0x1p-134 : dt == DType::kFP16 ? 0x1p-25 : 0x1p-150; }

class BackwardBound : public testing::TestWithParam<Target> {};

// Every contract rounds at most 2n + 1 times on a row of n positions (each addition in fp32, and in
// the dtype where it rounds per step or per chunk), each rounding off by at most u_dt times a
// partial sum (bounded by S = the sum of |g|, inflated by (1 + u)^(2n + 1)) plus half a subnormal:
// |result - exact| <= (2n + 1) (u_dt S (1 + u_dt)^(2n + 1) + half_subnormal). Where (2n + 1) u_dt
// >= 1/2 the bound says nothing useful and the row is skipped; so are rows with a non-finite term or
// result (overflow of a partial sum is what per-step rounding may do). The fp32 atomic adds of the
// order-of-arrival contract flush a subnormal addend and a subnormal result: 2n 2^-126 more.
TEST_P(BackwardBound, EachContractStaysWithinItsRoundingsOfTheExactSum) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const Case c = generated(Direction::kBackward);
    reproduce_with(c, "bound_violation");
    const Outcome o = run(target, c);
    RC_ASSERT(!o.rejected());
    const Tensor& g = *c.input("g");
    const Tensor& dw = o.outputs->at("d_weight");
    const int64_t H = g.dim(1);
    const DType dt = g.dtype();
    const double u = unit_roundoff(dt);
    const std::vector<double> exact = op_info("embedding").oracle(c).at("d_weight");
    std::map<int64_t, std::vector<int64_t>> positions;
    const std::vector<int64_t> rows = local_rows(c);
    for (size_t p = 0; p < rows.size(); ++p)
      if (rows[p] >= 0) positions[rows[p]].push_back(static_cast<int64_t>(p));
    int64_t checked = 0;
    for (const auto& [v, ps] : positions) {
      const double k = 2.0 * static_cast<double>(ps.size()) + 1;
      if (k * u >= 0.5) continue;
      for (int64_t h = 0; h < H; ++h) {
        double S = 0;
        for (int64_t p : ps) S += std::fabs(g.f64(p * H + h));
        const double got = dw.f64(v * H + h), want = exact[static_cast<size_t>(v * H + h)];
        if (!std::isfinite(S) || !std::isfinite(got) || !std::isfinite(want)) continue;
        const double flush = target.contract_info().order_of_arrival ? 2.0 * static_cast<double>(ps.size()) * 0x1p-126 : 0.0;
        const double bound = k * (u * S * std::pow(1 + u, k) + half_subnormal(dt)) + flush;
        RC_ASSERT(std::fabs(got - want) <= bound);
        ++checked;
      }
    }
    RC_TAG(checked ? "rows checked" : "no row checked");
  });
}

INSTANTIATE_TEST_SUITE_P(Embedding, BackwardBound, testing::ValuesIn(targets_where(backward)), target_name);

// --- directed cases: where the contracts part --------------------------------------------------

// P positions, all of id 0 (V = 1), g[0] = first and every later g = rest, bf16, width H.
Case all_same(int64_t P, int64_t H, float first, float rest) {
  Case c;
  c.op = "embedding";
  c.direction = Direction::kBackward;
  c.attrs["num_embeddings"] = int64_t{1};
  c.inputs["ids"] = Tensor(DType::kI64, {P});  // all 0
  Tensor g(DType::kBF16, {P, H});
  for (int64_t p = 0; p < P; ++p)
    for (int64_t h = 0; h < H; ++h) g.set_f32(p * H + h, p == 0 ? first : rest);
  c.inputs["g"] = g;
  return c;
}

double d_weight_at_0(const std::string& contract, const Case& c) {
  const Outcome o = run({"embedding", Direction::kBackward, "ref:" + contract}, c);
  EXPECT_FALSE(o.rejected()) << o.message;
  return o.outputs->at("d_weight").f64(0);
}

// 1 + 4 * 2^-9: added one at a time in bf16 each 2^-9 is below half of 1's ulp (2^-7) and vanishes;
// summed in fp32 first it is 1 + 2^-7, a bf16 value.
TEST(EmbeddingContracts, TheIndexBackwardRoundsPerStepAboveWidth32AndOnceUpToIt) {
  for (int64_t H : {33, 64, 4096}) EXPECT_EQ(d_weight_at_0("megatron_eager", all_same(5, H, 1.0f, 0x1p-9f)), 1.0) << H;
  for (int64_t H : {2, 31, 32}) EXPECT_EQ(d_weight_at_0("megatron_eager", all_same(5, H, 1.0f, 0x1p-9f)), 1 + 0x1p-7) << H;
  // F.embedding in one 32-position chunk: fp32 throughout, at any width.
  for (int64_t H : {1, 32, 33, 4096}) EXPECT_EQ(d_weight_at_0("baseline", all_same(5, H, 1.0f, 0x1p-9f)), 1 + 0x1p-7) << H;
}

// 1 at position 0, then 2^-9 at positions 1..37 (bf16's ulp at 1 is 2^-7, four such terms): the
// first 32-position chunk sums to 1 + 7.75 ulp, which F.embedding rounds to 1 + 8 ulp before adding
// the second chunk's 6 * 2^-9 = 1.5 ulp (exact in bf16): 1 + 9.5 ulp, a tie, to even: 1 + 10 ulp.
// In fp32 to the end (the atomic reference; the index backward at width 8): 1 + 9.25 ulp -> 1 + 9 ulp.
TEST(EmbeddingContracts, FEmbeddingRoundsEach32PositionChunkUpTo3072Positions) {
  const Case c = all_same(38, 8, 1.0f, 0x1p-9f);
  EXPECT_EQ(d_weight_at_0("baseline", c), 1 + 10 * 0x1p-7);
  EXPECT_EQ(d_weight_at_0("atomic_fp32", c), 1 + 9 * 0x1p-7);
  EXPECT_EQ(d_weight_at_0("megatron_eager", c), 1 + 9 * 0x1p-7);  // width 8: fp32 once
}

// F.embedding adds each 32-position chunk's fp32 sum to the row after rounding it to the dtype:
// grad_weight += scalar_t(sum), two roundings. bf16, width 8, 34 positions of id 0: 1 at position
// 0, +0 up to 31 (chunk 0 sums to 1), 2^-8 at 32 and 2^-17 at 33 (chunk 1 sums to 2^-8 (1 + 2^-9)
// in fp32, which bf16 rounds to 2^-8). Then 1 + 2^-8 is a tie between 1 and 1 + 2^-7, to even: 1.
// (The chunk sum added unrounded, 1 + 2^-8 + 2^-17 is past the tie: 1 + 2^-7, which is also what
// the fp32-once contracts give.)
TEST(EmbeddingContracts, FEmbeddingRoundsAChunksSumBeforeAddingIt) {
  Case c = all_same(34, 8, 1.0f, 0.0f);
  for (int64_t h = 0; h < 8; ++h) {
    c.inputs["g"].set_f32(32 * 8 + h, 0x1p-8f);
    c.inputs["g"].set_f32(33 * 8 + h, 0x1p-17f);
  }
  EXPECT_EQ(d_weight_at_0("baseline", c), 1.0);
  EXPECT_EQ(d_weight_at_0("atomic_fp32", c), 1 + 0x1p-7);
  EXPECT_EQ(d_weight_at_0("megatron_eager", c), 1 + 0x1p-7);  // width 8: fp32 once
}

// Width 1 with 64 duplicates: the stride-1 kernel's lanes each sum two positions, and the tree
// adds the 32 lane sums; 2^24 at position 0 absorbs a 1 added to it sequentially in fp32 (ties to
// even), but lane 0's 2^24 + 1 and the other lanes' 1 + 1 = 2 (exact) are combined in a tree.
TEST(EmbeddingContracts, TheWidthOneIndexBackwardSplitsDuplicatesOverAWarp) {
  Case c = all_same(64, 1, 0x1p24f, 1.0f);
  c.inputs["g"] = Tensor(DType::kFP32, {64, 1});
  for (int64_t p = 0; p < 64; ++p) c.inputs["g"].set_f32(p, p == 0 ? 0x1p24f : 1.0f);
  // Sequential fp32: every + 1 to 2^24 rounds back to 2^24 (tie to even).
  EXPECT_EQ(d_weight_at_0("atomic_fp32", c), 0x1p24);
  // Tree: lane 0 = 2^24 + 1 -> 2^24; lanes 1..31 = 2; the tree adds 2^24 + (sums of 2, 4, .. 32 = 62
  // over 31 lanes, combined pairwise): lane 16 (2) + lane 0 (2^24) first, each step exact or even.
  const double tree = d_weight_at_0("megatron_eager", c);
  EXPECT_GT(tree, 0x1p24);
  EXPECT_EQ(tree, 0x1p24 + 62);
}

// Width 1 at the tree's boundary: 32 duplicates are one whole pass of the warp (lane l holds
// position l), fewer are added in order. fp32, 2^24 at position 0, 1 elsewhere. 32: the tree
// halves 2^24 + 1 -> 2^24 (a tie, to even) beside fifteen 1 + 1 = 2, then 2^24 + 2, + 4, + 8, + 16,
// each exact: 2^24 + 30. 31: every + 1 to 2^24 ties back to it: 2^24.
TEST(EmbeddingContracts, TheWidthOneIndexBackwardTakesTheTreeFrom32Duplicates) {
  for (const int64_t P : {31, 32}) {
    Case c = all_same(P, 1, 0.0f, 0.0f);
    c.inputs["g"] = Tensor(DType::kFP32, {P, 1});
    for (int64_t p = 0; p < P; ++p) c.inputs["g"].set_f32(p, p == 0 ? 0x1p24f : 1.0f);
    EXPECT_EQ(d_weight_at_0("megatron_eager", c), P == 32 ? 0x1p24 + 30 : 0x1p24) << P << " duplicates";
  }
}

// The fp32 atomic add flushes subnormals to a zero of their sign (atom.add.f32; eager PyTorch's
// fp32 scatter_add_ on an H200, peers/torch): a subnormal addend is +0 + (-)0 = +0, and 1.5 2^-126
// - 2^-126 = 2^-127, a subnormal result, is +0 too. F.embedding's fp32 sums keep both (2^-127 is a
// bf16 subnormal, exact).
TEST(EmbeddingContracts, TheAtomicScatterFlushesSubnormalAddendsAndResults) {
  const double tiny = 0x1p-133;  // bf16 0x0001
  EXPECT_EQ(d_weight_at_0("atomic_fp32", all_same(1, 3, static_cast<float>(tiny), 0.0f)), 0.0);
  EXPECT_EQ(d_weight_at_0("baseline", all_same(1, 3, static_cast<float>(tiny), 0.0f)), tiny);
  const Case cancel = all_same(2, 3, 1.5f * 0x1p-126f, -0x1p-126f);
  EXPECT_EQ(d_weight_at_0("atomic_fp32", cancel), 0.0);
  EXPECT_EQ(d_weight_at_0("baseline", cancel), 0x1p-127);
  const Case negative = all_same(1, 3, static_cast<float>(-tiny), 0.0f);
  const Outcome o = run({"embedding", Direction::kBackward, "ref:atomic_fp32"}, negative);
  ASSERT_FALSE(o.rejected()) << o.message;
  EXPECT_EQ(o.outputs->at("d_weight").bits(0), 0u);  // +0, not -0
}

TEST(EmbeddingContracts, AnIdOutsideTheTableIsRefusedNamingItAndTheRange) {
  Case c = all_same(3, 4, 1.0f, 1.0f);
  c.inputs["ids"].set_bits(2, 7);
  const Outcome o = run({"embedding", Direction::kBackward, "ref:megatron_eager"}, c);
  ASSERT_TRUE(o.rejected());
  EXPECT_EQ(o.reject_class, "shape");
  EXPECT_NE(o.message.find("ids[2] = 7"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("[0, 1)"), std::string::npos) << o.message;
}

}  // namespace
}  // namespace bitparity::ops
