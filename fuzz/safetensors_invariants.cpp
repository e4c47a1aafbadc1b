#include "fuzz/safetensors_invariants.h"

#include "core/case_json.h"
#include "core/error.h"
#include "core/safetensors_case.h"
#include "fuzz/invariants.h"

namespace bitparity::fuzz {
namespace {

using nlohmann::json;

std::optional<std::string> check_file_round_trip(const Safetensors& file) {
  for (const auto& [name, t] : file.tensors) try {
      check_shape_limits(t.shape());
    } catch (const std::invalid_argument& e) {
      return "the reader accepted tensor " + name + " past the limits: " + e.what();
    }
  try {
    if (safetensors_from_bytes(safetensors_to_bytes(file)) != file) return "written and read again, the file changed";
  } catch (const std::exception& e) {
    return std::string("an accepted file did not survive writing and reading: ") + e.what();
  }
  return std::nullopt;
}

// Export and import again: the case, its outputs and its entry fields come back unchanged.
std::optional<std::string> check_case_round_trip(const Registry& registry, const json& doc, const Case& c) {
  try {
    const Safetensors exported = safetensors_from_case_document(doc, registry);
    const json back = case_document_from_safetensors(safetensors_from_bytes(safetensors_to_bytes(exported)), registry);
    if (case_to_json(case_from_json(back, registry)) != case_to_json(c)) return "exported and imported, the case changed";
    if (back.value("outputs", json()) != doc.value("outputs", json())) return "exported and imported, the outputs changed";
  } catch (const std::exception& e) {
    return std::string("an accepted case did not survive export and import: ") + e.what();
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_safetensors_file(const Registry& registry, std::string_view bytes) {
  Safetensors file;
  try {
    file = safetensors_from_bytes(bytes);
  } catch (const ParseError&) {
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string("the .safetensors reader threw something other than ParseError: ") + e.what();
  }
  if (std::optional<std::string> violation = check_file_round_trip(file)) return violation;

  json doc;
  Case c;
  try {
    doc = case_document_from_safetensors(file, registry);
    c = case_from_json(doc, registry);
  } catch (const ParseError&) {
    return std::nullopt;
  } catch (const RejectError&) {
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string("reading the file as a case threw neither ParseError nor RejectError: ") + e.what();
  }
  if (std::optional<std::string> violation = check_case_round_trip(registry, doc, c)) return violation;
  if (max_input_extent(c) > kMaxFuzzRunExtent) return std::nullopt;
  return check_reference_invariants(registry, c);
}

}  // namespace bitparity::fuzz
