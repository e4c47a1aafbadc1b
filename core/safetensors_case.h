// Cases, results and corpus entries as .safetensors files (safetensors.h), so that tensors dumped
// from PyTorch or Paddle replay here and a minimized case loads back in Python.
//
// Tensors: a case's inputs under their own names; a result's outputs as "outputs.NAME".
// Metadata ("__metadata__", strings only, as the format wants):
//   format      "bitparity-case/1" in every file bitparity writes. On import another tool's tag
//               (PyTorch's "pt") is ignored; another bitparity-case version is an error.
//   op          the op's name                                           (or --op)
//   direction   "fwd" or "bwd"                                          (or --direction)
//   attrs       the attributes as a JSON object in text: {"clamp": 7.0}  (or --attr NAME=VALUE)
//   finding, provenance, note   a corpus entry's fields, as JSON text
//   pins        a corpus entry's pin, as it is ("divergence", "fixed", "open")
// Other metadata keys are left alone. An imported file becomes the bitparity-case/1 document it
// stands for, which case_from_json validates against the registry like any JSON case: its errors
// read the same.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/registry.h"
#include "core/safetensors.h"

namespace bitparity {

inline constexpr std::string_view kOutputTensorPrefix = "outputs.";

// What the command line says about a file's case, over its metadata: the op, the direction, and
// attributes as typed ("clamp=7.0", "clamp=nan"), each replacing the metadata's value of its name.
struct CaseOverrides {
  std::optional<std::string> op, direction;
  std::vector<std::pair<std::string, std::string>> attrs;
};

// The document `file` stands for, with `overrides` applied, not yet validated. An attribute's value
// text is read as the registry types it: a string attribute takes the text as it is, others read it
// as a JSON value ("7.0", "true"), or as the string it is when it is not one ("nan", "inf"). A
// ParseError names the metadata key ("__metadata__.attrs") or the missing op or direction.
nlohmann::json case_document_from_safetensors(const Safetensors& file, const Registry& registry,
                                              const CaseOverrides& overrides = {});

// A document (a case, a result with "outputs", a corpus entry) as a .safetensors file, after
// case_from_json accepted it: the case's normal form (case_to_json), so JSON -> .safetensors -> JSON
// gives the case back bit for bit.
Safetensors safetensors_from_case_document(const nlohmann::json& doc, const Registry& registry);
Safetensors safetensors_from_case(const Case& c);

// The bitparity-case/1 document in a file of either form: .safetensors (looks_like_safetensors) or
// JSON text, read within the document limits. A ParseError's message starts with the path.
nlohmann::json read_case_document(const std::filesystem::path& path, const Registry& registry);
// That document, validated by case_from_json; the message starts with the path.
Case case_from_any_file(const std::filesystem::path& path, const Registry& registry);

}  // namespace bitparity
