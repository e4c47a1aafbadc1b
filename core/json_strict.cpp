#include "core/json_strict.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <limits>
#include <set>

#include "core/error.h"

namespace bitparity {
namespace {

using nlohmann::json;

// How much of a user's string or of a parser message a message repeats.
constexpr size_t kExcerptChars = 64;
constexpr size_t kParserMessageChars = 300;
constexpr size_t kReadChunkBytes = size_t{1} << 20;

// Closes a descriptor on every path out of read_document.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

std::string errno_text(int error) { return std::strerror(error); }

std::string too_large(size_t limit) {
  return "the file is larger than the limit of " + std::to_string(limit) + " bytes";
}

// One open object or array while parsing: its path, and what the next member is called.
struct Frame {
  bool object = false;
  std::string path;
  std::string key;  // the object's current member
  size_t index = 0;  // the array's next element
  std::set<std::string> keys;
};

// The parser callback's state: the open containers, and how many values were seen.
class Limits {
 public:
  explicit Limits(std::string what) : what_(std::move(what)) {}

  bool operator()(int, json::parse_event_t event, json& parsed) {
    using Event = json::parse_event_t;
    if (event != Event::object_end && event != Event::array_end && ++values_ > kMaxJsonValues)
      throw ParseError(current_path(), what_ + " holds more than " + std::to_string(kMaxJsonValues) + " JSON values");
    switch (event) {
      case Event::object_start:
      case Event::array_start: open(event == Event::object_start); break;
      case Event::object_end:
      case Event::array_end: frames_.pop_back(); break;
      case Event::key: add_key(parsed.get_ref<const std::string&>()); break;
      case Event::value: next_child_path(); break;
    }
    return true;
  }

 private:
  std::string current_path() const { return frames_.empty() ? "" : frames_.back().path; }

  // The path of the value that starts now, advancing the parent array's index.
  std::string next_child_path() {
    if (frames_.empty()) return "";
    Frame& parent = frames_.back();
    if (parent.object) return path_of(parent.path, parent.key);
    return parent.path + "[" + std::to_string(parent.index++) + "]";
  }

