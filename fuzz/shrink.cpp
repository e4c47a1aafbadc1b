#include "fuzz/shrink.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

namespace bitparity::fuzz {
namespace {

// Simple numbers reach up to 2^kMaxSimpleExponent and down to 2^-kMaxSimpleExponent.
constexpr int kMaxSimpleExponent = 8;
// One significant bit less always outweighs an exponent one larger (the largest fp64 exponent
// distance is 1074 + 1023), so rounding to fewer bits is always a simplification.
constexpr int64_t kBitWeight = 4096;
constexpr int kMaxSignificantBits = 64;
// Tensors with more distinct values than this skip the pairwise "fewer distinct values" pass,
// whose calls grow with the square of the count.
constexpr size_t kMaxDistinctToMerge = 16;

// 0, 1, -1, 2, -2, 0.5, -0.5, 4, -4, 0.25, -0.25, ...: the order in which values are tried.
const std::vector<double>& simple_values() {
  static const std::vector<double> values = [] {
    std::vector<double> v = {0.0, 1.0, -1.0};
    for (int e = 1; e <= kMaxSimpleExponent; ++e)
      for (double magnitude : {std::ldexp(1.0, e), std::ldexp(1.0, -e)})
        v.push_back(magnitude), v.push_back(-magnitude);
    return v;
  }();
  return values;
}

// Attributes read best as 1.0 first (a neutral scale or clamp), then 0.0 and -1.0.
const std::vector<double>& simple_attr_values() {
  static const std::vector<double> values = [] {
    std::vector<double> v = {1.0, 0.0, -1.0};
    for (double x : simple_values())
      if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
    return v;
  }();
  return values;
}

int significant_bits(double magnitude) {
  int exponent = 0;
  double fraction = std::frexp(magnitude, &exponent);
  int bits = 0;
  while (fraction != 0 && bits < kMaxSignificantBits) {
    fraction *= 2;
    fraction -= std::floor(fraction);
    ++bits;
  }
  return bits;
}

// Cost of a value that is not in a simple list: fewer significant bits first, then a smaller
// exponent, then positive before negative (so -0 costs more than +0).
int64_t general_cost(size_t list_size, double v) {
  const int64_t base = static_cast<int64_t>(list_size);
  const int64_t special = base + kBitWeight * (kMaxSignificantBits + 1);
  if (!std::isfinite(v)) return special;
  int exponent = 0;
  std::frexp(v, &exponent);
  return base + kBitWeight * significant_bits(std::fabs(v)) + std::abs(exponent) + (std::signbit(v) ? 1 : 0);
}

int64_t signed_value(DType dtype, uint64_t bits) {
  const int width = dtype_size(dtype) * 8;
  if (width >= 64) return static_cast<int64_t>(bits);
  const uint64_t sign = uint64_t{1} << (width - 1);
  return static_cast<int64_t>((bits ^ sign) - sign);  // sign-extend
}

uint64_t int_bits(DType dtype, int64_t v) {
  const int width = dtype_size(dtype) * 8;
  const uint64_t bits = static_cast<uint64_t>(v);
  return width >= 64 ? bits : bits & ((uint64_t{1} << width) - 1);
}

// 0, 1, -1, 2, -2, ... -> 0, 1, 2, 3, 4, ... (saturating for the extremes of int64).
int64_t int_cost(int64_t v) {
  if (v == 0) return 0;
  const uint64_t magnitude = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 2))
    return std::numeric_limits<int64_t>::max() / 2;
  return static_cast<int64_t>(2 * magnitude) - (v > 0 ? 1 : 0);
}

// `value` in `dtype` when it is exactly representable there: the shrinker never changes a value
// by rounding it behind the predicate's back.
std::optional<uint64_t> exact_bits(DType dtype, double value) {
  const uint64_t bits = from_double(dtype, value);
  const double back = to_double(dtype, bits);
  if (back != value || std::signbit(back) != std::signbit(value)) return std::nullopt;
  return bits;
}

