#include "core/gen.h"

#include <cmath>
#include <limits>
#include <vector>

#include <rapidcheck.h>

#include "core/random.h"

namespace bitparity::gen {
namespace {

constexpr int64_t kLargeRowsMax = 300;

uint64_t sign_bit(DType dtype) { return uint64_t{1} << (dtype_size(dtype) * 8 - 1); }
int exponent_bits(DType dtype) {
  return dtype == DType::kBF16 ? 8 : dtype == DType::kFP16 ? 5 : dtype == DType::kFP32 ? 8 : 11;
}
int mantissa_bits(DType dtype) {
  return dtype == DType::kBF16 ? 7 : dtype == DType::kFP16 ? 10 : dtype == DType::kFP32 ? 23 : 52;
}

// Each class's element as a function of the plain numbers it is drawn from, shared by the
// RapidCheck generators (small tensors: every element shrinks) and the seeded fill of large ones
// (moderate values: moderate_value_bits).
uint64_t small_int_bits(DType dtype, int v) { return from_double(dtype, v); }
std::vector<uint64_t> special_values(DType dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  const double max = dtype == DType::kFP64 ? std::numeric_limits<double>::max()
                                           : to_double(dtype, from_double(dtype, inf) - 1);  // below +Inf
  const double min_normal = std::ldexp(1.0, 2 - (1 << (exponent_bits(dtype) - 1)));
  return {uint64_t{0}, sign_bit(dtype), from_double(dtype, std::numeric_limits<double>::quiet_NaN()),
          from_double(dtype, -std::numeric_limits<double>::quiet_NaN()), from_double(dtype, inf),
          from_double(dtype, -inf), from_double(dtype, max), from_double(dtype, -max), from_double(dtype, min_normal),
          from_double(dtype, -min_normal), from_double(dtype, 1.0), from_double(dtype, -1.0)};
}
uint64_t tie_bits(uint64_t bf16_moderate) { return (bf16_moderate << 16) | 0x8000u; }
uint64_t raw_range(DType dtype) { return uint64_t{1} << (dtype_size(dtype) * 8); }  // for dtypes below 64 bits

rc::Gen<uint64_t> with_random_sign(DType dtype, rc::Gen<uint64_t> magnitude) {
  return rc::gen::map(rc::gen::pair(magnitude, rc::gen::arbitrary<bool>()), [dtype](const std::pair<uint64_t, bool>& p) {
    return p.second ? p.first | sign_bit(dtype) : p.first;
  });
}

rc::Gen<uint64_t> moderate(DType dtype) {
  return with_random_sign(dtype, rc::gen::map(rc::gen::pair(rc::gen::inRange(kModerateMinExp, kModerateMaxExp + 1),
                                                            rc::gen::inRange<uint32_t>(0, kModerateMantissas)),
                                              [dtype](const std::pair<int, uint32_t>& p) {
                                                return moderate_value_bits(dtype, p.first, p.second, false);
                                              }));
}

rc::Gen<uint64_t> small_int(DType dtype) {
  return rc::gen::map(rc::gen::inRange(-8, 9), [dtype](int v) { return small_int_bits(dtype, v); });
}

rc::Gen<uint64_t> special(DType dtype) {
  const std::vector<uint64_t> v = special_values(dtype);
  return rc::gen::element(uint64_t{v[0]}, uint64_t{v[1]}, uint64_t{v[2]}, uint64_t{v[3]}, uint64_t{v[4]}, uint64_t{v[5]},
                          uint64_t{v[6]}, uint64_t{v[7]}, uint64_t{v[8]}, uint64_t{v[9]}, uint64_t{v[10]}, uint64_t{v[11]});
}

rc::Gen<uint64_t> subnormal(DType dtype) {
  return with_random_sign(dtype, rc::gen::inRange<uint64_t>(1, uint64_t{1} << mantissa_bits(dtype)));
}

rc::Gen<uint64_t> tie(DType dtype) {
  if (dtype != DType::kFP32) return moderate(dtype);
  // High half from a moderate bf16, low half exactly 0x8000: halfway between two bf16 values.
  return rc::gen::map(moderate(DType::kBF16), tie_bits);
}

rc::Gen<uint64_t> raw(DType dtype) {
  if (dtype_size(dtype) == 8) return rc::gen::arbitrary<uint64_t>();
  return rc::gen::inRange<uint64_t>(0, raw_range(dtype));
}

// The mixed family's weights: moderate, small_int, special, subnormal, tie, raw.
constexpr int kMixedWeights[] = {40, 4, 3, 2, 2, 1};

// A large tensor's elements from splitmix64 (seeded by one RapidCheck draw), each of the family's
// classes with the same weights as the RapidCheck generators and their ranges at the nominal size
// (RapidCheck narrows an integer's range at smaller sizes): RapidCheck's per-element
// draws and shrink trees cost far more than the case's arithmetic on large tensors, and cases are
// generated one at a time (see campaign.cpp), so they bounded a campaign's cases a second.
void fill_seeded(Tensor& t, ValueFamily family, uint64_t seed) {
  const DType dtype = t.dtype();
  // The special values exist for floating dtypes only (the mixed family is drawn for those alone).
  const std::vector<uint64_t> specials = family == ValueFamily::kMixed ? special_values(dtype) : std::vector<uint64_t>{};
  uint64_t state = seed;
  auto below = [&](uint64_t n) { return splitmix64_next(state) % n; };  // n far below 2^64: bias negligible
  auto moderate_of = [&](DType d) {
    const int e = kModerateMinExp + static_cast<int>(below(kModerateMaxExp - kModerateMinExp + 1));
    const uint32_t m = static_cast<uint32_t>(below(kModerateMantissas));
    return moderate_value_bits(d, e, m, below(2) == 1);
  };
  for (int64_t i = 0; i < t.numel(); ++i) {
    ValueClass c = ValueClass::kModerate;
    switch (family) {
      case ValueFamily::kModerate: c = ValueClass::kModerate; break;
      case ValueFamily::kSmallInt: c = ValueClass::kSmallInt; break;
      case ValueFamily::kRaw: c = ValueClass::kRaw; break;
      case ValueFamily::kMixed: {
        int64_t r = static_cast<int64_t>(below(52));
        int k = 0;
        while (r >= kMixedWeights[k]) r -= kMixedWeights[k++];
        c = static_cast<ValueClass>(k);
        break;
      }
    }
    uint64_t bits = 0;
    switch (c) {
      case ValueClass::kModerate: bits = moderate_of(dtype); break;
      case ValueClass::kSmallInt: bits = small_int_bits(dtype, static_cast<int>(below(17)) - 8); break;
      case ValueClass::kSpecial: bits = specials[below(specials.size())]; break;
      case ValueClass::kSubnormal:
        bits = 1 + below((uint64_t{1} << mantissa_bits(dtype)) - 1);
        if (below(2) == 1) bits |= sign_bit(dtype);
        break;
      case ValueClass::kTie: bits = dtype == DType::kFP32 ? tie_bits(moderate_of(DType::kBF16)) : moderate_of(dtype); break;
      case ValueClass::kRaw: bits = dtype_size(dtype) == 8 ? splitmix64_next(state) : below(raw_range(dtype)); break;
    }
    t.set_bits(i, bits);
  }
}

}  // namespace

rc::Gen<uint64_t> element_bits(DType dtype, ValueClass value_class) {
  switch (value_class) {
    case ValueClass::kModerate: return moderate(dtype);
    case ValueClass::kSmallInt: return small_int(dtype);
    case ValueClass::kSpecial: return special(dtype);
    case ValueClass::kSubnormal: return subnormal(dtype);
    case ValueClass::kTie: return tie(dtype);
    case ValueClass::kRaw: return raw(dtype);
  }
  return raw(dtype);
}

rc::Gen<ValueFamily> value_family() {
  return rc::gen::weightedElement<ValueFamily>(
      {{5, ValueFamily::kMixed}, {3, ValueFamily::kModerate}, {1, ValueFamily::kSmallInt}, {1, ValueFamily::kRaw}});
}

namespace {
thread_local int seeded_tensors = 0;  // SeededTensors alive on this thread
}  // namespace

SeededTensors::SeededTensors() { ++seeded_tensors; }
SeededTensors::~SeededTensors() { --seeded_tensors; }

uint64_t moderate_value_bits(DType dtype, int exponent, uint32_t mantissa, bool negative) {
  // (1 + mantissa / 2^24) * 2^exponent rounded to nearest even into the dtype's p mantissa bits,
  // from the bits: an exponent in [kModerateMinExp, kModerateMaxExp] is normal in bf16, fp16, fp32
  // and fp64, and a carry out of the mantissa stays below their largest finite values. The fill of
  // a large tensor draws one an element; from_double's general path cost most of its time.
  int p = 0, bias = 0;
  switch (dtype) {
    case DType::kBF16: p = 7, bias = 127; break;
    case DType::kFP16: p = 10, bias = 15; break;
    case DType::kFP32: p = 23, bias = 127; break;
    case DType::kFP64: p = 52, bias = 1023; break;
    default: {
      const uint64_t bits = from_double(dtype, std::ldexp(1.0 + mantissa / double(kModerateMantissas), exponent));
      return negative ? bits | sign_bit(dtype) : bits;
    }
  }
  uint64_t fraction = 0;
  if (p >= 24) {
    fraction = uint64_t{mantissa} << (p - 24);
  } else {
    const int shift = 24 - p;
    fraction = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (fraction & 1))) ++fraction;
    if (fraction >> p) fraction = 0, ++exponent;
  }
  const uint64_t bits = (static_cast<uint64_t>(exponent + bias) << p) | fraction;
  return negative ? bits | sign_bit(dtype) : bits;
}

