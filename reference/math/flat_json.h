// The small file headers of reference/math: one flat JSON object of string and integer values,
// written and read without a JSON library (the device-side programs build with no dependencies).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bitparity::ref::math::detail {

std::string json_quote(const std::string& s);

// Parses {"key": "text" | integer, ...} into key -> value text. Throws std::runtime_error whose
// message starts with `what`.
std::map<std::string, std::string> parse_flat_json(std::string_view text, const std::string& what);

std::string json_string(const std::map<std::string, std::string>& kv, const char* key);
long long json_int(const std::map<std::string, std::string>& kv, const char* key);

void put_u32(std::vector<unsigned char>& out, uint32_t v);
uint32_t get_u32(const unsigned char* p);

// Sequential reads that throw std::runtime_error("<what>: truncated ...") past the end.
class ByteReader {
 public:
  ByteReader(std::span<const unsigned char> bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  std::span<const unsigned char> take(size_t n, const char* field);
  uint32_t u32(const char* field) { return get_u32(take(4, field).data()); }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  std::span<const unsigned char> bytes_;
  std::string what_;
  size_t pos_ = 0;
};

std::vector<unsigned char> read_whole_file(const std::string& path);  // throws std::runtime_error
// Writes `path` + ".tmp", then renames it over `path`. Throws std::runtime_error.
void write_file_atomically(const std::string& path, std::span<const unsigned char> bytes);

}  // namespace bitparity::ref::math::detail
