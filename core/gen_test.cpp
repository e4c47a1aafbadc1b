// gen::tensor: a large tensor (more than kShrinkableElements elements, filled from one drawn seed)
// draws every class of its family in the proportions of the per-element generators, at every size;
// a small one keeps RapidCheck's per-element shrinking.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/dtype.h"
#include "core/gen.h"
#include "core/random.h"

namespace bitparity::gen {
namespace {

Tensor draw(DType dtype, int64_t numel, ValueFamily family, uint64_t seed, int size = rc::kNominalSize) {
  return tensor(dtype, {numel}, family)(rc::Random(seed), size).value();
}

constexpr int64_t kLarge = 4 * kShrinkableElements + 3;

TEST(GenTensor, ALargeMixedTensorDrawsEveryClass) {
  for (const DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor t = draw(dtype, kLarge, ValueFamily::kMixed, 7);
    std::vector<std::string> expected = {"nan", "inf", "-0", "subnormal"};
    if (dtype == DType::kFP32) expected.push_back("bf16_tie");
    const std::vector<std::string> tags = value_tags(t);
    for (const std::string& tag : expected)
      EXPECT_NE(std::find(tags.begin(), tags.end(), tag), tags.end()) << tag << " never drawn";
    // The moderate class (40 of the mix's 52) and the small integers (4 of 52; 0 among them).
    int64_t moderate = 0, integers = 0, negative = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double v = to_double(dtype, t.bits(i));
      if (std::isfinite(v) && std::fabs(v) >= 0x1p-6 && std::fabs(v) < 0x1p7) ++moderate;
      if (v == std::trunc(v) && std::fabs(v) <= 8) ++integers;
      if (std::signbit(v)) ++negative;
    }
    const double n = static_cast<double>(t.numel());
    // About 0.89: the moderate class (40 of 52), the small integers but 0 (about 3.8 of 52), +-1
    // among the specials, some raw patterns.
    EXPECT_GT(moderate / n, 0.80);
    EXPECT_LT(moderate / n, 0.95);
    EXPECT_GT(integers / n, 0.05);
    EXPECT_GT(negative / n, 0.40);
    EXPECT_LT(negative / n, 0.60);
  }
}

TEST(GenTensor, ALargeTensorKeepsToItsFamily) {
  const Tensor ints = draw(DType::kBF16, kLarge, ValueFamily::kSmallInt, 3);
  std::set<double> seen;
  for (int64_t i = 0; i < ints.numel(); ++i) seen.insert(to_double(DType::kBF16, ints.bits(i)));
  EXPECT_EQ(seen.size(), 17u) << "the integers -8..8";
  EXPECT_EQ(*seen.begin(), -8.0);
  EXPECT_EQ(*seen.rbegin(), 8.0);
  const Tensor moderate = draw(DType::kFP32, kLarge, ValueFamily::kModerate, 3);
  int64_t top = 0;
  for (int64_t i = 0; i < moderate.numel(); ++i) {
    const double v = std::fabs(to_double(DType::kFP32, moderate.bits(i)));
    ASSERT_TRUE(v >= 0x1p-6 && v < 0x1p7) << v;
    top += v >= 0x1p6;
  }
  EXPECT_GT(top, 0) << "the largest exponent never drawn";
}

// At size 0 RapidCheck's integers are all 0; a large tensor's seed is drawn at the nominal size.
TEST(GenTensor, LargeTensorsDifferAtEverySize) {
  for (const int size : {0, 1, 50, rc::kNominalSize}) {
    EXPECT_FALSE(draw(DType::kBF16, kLarge, ValueFamily::kMixed, 1, size) ==
                 draw(DType::kBF16, kLarge, ValueFamily::kMixed, 2, size))
        << "size " << size;
  }
  EXPECT_TRUE(draw(DType::kBF16, kLarge, ValueFamily::kMixed, 1) == draw(DType::kBF16, kLarge, ValueFamily::kMixed, 1));
}

// A small tensor shrinks one element at a time.
TEST(GenTensor, ASmallTensorShrinksElementByElement) {
  const rc::Shrinkable<Tensor> s = tensor(DType::kBF16, {16}, ValueFamily::kModerate)(rc::Random(5), rc::kNominalSize);
  const Tensor value = s.value();
  bool one_element = false;
  for (auto shrinks = s.shrinks(); auto next = shrinks.next();) {
    const Tensor shrunk = next->value();
    int differing = 0;
    for (int64_t i = 0; i < value.numel(); ++i) differing += shrunk.bits(i) != value.bits(i);
    if (differing == 1) {
      one_element = true;
      break;
    }
  }
  EXPECT_TRUE(one_element);
}

// At kShrinkableElements elements a tensor is still drawn element by element (a shrink changes one
// element); one element more and it is filled from one seed (a shrink of the seed changes the
// tensor throughout).
TEST(GenTensor, AboveTheBoundATensorIsFilledFromOneSeed) {
  auto most_changed_by_a_shrink = [](int64_t numel) {
    const rc::Shrinkable<Tensor> s = tensor(DType::kBF16, {numel}, ValueFamily::kModerate)(rc::Random(5), rc::kNominalSize);
    const Tensor value = s.value();
    auto shrinks = s.shrinks();
    const auto next = shrinks.next();
    if (!next) return int64_t{-1};
    const Tensor shrunk = next->value();
    int64_t differing = 0;
    for (int64_t i = 0; i < value.numel(); ++i) differing += shrunk.bits(i) != value.bits(i);
    return differing;
  };
  EXPECT_EQ(most_changed_by_a_shrink(kShrinkableElements), 1);
  EXPECT_GT(most_changed_by_a_shrink(kShrinkableElements + 1), kShrinkableElements / 2);
  {
    // Inside a SeededTensors scope (a campaign's draws) every size is filled from one seed, nested
    // scopes too; outside it, small tensors are drawn element by element again.
    const SeededTensors seeded;
    EXPECT_GT(most_changed_by_a_shrink(64), 32);
    {
      const SeededTensors nested;
      EXPECT_GT(most_changed_by_a_shrink(kShrinkableElements), kShrinkableElements / 2);
    }
    EXPECT_GT(most_changed_by_a_shrink(64), 32);
  }
  EXPECT_EQ(most_changed_by_a_shrink(64), 1);
}

// A seeded small tensor has the classes of the family: the mixed family's special values (ties in fp32) show up
// across a few hundred 64-element tensors drawn in a SeededTensors scope.
TEST(GenTensor, ASeededSmallTensorDrawsEveryClass) {
  const SeededTensors seeded;
  std::set<std::string> tags;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const Tensor t = tensor(DType::kFP32, {64}, ValueFamily::kMixed)(rc::Random(seed), rc::kNominalSize).value();
    for (const std::string& tag : value_tags(t)) tags.insert(tag);
  }
  for (const char* tag : {"nan", "inf", "-0", "subnormal", "bf16_tie"}) EXPECT_TRUE(tags.count(tag)) << tag;
}