// The bit patterns of simple_values() in a floating dtype (empty where one is not exact there),
// computed once per dtype: value_cost runs for every element of every candidate.
const std::vector<std::optional<uint64_t>>& simple_bits(DType dtype) {
  static const std::map<DType, std::vector<std::optional<uint64_t>>> table = [] {
    std::map<DType, std::vector<std::optional<uint64_t>>> t;
    for (DType d : {DType::kBF16, DType::kFP16, DType::kFP32, DType::kFP64, DType::kFP8E4M3, DType::kFP8E5M2})
      for (double v : simple_values()) t[d].push_back(exact_bits(d, v));
    return t;
  }();
  return table.at(dtype);
}

// `v` cut to `bits` significant bits, rounded to nearest (ties to even) or toward zero. Both:
// the nearest may not exist in the dtype (448 in e4m3 rounds to 512) where the truncation does.
double round_to_bits(double v, int bits, bool toward_zero) {
  int exponent = 0;
  const double scaled = std::ldexp(std::frexp(v, &exponent), bits);
  return std::ldexp(toward_zero ? std::trunc(scaled) : std::nearbyint(scaled), exponent - bits);
}

// Simpler neighbours of a finite value: its magnitude, then fewer significant bits.
std::vector<double> rounded_variants(double v) {
  std::vector<double> out;
  if (!std::isfinite(v)) return out;
  if (std::signbit(v) && v != 0) out.push_back(-v);
  for (int bits = 1; bits < significant_bits(std::fabs(v)); ++bits)
    for (bool toward_zero : {false, true}) out.push_back(round_to_bits(v, bits, toward_zero));
  return out;
}

// Candidate bit patterns for one element, simplest first; only patterns valid in the dtype.
std::vector<uint64_t> element_candidates(DType dtype, uint64_t bits) {
  std::vector<uint64_t> out;
  const int64_t cost = value_cost(dtype, bits);
  auto offer = [&](std::optional<uint64_t> candidate) {
    if (candidate && *candidate != bits && value_cost(dtype, *candidate) < cost) out.push_back(*candidate);
  };
  if (dtype == DType::kBool) {
    offer(uint64_t{0});
  } else if (!is_floating(dtype)) {
    const int64_t v = signed_value(dtype, bits);
    for (int64_t c : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{2}, int64_t{-2}, v / 2, v - (v > 0) + (v < 0)})
      offer(int_bits(dtype, c));
  } else {
    for (double s : simple_values()) offer(exact_bits(dtype, s));
    for (double r : rounded_variants(to_double(dtype, bits))) offer(exact_bits(dtype, r));
  }
  return out;
}

int64_t attr_cost(const AttrValue& value) {
  if (const double* d = std::get_if<double>(&value)) {
    const std::vector<double>& list = simple_attr_values();
    for (size_t i = 0; i < list.size(); ++i)
      if (*d == list[i] && std::signbit(*d) == std::signbit(list[i])) return static_cast<int64_t>(i);
    return general_cost(list.size(), *d);
  }
  if (const int64_t* i = std::get_if<int64_t>(&value)) return int_cost(*i);
  if (const bool* b = std::get_if<bool>(&value)) return *b ? 1 : 0;
  return 0;  // strings are not shrunk
}

std::vector<AttrValue> attr_candidates(const AttrValue& value) {
  std::vector<AttrValue> out;
  if (const double* d = std::get_if<double>(&value)) {
    // emplace with the type named: GCC 12 warns (wrongly) on converting pushes into the variant.
    for (double s : simple_attr_values()) out.emplace_back(std::in_place_type<double>, s);
    for (double r : rounded_variants(*d)) out.emplace_back(std::in_place_type<double>, r);
  } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
    for (int64_t c : {int64_t{0}, int64_t{1}, int64_t{-1}, *i / 2, *i - (*i > 0) + (*i < 0)})
      out.emplace_back(std::in_place_type<int64_t>, c);
  } else if (std::holds_alternative<bool>(value)) {
    out.emplace_back(std::in_place_type<bool>, false);
  }
  const int64_t cost = attr_cost(value);
  std::erase_if(out, [&](const AttrValue& c) { return attr_cost(c) >= cost; });
  return out;
}

