// Transcribed from the PTX that nvcc 13.0 emits for libdevice.10.bc's __nv_expf, __nv_logf,
// __nv_log1pf and __nv_powf (non-FTZ, -O2, sm_90); reference/math/libdevice_ptx.md keeps that PTX
// and what the GPU checks established. Every fp32 step below is one IEEE operation rounded to
// nearest even unless its comment says otherwise: compile this file with -ffp-contract=off.
#include "reference/math/device_math.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace bitparity::ref::math {
namespace {

constexpr float f32(uint32_t bits) { return std::bit_cast<float>(bits); }
constexpr uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }

float canonical_nan() { return f32(kCanonicalNanBits); }
float canonicalize(float v) { return std::isnan(v) ? canonical_nan() : v; }

constexpr float kInf = std::numeric_limits<float>::infinity();

// --- __nv_expf constants (rule 12) --------------------------------------------------------------
constexpr float kLog2eHi = f32(0x3FB8AA3B);   // c1: log2(e), high part
constexpr float kLog2eLo = f32(0x32A57060);   // c2: log2(e), low part
constexpr float kRoundBias = f32(0x4B400000);  // c3: 1.5 * 2^23 (12582912) in the bitcode
// c4 = c1 / 252: the reduced argument is scaled so that saturate() maps a to [0, 1].
constexpr float kLog2eOver252 = kLog2eHi / 252.0f;
static_assert(std::bit_cast<uint32_t>(kLog2eOver252) == 0x3BBB989Du);  // the constant in the PTX
constexpr float kExpSteps = 252.0f;
// The addend of the fma.rm, (-126 + c3) + 127 = 0x4B400001 (12582913), and the bias that turns j
// back into the integer exponent d, c3 + 127 = 0x4B40007F. Both sums are exact in fp32.
constexpr float kJAddend = (-126.0f + kRoundBias) + 127.0f;
constexpr float kJBias = kRoundBias + 127.0f;
static_assert(std::bit_cast<uint32_t>(kJAddend) == 0x4B400001u);
static_assert(std::bit_cast<uint32_t>(kJBias) == 0x4B40007Fu);

// cvt.sat.f32.f32: clamp to [0, 1]; NaN becomes +0.
float saturate(float t) {
  if (std::isnan(t)) return 0.0f;
  if (t < 0.0f) return 0.0f;
  if (t > 1.0f) return 1.0f;
  return t;
}

// fma.rm.f32(t, 252, 0x4B400001) for t in [0, 1]. The exact value lies in [2^23, 2^24), where
// fp32 spacing is 1, so rounding down is the floor; t * 252 is exact in fp64 (24 + 8 bits).
float fma_rm_exponent(float t) {
  return kJAddend + static_cast<float>(std::floor(static_cast<double>(t) * static_cast<double>(kExpSteps)));
}

// --- __nv_logf constants ------------------------------------------------------------------------
constexpr float kLogfTiny = f32(0x00800000);         // 2^-126: smaller inputs are scaled by 2^23
constexpr float kTwo23 = f32(0x4B000000);            // 2^23
constexpr float kTwoM23 = f32(0x34000000);           // 2^-23
constexpr float kLogfTinyExponent = -23.0f;          // 0xC1B80000
constexpr uint32_t kLogfMantissaOffset = 0x3F2AAAABu;  // splits x = 2^e * m with m in [2/3, 4/3)
constexpr float kLn2 = f32(0x3F317218);
constexpr uint32_t kLogfPoly[9] = {0xBE055027, 0x3E1039F6, 0xBDF8CDCC, 0x3E0F2955, 0xBE2AD8B9,
                                   0x3E4CED0B, 0xBE7FFF22, 0x3EAAAA78, 0xBF000000};

// --- __nv_log1pf constants ----------------------------------------------------------------------
constexpr uint32_t kLog1pfMantissaOffset = 0x3F400000u;  // splits 1 + x with m in [3/4, 3/2)
constexpr uint32_t kFourBits = 0x40800000u;              // 4.0
constexpr float kQuarter = 0.25f;
constexpr uint32_t kLog1pfPoly[9] = {0xBD39BF78, 0x3DD80012, 0xBE0778E0, 0x3E146475, 0xBE2A68DD,
                                     0x3E4CAF9E, 0xBE800042, 0x3EAAAAE6, 0xBF000000};

