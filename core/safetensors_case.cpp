#include "core/safetensors_case.h"

#include <array>
#include <stdexcept>

#include "core/case_json.h"
#include "core/error.h"
#include "core/json_strict.h"

namespace bitparity {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kFormatKey = "format";
constexpr std::string_view kOpKey = "op";
constexpr std::string_view kDirectionKey = "direction";
constexpr std::string_view kAttrsKey = "attrs";
constexpr std::string_view kPinsKey = "pins";
// A corpus entry's fields that are JSON values of their own, kept as JSON text.
constexpr std::array<std::string_view, 3> kJsonTextKeys = {"finding", "provenance", "note"};
// The prefix of every version of the case format: a file of another version is refused, not read
// as this one.
constexpr std::string_view kCaseFormatFamily = "bitparity-case/";

std::string metadata_field(std::string_view key) {
  return std::string(kSafetensorsMetadataKey) + "." + std::string(key);
}

const std::string* find_key(const std::map<std::string, std::string>& metadata, std::string_view key) {
  const auto it = metadata.find(std::string(key));
  return it == metadata.end() ? nullptr : &it->second;
}

json json_in_text(const std::string& text, std::string_view key) {
  try {
    return parse_json_text(text, "its text");
  } catch (const ParseError& e) {
    throw ParseError(metadata_field(key), e.what());
  }
}

// The op or the direction: the command line's, else the metadata's.
std::string required_name(const std::optional<std::string>& given, const std::map<std::string, std::string>& metadata,
                          std::string_view key) {
  if (given) return *given;
  if (const std::string* text = find_key(metadata, key)) return *text;
  throw ParseError(std::string(key), "missing: the file's " + std::string(kSafetensorsMetadataKey) + " has no \"" +
                                         std::string(key) + "\" and none was given (--" + std::string(key) + ")");
}

// A command-line attribute as its type reads it: text for a string attribute; otherwise a JSON
// scalar ("7.0", "-0.0", "true", "null": absent), or the text itself ("nan", "inf", "-inf"), so
// that case_from_json checks it and words its error as for any case.
json attr_value(const Registry& registry, const std::string& op, const std::string& name, const std::string& text) {
  const OpInfo* info = registry.op(op);
  const AttrSpec* spec = info ? info->attr(name) : nullptr;
  if (spec && spec->type == AttrType::kString) return text;
  try {
    json value = parse_json_text(text, "the value");
    if (value.is_primitive()) return value;
  } catch (const ParseError&) {
  }
  return text;
}

json attrs_of(const Safetensors& file, const Registry& registry, const std::string& op,
              const CaseOverrides& overrides) {
  json attrs = json::object();
  if (const std::string* text = find_key(file.metadata, kAttrsKey)) {
    attrs = json_in_text(*text, kAttrsKey);
    if (!attrs.is_object())
      throw ParseError(metadata_field(kAttrsKey),
                       "expected a JSON object of attributes in text ({\"clamp\": 7.0}), got " + json_type(attrs));
  }
  for (const auto& [name, text] : overrides.attrs) attrs[name] = attr_value(registry, op, name, text);
  return attrs;
}

}  // namespace

json case_document_from_safetensors(const Safetensors& file, const Registry& registry, const CaseOverrides& overrides) {
  if (const std::string* format = find_key(file.metadata, kFormatKey);
      format && format->rfind(kCaseFormatFamily, 0) == 0 && *format != kCaseFormat)
    throw ParseError(metadata_field(kFormatKey),
                     "expected \"" + std::string(kCaseFormat) + "\", got " + excerpt(*format));
  json doc = json::object();
  doc["format"] = std::string(kCaseFormat);
  doc["op"] = required_name(overrides.op, file.metadata, kOpKey);
  doc["direction"] = required_name(overrides.direction, file.metadata, kDirectionKey);
  doc["attrs"] = attrs_of(file, registry, doc["op"].get<std::string>(), overrides);

  json inputs = json::object(), outputs = json::object();
  for (const auto& [name, tensor] : file.tensors) {
    if (name.rfind(kOutputTensorPrefix, 0) == 0)
      outputs[name.substr(kOutputTensorPrefix.size())] = tensor_to_json(tensor);
    else
      inputs[name] = tensor_to_json(tensor);
  }
  doc["inputs"] = std::move(inputs);
  if (!outputs.empty()) doc["outputs"] = std::move(outputs);

  if (const std::string* pins = find_key(file.metadata, kPinsKey)) doc["pins"] = *pins;
  for (std::string_view key : kJsonTextKeys)
    if (const std::string* text = find_key(file.metadata, key)) doc[std::string(key)] = json_in_text(*text, key);
  return doc;
}

Safetensors safetensors_from_case(const Case& c) {
  Safetensors file;
  file.tensors = c.inputs;
  const json normal = case_to_json(c);
  file.metadata[std::string(kFormatKey)] = kCaseFormat;
  file.metadata[std::string(kOpKey)] = c.op;
  file.metadata[std::string(kDirectionKey)] = direction_name(c.direction);
  file.metadata[std::string(kAttrsKey)] = normal["attrs"].dump();
  return file;
}

Safetensors safetensors_from_case_document(const json& doc, const Registry& registry) {
  Safetensors file = safetensors_from_case(case_from_json(doc, registry));
  if (const auto it = doc.find("outputs"); it != doc.end())
    for (auto& [name, tensor] : tensors_from_json(*it, "outputs"))
      if (!file.tensors.emplace(std::string(kOutputTensorPrefix) + name, std::move(tensor)).second)
        throw ParseError("outputs." + name, "has the name of an input: the two cannot share one file");
  if (const auto it = doc.find(std::string(kPinsKey)); it != doc.end()) file.metadata[std::string(kPinsKey)] = as_string(*it, "pins");
  for (std::string_view key : kJsonTextKeys)
    if (const auto it = doc.find(std::string(key)); it != doc.end()) file.metadata[std::string(key)] = it->dump();
  return file;
}

json read_case_document(const fs::path& path, const Registry& registry) {
  if (looks_like_safetensors(path)) {
    const Safetensors file = read_safetensors(path);  // its messages name the path
    try {
      return case_document_from_safetensors(file, registry);
    } catch (const ParseError& e) {
      throw ParseError("", path.string() + ": " + e.what());
    }
  }
  try {
    return parse_json_text(read_document(path), "the document");
  } catch (const ParseError& e) {
    throw ParseError("", path.string() + ": " + e.what());
  }
}

Case case_from_any_file(const fs::path& path, const Registry& registry) {
  if (!looks_like_safetensors(path)) return case_from_file(path, registry);
  const json doc = read_case_document(path, registry);
  try {
    return case_from_json(doc, registry);
  } catch (const ParseError& e) {
    throw ParseError("", path.string() + ": " + e.what());
  }
}

}  // namespace bitparity
