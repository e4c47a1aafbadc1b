// RapidCheck generators shared by every op's case generator: value classes of floating-point
// elements, tensors built from them, and the edge classes of shapes and clamp attributes. Each
// op's generator (in its reference file) composes these; harnesses only call OpInfo::generate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <rapidcheck/Gen.h>

#include "core/tensor.h"

namespace bitparity::gen {

// The bit pattern of one element, drawn from a class. Patterns shrink toward +0.
enum class ValueClass {
  kModerate,   // finite, |x| in [2^-6, 2^6], random sign: the common case
  kSmallInt,   // integers in [-8, 8]: every product and partial sum exact, so any order agrees
  kSpecial,    // NaN, +-Inf, +-0, largest finite, smallest normal, +-1
  kSubnormal,  // subnormal patterns of the dtype
  kTie,        // fp32 values exactly halfway between two bf16 values (bf16 rounding ties)
  kRaw,        // any bit pattern
};

rc::Gen<uint64_t> element_bits(DType dtype, ValueClass value_class);

// The moderate class's element: (1 + mantissa / kModerateMantissas) * 2^exponent rounded to nearest
// even into `dtype` (from_double's rounding), negated when `negative`; exponent in
// [kModerateMinExp, kModerateMaxExp], mantissa below kModerateMantissas.
inline constexpr int kModerateMinExp = -6, kModerateMaxExp = 6;
inline constexpr uint32_t kModerateMantissas = 1u << 24;
uint64_t moderate_value_bits(DType dtype, int exponent, uint32_t mantissa, bool negative);

// How a tensor's elements are drawn: "mixed" draws each element from a weighted mix of every
// class, the other families keep a whole tensor in one class.
enum class ValueFamily { kMixed, kModerate, kSmallInt, kRaw };
rc::Gen<ValueFamily> value_family();

// A tensor of the family's values. Up to kShrinkableElements elements each element is its own
// RapidCheck draw (shrinking toward +0); a larger tensor is filled from one drawn seed with the
// same classes and weights (each class's whole range), since RapidCheck's per-element draws cost
// far more than the case's arithmetic there.
inline constexpr int64_t kShrinkableElements = 1024;
rc::Gen<Tensor> tensor(DType dtype, Shape shape, ValueFamily family);

// While one lives on this thread, gen::tensor fills every tensor from one seed, as it fills those
// above kShrinkableElements: for draws that RapidCheck never shrinks (a campaign's, whose findings
// shrink through the op's own shrinker, fuzz/shrink.h), where per-element draws cost most of a
// small case's generation. A tensor's generator is chosen when gen::tensor is called, so the scope
// must hold while the case's generator runs. Nests.
class SeededTensors {
 public:
  SeededTensors();
  ~SeededTensors();
  SeededTensors(const SeededTensors&) = delete;
  SeededTensors& operator=(const SeededTensors&) = delete;
};

// Row counts by class: 0, 1..16, 17, 32, large (up to 300).
rc::Gen<int64_t> rows();
std::string rows_class(int64_t rows);

// A clamp attribute by class: absent, 0, -0.0, negative, tiny (positive but below fp32's
// smallest subnormal, or subnormal), normal, +Inf, NaN.
rc::Gen<std::optional<double>> clamp();
std::string clamp_class(std::optional<double> clamp);

// A large tensor for reference inputs (GPU tests, benchmarks): moderate values (|x| in [2^-6, 2^7),
// random sign and mantissa) with one special value (NaN, +-Inf, +-0, a subnormal) in about every
// kLargeSpecialEvery elements, drawn from splitmix64 so that (dtype, shape, seed) name its bits.
inline constexpr uint64_t kLargeSpecialEvery = 16411;
Tensor large_tensor(DType dtype, Shape shape, uint64_t seed);

// Tags of the special values present in a tensor: "nan", "inf", "-0", "subnormal", "bf16_tie".
std::vector<std::string> value_tags(const Tensor& tensor);

}  // namespace bitparity::gen
