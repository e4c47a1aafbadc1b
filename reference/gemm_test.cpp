// The reference's model of the tensor core's MMA step (spec rule 13) on hand-made terms: each
// expected pattern is worked out from the rule in the comment beside it, and each case is chosen so
// that a neighbouring model (rounding to nearest, no truncation, a renormalised product exponent,
// another chunk order) gives a different pattern.
#include "reference/gemm.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "core/case.h"
#include "ops/builtin.h"

namespace bitparity::ref {
namespace {

constexpr uint16_t kOne = 0x3F80, kMinusOne = 0xBF80, kZero = 0x0000, kMinusZero = 0x8000;
constexpr uint16_t kOneAndHalf = 0x3FC0;  // 1.5
constexpr uint16_t kInf = 0x7F80, kMinusInf = 0xFF80, kNan = 0x7FC0;

// ref:fixed_order's output of a @ b, and fixed_order_dot of output [m, n] rounded to bf16 once: what
// that output must hold.
Tensor fixed_order_out(const Tensor& a, const Tensor& b) {
  const Registry& r = builtin_registry();
  Case c;
  c.op = "gemm";
  c.direction = Direction::kForward;
  c.inputs["a"] = a;
  c.inputs["b"] = b;
  return (*r.impl("gemm", "ref:fixed_order"))(c, *r.op("gemm")->contract("fixed_order")).at("out");
}

uint16_t dot_in_bf16(const Tensor& a, const Tensor& b, int64_t m, int64_t n) {
  const int64_t K = a.dim(1), N = b.dim(1);
  const auto* ap = reinterpret_cast<const uint16_t*>(a.data());
  const auto* bp = reinterpret_cast<const uint16_t*>(b.data());
  return bf16_from_f32(f32_from_bits(fixed_order_dot(ap + m * K, 1, bp + n, N, K)));
}

// A bf16 power of two, 2^e for e in [-126, 127].
constexpr uint16_t pow2(int e) { return static_cast<uint16_t>((e + 127) << 7); }

struct Chunk {
  std::array<uint16_t, kMmaChunk> a{}, b{};
  int used = 0;
  Chunk& add(uint16_t x, uint16_t y) {
    a[static_cast<size_t>(used)] = x;
    b[static_cast<size_t>(used)] = y;
    ++used;
    return *this;
  }
  uint32_t step(uint32_t c = 0) const { return mma_bf16_step(a.data(), b.data(), c); }
};

TEST(MmaStep, RoundsTheFusedSumTowardZero) {
  // 1 + 1.5 * 2^-24 = 1 + 0.75 ulp(1): nearest is 1 + 2^-23 (0x3F800001), toward zero 1 (0x3F800000).
  EXPECT_EQ(Chunk().add(kOne, kOne).add(kOneAndHalf, pow2(-24)).step(), 0x3F800000u);
  // 1 - 2^-24 is exact in fp32: 0x3F7FFFFF either way.
  EXPECT_EQ(Chunk().add(kOne, kOne).add(kMinusOne, pow2(-24)).step(), 0x3F7FFFFFu);
  // Toward zero for negative sums too: -(1 + 0.75 ulp) gives -1.
  EXPECT_EQ(Chunk().add(kMinusOne, kOne).add(kOneAndHalf, 0x8000 | pow2(-24)).step(), 0xBF800000u);
}

TEST(MmaStep, TruncatesEachTermBelowTwoToTheLargestTagMinus25) {
  // 1 + 15 * 2^-26: exact, then toward zero, is 1 + 2^-23; but each 2^-26 (tag -26) truncates to a
  // multiple of 2^(0 - 25) first, i.e. to 0, so the step gives 1.
  Chunk c;
  c.add(kOne, kOne);
  for (int i = 0; i < 15; ++i) c.add(pow2(-13), pow2(-13));
  EXPECT_EQ(c.step(), 0x3F800000u);
  // A term at exactly 2^-25 is kept: 1 + 2 * 2^-25 = 1 + 2^-24 toward zero gives 1, but 1 + 4 * 2^-25
  // = 1 + 2^-23 is exact.
  Chunk d;
  d.add(kOne, kOne);
  for (int i = 0; i < 4; ++i) d.add(pow2(-25), kOne);
  EXPECT_EQ(d.step(), 0x3F800001u);
}

TEST(MmaStep, AProductInTwoToFourKeepsItsUnnormalisedTag) {
  // 1.5 * 1.5 = 2.25 has tag 0 (not 1), so q = -25 and -2^-25 survives: 2.25 - 2^-25 toward zero is
  // the fp32 value below 2.25 (0x400FFFFF). A renormalised tag would truncate it: 2.25 (0x40100000).
  EXPECT_EQ(Chunk().add(kOneAndHalf, kOneAndHalf).add(0x8000 | pow2(-25), kOne).step(), 0x400FFFFFu);
}

TEST(MmaStep, TheAccumulatorIsOneOfTheFusedTerms) {
  // c = 1.0f with 3 * 2^-25 added in the step: 1 + 0.75 ulp toward zero = 1.
  EXPECT_EQ(Chunk().add(0x4040 /* 3 */, pow2(-25)).step(0x3F800000u), 0x3F800000u);
  // c = 2^30 sets Emax: a product of 1 truncates to 0 below 2^5, so d = c exactly.
  EXPECT_EQ(Chunk().add(kOne, kOne).step(0x4E800000u), 0x4E800000u);
  // c = 2^-25 beside a product of 1: kept (a multiple of 2^-25), 1 + 2^-25 toward zero = 1.
  EXPECT_EQ(Chunk().add(kOne, kOne).step(0x33000000u), 0x3F800000u);
}

TEST(MmaStep, SubnormalsDecodeWithoutAHiddenBitAndStay) {
  // bf16 0x0001 is 2^-133 (e = -126, significand 1/128); times 1 it is the fp32 subnormal 2^-133 =
  // 2^16 * 2^-149: 0x00010000.
  EXPECT_EQ(Chunk().add(0x0001, kOne).step(), 0x00010000u);
  // An fp32 subnormal c alone passes through: 2^-149.
  EXPECT_EQ(Chunk().step(0x00000001u), 0x00000001u);
  // -2^-100 * 2^-60 = -2^-160 rounds toward zero to 0, which the H200 writes as +0, not -0.
  EXPECT_EQ(Chunk().add(0x8000 | pow2(-100), pow2(-60)).step(), 0x00000000u);
  // Terms below 2^-149 still count: two products of -0.75 * 2^-149 (-1.5 * 2^-75 times 2^-75) sum to
  // -1.5 * 2^-149, toward zero -2^-149 (0x80000001), where truncating each term at 2^-149 first would
  // give +0; and 2^-134 + 2 * 0.75 * 2^-149 gives 2^-134 + 2^-149 (0x00008001).
  constexpr uint16_t kThreeQuarters = 0x1A40, kTwoToMinus75 = 0x1A00;
  EXPECT_EQ(Chunk().add(0x8000 | kThreeQuarters, kTwoToMinus75).add(0x8000 | kThreeQuarters, kTwoToMinus75).step(),
            0x80000001u);
  EXPECT_EQ(Chunk().add(pow2(-67), pow2(-67)).add(kThreeQuarters, kTwoToMinus75).add(kThreeQuarters, kTwoToMinus75).step(),
            0x00008001u);
}

TEST(MmaStep, ZerosAndSpecials) {
  // An exact-zero sum is +0, even from -0 terms and a -0 accumulator.
  EXPECT_EQ(Chunk().add(kMinusZero, kOne).add(kMinusOne, kZero).step(0x80000000u), 0x00000000u);
  EXPECT_EQ(Chunk().add(kOne, kOne).add(kMinusOne, kOne).step(), 0x00000000u);
  // NaN, Inf * 0, and +Inf with -Inf give 0x7FFFFFFF; otherwise an Inf gives that Inf.
  EXPECT_EQ(Chunk().add(kNan, kOne).step(), 0x7FFFFFFFu);
  EXPECT_EQ(Chunk().add(kInf, kZero).step(), 0x7FFFFFFFu);
  EXPECT_EQ(Chunk().add(kInf, kOne).add(kMinusInf, kOne).step(), 0x7FFFFFFFu);
  EXPECT_EQ(Chunk().add(kInf, kMinusOne).add(kOne, kOne).step(), 0xFF800000u);
  EXPECT_EQ(Chunk().add(kOne, kOne).step(0x7F800000u), 0x7F800000u);
  EXPECT_EQ(Chunk().add(kInf, kOne).step(0xFF800000u), 0x7FFFFFFFu);
  EXPECT_EQ(Chunk().add(kOne, kOne).step(0x7FC00000u), 0x7FFFFFFFu);
  // A finite sum beyond fp32's range: 2^127 * 2 = 2^128 gives +Inf (exponent overflow).
  EXPECT_EQ(Chunk().add(pow2(127), pow2(1)).step(), 0x7F800000u);
}

#if defined(__x86_64__) && defined(__GNUC__)
// Whether the upper halves of the YMM registers hold state (XINUSE bit 2, XGETBV with ECX = 1), or
// nullopt where the processor cannot say.
std::optional<bool> upper_avx_state_in_use() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__builtin_cpu_supports("avx") || !__get_cpuid_count(0xD, 1, &a, &b, &c, &d) || !(a & (1u << 2))) return std::nullopt;
  uint32_t lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return (lo & (1u << 2)) != 0;
}
#endif

