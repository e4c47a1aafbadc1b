// Comparison of two backends' outputs: shapes first, then bits.
//
// Bits are compared in the output dtype. All NaNs are equal unless strict_nan; +0 and -0 differ.
// A shape difference (rank or any dim) is reported as such and never reshaped away.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/case.h"
#include "core/registry.h"

namespace bitparity {

struct CompareOptions {
  bool strict_nan = false;  // compare NaN payloads and signs bit for bit
};

struct ElementMismatch {
  int64_t index = 0;  // row-major flat index
  Shape position;     // the same index per dimension
  uint64_t a_bits = 0, b_bits = 0;
  std::optional<uint64_t> ulps;  // empty when one side is NaN
};

// Histogram buckets of ulp distance over mismatching elements: "0" (signed zero or NaN payload),
// "1", "2", "3-4", "5-8", ... powers of two, and "nan" (one side NaN, the other not).
std::string ulp_bucket(std::optional<uint64_t> ulps);

struct OutputComparison {
  std::string name;
  bool present_a = true, present_b = true;
  bool shape_equal = true;
  bool dtype_equal = true;
  Shape shape_a, shape_b;
  DType dtype = DType::kFP32;
  int64_t numel = 0;
  int64_t mismatches = 0;
  std::optional<ElementMismatch> first;
  uint64_t max_ulps = 0;
  std::map<std::string, int64_t> ulp_histogram;
};

enum class Verdict { kIdentical, kBitMismatch, kShapeMismatch };
std::string_view verdict_name(Verdict verdict);  // "identical", "bit_mismatch", "shape_mismatch"

struct Comparison {
  Verdict verdict = Verdict::kIdentical;
  std::vector<OutputComparison> outputs;  // sorted by name, union of both sides
  // The first output that differs, shape differences before bit differences.
  const OutputComparison* first_difference() const;
};

Comparison compare_outputs(const TensorMap& a, const TensorMap& b, const CompareOptions& options = {});

// Which side of a mismatch is closer to the true value, with each side's distance from it in
// ulps of the output dtype (fractional; Inf when a side is non-finite and the truth is finite).
struct Arbitration {
  double truth = 0;
  double a_ulps = 0, b_ulps = 0;
  std::string closer;  // "a", "b", "tie"
};
Arbitration arbitrate(DType dtype, uint64_t a_bits, uint64_t b_bits, double truth);

// Whether two elements of `dtype` agree as compare_outputs has it: the same bits, or NaN against NaN
// unless `strict_nan`.
bool bits_equal(DType dtype, uint64_t a, uint64_t b, bool strict_nan);
// The index per dimension of the row-major element `index` of a tensor of `shape`.
Shape unravel(int64_t index, const Shape& shape);
// "[2, 5]": an element's index per dimension, as messages write it.
std::string position_string(const Shape& position);

// The magnitude from which a sum rounds (RNE) to infinity in a floating `dtype`: its largest finite
// value plus half an ulp.
double overflow_threshold(DType dtype);

// One output of one side against a contract's error bound (registry.h ElementBounds).
struct BoundCheck {
  int64_t outside = 0;                  // elements outside the bound
  std::optional<int64_t> first;         // the first of them (row-major index)
  Shape position;                       // its index per dimension
  double value = 0, truth = 0, bound = 0;  // at the first
  double worst_ratio = 0;               // the largest |value - truth| / bound over finite elements
};
// Throws std::logic_error when the bounds do not have one truth and one bound per element.
BoundCheck check_bound(const Tensor& t, const ElementBounds& bounds);

// The PyTorch-style message:
//   swiglu_scale bwd cuda:paddle_fused vs ref:paddle_fused: not bit-identical
//   Mismatched elements: 3 / 4096 (0.07%)
//   First mismatch at d_scale[2]: a=0x3f80 (1) b=0x3f81 (1.0078125), 1 ulp
std::string format_comparison(const Comparison& comparison, const std::string& title,
                              const std::string& a_name, const std::string& b_name);

}  // namespace bitparity
