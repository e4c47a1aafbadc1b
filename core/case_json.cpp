#include "core/case_json.h"

#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"
#include "core/json_strict.h"

namespace bitparity {
namespace {

using nlohmann::json;

// Top-level fields a case document may carry besides the case itself.
const std::set<std::string> kCaseFields = {"format", "op", "direction", "attrs", "inputs"};
const std::set<std::string> kExtraFields = {"outputs", "finding", "provenance", "pins", "note"};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Shape parse_shape(const json& j, const std::string& field) {
  if (!j.is_array()) throw ParseError(field, "expected an array of dimensions, got " + json_type(j));
  if (static_cast<int64_t>(j.size()) > kMaxTensorRank)
    throw ParseError(field, "a tensor has at most " + std::to_string(kMaxTensorRank) + " dims; got " +
                                std::to_string(j.size()));
  Shape shape;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string path = field + "[" + std::to_string(i) + "]";
    const int64_t v = as_int(j[i], path);
    if (v < 0) throw ParseError(path, "negative dimension " + std::to_string(v));
    shape.push_back(v);
  }
  // Before anything loops over the dims: a zero-element tensor may not carry an absurd dim either.
  try {
    check_shape_limits(shape);
  } catch (const std::invalid_argument& e) {
    throw ParseError(field, e.what());
  }
  return shape;
}

double parse_float_attr(const json& j, const std::string& field) {
  if (j.is_number() && !j.is_boolean()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf" || s == "+inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  // The value's type only: a value may be nested thousands of levels deep, or megabytes long.
  throw ParseError(field, "expected a number or one of \"nan\", \"inf\", \"-inf\"; got " +
                              (j.is_string() ? excerpt(j.get_ref<const std::string&>()) : json_type(j)));
}

AttrValue parse_attr(const json& j, const AttrSpec& spec, const std::string& field) {
  switch (spec.type) {
    case AttrType::kFloat: return parse_float_attr(j, field);
    case AttrType::kInt: return as_int(j, field);
    case AttrType::kBool:
      if (!j.is_boolean()) throw ParseError(field, "expected true or false, got " + json_type(j));
      return j.get<bool>();
    case AttrType::kString: return as_string(j, field);
  }
  throw ParseError(field, "unknown attribute type");
}

std::string names_of(const std::vector<TensorSpec>& specs) {
  std::string s;
  for (const TensorSpec& t : specs) s += (s.empty() ? "" : ", ") + t.name + (t.optional ? "?" : "");
  return s.empty() ? "none" : s;
}

}  // namespace

void check_provenance(const json& doc) {
  auto it = doc.find("provenance");
  if (it == doc.end()) return;
  if (!it->is_object()) throw ParseError("provenance", "expected an object, got " + json_type(*it));
  if (it->contains("seed")) get_uint64(*it, "seed", "provenance");
  if (it->contains("case_index")) get_count(*it, "case_index", "provenance");
  for (const char* text : {"shard", "commit", "device", "tool_version", "date", "author"})
    if (it->contains(text)) get_string(*it, text, "provenance");
}

json tensor_to_json(const Tensor& tensor) {
  static const char* kDigits = "0123456789abcdef";
  const int width = dtype_size(tensor.dtype()) * 2;
  std::string hex(static_cast<size_t>(tensor.numel() * width), '0');
  for (int64_t i = 0; i < tensor.numel(); ++i) {
    uint64_t bits = tensor.bits(i);
    for (int d = width - 1; d >= 0; --d, bits >>= 4) hex[static_cast<size_t>(i * width + d)] = kDigits[bits & 15];
  }
  return json{{"dtype", std::string(dtype_name(tensor.dtype()))}, {"shape", tensor.shape()}, {"hex", hex}};
}

Tensor tensor_from_json(const json& j, const std::string& field) {
  if (!j.is_object()) throw ParseError(field, "expected a tensor object {dtype, shape, hex}, got " + json_type(j));
  for (const auto& [key, value] : j.items())
    if (key != "dtype" && key != "shape" && key != "hex")
      throw ParseError(field + "." + key, "unexpected field in a tensor (expected dtype, shape, hex)");
  const std::string dtype_text = get_string(j, "dtype", field);
  const std::optional<DType> dtype = parse_dtype(dtype_text);
  if (!dtype)
    throw ParseError(field + ".dtype", "unknown dtype " + excerpt(dtype_text) +
                                           " (known: bf16, fp16, fp32, fp64, fp8_e4m3, fp8_e5m2, bool, i32, i64)");
  const Shape shape = parse_shape(require(j, "shape", field), field + ".shape");
  const std::string hex = get_string(j, "hex", field);
  const int width = dtype_size(*dtype) * 2;
  const int64_t numel = shape_numel(shape);
  if (hex.size() % static_cast<size_t>(width) != 0 || static_cast<int64_t>(hex.size() / width) != numel)
    throw ParseError(field + ".hex", "expected " + std::to_string(width) + " hex digits per element for " +
                                         std::to_string(numel) + " " + dtype_text + " elements of shape " +
                                         shape_string(shape) + " (" +
                                         (numel <= INT64_MAX / width ? std::to_string(numel * width) : "too many") +
                                         " digits); got " + std::to_string(hex.size()));
  Tensor tensor(*dtype, shape);
  for (int64_t i = 0; i < numel; ++i) {
    uint64_t bits = 0;
    for (int d = 0; d < width; ++d) {
      const int v = hex_digit(hex[static_cast<size_t>(i * width + d)]);
      if (v < 0)
        throw ParseError(field + ".hex", "not a hexadecimal digit at position " + std::to_string(i * width + d));
      bits = (bits << 4) | static_cast<uint64_t>(v);
    }
    if (*dtype == DType::kBool && bits > 1)
      throw ParseError(field + ".hex", "bool element " + std::to_string(i) + " is neither 00 nor 01");
    tensor.set_bits(i, bits);
  }
  return tensor;
}

json attr_to_json(const AttrValue& value) {
  if (const double* d = std::get_if<double>(&value)) {
    if (std::isnan(*d)) return "nan";
    if (std::isinf(*d)) return *d > 0 ? "inf" : "-inf";
    return *d;
  }
  if (const int64_t* i = std::get_if<int64_t>(&value)) return *i;
  if (const bool* b = std::get_if<bool>(&value)) return *b;
  return std::get<std::string>(value);
}

json tensors_to_json(const TensorMap& tensors) {
  json j = json::object();
  for (const auto& [name, t] : tensors) j[name] = tensor_to_json(t);
  return j;
}

TensorMap tensors_from_json(const json& j, const std::string& field) {
  if (!j.is_object()) throw ParseError(field, "expected an object of named tensors, got " + json_type(j));
  TensorMap tensors;
  for (const auto& [name, value] : j.items()) tensors.emplace(name, tensor_from_json(value, field + "." + name));
  return tensors;
}

json case_to_json(const Case& c) {
  json attrs = json::object();
  for (const auto& [name, value] : c.attrs) attrs[name] = attr_to_json(value);
  return json{{"format", std::string(kCaseFormat)},
              {"op", c.op},
              {"direction", std::string(direction_name(c.direction))},
              {"attrs", attrs},
              {"inputs", tensors_to_json(c.inputs)}};
}

Case case_from_json(const json& j, const Registry& registry) {
  if (!j.is_object()) throw ParseError("", "expected a JSON object (a bitparity-case/1 document), got " + json_type(j));
  for (const auto& [key, value] : j.items())
    if (!kCaseFields.count(key) && !kExtraFields.count(key))
      throw ParseError(key, "unexpected top-level field");
  const std::string format = get_string(j, "format", "");
  if (format != kCaseFormat)
    throw ParseError("format", "expected \"" + std::string(kCaseFormat) + "\", got " + excerpt(format));

  Case c;
  c.op = get_string(j, "op", "");
  const OpInfo* info = registry.op(c.op);
  if (!info) throw ParseError("op", "unknown op " + excerpt(c.op) + " (see `bitparity list`)");
  const std::string direction = get_string(j, "direction", "");
  const std::optional<Direction> dir = parse_direction(direction);
  if (!dir) throw ParseError("direction", "expected \"fwd\" or \"bwd\", got " + excerpt(direction));
  c.direction = *dir;
  auto specs = info->inputs.find(c.direction);
  if (specs == info->inputs.end()) throw ParseError("direction", c.op + " has no " + direction + " direction");

  if (auto it = j.find("attrs"); it != j.end()) {
    if (!it->is_object()) throw ParseError("attrs", "expected an object, got " + json_type(*it));
    for (const auto& [name, value] : it->items()) {
      const AttrSpec* spec = info->attr(name);
      if (!spec) throw ParseError("attrs." + name, "unknown attribute of " + c.op);
      if (value.is_null()) continue;  // null is Python's None: the same as absent
      c.attrs[name] = parse_attr(value, *spec, "attrs." + name);
    }
  }

  const json& inputs = require(j, "inputs", "");
  if (!inputs.is_object()) throw ParseError("inputs", "expected an object of named tensors, got " + json_type(inputs));
  for (const auto& [name, value] : inputs.items()) {
    bool known = false;
    for (const TensorSpec& s : specs->second) known = known || s.name == name;
    if (!known)
      throw ParseError("inputs." + name, "unexpected input of " + c.op + " " + direction +
                                             " (expected: " + names_of(specs->second) + ")");
    c.inputs.emplace(name, tensor_from_json(value, "inputs." + name));
  }
  for (const TensorSpec& s : specs->second)
    if (!s.optional && !c.inputs.count(s.name))
      throw ParseError("inputs." + s.name, "missing required input of " + c.op + " " + direction);
  if (auto it = j.find("outputs"); it != j.end()) tensors_from_json(*it, "outputs");  // validated, kept by callers
  check_provenance(j);
  return c;
}

Case case_from_text(std::string_view text, const Registry& registry) {
  return case_from_json(parse_json_text(text, "the case"), registry);
}

Case case_from_file(const std::filesystem::path& path, const Registry& registry) {
  try {
    return case_from_text(read_document(path), registry);
  } catch (const ParseError& e) {
    throw ParseError("", path.string() + ": " + e.what());
  }
}

}  // namespace bitparity
