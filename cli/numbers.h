// Numeric command-line values, parsed strictly: the whole text must be the number, in range. NaN,
// Inf, a sign where none belongs, trailing characters and values past the range are errors naming
// the flag (a ParseError, exit 2), never saturated or wrapped.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace bitparity::cli {

// A finite decimal number in [min, max] ("60", "0.5", "1e3").
double parse_number(const std::string& text, const std::string& flag, double min, double max);

// A decimal integer in [min, max] without a leading '+'.
int64_t parse_integer(const std::string& text, const std::string& flag, int64_t min = 0,
                      int64_t max = std::numeric_limits<int64_t>::max());

// A decimal unsigned 64-bit integer (a seed): 0 .. 18446744073709551615.
uint64_t parse_unsigned(const std::string& text, const std::string& flag);

}  // namespace bitparity::cli