rc::Gen<Tensor> tensor(DType dtype, Shape shape, ValueFamily family) {
  const int64_t numel = shape_numel(shape);
  if (numel > kShrinkableElements || seeded_tensors > 0)
    // The seed at the nominal size: at size 0 an arbitrary integer is always 0.
    return rc::gen::map(rc::gen::resize(rc::kNominalSize, rc::gen::arbitrary<uint64_t>()), [dtype, shape, family](uint64_t seed) {
      Tensor t(dtype, shape);
      fill_seeded(t, family, seed);
      return t;
    });
  rc::Gen<uint64_t> element = [&]() -> rc::Gen<uint64_t> {
    switch (family) {
      case ValueFamily::kModerate: return moderate(dtype);
      case ValueFamily::kSmallInt: return small_int(dtype);
      case ValueFamily::kRaw: return raw(dtype);
      case ValueFamily::kMixed: break;
    }
    return rc::gen::weightedOneOf<uint64_t>({{kMixedWeights[0], moderate(dtype)},
                                             {kMixedWeights[1], small_int(dtype)},
                                             {kMixedWeights[2], special(dtype)},
                                             {kMixedWeights[3], subnormal(dtype)},
                                             {kMixedWeights[4], tie(dtype)},
                                             {kMixedWeights[5], raw(dtype)}});
  }();
  return rc::gen::map(rc::gen::container<std::vector<uint64_t>>(static_cast<size_t>(numel), element),
                      [dtype, shape](const std::vector<uint64_t>& bits) {
                        Tensor t(dtype, shape);
                        for (size_t i = 0; i < bits.size(); ++i) t.set_bits(static_cast<int64_t>(i), bits[i]);
                        return t;
                      });
}