// The AVX2 build of the MMA step leaves no upper YMM state behind on any path: code compiled for
// plain x86-64 that runs after it on the thread (the reference's SSE arithmetic, libm's fmaf) would
// otherwise pay a state transition on every instruction that mixes the two (measured: a
// cross_entropy reference case 20 to 40 times slower after a gemm case had run on its thread).
TEST(MmaStep, LeavesNoUpperAvxStateBehind) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (!upper_avx_state_in_use()) GTEST_SKIP() << "this processor does not report XINUSE (XGETBV with ECX = 1)";
  // The finite step's two exits: its last conversion (the tail call that lacked vzeroupper), and
  // the early +0 where no term counts (all products zero, c = +0). A special chunk (+Inf) is
  // decided before the finite step and never reaches it.
  Chunk finite = Chunk().add(kOne, kOne).add(kOneAndHalf, pow2(-24)).add(pow2(5), kMinusOne);
  Chunk zeros = Chunk().add(kZero, kOne).add(kOne, kMinusZero);
  for (const Chunk* chunk : {&finite, &zeros})
    for (const uint32_t c : {0u, 0x3f800000u, 0x00000001u}) {
      if (chunk == &zeros && c != 0) continue;  // a nonzero c counts: the conversion exit again
      asm volatile("vzeroupper");
      ASSERT_EQ(upper_avx_state_in_use(), false) << "vzeroupper left the upper state in use";
      const uint32_t bits = chunk->step(c);
      const std::optional<bool> dirty = upper_avx_state_in_use();
      EXPECT_EQ(dirty, false) << "the step (c = " << c << ", result " << bits << ") left the upper YMM halves in use";
    }
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

