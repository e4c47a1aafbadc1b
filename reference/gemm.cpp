// gemm (spec OP-10, rule 13): each contract's exact arithmetic. fixed_order is bitparity's
// tensor-core GEMM: per output, K-chunks of 16 through the MMA step in ascending order, then one
// RNE rounding of the fp32 accumulator to bf16.
#include "reference/gemm.h"

#include <array>
#include <cstdlib>

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

// A term of the fused sum: value sig * 2^exp, aligned by its tag.
struct Term {
  int64_t sig = 0;
  int exp = 0;
  int tag = 0;
};

bool bf16_is_nan(uint16_t h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0; }
bool bf16_is_inf(uint16_t h) { return (h & 0x7FFFu) == 0x7F80u; }
bool bf16_is_zero(uint16_t h) { return (h & 0x7FFFu) == 0; }

// A bf16 product as the unit forms it: the integer product of the two 8-bit significands (hidden
// bit included where normal), tag ea + eb, value P * 2^(ea + eb - 14).
Term product(uint16_t a, uint16_t b) {
  auto decode = [](uint16_t h, int& e, int64_t& m) {
    const int biased = (h >> 7) & 0xFF;
    m = h & 0x7F;
    if (biased == 0) {
      e = -126;
    } else {
      e = biased - 127;
      m |= 0x80;
    }
  };
  int ea = 0, eb = 0;
  int64_t ma = 0, mb = 0;
  decode(a, ea, ma);
  decode(b, eb, mb);
  const int64_t p = ma * mb;
  return {((a ^ b) & 0x8000u) ? -p : p, ea + eb - 14, ea + eb};
}

// The fp32 accumulator as a term: significand (hidden bit where normal), tag e, value m * 2^(e - 23).
Term accumulator(uint32_t c) {
  const int biased = static_cast<int>((c >> 23) & 0xFF);
  int64_t m = c & 0x7FFFFF;
  int e = -126;
  if (biased != 0) {
    e = biased - 127;
    m |= 0x800000;
  }
  return {(c >> 31) ? -m : m, e - 23, e};
}

// S * 2^q rounded toward zero to fp32 (subnormals kept; overflow to +-Inf); S = 0 gives +0, and so
// does a nonzero S that rounds to zero (below 2^-149): the H200 writes +0 for a negative one too
// (peers/hw/gemm.jsonl.gz, its directed cases).
uint32_t to_f32_toward_zero(int64_t S, int q) {
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

namespace {
uint32_t mma_bf16_special_step(const uint16_t* a, const uint16_t* b, uint32_t c);
uint32_t mma_bf16_finite_step(const uint16_t* a, const uint16_t* b, uint32_t c);
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
// exactly, truncated to fp32.
uint32_t mma_bf16_finite_step(const uint16_t* a, const uint16_t* b, uint32_t c) {
  std::array<Term, kMmaChunk + 1> terms;
  terms[0] = accumulator(c);
  for (int k = 0; k < kMmaChunk; ++k) terms[static_cast<size_t>(k) + 1] = product(a[k], b[k]);
  int emax = kNoTerm;
  for (const Term& t : terms)
    if (t.sig != 0 && t.tag > emax) emax = t.tag;
  if (emax == kNoTerm) return 0;
  const int q = emax - kKeptBits;
  // Left shifts are at most 11 bits (a product's exp is its tag - 14), so every aligned term is
  // below 2^28 and the sum of 17 of them fits an int64 with room to spare.
  int64_t sum = 0;
  for (const Term& t : terms) {
    if (t.sig == 0) continue;
    const int shift = q - t.exp;
    const int64_t magnitude = std::llabs(t.sig);
    const int64_t aligned = shift <= 0 ? magnitude << (-shift) : (shift >= 63 ? 0 : magnitude >> shift);
    sum += t.sig < 0 ? -aligned : aligned;
  }
  return to_f32_toward_zero(sum, q);
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

// out[m, n] = bf16(fixed_order_dot(a[m, :], b[:, n])), RNE; a NaN accumulator stores as 0x7FFF.
TensorMap fixed_order(const Case& c, const ContractInfo&) {
  const Tensor& a = *c.input("a");
  const Tensor& b = *c.input("b");
  const int64_t M = a.dim(0), K = a.dim(1), N = b.dim(1);
  const auto* ap = reinterpret_cast<const uint16_t*>(a.data());
  const auto* bp = reinterpret_cast<const uint16_t*>(b.data());
  Tensor out(DType::kBF16, {M, N});
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      // At K = 0, b holds no element and its data may be null: no offset n is taken from it (a's
      // offset m * K is then 0).
      const uint16_t* column = K > 0 ? bp + n : bp;
      out.set_f32(m * N + n, f32_from_bits(fixed_order_dot(ap + m * K, 1, column, N, K)));
    }
  return {{"out", out}};
}

// cublas: NVIDIA's order is unknown, and the contract is judged by its error bound (ops/gemm.cpp);
// its reference is one admissible result, the exact sum (the op's own, ops/gemm.h) rounded once to
// bf16.
TensorMap exact_rounded_once(const Case& c, const ContractInfo&) {
  const Tensor& a = *c.input("a");
  const Tensor& b = *c.input("b");
  const std::vector<double> sums = ops::gemm_exact_sums(a, b);
  Tensor out(DType::kBF16, {a.dim(0), b.dim(1)});
  for (int64_t i = 0; i < out.numel(); ++i) out.set_bits(i, from_double(DType::kBF16, sums[static_cast<size_t>(i)]));
  return {{"out", out}};
}

}  // namespace

std::vector<ImplEntry> gemm_impls() {
  return {{"gemm", "fixed_order", with_canonical_nans(fixed_order)},
          {"gemm", "cublas", with_canonical_nans(exact_rounded_once)}};
}

}  // namespace bitparity::ref
