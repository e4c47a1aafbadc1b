#include "cli/numbers.h"

#include <charconv>
#include <cmath>
#include <sstream>
#include <system_error>

#include "core/error.h"

namespace bitparity::cli {
namespace {

// The shortest text that reads back as `value` ("60", "0.5", "1e+09").
std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// from_chars over the whole text; `what` describes the expected value for the message.
template <typename T>
T read_whole(const std::string& text, const std::string& flag, const std::string& what) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error == std::errc::result_out_of_range)
    throw ParseError(flag, "'" + text + "' is out of range: expected " + what);
  if (text.empty() || error != std::errc() || ptr != end) throw ParseError(flag, "expected " + what + "; got '" + text + "'");
  return value;
}

}  // namespace

double parse_number(const std::string& text, const std::string& flag, double min, double max) {
  const std::string what = "a number from " + number_text(min) + " to " + number_text(max);
  const double value = read_whole<double>(text, flag, what);
  if (!std::isfinite(value) || value < min || value > max) throw ParseError(flag, "expected " + what + "; got '" + text + "'");
  return value;
}

int64_t parse_integer(const std::string& text, const std::string& flag, int64_t min, int64_t max) {
  const std::string what = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  const int64_t value = read_whole<int64_t>(text, flag, what);
  if (value < min || value > max) throw ParseError(flag, "'" + text + "' is out of range: expected " + what);
  return value;
}

uint64_t parse_unsigned(const std::string& text, const std::string& flag) {
  // from_chars for unsigned types accepts no sign, so "-3" is an error rather than a wrapped seed.
  return read_whole<uint64_t>(text, flag,
                              "an integer from 0 to " + std::to_string(std::numeric_limits<uint64_t>::max()));
}

}  // namespace bitparity::cli