TEST(FixedOrderDot, ChunksEnterInAscendingK) {
  // k 0..15: 1 * 1, then k 16..30: fifteen 2^-26. Ascending: the accumulator 1 truncates each 2^-26
  // to 0: 1. The other order would give 15 * 2^-26 first, exactly, then 1 + (15 * 2^-26 truncated
  // to 14 * 2^-26) toward zero = 1 + 2^-23.
  std::array<uint16_t, 31> a{}, b{};
  a[0] = b[0] = kOne;
  for (int k = 16; k < 31; ++k) a[k] = b[k] = pow2(-13);
  EXPECT_EQ(fixed_order_dot(a.data(), 1, b.data(), 1, 31), 0x3F800000u);
  std::array<uint16_t, 31> ra{}, rb{};
  for (int k = 0; k < 15; ++k) ra[k] = rb[k] = pow2(-13);
  ra[16] = rb[16] = kOne;
  EXPECT_EQ(fixed_order_dot(ra.data(), 1, rb.data(), 1, 31), 0x3F800001u);
}

TEST(FixedOrderDot, EmptyKAndStrides) {
  // K = 0 gives +0.
  EXPECT_EQ(fixed_order_dot(nullptr, 1, nullptr, 1, 0), 0x00000000u);
  // Strides: b read down a column of a [K, 2] matrix.
  const std::array<uint16_t, 4> column_major_b = {kOne, kMinusOne, kOneAndHalf, kOne};  // b[:, 0] = (1, 1.5)
  const std::array<uint16_t, 2> row = {kOne, kOne};
  EXPECT_EQ(fixed_order_dot(row.data(), 1, column_major_b.data(), 2, 2), 0x40200000u);  // 1 + 1.5 = 2.5
}

