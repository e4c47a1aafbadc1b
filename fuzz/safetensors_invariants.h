// What must hold for any bytes handed to bitparity as a .safetensors file: what the safetensors
// fuzz target and the replay of its seeds and of the crafted hostile files check.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/registry.h"

namespace bitparity::fuzz {

// The whole path a user's .safetensors file takes: the reader throws ParseError or accepts; an
// accepted file keeps within check_shape_limits, and written again reads back equal. As a case
// (case_document_from_safetensors, then case_from_json) it may be refused with ParseError or
// RejectError only; an accepted case exported and imported again is the same case, and (up to
// kMaxFuzzRunExtent) keeps check_reference_invariants. Returns the first violation.
std::optional<std::string> check_safetensors_file(const Registry& registry, std::string_view bytes);

}  // namespace bitparity::fuzz