rc::Gen<int64_t> rows() {
  return rc::gen::weightedOneOf<int64_t>({{1, rc::gen::just<int64_t>(0)},
                                          {6, rc::gen::inRange<int64_t>(1, 17)},
                                          {2, rc::gen::just<int64_t>(17)},
                                          {2, rc::gen::just<int64_t>(32)},
                                          {1, rc::gen::inRange<int64_t>(33, kLargeRowsMax + 1)}});
}

std::string rows_class(int64_t rows) {
  if (rows == 0) return "rows=0";
  if (rows <= 16) return "rows=1..16";
  if (rows == 17) return "rows=17";
  if (rows == 32) return "rows=32";
  return "rows=large";
}

rc::Gen<std::optional<double>> clamp() {
  using C = std::optional<double>;
  return rc::gen::weightedOneOf<C>({
      {4, rc::gen::just<C>(std::nullopt)},
      {1, rc::gen::just<C>(0.0)},
      {1, rc::gen::just<C>(-0.0)},
      {1, rc::gen::map(rc::gen::inRange(1, 64), [](int v) { return C(-v / 8.0); })},
      {1, rc::gen::element<C>(1e-300, 1e-40, 1e-45, 0x1p-149)},
      {4, rc::gen::map(rc::gen::inRange(1, 96), [](int v) { return C(v / 8.0); })},
      {1, rc::gen::just<C>(std::numeric_limits<double>::infinity())},
      {1, rc::gen::just<C>(std::numeric_limits<double>::quiet_NaN())},
  });
}