// K = 0 with several columns: every output is +0, and no offset is taken from the operands' data,
// which holds no element (null): UBSan (asan and fuzz presets) flags `b.data() + n` there. Found by
// a long case_fuzzer run through expert_mlp, whose weight-gradient GEMMs have K = 0 for an expert
// without tokens (fuzz/seeds/case_fuzzer/expert_mlp_empty_k).
TEST(GemmReference, EmptyKGivesPositiveZerosWithoutTouchingTheOperands) {
  Case c;
  c.op = "gemm";
  c.direction = Direction::kForward;
  c.inputs["a"] = Tensor(DType::kBF16, {3, 0});
  c.inputs["b"] = Tensor(DType::kBF16, {0, 4});
  const Registry& r = builtin_registry();
  const TensorMap out = (*r.impl("gemm", "ref:fixed_order"))(c, *r.op("gemm")->contract("fixed_order"));
  ASSERT_EQ(out.at("out").shape(), (Shape{3, 4}));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(out.at("out").bits(i), 0x0000u) << i;
}

TEST(GemmReference, OutputsRoundTheAccumulatorToBf16Once) {
  // a = [[1, 3, 0], [1, 1, 1]], b = [[1], [2^-25], [0]]: both accumulators are 1 + (3 or 1) * 2^-25
  // toward zero, 1.0f, so bf16 1 (0x3F80).
  Case c;
  c.op = "gemm";
  c.direction = Direction::kForward;
  Tensor a(DType::kBF16, {2, 3}), b(DType::kBF16, {3, 1});
  const uint16_t av[] = {kOne, 0x4040 /* 3 */, kZero, kOne, kOne, kOne};
  for (int i = 0; i < 6; ++i) a.set_bits(i, av[i]);
  b.set_bits(0, kOne);
  b.set_bits(1, pow2(-25));
  c.inputs["a"] = a;
  c.inputs["b"] = b;
  const Registry& r = builtin_registry();
  const ContractInfo& contract = *r.op("gemm")->contract("fixed_order");
  TensorMap out = (*r.impl("gemm", "ref:fixed_order"))(c, contract);
  ASSERT_EQ(out.at("out").shape(), (Shape{2, 1}));
  EXPECT_EQ(out.at("out").bits(0), 0x3F80u);
  EXPECT_EQ(out.at("out").bits(1), 0x3F80u);

  // b = [[1], [2^-8], [2^-9]]: row 0 is 1 + 3 * 2^-8 = 1 + 1.5 * 2^-7, exactly the tie between
  // 0x3F81 and 0x3F82, which RNE sends to the even 0x3F82 (toward zero would give 0x3F81); row 1 is
  // 1 + 0.75 * 2^-7, nearest 0x3F81.
  b.set_bits(1, pow2(-8));
  b.set_bits(2, pow2(-9));
  c.inputs["b"] = b;
  out = (*r.impl("gemm", "ref:fixed_order"))(c, contract);
  EXPECT_EQ(out.at("out").bits(0), 0x3F82u);
  EXPECT_EQ(out.at("out").bits(1), 0x3F81u);
}

