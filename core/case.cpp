#include "core/case.h"

namespace bitparity {

std::string_view direction_name(Direction direction) {
  return direction == Direction::kForward ? "fwd" : "bwd";
}

std::optional<Direction> parse_direction(std::string_view name) {
  if (name == "fwd") return Direction::kForward;
  if (name == "bwd") return Direction::kBackward;
  return std::nullopt;
}

std::string_view attr_type_name(AttrType type) {
  switch (type) {
    case AttrType::kFloat: return "float";
    case AttrType::kInt: return "int";
    case AttrType::kBool: return "bool";
    case AttrType::kString: return "string";
  }
  return "?";
}

std::optional<double> Case::float_attr(const std::string& name) const {
  auto it = attrs.find(name);
  if (it == attrs.end()) return std::nullopt;
  if (const double* d = std::get_if<double>(&it->second)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return std::nullopt;
}

const Tensor* Case::input(const std::string& name) const {
  auto it = inputs.find(name);
  return it == inputs.end() ? nullptr : &it->second;
}

}  // namespace bitparity