// --- __nv_powf constants ------------------------------------------------------------------------
constexpr float kPowfTiny = f32(0x00800000);             // 2^-126: smaller |x| is scaled by 2^24
constexpr float kTwo24 = f32(0x4B800000);                // 2^24
constexpr float kPowfTinyExponent = -24.0f;              // 0xC1C00000
constexpr uint32_t kPowfMantissaOffset = 0x3F3504F3u;    // splits |x| = 2^e * m with m in [√½, √2)
constexpr float kPowfLog2eLo = f32(0x32A55E34);          // log2(e) − kLog2eHi, powf's low part
// log2(m) = log2(e) * (u + u^3 * P(u^2)), u = 2(m − 1)/(m + 1); kLog2Poly is P's Horner list.
constexpr uint32_t kLog2Poly[4] = {0x3A2C32E4, 0x3B52E7DB, 0x3C93BB73, 0x3DF6384F};
// 2^r for r in [-1/2, 1/2], ending in the constant term 1.
constexpr uint32_t kExp2Poly[7] = {0x391FCB8E, 0x3AAF85ED, 0x3C1D9856, 0x3D6357BB,
                                   0x3E75FDEC, 0x3F317218, 0x3F800000};
constexpr float kPowfExponentLimit = 152.0f;   // |y log2|x|| > 152: the result is 0 or Inf
constexpr uint32_t kTwo127Bits = 0x7F000000u;  // 2^127, the first factor of 2^n when n > 0
// n <= 0 moves 250 from the exponent of the first factor (2^-123) to the second (2^(n+123)).
constexpr uint32_t kNonPositiveScaleShift = 0x83000000u;  // -(250 << 23) as a uint32
constexpr uint32_t kExponentBits = 0x7F800000u;
constexpr uint32_t kMagnitudeBits = 0x7FFFFFFFu;

// Horner over the coefficient list exactly as libdevice nests it:
// p = fma(c0, f, c1); p = fma(p, f, c_k) for k = 2..N-1.
template <size_t N>
float horner(const uint32_t (&c)[N], float f) {
  float p = std::fma(f32(c[0]), f, f32(c[1]));
  for (size_t k = 2; k < N; ++k) p = std::fma(p, f, f32(c[k]));
  return p;
}

}  // namespace

const char* math_model_name(MathModel model) {
  return model == MathModel::kLibdevice ? "libdevice" : "cr";
}

float add_rz(float a, float b) {
  const float s = a + b;  // RNE
  if (std::isinf(s) && std::isfinite(a) && std::isfinite(b)) {
    return std::copysign(std::numeric_limits<float>::max(), s);  // RZ never overflows
  }
  if (!std::isfinite(s)) return s;
  // TwoSum: err = (a + b) - s exactly.
  const float bb = s - a;
  const float err = (a - (s - bb)) + (b - bb);
  // RNE went away from zero when the error points back toward zero: step one ulp toward zero.
  if ((s > 0.0f && err < 0.0f) || (s < 0.0f && err > 0.0f)) return std::nextafter(s, 0.0f);
  return s;
}

// --- ex2.approx.ftz.f32 (rule 12) ---------------------------------------------------------------

namespace {

// ex2.approx's input either has a fixed result or splits as |r| * 2^23 = i * 2^23 + f.
struct Ex2Split {
  bool fixed;     // NaN, ±Inf, |r| < 2^-126 (FTZ) or |r| >= 128: the result is `value`
  float value;
  bool negative;
  uint32_t i;     // integer part of |r|
  uint32_t f;     // the table index: |r|'s first 23 fraction bits (truncated)
};

Ex2Split split_ex2(float r) {
  const uint32_t b = bits_of(r);
  const uint32_t mag = b & 0x7FFFFFFFu;
  const bool negative = (b >> 31) != 0;
  if (mag > 0x7F800000u) return {true, canonical_nan(), negative, 0, 0};
  if (mag == 0x7F800000u) return {true, negative ? 0.0f : kInf, negative, 0, 0};
  if (mag < 0x00800000u) return {true, 1.0f, negative, 0, 0};  // FTZ input: |r| < 2^-126 counts as 0
  const int exponent = static_cast<int>(mag >> 23) - 127;       // |r| = m * 2^(exponent - 23)
  if (exponent >= 7) return {true, negative ? 0.0f : kInf, negative, 0, 0};  // |r| >= 128
  const uint32_t m = (mag & 0x7FFFFFu) | 0x800000u;
  uint32_t fixed = 0;  // |r| * 2^23, truncated
  if (exponent >= 0) {
    fixed = m << exponent;
  } else if (exponent > -24) {
    fixed = m >> -exponent;
  }
  return {false, 0.0f, negative, fixed >> kEx2FractionBits, fixed & (kEx2TableSize - 1)};
}

// The table entry ex2_approx(tables, r) reads, or nullptr when it reads none (for prefetching).
const float* ex2_entry(const Ex2Tables& tables, float r) {
  const Ex2Split s = split_ex2(r);
  if (s.fixed) return nullptr;
  return s.negative ? &tables.tn[s.f] : &tables.tp[s.f];
}

}  // namespace