// The measure every accepted step strictly lowers, compared lexicographically: the shape, then
// the values, then the attributes. All parts are non-negative integers, so it cannot fall forever.
struct Size {
  int64_t numel = 0, dims = 0, values = 0, distinct = 0, attr_count = 0, attrs = 0;
  auto operator<=>(const Size&) const = default;
};

Size size_of(const Case& c) {
  Size s;
  for (const auto& [name, t] : c.inputs) {
    s.numel += t.numel();
    for (int64_t d : t.shape()) s.dims += d;
    std::set<uint64_t> distinct;
    for (int64_t i = 0; i < t.numel(); ++i) {
      s.values += value_cost(t.dtype(), t.bits(i));
      distinct.insert(t.bits(i));
    }
    s.distinct += static_cast<int64_t>(distinct.size());
  }
  s.attr_count = static_cast<int64_t>(c.attrs.size());
  for (const auto& [name, value] : c.attrs) s.attrs += attr_cost(value);
  return s;
}

class Shrinker {
 public:
  Shrinker(const OpInfo& op, const Case& failing, const StillFails& still_fails, const ShrinkOptions& options)
      : op_(op), still_fails_(still_fails), options_(options), current_(failing), size_(size_of(failing)) {}

  ShrinkResult run() {
    while (!out_of_budget()) {
      bool progressed = shrink_shape();
      progressed = shrink_values() || progressed;
      progressed = shrink_attrs() || progressed;
      if (!progressed) break;
    }
    return {current_, calls_, accepted_, out_of_budget()};
  }

 private:
  bool out_of_budget() const {
    return calls_ >= options_.max_calls || (options_.should_stop && options_.should_stop());
  }

  // Takes the candidate when it is smaller and still fails; the size check costs no call.
  bool try_accept(Case candidate) {
    if (out_of_budget()) return false;
    const Size size = size_of(candidate);
    if (!(size < size_)) return false;
    ++calls_;
    bool fails = false;
    try {
      fails = still_fails_(candidate);
    } catch (...) {
      fails = false;  // a candidate the predicate cannot even evaluate is not a reproduction
    }
    if (!fails) return false;
    current_ = std::move(candidate);
    size_ = size;
    ++accepted_;
    return true;
  }

  std::vector<Case> shape_candidates() const {
    if (!op_.shrink_shape) return {};
    try {
      return op_.shrink_shape(current_);
    } catch (...) {
      return {};
    }
  }

  bool shrink_shape() {
    bool progressed = false;
    for (bool step = true; step && !out_of_budget();) {
      step = false;
      for (Case& candidate : shape_candidates())
        if ((step = try_accept(std::move(candidate)))) break;
      progressed = progressed || step;
    }
    return progressed;
  }

  bool shrink_values() {
    bool progressed = false;
    for (const std::string& name : input_names()) {
      progressed = zero_blocks(name) || progressed;
      progressed = simplify_elements(name) || progressed;
      progressed = merge_distinct(name) || progressed;
    }
    return progressed;
  }

  std::vector<std::string> input_names() const {
    std::vector<std::string> names;
    for (const auto& [name, t] : current_.inputs) names.push_back(name);
    return names;
  }

  static uint64_t zero_bits(DType dtype) { return is_floating(dtype) ? from_double(dtype, 0.0) : 0; }