  void open(bool object) {
    std::string path = next_child_path();
    if (static_cast<int>(frames_.size()) >= kMaxJsonDepth)
      throw ParseError(path, what_ + " nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    frames_.push_back(Frame{object, std::move(path), "", 0, {}});
  }

  void add_key(const std::string& key) {
    Frame& frame = frames_.back();
    const std::string shown = key.size() > kExcerptChars ? key.substr(0, kExcerptChars) + "..." : key;
    if (!frame.keys.insert(key).second)
      throw ParseError(path_of(frame.path, shown), "duplicate key in " + what_ + " (each key may appear once)");
    frame.key = shown;
  }

  std::string what_;
  std::vector<Frame> frames_;
  size_t values_ = 0;
};

std::string cut(std::string text, size_t chars) {
  if (text.size() > chars) text = text.substr(0, chars) + "...";
  return text;
}

}  // namespace

std::string read_document(const std::filesystem::path& path, size_t limit) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw ParseError("", "cannot read the file: " + errno_text(errno));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw ParseError("", "cannot read the file: " + errno_text(errno));
  if (S_ISDIR(info.st_mode)) throw ParseError("", "is a folder, not a file");
  if (S_ISREG(info.st_mode) && static_cast<uint64_t>(info.st_size) > limit) throw ParseError("", too_large(limit));
  // A device or a pipe has no size: read into a doubling buffer (realloc moves large blocks
  // without copying), and stop one byte past the limit.
  std::unique_ptr<char, FreeDeleter> buffer;
  size_t capacity = 0, size = 0;
  for (;;) {
    if (size == capacity) {
      const size_t grown = std::min(std::max(2 * capacity, kReadChunkBytes), limit + 1);
      char* moved = static_cast<char*>(std::realloc(buffer.get(), grown));
      if (!moved) throw ParseError("", "the file does not fit in memory");
      buffer.release();
      buffer.reset(moved);
      capacity = grown;
    }
    const ssize_t got = ::read(fd.get(), buffer.get() + size, capacity - size);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw ParseError("", "cannot read the file: " + errno_text(errno));
    if (got == 0) return std::string(buffer.get(), size);
    size += static_cast<size_t>(got);
    if (size > limit) throw ParseError("", too_large(limit));
  }
}

json parse_json_text(std::string_view text, const std::string& what) {
  if (text.size() > kMaxDocumentBytes) throw ParseError("", what + ": " + too_large(kMaxDocumentBytes));
  // UTF-16 and UTF-32 text (a byte-order mark; Windows editors save JSON so) is named as such,
  // rather than as a NUL byte or a syntax error.
  using namespace std::string_view_literals;  // the marks hold NUL bytes: their lengths are the literals'
  for (const auto& [mark, encoding] : {std::pair<std::string_view, const char*>{"\xff\xfe\0\0"sv, "UTF-32"},
                                       {"\0\0\xfe\xff"sv, "UTF-32"},
                                       {"\xff\xfe"sv, "UTF-16"},
                                       {"\xfe\xff"sv, "UTF-16"}})
    if (text.substr(0, mark.size()) == mark)
      throw ParseError("", what + " is " + encoding + " text (it begins with a byte-order mark); bitparity reads JSON in UTF-8");
  // The parser ends its input at a NUL byte, so "{}\0junk" would read as "{}": a document with one
  // is not JSON (a binary file given where a case was expected).
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw ParseError("", what + " is not valid JSON (a NUL byte at offset " + std::to_string(nul) + ")");
  Limits limits(what);
  try {
    return json::parse(text.begin(), text.end(), std::ref(limits));
  } catch (const json::exception& e) {  // syntax errors, invalid UTF-8, numbers beyond a double (1e400)
    throw ParseError("", what + " is not valid JSON (" + cut(e.what(), kParserMessageChars) + ")");
  }
}

std::string json_type(const json& value) {
  if (value.is_number_integer()) return "integer";
  return value.type_name();
}

std::string path_of(const std::string& field, const std::string& key) { return field.empty() ? key : field + "." + key; }

namespace {

// The length of the UTF-8 sequence at text[i] and its code point; 0 where the bytes there are none
// (a stray continuation byte, a cut or overlong sequence, a surrogate, past U+10FFFF).
size_t utf8_at(std::string_view text, size_t i, uint32_t& code) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) {
    code = lead;
    return 1;
  }
  size_t n = 0;
  uint32_t least = 0;
  if ((lead & 0xe0) == 0xc0) n = 2, code = lead & 0x1f, least = 0x80;
  else if ((lead & 0xf0) == 0xe0) n = 3, code = lead & 0x0f, least = 0x800;
  else if ((lead & 0xf8) == 0xf0) n = 4, code = lead & 0x07, least = 0x10000;
  else return 0;
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3f);
  }
  if (code < least || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return n;
}

// C0 controls, DEL and the C1 controls (U+0080-U+009F: 0x9b is an 8-bit CSI to some terminals).
bool is_control(uint32_t code) { return code < 0x20 || (code >= 0x7f && code <= 0x9f); }

}  // namespace

std::string excerpt(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    if (i >= kExcerptChars) {
      out += "...";
      break;
    }
    uint32_t code = 0;
    const size_t n = utf8_at(text, i, code);
    if (n == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD for a byte that is no UTF-8
      i += 1;
      continue;
    }
    if (code == '"' || code == '\\') {
      out += '\\';
      out += static_cast<char>(code);
    } else if (code == '\n') {
      out += "\\n";
    } else if (code == '\t') {
      out += "\\t";
    } else if (code == '\r') {
      out += "\\r";
    } else if (is_control(code)) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(code));
      out += escaped;
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out + "\"";
}

std::string printable(std::string_view text, size_t max_bytes, bool keep_line_ends) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    uint32_t code = 0;
    size_t n = utf8_at(text, i, code);
    std::string_view piece = text.substr(i, n);
    if (n == 0) {
      piece = "?", n = 1;  // no UTF-8: a message goes into corpus entries, which are UTF-8 JSON
    } else if (code == '\n' && keep_line_ends) {
    } else if (code == '\n' || code == '\r' || code == '\t') {
      piece = " ";
    } else if (is_control(code)) {
      piece = "?";
    }
    if (out.size() + piece.size() > max_bytes) {
      out += "...";
      break;
    }
    out.append(piece);
    i += n;
  }
  return out;
}