float ex2_approx(const Ex2Tables& tables, float r) {
  const Ex2Split s = split_ex2(r);
  if (s.fixed) return s.value;
  if (!s.negative) {  // TP[f] * 2^i
    const uint32_t t = bits_of(tables.tp[s.f]);
    if ((t >> 23) + s.i >= 255u) return kInf;
    return f32(t + (s.i << 23));
  }
  const uint32_t t = bits_of(tables.tn[s.f]);  // TN[f] * 2^-i
  if ((t >> 23) <= s.i) return 0.0f;            // below 2^-126: FTZ output
  return f32(t - (s.i << 23));
}

float ex2_approx(float r) { return ex2_approx(default_ex2_tables(), r); }

// --- __nv_expf ------------------------------------------------------------------------------------

namespace {

// __nv_expf up to the ex2: the reduced argument r and the scale s = 2^d.
struct ExpfReduced {
  float r;
  float s;
};

// Inlined into each caller, so that a caller built for x86-64-v3 fuses with the instruction.
[[gnu::always_inline]] inline ExpfReduced reduce_expf(float a) {
  const float t = saturate(std::fma(a, kLog2eOver252, 0.5f));  // fma.rn, cvt.sat
  const float j = fma_rm_exponent(t);                           // fma.rm(t, 252, 0x4B400001)
  const float d = j - kJBias;                                   // add.f32 j, -0x4B40007F (exact)
  const float r = std::fma(a, kLog2eLo, std::fma(a, kLog2eHi, -d));
  return {r, f32(bits_of(j) << 23)};                            // s = 2^d
}

// Inlined into each caller, as reduce_expf is.
[[gnu::always_inline]] inline ExpfFactors expf_factors(const Ex2Tables& tables, float a) {
  const ExpfReduced q = reduce_expf(a);
  return {ex2_approx(tables, q.r), q.s};
}

}  // namespace

ExpfFactors libdevice_expf_factors(const Ex2Tables& tables, float a) { return expf_factors(tables, a); }

float libdevice_expf(const Ex2Tables& tables, float a) {
  const ExpfFactors e = libdevice_expf_factors(tables, a);
  return canonicalize(e.mantissa * e.scale);  // mul.f32, no FTZ
}

// --- __nv_logf ------------------------------------------------------------------------------------

float libdevice_logf(float a) {
  float x = a;
  float fi = 0.0f;
  if (x < kLogfTiny) {  // setp.lt.f32 (false for NaN)
    x = x * kTwo23;
    fi = kLogfTinyExponent;
  }
  const uint32_t ix = bits_of(x);
  const uint32_t e = (ix - kLogfMantissaOffset) & 0xFF800000u;
  const float m = f32(ix - e);
  const float fe = std::fma(static_cast<float>(static_cast<int32_t>(e)), kTwoM23, fi);
  const float f = m - 1.0f;
  const float p = horner(kLogfPoly, f);
  float q = f * p;
  q = std::fma(q, f, f);
  float r = std::fma(fe, kLn2, q);
  if (!(ix < 0x7F800000u)) r = std::fma(x, kInf, kInf);  // negative, +Inf, NaN
  if (x == 0.0f) r = -kInf;
  return canonicalize(r);
}

// --- __nv_log1pf ----------------------------------------------------------------------------------