// The GEMM reference skips a K-chunk whose products are all zero (a zero chunk of one operand and no
// Inf or NaN in the other's). Against fixed_order_dot output by output, on operands built to hold
// every kind of chunk: zero rows (padded experts), zero columns, zero chunks inside a row, -0s,
// Infs and NaNs in a zero row's partner column, tails of K that are not a multiple of 16, and
// accumulators that are already Inf or NaN when a zero chunk follows.
TEST(GemmReference, SkippedZeroChunksGiveFixedOrderDotsBits) {
  std::mt19937 rng(13);
  int zero_against_special = 0, special_then_zero = 0, skipped = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t M = 1 + static_cast<int64_t>(rng() % 6), K = 1 + static_cast<int64_t>(rng() % 50),
                  N = 1 + static_cast<int64_t>(rng() % 6);
    Tensor a(DType::kBF16, {M, K}), b(DType::kBF16, {K, N});
    auto value = [&]() -> uint16_t {
      switch (rng() % 16) {
        case 0: return kInf;
        case 1: return kMinusInf;
        case 2: return kNan;
        case 3: return kMinusZero;
        default: return static_cast<uint16_t>(((rng() % 2) << 15) | ((118 + rng() % 20) << 7) | (rng() % 128));
      }
    };
    const bool sparse_specials = trial % 2 == 0;  // half the trials keep Inf and NaN rare
    auto draw = [&]() -> uint16_t {
      const uint16_t v = value();
      return sparse_specials && (v & 0x7F80u) == 0x7F80u && rng() % 8 != 0 ? kOne : v;
    };
    for (int64_t m = 0; m < M; ++m) {
      const bool zero_row = rng() % 3 == 0;
      const int64_t zero_chunk = static_cast<int64_t>(rng() % 4);  // this chunk of the row is zeros
      for (int64_t k = 0; k < K; ++k)
        a.set_bits(m * K + k, zero_row || k / kMmaChunk == zero_chunk ? (rng() % 2 ? kZero : kMinusZero) : draw());
    }
    for (int64_t n = 0; n < N; ++n) {
      const bool zero_column = rng() % 4 == 0;
      for (int64_t k = 0; k < K; ++k) b.set_bits(k * N + n, zero_column ? kZero : draw());
    }
    const Tensor out = fixed_order_out(a, b);
    const auto* ap = reinterpret_cast<const uint16_t*>(a.data());
    const auto* bp = reinterpret_cast<const uint16_t*>(b.data());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        const uint16_t expected = dot_in_bf16(a, b, m, n);
        const uint16_t got = static_cast<uint16_t>(out.bits(m * N + n));
        if ((expected & 0x7FFFu) > 0x7F80u) {
          EXPECT_GT(got & 0x7FFFu, 0x7F80u) << "trial " << trial << " [" << m << ", " << n << "]";
        } else {
          EXPECT_EQ(got, expected) << "trial " << trial << " [" << m << ", " << n << "] K " << K;
        }
        // What the outputs exercised: a chunk of zeros against an Inf or NaN (taken), a zero chunk
        // after the accumulator became Inf or NaN (skipped), any skipped chunk.
        bool special_acc = false;
        for (int64_t k0 = 0; k0 < K; k0 += kMmaChunk) {
          bool a_zero = true, b_zero = true, a_special = false, b_special = false;
          for (int64_t k = k0; k < std::min<int64_t>(K, k0 + kMmaChunk); ++k) {
            const uint16_t x = ap[m * K + k], y = bp[k * N + n];
            a_zero &= (x & 0x7FFFu) == 0;
            b_zero &= (y & 0x7FFFu) == 0;
            a_special |= (x & 0x7F80u) == 0x7F80u;
            b_special |= (y & 0x7F80u) == 0x7F80u;
          }
          const bool skip = (a_zero && !b_special) || (b_zero && !a_special);
          zero_against_special += (a_zero && b_special) || (b_zero && a_special);
          special_then_zero += skip && special_acc;
          skipped += skip;
          special_acc |= a_special || b_special;
        }
      }
  }
  EXPECT_GT(zero_against_special, 20);
  EXPECT_GT(special_then_zero, 20);
  EXPECT_GT(skipped, 200);
}

