// Properties that must hold for every input, whatever its values: what the fuzz targets check.
// Each returns the first violation as a message, or nothing.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/registry.h"

namespace bitparity::fuzz {

// Every ref contract of the op: it either rejects with RejectError (the same class when run
// again) or returns exactly the op's outputs for the direction (required ones present, no
// others); a second run gives identical bits. Any other exception is a violation.
std::optional<std::string> check_reference_invariants(const Registry& registry, const Case& c);

// case_to_json -> case_from_json -> case_to_json gives the same text.
std::optional<std::string> check_json_round_trip(const Registry& registry, const Case& c);

// case_from_text on arbitrary text throws nothing but ParseError or RejectError.
std::optional<std::string> check_parser(const Registry& registry, std::string_view text);

}  // namespace bitparity::fuzz