float libdevice_log1pf(float a) {
  const float u = add_rz(a, 1.0f);
  const uint32_t e = (bits_of(u) - kLog1pfMantissaOffset) & 0xFF800000u;
  const uint32_t ia = bits_of(a);
  const float m = f32(ia - e);
  const float s = f32(kFourBits - e);
  const float t = std::fma(kQuarter, s, -1.0f);
  const float f = t + m;
  const float fe = static_cast<float>(static_cast<int32_t>(e)) * kTwoM23;
  const float p = horner(kLog1pfPoly, f);
  float q = f * p;
  q = std::fma(q, f, f);
  float r = std::fma(fe, kLn2, q);
  if (!(ia < 0x7F800000u)) {                                   // negative, +Inf, NaN
    if (!(static_cast<int32_t>(ia) < static_cast<int32_t>(0xBF800001u))) {  // a < -1, +Inf, NaN
      r = std::fma(a, kInf, kInf);
    }
    if (a == 0.0f) r = -0.0f;
  }
  return canonicalize(r);
}

// --- __nv_powf ------------------------------------------------------------------------------------

namespace {

// A value carried as the unevaluated sum hi + lo (|lo| <= half an ulp of hi).
struct DoubleFloat {
  float hi;
  float lo;
};

// rcp.approx.ftz.f32 (MUFU.RCP), the one approximate step of __nv_powf. Its arguments here are
// m + 1 in [1.707, 2.415], always normal, so FTZ never applies. The unit's exact results are not
// captured: this is RN(1/d), which the H200's beta^t results confirm where they depend on it
// (libdevice_ptx.md, "__nv_powf"); about 0.65 % of random powf results depend on it.
float rcp_approx(float d) { return 1.0f / d; }

// cvt.rzi.s32.f32: truncation, saturating; NaN becomes 0.
int32_t cvt_rzi_s32(float v) {
  if (std::isnan(v)) return 0;
  if (v >= 0x1p31f) return std::numeric_limits<int32_t>::max();
  if (v < -0x1p31f) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(v);
}

// __internal_log2_ep: log2(a) for finite a > 0 as hi + lo (the PTX's %f52 + %f56).
DoubleFloat log2_ep(float a) {
  float fi = 0.0f;
  if (a < kPowfTiny) {  // setp.lt.f32
    a = a * kTwo24;
    fi = kPowfTinyExponent;
  }
  const uint32_t ia = bits_of(a);
  const uint32_t e = (ia - kPowfMantissaOffset) & 0xFF800000u;
  const float m = f32(ia - e);
  const float fe = std::fma(static_cast<float>(static_cast<int32_t>(e)), kTwoM23, fi);
  // u = 2f/(m+1) through the approximate reciprocal, then its error term du.
  const float f = m - 1.0f;
  const float r = rcp_approx(m + 1.0f);
  const float u = (f + f) * r;
  const float v = u * u;
  const float twice_f_minus_u = (f - u) + (f - u);
  const float du = r * std::fma(-u, f, twice_f_minus_u);
  const float pv = horner(kLog2Poly, v) * v;
  // hi = fe + u log2(e) rounded, and everything below it, each product by fma.rn.
  const float hi = std::fma(u, kLog2eHi, fe);
  float lo = std::fma(u, kLog2eHi, fe - hi);
  lo = std::fma(du, kLog2eHi, lo);
  lo = std::fma(u, kPowfLog2eLo, lo);
  lo = std::fma(pv * 3.0f, du, lo);  // mul.f32 then fma.rn: ptxas fuses nothing here
  lo = std::fma(pv, u, lo);
  // Fast2Sum renormalisation (add.rn).
  const float s = hi + lo;
  const float carried = s - hi;
  return {s, lo - carried};
}

// __internal_accurate_powf's tail: 2^(l * y) for l = log2|x|, before the special cases (%f5).
float exp2_of_product(DoubleFloat l, float y) {
  const float t = l.hi * y;                                     // mul.rn
  const float t_lo = std::fma(l.lo, y, std::fma(l.hi, y, -t));  // the exact error of t, plus lo*y
  const float n = std::nearbyint(t);                            // cvt.rni: to nearest even
  const float r = t_lo + (t - n);
  const float p = horner(kExp2Poly, r);
  if (std::fabs(t) > kPowfExponentLimit) return t < 0.0f ? 0.0f : kInf;
  // 2^n as two factors, so that neither leaves the normal range before the final, single rounding.
  const uint32_t shift = n > 0.0f ? 0u : kNonPositiveScaleShift;
  const float first = f32(kTwo127Bits + shift);
  const float second = f32((static_cast<uint32_t>(cvt_rzi_s32(n)) << 23) - shift);
  return (p * first) * second;
}

// y is an odd integer: |y - 2 trunc(y/2)| == 1 (false for ±Inf and NaN).
bool is_odd_integer(float y) {
  const float half = std::trunc(y * 0.5f);
  return std::fabs(y - (half + half)) == 1.0f;
}

}  // namespace

