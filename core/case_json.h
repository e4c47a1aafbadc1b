// The `bitparity-case/1` JSON form of cases, tensors and results (see design.md, "Cases and the
// corpus"). The parser is strict: every malformed document is a ParseError naming the field.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/registry.h"

namespace bitparity {

inline constexpr std::string_view kCaseFormat = "bitparity-case/1";

nlohmann::json tensor_to_json(const Tensor& tensor);
// `field` is the path used in error messages ("inputs.y").
Tensor tensor_from_json(const nlohmann::json& j, const std::string& field);

nlohmann::json attr_to_json(const AttrValue& value);

// The case's own fields; corpus entries and results add "outputs", "finding", "provenance" and
// "pins" beside them.
nlohmann::json case_to_json(const Case& c);

// Parses and validates a case against the registry's OpInfo: the op exists and has the
// direction, every required input is present, no unknown input or attribute, attribute types
// match, tensors are well formed. Fields in `extra_fields` are allowed at the top level and
// ignored here.
Case case_from_json(const nlohmann::json& j, const Registry& registry);
// Same, from text; truncated or invalid JSON is a ParseError too.
Case case_from_text(std::string_view text, const Registry& registry);
nlohmann::json parse_json_text(std::string_view text, const std::string& what);

// Tensors under a JSON object such as "outputs".
TensorMap tensors_from_json(const nlohmann::json& j, const std::string& field);
nlohmann::json tensors_to_json(const TensorMap& tensors);

}  // namespace bitparity
