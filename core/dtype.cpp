#include "core/dtype.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace bitparity {
namespace {

// A binary floating-point format narrower than fp64: `exp_bits` exponent bits, `man_bits`
// stored fraction bits. `has_inf` is false for fp8_e4m3 (the "fn" variant: no Inf, one NaN
// pattern per sign, largest finite value 448).
struct Format {
  int exp_bits;
  int man_bits;
  bool has_inf;
};

constexpr Format kBF16{8, 7, true};
constexpr Format kFP16{5, 10, true};
constexpr Format kFP32{8, 23, true};
constexpr Format kE4M3{4, 3, false};
constexpr Format kE5M2{5, 2, true};

const Format* format_of(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return &kBF16;
    case DType::kFP16: return &kFP16;
    case DType::kFP32: return &kFP32;
    case DType::kFP8E4M3: return &kE4M3;
    case DType::kFP8E5M2: return &kE5M2;
    default: return nullptr;
  }
}

int bias(const Format& f) { return (1 << (f.exp_bits - 1)) - 1; }
uint64_t exp_mask(const Format& f) { return (uint64_t{1} << f.exp_bits) - 1; }
uint64_t man_mask(const Format& f) { return (uint64_t{1} << f.man_bits) - 1; }
int total_bits(const Format& f) { return 1 + f.exp_bits + f.man_bits; }

bool format_is_nan(const Format& f, uint64_t bits) {
  const uint64_t e = (bits >> f.man_bits) & exp_mask(f);
  const uint64_t m = bits & man_mask(f);
  if (!f.has_inf) return e == exp_mask(f) && m == man_mask(f);
  return e == exp_mask(f) && m != 0;
}

double decode(const Format& f, uint64_t bits) {
  const bool negative = (bits >> (total_bits(f) - 1)) & 1;
  const uint64_t e = (bits >> f.man_bits) & exp_mask(f);
  const uint64_t m = bits & man_mask(f);
  double magnitude;
  if (format_is_nan(f, bits)) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (f.has_inf && e == exp_mask(f)) {
    magnitude = std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    magnitude = std::ldexp(static_cast<double>(m), 1 - bias(f) - f.man_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(m | (uint64_t{1} << f.man_bits)),
                           static_cast<int>(e) - bias(f) - f.man_bits);
  }
  return negative ? -magnitude : magnitude;
}

double max_finite(const Format& f) {
  const uint64_t top_exp = f.has_inf ? exp_mask(f) - 1 : exp_mask(f);
  const uint64_t top_man = f.has_inf ? man_mask(f) : man_mask(f) - 1;
  return decode(f, (top_exp << f.man_bits) | top_man);
}

// Single RNE rounding of a double into the format. The scaled magnitude a / 2^q is an integer
// plus a fraction that fits a double exactly, so nearbyint() performs the one rounding.
uint64_t encode(const Format& f, double value) {
  const uint64_t sign = std::signbit(value) ? uint64_t{1} << (total_bits(f) - 1) : 0;
  if (std::isnan(value)) {
    // A quiet NaN with the sign kept: the top fraction bit set (all bits for e4m3fn).
    const uint64_t nan = f.has_inf ? (exp_mask(f) << f.man_bits) | (uint64_t{1} << (f.man_bits - 1))
                                   : (exp_mask(f) << f.man_bits) | man_mask(f);
    return sign | nan;
  }
  const uint64_t overflow = f.has_inf ? exp_mask(f) << f.man_bits
                                      : (exp_mask(f) << f.man_bits) | man_mask(f);
  if (std::isinf(value)) return sign | overflow;
  const double a = std::fabs(value);
  if (a == 0) return sign;
  const int emin = 1 - bias(f);
  const int e = std::max(std::ilogb(a), emin);
  const int q = e - f.man_bits;
  const double m = std::nearbyint(std::ldexp(a, -q));  // default rounding mode: to nearest even
  const double rounded = std::ldexp(m, q);
  if (rounded > max_finite(f)) return sign | overflow;
  if (rounded < std::ldexp(1.0, emin)) return sign | static_cast<uint64_t>(m);  // subnormal or 0
  const int re = std::ilogb(rounded);
  const uint64_t frac = static_cast<uint64_t>(std::ldexp(rounded, f.man_bits - re)) & man_mask(f);
  return sign | (static_cast<uint64_t>(re + bias(f)) << f.man_bits) | frac;
}

struct Name {
  DType dtype;
  std::string_view name;
};
constexpr std::array<Name, 9> kNames{{{DType::kBF16, "bf16"},
                                      {DType::kFP16, "fp16"},
                                      {DType::kFP32, "fp32"},
                                      {DType::kFP64, "fp64"},
                                      {DType::kFP8E4M3, "fp8_e4m3"},
                                      {DType::kFP8E5M2, "fp8_e5m2"},
                                      {DType::kBool, "bool"},
                                      {DType::kI32, "i32"},
                                      {DType::kI64, "i64"}}};