// The special cases in the PTX's order (C99 Annex F), then the core for finite x != 0.
float libdevice_powf(float x, float y) {
  if (x == 1.0f || y == 0.0f) return 1.0f;                    // also for NaN y / NaN x
  if (std::isnan(x) || std::isnan(y)) return canonical_nan();  // add.rn(x, y)
  const bool odd = is_odd_integer(y);
  if (x == 0.0f || std::isinf(x)) {
    // ±0 or ±Inf (x + x keeps the sign); y < 0 swaps 0 and Inf by flipping every exponent bit.
    uint32_t b = bits_of(x + x);
    if (y < 0.0f) b ^= kExponentBits;
    return f32(odd ? b : b & kMagnitudeBits);
  }
  if (x == -1.0f && std::isinf(y)) return 1.0f;
  const float core = exp2_of_product(log2_ep(std::fabs(x)), y);
  if (!(x < 0.0f)) return canonicalize(core);      // setp.geu.f32: x > 0 here
  if (std::floor(y) != y) return canonical_nan();  // negative base, non-integer exponent
  return canonicalize(odd ? -core : core);
}

// --- the two models -------------------------------------------------------------------------------

namespace {
float cr_expf(float x) { return canonicalize(static_cast<float>(std::exp(static_cast<double>(x)))); }
float cr_logf(float x) { return canonicalize(static_cast<float>(std::log(static_cast<double>(x)))); }
float cr_log1pf(float x) { return canonicalize(static_cast<float>(std::log1p(static_cast<double>(x)))); }
float cr_powf(float x, float y) {
  return canonicalize(static_cast<float>(std::pow(static_cast<double>(x), static_cast<double>(y))));
}
}  // namespace

float expf(MathModel model, float x) {
  return model == MathModel::kLibdevice ? libdevice_expf(default_ex2_tables(), x) : cr_expf(x);
}

float logf(MathModel model, float x) {
  return model == MathModel::kLibdevice ? libdevice_logf(x) : cr_logf(x);
}

float log1pf(MathModel model, float x) {
  return model == MathModel::kLibdevice ? libdevice_log1pf(x) : cr_log1pf(x);
}

float powf(MathModel model, float x, float y) {
  return model == MathModel::kLibdevice ? libdevice_powf(x, y) : cr_powf(x, y);
}

// silu div.rn(x, d) and sigmoid rcp.rn(d) of the one denominator d = fma.rn(ex2, s, 1). At x = +-0
// the reduced argument is +-0 and the scale 2^0, so ex2 gives 1 and d = 2: silu x / 2 = x and
// sigmoid 0.5, taken without the table (padded expert rows are zeros; device_math_test checks both
// against the full formula).
//
// Built twice on x86-64: for x86-64-v3 (its fused multiply-add and rounding instructions, where the
// baseline calls libm's fmaf and floor) and for the baseline; the loader picks one. Both compute the
// same correctly rounded fma and exact floor, and -ffp-contract=off fuses nothing else.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
SiluSigmoid libdevice_silu_sigmoid(const Ex2Tables& tables, float x) {
  if (x == 0.0f) return {x, 0.5f};
  const ExpfFactors e = expf_factors(tables, -x);
  const float denominator = std::fma(e.mantissa, e.scale, 1.0f);
  return {canonicalize(x / denominator), canonicalize(1.0f / denominator)};
}

float libdevice_sigmoid(const Ex2Tables& tables, float x) { return libdevice_silu_sigmoid(tables, x).sigmoid; }

float libdevice_silu(const Ex2Tables& tables, float x) { return libdevice_silu_sigmoid(tables, x).silu; }

float libdevice_softplus(const Ex2Tables& tables, float x) {
  if (x > kSoftplusThreshold) return x;  // setp.gt.f32: NaN takes the formula
  return libdevice_log1pf(libdevice_expf(tables, x));
}