std::string clamp_class(std::optional<double> clamp) {
  if (!clamp) return "clamp=none";
  const double c = *clamp;
  if (std::isnan(c)) return "clamp=nan";
  if (std::isinf(c)) return c > 0 ? "clamp=+inf" : "clamp=-inf";
  if (c == 0) return std::signbit(c) ? "clamp=-0" : "clamp=0";
  if (c < 0) return "clamp=negative";
  if (c < std::numeric_limits<float>::min()) return "clamp=tiny";
  return "clamp=normal";
}

std::vector<std::string> value_tags(const Tensor& t) {
  bool nan = false, inf = false, neg_zero = false, sub = false, tie = false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint64_t b = t.bits(i);
    nan = nan || is_nan_bits(t.dtype(), b);
    inf = inf || is_inf_bits(t.dtype(), b);
    neg_zero = neg_zero || (is_floating(t.dtype()) && b == sign_bit(t.dtype()));
    sub = sub || is_subnormal_bits(t.dtype(), b);
    tie = tie || (t.dtype() == DType::kFP32 && (b & 0xffffu) == 0x8000u);
  }
  std::vector<std::string> tags;
  if (nan) tags.push_back("nan");
  if (inf) tags.push_back("inf");
  if (neg_zero) tags.push_back("-0");
  if (sub) tags.push_back("subnormal");
  if (tie) tags.push_back("bf16_tie");
  return tags;
}

Tensor large_tensor(DType dtype, Shape shape, uint64_t seed) {
  constexpr uint64_t kIndexStride = 0x100000001b3ull;  // FNV's prime: seeds stay apart per index
  constexpr int kMinExponent = -6, kExponents = 13;
  Tensor t(dtype, std::move(shape));
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e-39f};
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint64_t r = splitmix64_mix(seed * kIndexStride + static_cast<uint64_t>(i));
    if (r % kLargeSpecialEvery == 0) {
      t.set_f32(i, specials[(r >> 20) % std::size(specials)]);
      continue;
    }
    const int exponent = static_cast<int>((r >> 8) % kExponents) + kMinExponent;
    const float mantissa = 1.0f + static_cast<float>((r >> 24) & 0x7fffff) / static_cast<float>(1 << 23);
    t.set_f32(i, std::ldexp((r & 1) ? -mantissa : mantissa, exponent));
  }
  return t;
}

}  // namespace bitparity::gen
