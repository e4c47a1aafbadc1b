// gemm (spec OP-10, rule 13): each contract's exact arithmetic. fixed_order is bitparity's
// tensor-core GEMM: per output, K-chunks of 16 through the MMA step in ascending order, then one
// RNE rounding of the fp32 accumulator to bf16.
#include "reference/gemm.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "ops/gemm.h"
#include "reference/numerics.h"

namespace bitparity::ref {
namespace {

constexpr uint32_t kCanonicalNan = 0x7FFFFFFFu;
constexpr uint32_t kPlusInf = 0x7F800000u, kMinusInf = 0xFF800000u;
// Bits kept below the largest tag: each term is truncated to a multiple of 2^(Emax - kKeptBits).
constexpr int kKeptBits = 25;
constexpr int kNoTerm = -100000;

bool bf16_is_nan(uint16_t h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0; }
bool bf16_is_inf(uint16_t h) { return (h & 0x7FFFu) == 0x7F80u; }
bool bf16_is_zero(uint16_t h) { return (h & 0x7FFFu) == 0; }

// S * 2^q rounded toward zero to fp32 (subnormals kept; overflow to +-Inf); S = 0 gives +0, and so
// does a nonzero S that rounds to zero (below 2^-149): the H200 writes +0 for a negative one too
// (peers/hw/gemm.jsonl.gz, its directed cases). Always inlined: called last from the AVX2 build of
// the finite step, as a tail call GCC jumps to it without vzeroupper, and the upper YMM state left in
// use slows every SSE instruction after it on the thread (MmaStep.LeavesNoUpperAvxStateBehind).
[[gnu::always_inline]] inline uint32_t to_f32_toward_zero(int64_t S, int q) {
  if (S == 0) return 0;
  const uint32_t sign = S < 0 ? 0x80000000u : 0;
  const uint64_t M = S < 0 ? static_cast<uint64_t>(-S) : static_cast<uint64_t>(S);
  const int bits = 64 - __builtin_clzll(M);
  const int msb = q + bits - 1;
  int lsb = msb - 23;
  if (lsb < -149) lsb = -149;
  const int shift = lsb - q;
  uint64_t R = 0;
  if (shift <= 0) {
    R = M << (-shift);  // M < 2^33 and -shift < 24: no overflow
  } else {
    R = shift >= 64 ? 0 : M >> shift;
  }
  if (R == 0) return 0;
  if (R < (uint64_t{1} << 23)) return sign | static_cast<uint32_t>(R);  // subnormal (lsb = -149)
  const int e = lsb + 23;
  if (e > 127) return sign | kPlusInf;
  return sign | (static_cast<uint32_t>(e + 127) << 23) | (static_cast<uint32_t>(R) & 0x7FFFFFu);
}

}  // namespace

// The finite step's second loop shifts each of 16 32-bit lanes by its own count, which AVX2 does in
// one instruction (vpsrlvd) and SSE2 cannot: on x86-64 it is built for both and the loader picks
// one. Integer arithmetic throughout, so both give the same bits.
#if defined(__x86_64__) && defined(__GNUC__)
#define BITPARITY_LANE_SHIFTS __attribute__((target_clones("avx2", "default")))
#else
#define BITPARITY_LANE_SHIFTS
#endif

namespace {
uint32_t mma_bf16_special_step(const uint16_t* a, const uint16_t* b, uint32_t c);
BITPARITY_LANE_SHIFTS uint32_t mma_bf16_finite_step(const uint16_t* a, const uint16_t* b, uint32_t c);
}  // namespace

uint32_t mma_bf16_step(const uint16_t* a, const uint16_t* b, uint32_t c) {
  // Non-finite inputs first (their exponents all ones); most steps have none and skip the sorting.
  bool any_special = ((c >> 23) & 0xFF) == 0xFF;
  for (int k = 0; k < kMmaChunk; ++k) any_special |= ((a[k] & 0x7F80u) == 0x7F80u) | ((b[k] & 0x7F80u) == 0x7F80u);
  if (any_special) return mma_bf16_special_step(a, b, c);
  return mma_bf16_finite_step(a, b, c);
}

namespace {

uint32_t mma_bf16_special_step(const uint16_t* a, const uint16_t* b, uint32_t c) {
  bool nan = false, plus_inf = false, minus_inf = false;
  if (((c >> 23) & 0xFF) == 0xFF) {
    if (c & 0x7FFFFF) {
      nan = true;
    } else {
      ((c >> 31) ? minus_inf : plus_inf) = true;
    }
  }
  for (int k = 0; k < kMmaChunk; ++k) {
    if (bf16_is_nan(a[k]) || bf16_is_nan(b[k])) {
      nan = true;
    } else if (bf16_is_inf(a[k]) || bf16_is_inf(b[k])) {
      if (bf16_is_zero(a[k]) || bf16_is_zero(b[k])) {
        nan = true;
      } else {
        (((a[k] ^ b[k]) & 0x8000u) ? minus_inf : plus_inf) = true;
      }
    }
  }
  if (nan || (plus_inf && minus_inf)) return kCanonicalNan;
  if (plus_inf) return kPlusInf;
  if (minus_inf) return kMinusInf;
  return mma_bf16_finite_step(a, b, c);
}

// The step of finite inputs: the products and the accumulator aligned to the largest tag, summed
// exactly, truncated to fp32. A product of bf16 significands (hidden bit where normal; a subnormal
// decodes with e = -126) is P * 2^(tag - 14), tag = ea + eb; the accumulator is m * 2^(e - 23), tag
// e. Each is truncated to a multiple of 2^(Emax - kKeptBits): a product is (|P| << 11) >> (Emax -
// tag), the accumulator (|m| << 2) >> (Emax - e), both below 2^28. Zero terms take no part in Emax
// (and contribute 0 whatever their shift). The loops carry no branch on the data (the terms of one
// step have unrelated exponents) and work in 32-bit lanes: |P| << 11 is below 2^27, so a shift of 31
// or more gives 0 as any larger one would, and the 16 aligned products sum exactly in an int32
// (below 16 * 2^27 = 2^31); the accumulator joins them in an int64.
BITPARITY_LANE_SHIFTS uint32_t mma_bf16_finite_step(const uint16_t* a, const uint16_t* b, uint32_t c) {
  uint32_t magnitude[kMmaChunk];  // |P| << 11
  int32_t negative[kMmaChunk];    // -1 where the product is negative, else 0
  int32_t tag[kMmaChunk];
  int32_t emax = kNoTerm;
  for (int k = 0; k < kMmaChunk; ++k) {
    const uint32_t ua = a[k], ub = b[k];
    const uint32_t biased_a = (ua >> 7) & 0xFF, biased_b = (ub >> 7) & 0xFF;
    const uint32_t pa = (ua & 0x7F) | (biased_a != 0 ? 0x80u : 0u);
    const uint32_t pb = (ub & 0x7F) | (biased_b != 0 ? 0x80u : 0u);
    const uint32_t p = pa * pb;
    const int32_t t = static_cast<int32_t>(biased_a + (biased_a == 0)) + static_cast<int32_t>(biased_b + (biased_b == 0)) - 254;
    magnitude[k] = p << 11;
    negative[k] = ((ua ^ ub) & 0x8000u) != 0 ? -1 : 0;
    tag[k] = t;
    const int32_t counted = p != 0 ? t : kNoTerm;
    emax = counted > emax ? counted : emax;
  }
  const uint32_t biased_c = (c >> 23) & 0xFF;
  const auto mc = static_cast<int64_t>((c & 0x7FFFFF) | (biased_c != 0 ? 0x800000u : 0u));
  const int ec = static_cast<int>(biased_c + (biased_c == 0)) - 127;
  const int counted_c = mc != 0 ? ec : kNoTerm;
  emax = counted_c > emax ? counted_c : emax;
  if (emax == kNoTerm) return 0;
  int32_t products = 0;
  for (int k = 0; k < kMmaChunk; ++k) {
    // A zero term's tag may lie above emax: as unsigned its shift is clamped to 31, and 0 stays 0.
    const uint32_t shift = std::min(static_cast<uint32_t>(emax - tag[k]), 31u);
    const auto aligned = static_cast<int32_t>(magnitude[k] >> shift);
    products += (aligned ^ negative[k]) - negative[k];  // -aligned where the product is negative
  }
  auto right_shift = [](int s) { return s < 0 ? 0 : (s > 63 ? 63 : s); };  // 0 only for a zero accumulator's tag
  const int64_t aligned_c = (mc << 2) >> right_shift(emax - ec);
  const int64_t sum = products + ((c >> 31) != 0 ? -aligned_c : aligned_c);
  return to_f32_toward_zero(sum, emax - kKeptBits);
}

}  // namespace

uint32_t fixed_order_dot(const uint16_t* a, int64_t a_stride, const uint16_t* b, int64_t b_stride, int64_t K) {
  uint32_t acc = 0;
  std::array<uint16_t, kMmaChunk> ca{}, cb{};
  for (int64_t k0 = 0; k0 < K; k0 += kMmaChunk) {
    for (int j = 0; j < kMmaChunk; ++j) {
      const int64_t k = k0 + j;
      ca[static_cast<size_t>(j)] = k < K ? a[k * a_stride] : 0;
      cb[static_cast<size_t>(j)] = k < K ? b[k * b_stride] : 0;
    }
    acc = mma_bf16_step(ca.data(), cb.data(), acc);
  }
  return acc;
}

namespace {

// A GEMM operand as fixed_order walks it: each of its vectors (a row of a, a column of b) as
// contiguous K-chunks of kMmaChunk (the last padded with zeros), and per chunk whether every value
// is a zero (+-0) and whether any is not finite.
struct ChunkedOperand {
  static constexpr uint8_t kAllZero = 1, kNonFinite = 2;
  int64_t chunks = 0;
  std::vector<uint16_t> values;  // [vector][chunks * kMmaChunk]
  std::vector<uint8_t> flags;    // [vector][chunks]

