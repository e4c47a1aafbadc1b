// A case: one op, one direction, attributes and named input tensors; the unit that every harness
// generates, runs, compares, shrinks and stores. Its JSON form is `bitparity-case/1` (case_json.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>

#include "core/tensor.h"

namespace bitparity {

enum class Direction { kForward, kBackward };
std::string_view direction_name(Direction direction);  // "fwd" / "bwd"
std::optional<Direction> parse_direction(std::string_view name);

enum class AttrType { kFloat, kInt, kBool, kString };
std::string_view attr_type_name(AttrType type);

// double for kFloat (clamp may be NaN, ±Inf or -0), int64_t for kInt, and so on.
using AttrValue = std::variant<bool, int64_t, double, std::string>;
using Attrs = std::map<std::string, AttrValue>;
using TensorMap = std::map<std::string, Tensor>;

struct Case {
  std::string op;
  Direction direction = Direction::kForward;
  Attrs attrs;
  TensorMap inputs;

  std::optional<double> float_attr(const std::string& name) const;
  const Tensor* input(const std::string& name) const;  // nullptr when absent
};

}  // namespace bitparity
