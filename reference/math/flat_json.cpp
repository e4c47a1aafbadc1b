#include "reference/math/flat_json.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace bitparity::ref::math::detail {

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::map<std::string, std::string> parse_flat_json(std::string_view text, const std::string& what) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  auto fail = [&](const char* problem) {
    throw std::runtime_error(what + ": " + problem + " at byte " + std::to_string(i));
  };
  auto skip_ws = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) ++i;
  };
  auto read_string = [&]() -> std::string {
    if (i >= text.size() || text[i] != '"') fail("expected a string");
    ++i;
    std::string s;
    while (i < text.size() && text[i] != '"') {
      if (text[i] == '\\') {
        if (++i >= text.size()) fail("unterminated escape");
        if (text[i] == 'u') {
          if (i + 4 >= text.size()) fail("short \\u escape");
          s += static_cast<char>(std::strtol(std::string(text.substr(i + 1, 4)).c_str(), nullptr, 16));
          i += 4;
        } else if (text[i] == 'n') {
          s += '\n';
        } else {
          s += text[i];
        }
      } else {
        s += text[i];
      }
      ++i;
    }
    if (i >= text.size()) fail("unterminated string");
    ++i;
    return s;
  };
  skip_ws();
  if (i >= text.size() || text[i] != '{') fail("expected '{'");
  ++i;
  skip_ws();
  if (i < text.size() && text[i] == '}') return out;
  while (true) {
    skip_ws();
    std::string key = read_string();
    skip_ws();
    if (i >= text.size() || text[i] != ':') fail("expected ':'");
    ++i;
    skip_ws();
    if (i < text.size() && text[i] == '"') {
      out[key] = read_string();
    } else {
      size_t start = i;
      while (i < text.size() && (text[i] == '-' || (text[i] >= '0' && text[i] <= '9'))) ++i;
      if (start == i) fail("expected a string or an integer");
      out[key] = std::string(text.substr(start, i - start));
    }
    skip_ws();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    if (i < text.size() && text[i] == '}') return out;
    fail("expected ',' or '}'");
  }
}

std::string json_string(const std::map<std::string, std::string>& kv, const char* key) {
  auto it = kv.find(key);
  return it == kv.end() ? std::string() : it->second;
}

long long json_int(const std::map<std::string, std::string>& kv, const char* key) {
  auto it = kv.find(key);
  return it == kv.end() ? 0 : std::atoll(it->second.c_str());
}

void put_u32(std::vector<unsigned char>& out, uint32_t v) {
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<unsigned char>(v >> (8 * k)));
}

uint32_t get_u32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

std::span<const unsigned char> ByteReader::take(size_t n, const char* field) {
  if (bytes_.size() - pos_ < n) {
    throw std::runtime_error(what_ + " is truncated: " + field + " needs " + std::to_string(n) +
                             " bytes at offset " + std::to_string(pos_) + ", the data has " +
                             std::to_string(bytes_.size()));
  }
  auto s = bytes_.subspan(pos_, n);
  pos_ += n;
  return s;
}

std::vector<unsigned char> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open '" + path + "'");
  in.seekg(0, std::ios::end);
  std::vector<unsigned char> bytes(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  return bytes;
}

void write_file_atomically(const std::string& path, std::span<const unsigned char> bytes) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot create '" + tmp + "'");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot rename '" + tmp + "' to '" + path + "'");
  }
}

}  // namespace bitparity::ref::math::detail