  // Vector v's element k is data[v * v_stride + k * k_stride].
  ChunkedOperand(const uint16_t* data, int64_t vectors, int64_t K, int64_t v_stride, int64_t k_stride)
      : chunks((K + kMmaChunk - 1) / kMmaChunk),
        values(static_cast<size_t>(vectors * chunks * kMmaChunk), 0),
        flags(static_cast<size_t>(vectors * chunks), kAllZero) {
    for (int64_t v = 0; v < vectors; ++v)
      for (int64_t c = 0; c < chunks; ++c) {
        uint16_t* chunk_values = values.data() + static_cast<size_t>((v * chunks + c) * kMmaChunk);
        bool nonzero = false, non_finite = false;
        for (int64_t k = c * kMmaChunk; k < std::min(K, (c + 1) * kMmaChunk); ++k) {
          const uint16_t h = data[v * v_stride + k * k_stride];
          chunk_values[k - c * kMmaChunk] = h;
          nonzero |= !bf16_is_zero(h);
          non_finite |= (h & 0x7F80u) == 0x7F80u;
        }
        flags[static_cast<size_t>(v * chunks + c)] = static_cast<uint8_t>((nonzero ? 0 : kAllZero) | (non_finite ? kNonFinite : 0));
      }
  }
  const uint16_t* chunk(int64_t v, int64_t c) const {
    return values.data() + static_cast<size_t>((v * chunks + c) * kMmaChunk);
  }
  uint8_t flag(int64_t v, int64_t c) const { return flags[static_cast<size_t>(v * chunks + c)]; }
};

// A chunk whose 16 products are all zero (a zero times a finite value) is not taken: the step of
// zero products returns its accumulator unchanged whatever it holds (a finite value, +-Inf or the
// canonical NaN that steps return; never -0, which a step does not produce), so the result is
// fixed_order_dot's. A chunk of finite values on both sides, into a finite accumulator, goes
// straight to the finite step, which is where mma_bf16_step would send it after finding nothing to
// sort out; any other chunk (a non-finite value on either side, or an accumulator that overflowed
// to an Inf or became NaN) is taken through the full step.
uint32_t chunked_dot(const ChunkedOperand& a, int64_t m, const ChunkedOperand& b, int64_t n) {
  constexpr uint8_t kZero = ChunkedOperand::kAllZero, kSpecial = ChunkedOperand::kNonFinite;
  uint32_t acc = 0;
  for (int64_t c = 0; c < a.chunks; ++c) {
    const uint8_t fa = a.flag(m, c), fb = b.flag(n, c);
    if (((fa & kZero) && !(fb & kSpecial)) || ((fb & kZero) && !(fa & kSpecial))) continue;
    const bool finite = ((fa | fb) & kSpecial) == 0 && ((acc >> 23) & 0xFF) != 0xFF;
    acc = finite ? mma_bf16_finite_step(a.chunk(m, c), b.chunk(n, c), acc) : mma_bf16_step(a.chunk(m, c), b.chunk(n, c), acc);
  }
  return acc;
}

// out[m, n] = bf16(fixed_order_dot(a[m, :], b[:, n])), RNE; a NaN accumulator stores as 0x7FFF.
TensorMap fixed_order(const Case& c, const ContractInfo&) {
  const Tensor& a = *c.input("a");
  const Tensor& b = *c.input("b");
  const int64_t M = a.dim(0), K = a.dim(1), N = b.dim(1);
  Tensor out(DType::kBF16, {M, N});
  // At K = 0 there is no chunk: no operand element is read (their data may be null) and every
  // output is +0.
  const ChunkedOperand rows(reinterpret_cast<const uint16_t*>(a.data()), M, K, K, 1);
  const ChunkedOperand columns(reinterpret_cast<const uint16_t*>(b.data()), N, K, 1, N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) out.set_f32(m * N + n, f32_from_bits(chunked_dot(rows, m, columns, n)));
  return {{"out", std::move(out)}};
}

// cublas: NVIDIA's order is unknown, and the contract is judged by its error bound (ops/gemm.cpp);
// its reference is one admissible result, the exact sum (the op's own, ops/gemm.h) rounded once to
// bf16.
TensorMap exact_rounded_once(const Case& c, const ContractInfo&) {
  const Tensor& a = *c.input("a");
  const Tensor& b = *c.input("b");
  const std::vector<double> sums = ops::gemm_exact_sums(a, b);
  Tensor out(DType::kBF16, {a.dim(0), b.dim(1)});
  auto* bits = reinterpret_cast<uint16_t*>(out.data());
  for (int64_t i = 0; i < out.numel(); ++i)
    bits[i] = static_cast<uint16_t>(from_double(DType::kBF16, sums[static_cast<size_t>(i)]));
  return {{"out", std::move(out)}};
}

}  // namespace

std::vector<ImplEntry> gemm_impls() {
  return {{"gemm", "fixed_order", with_canonical_nans(fixed_order)},
          {"gemm", "cublas", with_canonical_nans(exact_rounded_once)}};
}

}  // namespace bitparity::ref