// Sign-magnitude to a monotone integer line, +0 and -0 both at 0.
int64_t ordinal(DType dtype, uint64_t bits) {
  const int width = dtype_size(dtype) * 8;
  const uint64_t sign_bit = uint64_t{1} << (width - 1);
  const uint64_t magnitude = bits & (sign_bit - 1);
  // For fp64 the magnitude fits 63 bits, so the cast is safe.
  return (bits & sign_bit) ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  for (const Name& n : kNames)
    if (n.dtype == dtype) return n.name;
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const Name& n : kNames)
    if (n.name == name) return n.dtype;
  return std::nullopt;
}


bool is_floating(DType dtype) {
  return dtype != DType::kBool && dtype != DType::kI32 && dtype != DType::kI64;
}

uint64_t f64_bits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
double f64_from_bits(uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}


uint16_t fp16_from_f32(float value) {
  return static_cast<uint16_t>(encode(kFP16, static_cast<double>(value)));
}

float f32_from_fp16(uint16_t bits) { return static_cast<float>(decode(kFP16, bits)); }

void throw_not_a_rounding_dtype() { throw std::invalid_argument("round_to: not a bf16/fp16/fp32 dtype"); }

double other_to_double(DType dtype, uint64_t bits) {
  if (dtype == DType::kFP64) return f64_from_bits(bits);
  if (const Format* f = format_of(dtype)) return decode(*f, bits);
  if (dtype == DType::kBool) return bits != 0;
  if (dtype == DType::kI32) return static_cast<int32_t>(static_cast<uint32_t>(bits));
  return static_cast<double>(static_cast<int64_t>(bits));
}

namespace {

// RNE from a double to bf16 in one rounding, through fp32 rounded to odd (toward zero, its last bit
// set when inexact): fp32 keeps 16 bits below bf16's last, so the odd bit stands for the dropped
// remainder and can neither make nor break a tie, and bf16_from_f32's RNE of it is the double's.
// Overflow lands on FLT_MAX | 1, which rounds to Inf as every double beyond bf16's range does.
uint16_t bf16_from_double(double value) {
  if (std::isnan(value)) return std::signbit(value) ? 0xFFC0u : 0x7FC0u;  // encode's quiet NaN, sign kept
  float f = static_cast<float>(value);
  if (std::isinf(f) && !std::isinf(value)) {
    f = std::copysign(std::numeric_limits<float>::max(), f);
  } else if (std::fabs(static_cast<double>(f)) > std::fabs(value)) {
    f = std::nextafter(f, 0.0f);
  }
  uint32_t bits = f32_bits(f);
  if (static_cast<double>(f) != value) bits |= 1u;
  return bf16_from_f32(f32_from_bits(bits));
}

}  // namespace

uint64_t from_double(DType dtype, double value) {
  if (dtype == DType::kFP64) return f64_bits(value);
  if (dtype == DType::kBF16) return bf16_from_double(value);
  if (const Format* f = format_of(dtype)) return encode(*f, value);
  throw std::invalid_argument("from_double: not a floating dtype");
}

bool format_nan_bits(DType dtype, uint64_t bits) {
  if (dtype == DType::kFP64) return std::isnan(f64_from_bits(bits));
  const Format* f = format_of(dtype);
  return f != nullptr && format_is_nan(*f, bits);
}

bool is_inf_bits(DType dtype, uint64_t bits) {
  return is_floating(dtype) && std::isinf(to_double(dtype, bits));
}

bool is_subnormal_bits(DType dtype, uint64_t bits) {
  if (dtype == DType::kFP64) return std::fpclassify(f64_from_bits(bits)) == FP_SUBNORMAL;
  const Format* f = format_of(dtype);
  if (f == nullptr) return false;
  return ((bits >> f->man_bits) & exp_mask(*f)) == 0 && (bits & man_mask(*f)) != 0;
}

std::optional<uint64_t> ulp_distance(DType dtype, uint64_t a, uint64_t b) {
  if (is_nan_bits(dtype, a) || is_nan_bits(dtype, b)) return std::nullopt;
  const int64_t oa = ordinal(dtype, a), ob = ordinal(dtype, b);
  return oa > ob ? static_cast<uint64_t>(oa) - static_cast<uint64_t>(ob)
                 : static_cast<uint64_t>(ob) - static_cast<uint64_t>(oa);
}

std::string describe_bits(DType dtype, uint64_t bits) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%0*llx", dtype_size(dtype) * 2,
                static_cast<unsigned long long>(bits));
  if (!is_floating(dtype)) return std::string(hex);
  char value[48];
  std::snprintf(value, sizeof value, " (%.9g)", to_double(dtype, bits));
  return std::string(hex) + value;
}

}  // namespace bitparity