// The GEMM reference takes a chunk of finite values into a finite accumulator through the finite
// step directly. Against fixed_order_dot output by output, on operands whose products reach past
// fp32's range in some chunks and not in others, with a rare NaN: an accumulator that overflowed to
// +-Inf, or became NaN, must still go through the full step when finite chunks follow, and the
// finite ones must give the full step's bits.
TEST(GemmReference, FiniteChunksGiveFixedOrderDotsBitsAfterAnOverflow) {
  std::mt19937 rng(29);
  int finite_after_inf = 0, finite_after_nan = 0, finite_steps = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t M = 1 + static_cast<int64_t>(rng() % 6), K = 1 + static_cast<int64_t>(rng() % 80),
                  N = 1 + static_cast<int64_t>(rng() % 6);
    Tensor a(DType::kBF16, {M, K}), b(DType::kBF16, {K, N});
    // a's chunks are large (2^100 .. 2^127) or moderate (2^-10 .. 2^9), by chunk; b's values 2^0 .. 2^29,
    // so that a large chunk's products overflow fp32 (2^128) and a moderate one's do not.
    std::vector<bool> large_chunk(static_cast<size_t>((K + kMmaChunk - 1) / kMmaChunk));
    for (size_t c = 0; c < large_chunk.size(); ++c) large_chunk[c] = rng() % 3 == 0;
    auto value = [&](int lo, int span) {
      return static_cast<uint16_t>(((rng() % 2) << 15) | ((127 + lo + static_cast<int>(rng() % span)) << 7) | (rng() % 128));
    };
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k)  // now and then a NaN, whose chunk leaves a NaN accumulator
        a.set_bits(m * K + k, rng() % 64 == 0                                  ? kNan
                              : large_chunk[static_cast<size_t>(k / kMmaChunk)] ? value(100, 28)
                                                                                : value(-10, 20));
    for (int64_t i = 0; i < K * N; ++i) b.set_bits(i, value(0, 30));
    const Tensor out = fixed_order_out(a, b);
    const auto* ap = reinterpret_cast<const uint16_t*>(a.data());
    const auto* bp = reinterpret_cast<const uint16_t*>(b.data());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        const uint16_t expected = dot_in_bf16(a, b, m, n);
        EXPECT_EQ(static_cast<uint16_t>(out.bits(m * N + n)), expected)
            << "trial " << trial << " [" << m << ", " << n << "] K " << K;
        // What the outputs exercised: finite chunks into an Inf or a NaN accumulator, and into a
        // finite one.
        uint32_t acc = 0;
        for (int64_t k0 = 0; k0 < K; k0 += kMmaChunk) {
          const int64_t k1 = std::min<int64_t>(K, k0 + kMmaChunk);
          const uint32_t next = fixed_order_dot(ap + m * K, 1, bp + n, N, k1);
          bool finite_chunk = true;
          for (int64_t k = k0; k < k1; ++k) finite_chunk &= ap[m * K + k] != kNan;
          const bool inf = (acc & 0x7FFFFFFFu) == 0x7F800000u, nan = (acc & 0x7FFFFFFFu) > 0x7F800000u;
          finite_after_inf += finite_chunk && inf;
          finite_after_nan += finite_chunk && nan;
          finite_steps += finite_chunk && !inf && !nan;
          acc = next;
        }
      }
  }
  EXPECT_GT(finite_after_inf, 50);
  EXPECT_GT(finite_after_nan, 20);
  EXPECT_GT(finite_steps, 500);
}

}  // namespace
}  // namespace bitparity::ref
