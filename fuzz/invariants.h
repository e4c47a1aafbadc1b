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

// The largest input extent (the product of its nonzero dims) that check_user_file runs. The
// limits accept a zero-element tensor of 2^26 rows, correctly; running one is too slow for a fuzzer
// to repeat, and the limit itself is what the hostile tests check.
inline constexpr int64_t kMaxFuzzRunExtent = int64_t{1} << 16;

// The whole path a user's file takes: bytes -> the bounded parse (case_from_text) -> validate ->
// run on every ref contract. The parse may throw ParseError or RejectError only; a case it accepts
// keeps within check_shape_limits, and (up to kMaxFuzzRunExtent) keeps check_reference_invariants.
std::optional<std::string> check_user_file(const Registry& registry, std::string_view text);

// Input extents of a case: the product of each input's nonzero dims, the largest one.
int64_t max_input_extent(const Case& c);

}  // namespace bitparity::fuzz