const json& require(const json& object, const std::string& key, const std::string& field) {
  if (!object.is_object()) throw ParseError(field, "expected an object, got " + json_type(object));
  auto it = object.find(key);
  if (it == object.end()) throw ParseError(path_of(field, key), "missing");
  return *it;
}

const json& require_object(const json& object, const std::string& key, const std::string& field) {
  const json& v = require(object, key, field);
  if (!v.is_object()) throw ParseError(path_of(field, key), "expected an object, got " + json_type(v));
  return v;
}

const json& require_array(const json& object, const std::string& key, const std::string& field) {
  const json& v = require(object, key, field);
  if (!v.is_array()) throw ParseError(path_of(field, key), "expected an array, got " + json_type(v));
  return v;
}

std::string as_string(const json& value, const std::string& path) {
  if (!value.is_string()) throw ParseError(path, "expected a string, got " + json_type(value));
  return value.get<std::string>();
}

int64_t as_int(const json& value, const std::string& path) {
  if (!value.is_number_integer()) throw ParseError(path, "expected an integer, got " + json_type(value));
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw ParseError(path, "integer out of range (at most " + std::to_string(std::numeric_limits<int64_t>::max()) + ")");
  return value.get<int64_t>();
}

int64_t as_count(const json& value, const std::string& path) {
  const int64_t n = as_int(value, path);
  if (n < 0) throw ParseError(path, "expected a non-negative integer, got " + std::to_string(n));
  return n;
}

uint64_t as_uint64(const json& value, const std::string& path) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return static_cast<uint64_t>(value.get<int64_t>());
  if (value.is_number_integer())
    throw ParseError(path, "expected a non-negative integer, got " + std::to_string(value.get<int64_t>()));
  if (value.is_number_float() && std::trunc(value.get<double>()) == value.get<double>())
    throw ParseError(path, "integer out of range (at most " + std::to_string(std::numeric_limits<uint64_t>::max()) + ")");
  throw ParseError(path, "expected a non-negative integer, got " + json_type(value));
}

std::string get_string(const json& object, const std::string& key, const std::string& field) {
  return as_string(require(object, key, field), path_of(field, key));
}

bool get_bool(const json& object, const std::string& key, const std::string& field) {
  const json& v = require(object, key, field);
  if (!v.is_boolean()) throw ParseError(path_of(field, key), "expected true or false, got " + json_type(v));
  return v.get<bool>();
}

int64_t get_int(const json& object, const std::string& key, const std::string& field) {
  return as_int(require(object, key, field), path_of(field, key));
}

int64_t get_count(const json& object, const std::string& key, const std::string& field) {
  return as_count(require(object, key, field), path_of(field, key));
}

uint64_t get_uint64(const json& object, const std::string& key, const std::string& field) {
  return as_uint64(require(object, key, field), path_of(field, key));
}

double get_number(const json& object, const std::string& key, const std::string& field) {
  const json& v = require(object, key, field);
  if (!v.is_number()) throw ParseError(path_of(field, key), "expected a number, got " + json_type(v));
  const double d = v.get<double>();
  if (!std::isfinite(d)) throw ParseError(path_of(field, key), "expected a finite number");
  return d;
}

std::vector<std::string> get_strings(const json& object, const std::string& key, const std::string& field) {
  const json& v = require_array(object, key, field);
  const std::string path = path_of(field, key);
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(as_string(v[i], path + "[" + std::to_string(i) + "]"));
  return out;
}

std::map<std::string, int64_t> get_count_map(const json& object, const std::string& key, const std::string& field) {
  const json& v = require_object(object, key, field);
  const std::string path = path_of(field, key);
  std::map<std::string, int64_t> counts;
  for (const auto& [name, n] : v.items()) counts[name] = as_count(n, path + "." + name);
  return counts;
}

}  // namespace bitparity