SiluSigmoid silu_sigmoid(MathModel model, float x) {
  if (model == MathModel::kLibdevice) return libdevice_silu_sigmoid(default_ex2_tables(), x);
  const float denominator = 1.0f + cr_expf(-x);
  return {canonicalize(x / denominator), canonicalize(1.0f / denominator)};
}

float sigmoid(MathModel model, float x) { return silu_sigmoid(model, x).sigmoid; }

float silu(MathModel model, float x) { return silu_sigmoid(model, x).silu; }

float softplus(MathModel model, float x) {
  if (model == MathModel::kLibdevice) return libdevice_softplus(default_ex2_tables(), x);
  if (x > kSoftplusThreshold) return x;
  return cr_log1pf(cr_expf(x));
}

// --- batched forms ---------------------------------------------------------------------------------

namespace {

void check_sizes(std::span<const float> x, std::span<float> y) {
  if (x.size() != y.size()) {
    throw std::invalid_argument("device math: output has " + std::to_string(y.size()) + " elements, input " +
                                std::to_string(x.size()));
  }
}

// y[i] = finish(x[i], factors of __nv_expf(±x[i])). A block's ex2 table entries are prefetched
// before any is read: the tables are 64 MiB, so a lone lookup usually waits on memory.
template <typename Finish>
void libdevice_expf_blocks(const Ex2Tables& tables, std::span<const float> x, std::span<float> y, bool negate,
                           Finish finish) {
  constexpr size_t kBlock = 64;
  ExpfReduced q[kBlock];
  for (size_t i0 = 0; i0 < x.size(); i0 += kBlock) {
    const size_t n = std::min(kBlock, x.size() - i0);
    for (size_t k = 0; k < n; ++k) {
      q[k] = reduce_expf(negate ? -x[i0 + k] : x[i0 + k]);
      if (const float* p = ex2_entry(tables, q[k].r)) __builtin_prefetch(p);
    }
    for (size_t k = 0; k < n; ++k) y[i0 + k] = finish(x[i0 + k], ExpfFactors{ex2_approx(tables, q[k].r), q[k].s});
  }
}

template <typename Scalar>
void scalar_loop(std::span<const float> x, std::span<float> y, Scalar fn) {
  for (size_t i = 0; i < x.size(); ++i) y[i] = fn(x[i]);
}

}  // namespace

void expf_n(MathModel model, std::span<const float> x, std::span<float> y) {
  check_sizes(x, y);
  if (model == MathModel::kCorrectlyRounded) return scalar_loop(x, y, cr_expf);
  libdevice_expf_blocks(default_ex2_tables(), x, y, false,
                        [](float, ExpfFactors e) { return canonicalize(e.mantissa * e.scale); });
}

void sigmoid_n(MathModel model, std::span<const float> x, std::span<float> y) {
  check_sizes(x, y);
  if (model == MathModel::kCorrectlyRounded) return scalar_loop(x, y, [](float v) { return sigmoid(MathModel::kCorrectlyRounded, v); });
  libdevice_expf_blocks(default_ex2_tables(), x, y, true,
                        [](float, ExpfFactors e) { return canonicalize(1.0f / std::fma(e.mantissa, e.scale, 1.0f)); });
}

void silu_n(MathModel model, std::span<const float> x, std::span<float> y) {
  check_sizes(x, y);
  if (model == MathModel::kCorrectlyRounded) return scalar_loop(x, y, [](float v) { return silu(MathModel::kCorrectlyRounded, v); });
  libdevice_expf_blocks(default_ex2_tables(), x, y, true,
                        [](float v, ExpfFactors e) { return canonicalize(v / std::fma(e.mantissa, e.scale, 1.0f)); });
}

void softplus_n(MathModel model, std::span<const float> x, std::span<float> y) {
  check_sizes(x, y);
  if (model == MathModel::kCorrectlyRounded) return scalar_loop(x, y, [](float v) { return softplus(MathModel::kCorrectlyRounded, v); });
  libdevice_expf_blocks(default_ex2_tables(), x, y, false, [](float v, ExpfFactors e) {
    return v > kSoftplusThreshold ? v : libdevice_log1pf(canonicalize(e.mantissa * e.scale));
  });
}

}  // namespace bitparity::ref::math