// The moderate class built from its bits is from_double's rounding of the same number: every
// mantissa at one exponent in bf16 (rounding depends on the mantissa's low bits alone), and random
// exponents, mantissas and signs in bf16, fp16, fp32 and fp64 (the dtypes built from bits; others
// go through from_double), rounding boundaries (ties, a carry into the exponent) among them.
TEST(GenTensor, ModerateValuesFromTheirBitsRoundAsFromDouble) {
  auto by_double = [](DType dtype, int e, uint32_t m, bool negative) {
    const uint64_t bits = from_double(dtype, std::ldexp(1.0 + m / double(kModerateMantissas), e));
    return negative ? bits | (uint64_t{1} << (dtype_size(dtype) * 8 - 1)) : bits;
  };
  for (uint32_t m = 0; m < kModerateMantissas; ++m)
    ASSERT_EQ(moderate_value_bits(DType::kBF16, 0, m, false), by_double(DType::kBF16, 0, m, false)) << m;
  uint64_t state = 7;
  for (const DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32, DType::kFP64})
    for (int i = 0; i < 200000; ++i) {
      const int e = kModerateMinExp + static_cast<int>(splitmix64_next(state) % (kModerateMaxExp - kModerateMinExp + 1));
      uint32_t m = static_cast<uint32_t>(splitmix64_next(state) % kModerateMantissas);
      if (i % 6 == 1) m |= 0xfe0000u;                   // bf16's kept bits all ones: a carry when rounding up
      if (i % 6 == 2) m |= 0xffc000u;                   // fp16's
      if (i % 6 == 3) m = (m & ~0x1ffffu) | 0x10000u;   // a bf16 tie
      if (i % 6 == 4) m = (m & ~0x3fffu) | 0x2000u;     // an fp16 tie
      if (i % 6 == 5) m |= 0xffffffu;                   // every bit: fp32's tie with all kept bits ones
      const bool negative = splitmix64_next(state) & 1;
      ASSERT_EQ(moderate_value_bits(dtype, e, m, negative), by_double(dtype, e, m, negative))
          << dtype_name(dtype) << " e " << e << " m " << m << " negative " << negative;
    }
}

}  // namespace
}  // namespace bitparity::gen