  // Whole tensor, halves, quarters, ... to single elements: each block to +0 at once.
  bool zero_blocks(const std::string& name) {
    bool progressed = false;
    const int64_t numel = current_.inputs.at(name).numel();
    for (int64_t block = numel; block >= 1 && !out_of_budget(); block /= 2)
      for (int64_t start = 0; start < numel && !out_of_budget(); start += block) {
        const Tensor& t = current_.inputs.at(name);
        const uint64_t zero = zero_bits(t.dtype());
        const int64_t end = std::min(numel, start + block);
        bool all_zero = true;
        for (int64_t i = start; i < end; ++i) all_zero = all_zero && t.bits(i) == zero;
        if (all_zero) continue;
        Case candidate = current_;
        Tensor& ct = candidate.inputs.at(name);
        for (int64_t i = start; i < end; ++i) ct.set_bits(i, zero);
        progressed = try_accept(std::move(candidate)) || progressed;
      }
    return progressed;
  }

  bool simplify_elements(const std::string& name) {
    bool progressed = false;
    const int64_t numel = current_.inputs.at(name).numel();
    for (int64_t i = 0; i < numel && !out_of_budget(); ++i) {
      const Tensor& t = current_.inputs.at(name);
      for (uint64_t bits : element_candidates(t.dtype(), t.bits(i))) {
        Case candidate = current_;
        candidate.inputs.at(name).set_bits(i, bits);
        if (try_accept(std::move(candidate))) {
          progressed = true;
          break;  // candidates are simplest first: the first that fails is the one to keep
        }
      }
    }
    return progressed;
  }

  // Replaces every occurrence of a value by a simpler value already present.
  bool merge_distinct(const std::string& name) {
    bool progressed = false;
    for (bool step = true; step && !out_of_budget();) {
      step = false;
      const Tensor& t = current_.inputs.at(name);
      std::set<std::pair<int64_t, uint64_t>> by_cost;  // (cost, bits), simplest first
      for (int64_t i = 0; i < t.numel(); ++i) by_cost.insert({value_cost(t.dtype(), t.bits(i)), t.bits(i)});
      if (by_cost.size() < 2 || by_cost.size() > kMaxDistinctToMerge) break;
      for (auto from = by_cost.rbegin(); from != by_cost.rend() && !step; ++from)
        for (auto to = by_cost.begin(); to != by_cost.end() && to->first <= from->first && !step; ++to) {
          if (to->second == from->second) continue;
          Case candidate = current_;
          Tensor& ct = candidate.inputs.at(name);
          for (int64_t i = 0; i < ct.numel(); ++i)
            if (ct.bits(i) == from->second) ct.set_bits(i, to->second);
          step = try_accept(std::move(candidate));
        }
      progressed = progressed || step;
    }
    return progressed;
  }

  bool shrink_attrs() {
    bool progressed = false;
    std::vector<std::string> names;
    for (const auto& [name, value] : current_.attrs) names.push_back(name);
    for (const std::string& name : names) {
      if (out_of_budget()) break;
      Case dropped = current_;
      dropped.attrs.erase(name);
      if (try_accept(std::move(dropped))) {
        progressed = true;
        continue;
      }
      for (const AttrValue& value : attr_candidates(current_.attrs.at(name))) {
        Case candidate = current_;
        candidate.attrs[name] = value;
        if (try_accept(std::move(candidate))) {
          progressed = true;
          break;
        }
      }
    }
    return progressed;
  }

  const OpInfo& op_;
  const StillFails& still_fails_;
  const ShrinkOptions& options_;
  Case current_;
  Size size_;
  int calls_ = 0;
  int accepted_ = 0;
};

}  // namespace

int64_t value_cost(DType dtype, uint64_t bits) {
  if (dtype == DType::kBool) return bits ? 1 : 0;
  if (!is_floating(dtype)) return int_cost(signed_value(dtype, bits));
  const std::vector<std::optional<uint64_t>>& simple = simple_bits(dtype);
  for (size_t i = 0; i < simple.size(); ++i)
    if (simple[i] == bits) return static_cast<int64_t>(i);
  return general_cost(simple.size(), to_double(dtype, bits));
}

ShrinkResult shrink_case(const OpInfo& op, const Case& failing, const StillFails& still_fails,
                         const ShrinkOptions& options) {
  return Shrinker(op, failing, still_fails, options).run();
}

}  // namespace bitparity::fuzz
