// Element types of bitparity tensors and their exact conversions.
//
// Every conversion here rounds to nearest, ties to even (RNE), the rounding that PyTorch, CUDA's
// __float2bfloat16_rn and IEEE arithmetic use. Values travel as raw bit patterns so that NaN
// payloads, signed zeros and subnormals survive every step unchanged.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace bitparity {

enum class DType { kBF16, kFP16, kFP32, kFP64, kFP8E4M3, kFP8E5M2, kBool, kI32, kI64 };

// The names of the case format: "bf16", "fp16", "fp32", "fp64", "fp8_e4m3", "fp8_e5m2", "bool",
// "i32", "i64".
std::string_view dtype_name(DType dtype);
std::optional<DType> parse_dtype(std::string_view name);

// Bytes per element; also the width of an element's hexadecimal form (two digits a byte). Inline:
// every element access of a Tensor asks for it.
constexpr int dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFP64:
    case DType::kI64: return 8;
    case DType::kFP32:
    case DType::kI32: return 4;
    case DType::kBF16:
    case DType::kFP16: return 2;
    case DType::kFP8E4M3:
    case DType::kFP8E5M2:
    case DType::kBool: return 1;
  }
  return 0;
}
bool is_floating(DType dtype);

// --- bit views (inline: the references call them once an element) -------------------------------
inline uint32_t f32_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
inline float f32_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
uint64_t f64_bits(double value);
double f64_from_bits(uint64_t bits);

// --- bf16 / fp16 (RNE; NaN stays NaN with its sign, overflow goes to +-Inf) ---------------------
inline uint16_t bf16_from_f32(float value) {
  uint32_t u = f32_bits(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);  // RNE on the 16 dropped bits; a carry may reach Inf
  return static_cast<uint16_t>(u >> 16);
}
inline float f32_from_bf16(uint16_t bits) { return f32_from_bits(static_cast<uint32_t>(bits) << 16); }
uint16_t fp16_from_f32(float value);
float f32_from_fp16(uint16_t bits);

// Rounds an fp32 value to `dtype` (bf16, fp16 or fp32) and back: the value an fp32 computation
// has once it is stored in a tensor of that dtype. Throws std::invalid_argument for other dtypes.
[[noreturn]] void throw_not_a_rounding_dtype();
inline float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::kBF16: return f32_from_bf16(bf16_from_f32(value));
    case DType::kFP16: return f32_from_fp16(fp16_from_f32(value));
    case DType::kFP32: return value;
    default: throw_not_a_rounding_dtype();
  }
}

// Exact value of a floating-point bit pattern of `dtype` (every such value is a double); fp64, fp32
// and bf16 inline, the others through their Format.
double other_to_double(DType dtype, uint64_t bits);
inline double to_double(DType dtype, uint64_t bits) {
  if (dtype == DType::kFP32) return f32_from_bits(static_cast<uint32_t>(bits));
  if (dtype == DType::kBF16) return f32_from_bf16(static_cast<uint16_t>(bits));  // a NaN stays a NaN of its sign
  return other_to_double(dtype, bits);
}
// RNE from a double to a floating dtype, in a single rounding (no double rounding through fp32).
uint64_t from_double(DType dtype, double value);

// Whether `bits` is a NaN of `dtype`: the common formats by their masks (every exponent bit set, a
// mantissa bit set), inline for loops over large tensors; the others through their Format.
bool format_nan_bits(DType dtype, uint64_t bits);
inline bool is_nan_bits(DType dtype, uint64_t bits) {
  switch (dtype) {
    case DType::kFP32: return (bits & 0x7FFFFFFFu) > 0x7F800000u;
    case DType::kBF16: return (bits & 0x7FFFu) > 0x7F80u;
    case DType::kFP16: return (bits & 0x7FFFu) > 0x7C00u;
    default: return format_nan_bits(dtype, bits);
  }
}
bool is_inf_bits(DType dtype, uint64_t bits);
bool is_subnormal_bits(DType dtype, uint64_t bits);

// Distance in units in the last place between two bit patterns of a floating dtype: the number
// of representable values strictly between them plus one; +0 and -0 are 0 apart, ±Inf are one ulp
// beyond the largest finite value. Empty when either side is NaN.
std::optional<uint64_t> ulp_distance(DType dtype, uint64_t a, uint64_t b);

// "0x3f80 (1.0)": the bit pattern in hex with its value, as every mismatch message prints it.
std::string describe_bits(DType dtype, uint64_t bits);

}  // namespace bitparity
