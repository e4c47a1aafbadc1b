#include "core/compare.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>

namespace bitparity {
Shape unravel(int64_t index, const Shape& shape) {
  Shape position(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) break;
    position[d] = index % shape[d];
    index /= shape[d];
  }
  return position;
}

double overflow_threshold(DType dtype) {
  const uint64_t max_bits = from_double(dtype, INFINITY) - 1;
  const double max = to_double(dtype, max_bits);
  return max + (max - to_double(dtype, max_bits - 1)) / 2;
}

bool bits_equal(DType dtype, uint64_t a, uint64_t b, bool strict_nan) {
  if (a == b) return true;
  return !strict_nan && is_nan_bits(dtype, a) && is_nan_bits(dtype, b);
}

namespace {

OutputComparison compare_tensor(const std::string& name, const Tensor& a, const Tensor& b,
                                const CompareOptions& options) {
  OutputComparison out;
  out.name = name;
  out.shape_a = a.shape();
  out.shape_b = b.shape();
  out.dtype = a.dtype();
  out.numel = a.numel();
  out.shape_equal = a.shape() == b.shape();
  out.dtype_equal = a.dtype() == b.dtype();
  if (!out.shape_equal || !out.dtype_equal) return out;
  // The same bytes are the same bits, whatever the NaN policy: no element to look at.
  if (a.nbytes() == b.nbytes() && (a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0)) return out;
  // Blocks of equal bytes are skipped whole (large outputs that differ in a few elements); the
  // elements of the others in order, so that the first mismatch is the lowest index.
  constexpr int64_t kBlock = 256;
  const auto width = static_cast<size_t>(dtype_size(a.dtype()));
  for (int64_t start = 0; start < a.numel(); start += kBlock) {
    const int64_t end = std::min(a.numel(), start + kBlock);
    const size_t offset = static_cast<size_t>(start) * width;
    if (std::memcmp(a.data() + offset, b.data() + offset, static_cast<size_t>(end - start) * width) == 0) continue;
    for (int64_t i = start; i < end; ++i) {
      const uint64_t x = a.bits(i), y = b.bits(i);
      if (bits_equal(a.dtype(), x, y, options.strict_nan)) continue;
      const std::optional<uint64_t> ulps = is_floating(a.dtype()) ? ulp_distance(a.dtype(), x, y) : std::nullopt;
      ++out.mismatches;
      ++out.ulp_histogram[ulp_bucket(ulps)];
      if (ulps) out.max_ulps = std::max(out.max_ulps, *ulps);
      if (!out.first) out.first = ElementMismatch{i, unravel(i, a.shape()), x, y, ulps};
    }
  }
  return out;
}


// Distance from `truth` to the value of `bits`, in ulps of the dtype at the truth's binade.
double ulps_from_truth(DType dtype, uint64_t bits, double truth) {
  const double value = to_double(dtype, bits);
  if (std::isnan(value) || std::isnan(truth)) return std::isnan(value) && std::isnan(truth) ? 0 : INFINITY;
  if (std::isinf(value) || std::isinf(truth)) return value == truth ? 0 : INFINITY;
  // One ulp at the truth: the gap between the truth rounded into the dtype and its successor.
  const uint64_t near = from_double(dtype, std::fabs(truth));
  double ulp = to_double(dtype, near + 1) - to_double(dtype, near);
  if (!std::isfinite(ulp) || ulp <= 0) ulp = to_double(dtype, near) - to_double(dtype, near - 1);
  return std::fabs(value - truth) / ulp;
}

}  // namespace

namespace {

// Whether `value` may stand for a true value within [truth - bound, truth + bound] once rounded
// into `dtype`: an infinity where the interval reaches past the largest finite value's rounding
// boundary on its side.
bool within_bound(DType dtype, double value, double truth, double bound) {
  if (std::isinf(bound)) return true;
  if (std::isnan(truth)) return std::isnan(value);
  if (std::isnan(value)) return false;
  if (std::isinf(truth)) return value == truth;
  if (std::isinf(value)) {
    const double overflow = overflow_threshold(dtype);
    return value > 0 ? truth + bound >= overflow : truth - bound <= -overflow;
  }
  return std::fabs(value - truth) <= bound;
}

}  // namespace

BoundCheck check_bound(const Tensor& t, const ElementBounds& bounds) {
  const auto n = static_cast<size_t>(t.numel());
  if (bounds.truth.size() != n || bounds.bound.size() != n)
    throw std::logic_error("check_bound: " + std::to_string(bounds.truth.size()) + " truths and " +
                           std::to_string(bounds.bound.size()) + " bounds for " + std::to_string(n) + " elements");
  BoundCheck check;
  for (size_t i = 0; i < n; ++i) {
    const double value = t.f64(static_cast<int64_t>(i)), truth = bounds.truth[i], bound = bounds.bound[i];
    if (std::isfinite(value) && std::isfinite(truth) && std::isfinite(bound) && bound > 0)
      check.worst_ratio = std::max(check.worst_ratio, std::fabs(value - truth) / bound);
    if (within_bound(t.dtype(), value, truth, bound)) continue;
    if (!check.outside++) {
      check.first = static_cast<int64_t>(i);
      check.position = unravel(static_cast<int64_t>(i), t.shape());
      check.value = value, check.truth = truth, check.bound = bound;
    }
  }
  return check;
}

