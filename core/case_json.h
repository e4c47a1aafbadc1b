// The `bitparity-case/1` JSON form of cases, tensors and results (see design.md, "Cases and the
// corpus"). The parser is strict: every malformed document is a ParseError naming the field.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/json_strict.h"
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
// match, tensors are well formed and within check_shape_limits (tensor.h). Fields in `extra_fields` are allowed at the top level and
// ignored here.
Case case_from_json(const nlohmann::json& j, const Registry& registry);
// Same, from text through parse_json_text (json_strict.h): truncated or invalid JSON, a duplicate
// key or a document past the size and nesting limits is a ParseError too.
Case case_from_text(std::string_view text, const Registry& registry);
// Same, from a file read with read_document (at most kMaxDocumentBytes); the message starts with
// the path ("case.json: inputs.y.shape: ...").
Case case_from_file(const std::filesystem::path& path, const Registry& registry);

// A document's optional "provenance" (corpus entries, results): free-form, but what it states must
// be in range: "seed" a 64-bit unsigned integer (one past would replay another seed), "case_index"
// a non-negative integer, the texts strings. ParseError naming the field otherwise.
void check_provenance(const nlohmann::json& doc);

// Tensors under a JSON object such as "outputs".
TensorMap tensors_from_json(const nlohmann::json& j, const std::string& field);
nlohmann::json tensors_to_json(const TensorMap& tensors);

}  // namespace bitparity
