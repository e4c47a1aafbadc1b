// Megatron's SwiGLU references compute a row whose inputs repeat the row before it by copying that
// row's outputs (an expert's padded rows are all zeros). Each case here is run twice: once with its
// rows in pairs, each row next to its twin or near-twin (equal y but another g, equal y and g but
// another scale, +0 against -0), and once with the same rows in an order where no row repeats the one
// before it. Row for row, the two runs must give the same bits.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/case.h"
#include "ops/builtin.h"

namespace bitparity::ref {
namespace {

constexpr int64_t kF = 12;

// One row's inputs: y [2F], g [F] and the scale, as bit patterns of their dtypes.
struct Row {
  std::vector<uint64_t> y, g;
  uint64_t scale = 0;
  bool operator==(const Row&) const = default;
};

struct Layout {
  DType act, scale;
};

uint64_t random_value(std::mt19937& rng, DType dtype, int lo, int span) {
  const float v = std::ldexp(1.0f + static_cast<float>(rng() % 128) / 128.0f, lo + static_cast<int>(rng() % span));
  const float signed_v = rng() % 2 ? -v : v;
  return dtype == DType::kBF16 ? bf16_from_f32(signed_v) : f32_bits(signed_v);
}

Row random_row(std::mt19937& rng, const Layout& l) {
  Row r;
  for (int64_t j = 0; j < 2 * kF; ++j) r.y.push_back(random_value(rng, l.act, -3, 5));
  for (int64_t j = 0; j < kF; ++j) r.g.push_back(random_value(rng, l.act, -8, 4));
  r.scale = l.scale == DType::kBF16 ? bf16_from_f32(static_cast<float>(rng() % 1024) / 1024.0f)
                                    : f32_bits(static_cast<float>(rng() % 1024) / 1024.0f);
  return r;
}

// The rows in pairs: [first, second] per pair, the second a twin or near-twin of the first. Every
// pair's first row has a y of its own, and so does every pair's second row but for the zero rows'
// (pairs 0 and last, kept apart).
std::vector<std::pair<Row, Row>> pairs_of(std::mt19937& rng, const Layout& l) {
  const uint64_t minus_zero = l.act == DType::kBF16 ? 0x8000u : 0x80000000u;
  std::vector<std::pair<Row, Row>> pairs;
  const Row zeros{std::vector<uint64_t>(2 * kF, 0), std::vector<uint64_t>(kF, 0), 0};
  Row minus_zeros = zeros;
  minus_zeros.y[0] = minus_zero;
  pairs.push_back({zeros, zeros});  // padded rows
  for (int i = 0; i < 3; ++i) {
    const Row twin = random_row(rng, l);
    pairs.push_back({twin, twin});
    Row other_g = random_row(rng, l);  // equal y, another g
    pairs.push_back({other_g, other_g});
    pairs.back().second.g[static_cast<size_t>(rng() % kF)] ^= 1;
    Row other_scale = random_row(rng, l);  // equal y and g, another scale
    pairs.push_back({other_scale, other_scale});
    pairs.back().second.scale ^= 1;
  }
  pairs.push_back({minus_zeros, zeros});  // one -0 apart
  return pairs;
}

Case case_of(const std::string& op, Direction d, const Layout& l, const std::vector<Row>& rows, bool clamped) {
  const auto n = static_cast<int64_t>(rows.size());
  Case c;
  c.op = op;
  c.direction = d;
  if (clamped) c.attrs["clamp"] = 1.5;
  Tensor y(l.act, {n, 2 * kF}), g(l.act, {n, kF}), scale(l.scale, {n});
  for (int64_t r = 0; r < n; ++r) {
    const Row& row = rows[static_cast<size_t>(r)];
    for (int64_t j = 0; j < 2 * kF; ++j) y.set_bits(r * 2 * kF + j, row.y[static_cast<size_t>(j)]);
    for (int64_t j = 0; j < kF; ++j) g.set_bits(r * kF + j, row.g[static_cast<size_t>(j)]);
    scale.set_bits(r, row.scale);
  }
  c.inputs["y"] = y;
  if (op == "swiglu_scale") c.inputs["scale"] = scale;
  if (d == Direction::kBackward) c.inputs["g"] = g;
  return c;
}

// Row r of every output of `t` (rows first) as bit patterns.
std::vector<uint64_t> row_bits(const Tensor& t, int64_t r) {
  const int64_t width = t.numel() / t.dim(0);
  std::vector<uint64_t> out;
  for (int64_t j = 0; j < width; ++j) out.push_back(t.bits(r * width + j));
  return out;
}

TEST(SwigluReference, RowsThatRepeatTheRowBeforeGiveTheirOwnOutputs) {
  const Registry& registry = builtin_registry();
  std::mt19937 rng(5);
  int compared = 0, nonzero = 0;
  for (const std::string op : {"swiglu", "swiglu_scale"})
    for (const std::string contract : {"megatron_eager", "megatron_unfused"})
      for (const Direction d : {Direction::kForward, Direction::kBackward})
        for (const Layout l : {Layout{DType::kBF16, DType::kFP32}, Layout{DType::kFP32, DType::kFP32},
                               Layout{DType::kBF16, DType::kBF16}})
          for (const bool clamped : {false, true}) {
            const auto pairs = pairs_of(rng, l);
            // Paired: first, second, first, second, ... Apart: every first, then every second; no
            // row there repeats the one before it (each pair's first rows differ from each other).
            std::vector<Row> paired, apart;
            for (const auto& [first, second] : pairs) paired.insert(paired.end(), {first, second});
            for (const auto& [first, second] : pairs) apart.push_back(first);
            for (const auto& [first, second] : pairs) apart.push_back(second);
            for (size_t r = 1; r < apart.size(); ++r) ASSERT_NE(apart[r].y, apart[r - 1].y) << "row " << r;
            const ContractInfo& info = *registry.op(op)->contract(contract);
            const Impl& impl = *registry.impl(op, "ref:" + contract);
            const TensorMap out_paired = impl(case_of(op, d, l, paired, clamped), info);
            const TensorMap out_apart = impl(case_of(op, d, l, apart, clamped), info);
            const auto n = static_cast<int64_t>(pairs.size());
            for (const auto& [name, t] : out_paired)
              for (int64_t i = 0; i < n; ++i)
                for (const int64_t second : {0, 1}) {
                  const std::vector<uint64_t> got = row_bits(t, 2 * i + second);
                  EXPECT_EQ(got, row_bits(out_apart.at(name), i + second * n))
                      << op << " " << contract << " " << direction_name(d) << " " << name << " pair " << i
                      << (second ? " second" : " first") << (clamped ? " clamped" : "");
                  ++compared;
                  for (const uint64_t b : got) nonzero += (b << 1) != 0;
                }
          }
  EXPECT_EQ(compared, 2 * 3 * 2 * 11 * 2 * 5);  // contracts, layouts, clamps, pairs, rows, outputs
  EXPECT_GT(nonzero, 10000);
}

}  // namespace
}  // namespace bitparity::ref