std::string position_string(const Shape& position) {
  std::string s = "[";
  for (size_t i = 0; i < position.size(); ++i) s += (i ? ", " : "") + std::to_string(position[i]);
  return s + "]";
}

std::string ulp_bucket(std::optional<uint64_t> ulps) {
  if (!ulps) return "nan";
  if (*ulps <= 2) return std::to_string(*ulps);
  const uint64_t hi = std::bit_ceil(*ulps);
  return std::to_string(hi / 2 + 1) + "-" + std::to_string(hi);
}

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kIdentical: return "identical";
    case Verdict::kBitMismatch: return "bit_mismatch";
    case Verdict::kShapeMismatch: return "shape_mismatch";
  }
  return "?";
}

const OutputComparison* Comparison::first_difference() const {
  for (const OutputComparison& o : outputs)
    if (!o.present_a || !o.present_b || !o.shape_equal || !o.dtype_equal) return &o;
  for (const OutputComparison& o : outputs)
    if (o.mismatches) return &o;
  return nullptr;
}

Comparison compare_outputs(const TensorMap& a, const TensorMap& b, const CompareOptions& options) {
  std::set<std::string> names;
  for (const auto& [name, t] : a) names.insert(name);
  for (const auto& [name, t] : b) names.insert(name);
  Comparison result;
  for (const std::string& name : names) {
    auto ia = a.find(name), ib = b.find(name);
    if (ia == a.end() || ib == b.end()) {
      OutputComparison missing;
      missing.name = name;
      missing.present_a = ia != a.end();
      missing.present_b = ib != b.end();
      missing.shape_equal = false;
      if (ia != a.end()) missing.shape_a = ia->second.shape();
      if (ib != b.end()) missing.shape_b = ib->second.shape();
      result.outputs.push_back(missing);
      continue;
    }
    result.outputs.push_back(compare_tensor(name, ia->second, ib->second, options));
  }
  for (const OutputComparison& o : result.outputs) {
    if (!o.present_a || !o.present_b || !o.shape_equal || !o.dtype_equal) {
      result.verdict = Verdict::kShapeMismatch;
      break;
    }
    if (o.mismatches) result.verdict = Verdict::kBitMismatch;
  }
  return result;
}

Arbitration arbitrate(DType dtype, uint64_t a_bits, uint64_t b_bits, double truth) {
  Arbitration r;
  r.truth = truth;
  r.a_ulps = ulps_from_truth(dtype, a_bits, truth);
  r.b_ulps = ulps_from_truth(dtype, b_bits, truth);
  r.closer = r.a_ulps < r.b_ulps ? "a" : r.b_ulps < r.a_ulps ? "b" : "tie";
  return r;
}

std::string format_comparison(const Comparison& comparison, const std::string& title,
                              const std::string& a_name, const std::string& b_name) {
  std::string s = title + " " + a_name + " vs " + b_name + ": ";
  const OutputComparison* d = comparison.first_difference();
  if (!d) return s + "bit-identical";
  char line[512];
  if (!d->present_a || !d->present_b) {
    return s + "output " + d->name + " is produced only by " + (d->present_a ? a_name : b_name);
  }
  if (!d->shape_equal) {
    return s + "shape mismatch\nOutput " + d->name + ": " + a_name + " has shape " + shape_string(d->shape_a) +
           ", " + b_name + " has shape " + shape_string(d->shape_b);
  }
  if (!d->dtype_equal) return s + "dtype mismatch in output " + d->name;
  s += "not bit-identical";
  for (const OutputComparison& o : comparison.outputs) {
    if (!o.mismatches) continue;
    std::snprintf(line, sizeof line, "\nMismatched elements in %s: %lld / %lld (%.2f%%), max %llu ulp", o.name.c_str(),
                  static_cast<long long>(o.mismatches), static_cast<long long>(o.numel),
                  100.0 * static_cast<double>(o.mismatches) / static_cast<double>(o.numel),
                  static_cast<unsigned long long>(o.max_ulps));
    s += line;
  }
  const ElementMismatch& m = *d->first;
  s += "\nFirst mismatch at " + d->name + position_string(m.position) + ": " + a_name + "=" +
       describe_bits(d->dtype, m.a_bits) + " " + b_name + "=" + describe_bits(d->dtype, m.b_bits) + ", " +
       (m.ulps ? std::to_string(*m.ulps) + " ulp" : std::string("NaN on one side"));
  return s;
}

}  // namespace bitparity
