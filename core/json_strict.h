// Strict reading of the JSON documents bitparity accepts from other people and other tools (cases,
// corpus entries, reports). Every document goes through one bounded parse, and every field through
// one set of getters that name the field's path in the ParseError ("counts[2].cases").
//
// The bounds hold before nlohmann builds a tree: a file is read up to kMaxDocumentBytes and no
// further (so `--case /dev/zero` fails at once), and a parser callback stops a document nested
// deeper than kMaxJsonDepth or holding more than kMaxJsonValues values before the tree exists. A
// duplicate key in an object is an error, never "the last one wins". No error path prints a value
// of a document: a message names the field and the value's type only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace bitparity {

// The largest document read, in bytes: a case holds its tensors in hex, so this also bounds a
// parsed case's elements (2 hex digits at least per element).
inline constexpr size_t kMaxDocumentBytes = size_t{256} << 20;
// The deepest nesting of objects and arrays; bitparity's own documents nest 5 levels at most.
inline constexpr int kMaxJsonDepth = 64;
// The most values (objects, arrays, keys, scalars) in one document: bounds the tree's memory for a
// document of many small values, which the byte limit alone would let reach gigabytes.
inline constexpr size_t kMaxJsonValues = size_t{4} << 20;

// The file's bytes, read up to `limit` and no more: a longer file (or a device that never ends) is
// a ParseError saying so; a folder, a missing or unreadable file is a ParseError with the reason
// (strerror). Messages do not repeat the path: callers prefix it ("case.json: ...").
std::string read_document(const std::filesystem::path& path, size_t limit = kMaxDocumentBytes);

// Parses text under the limits above and rejects duplicate keys; invalid JSON, a number beyond a
// double (1e400) and every limit are ParseErrors whose message starts with `what`.
nlohmann::json parse_json_text(std::string_view text, const std::string& what);

// The name of a value's type in messages: "integer", "number", "string", "object", ...
std::string json_type(const nlohmann::json& value);
// "field.key", or "key" at the top level.
std::string path_of(const std::string& field, const std::string& key);

// Getters of `object[key]`, where `field` is the object's path ("" at the top level). Each throws
// ParseError naming path_of(field, key) when `object` is not an object, the key is missing, or
// the value has another type or is out of range.
const nlohmann::json& require(const nlohmann::json& object, const std::string& key, const std::string& field);
const nlohmann::json& require_object(const nlohmann::json& object, const std::string& key, const std::string& field);
const nlohmann::json& require_array(const nlohmann::json& object, const std::string& key, const std::string& field);
std::string get_string(const nlohmann::json& object, const std::string& key, const std::string& field);
bool get_bool(const nlohmann::json& object, const std::string& key, const std::string& field);
// An integer in int64's range (a float such as 1.0 or 1e30 is not an integer).
int64_t get_int(const nlohmann::json& object, const std::string& key, const std::string& field);
// An integer in [0, INT64_MAX]: counts, indices.
int64_t get_count(const nlohmann::json& object, const std::string& key, const std::string& field);
// An integer in [0, UINT64_MAX]: seeds. 18446744073709551616 (one past) is rejected, not rounded.
uint64_t get_uint64(const nlohmann::json& object, const std::string& key, const std::string& field);
// A finite number (integers included).
double get_number(const nlohmann::json& object, const std::string& key, const std::string& field);
std::vector<std::string> get_strings(const nlohmann::json& object, const std::string& key, const std::string& field);
// An object of name -> get_count values.
std::map<std::string, int64_t> get_count_map(const nlohmann::json& object, const std::string& key,
                                             const std::string& field);

// A user's string for a message: its first few dozen bytes (then "..."), quoted as a JSON string
// would be, with every control character escaped (C0, DEL and C1) and a byte that is no UTF-8
// replaced by U+FFFD: what it shows cannot drive the user's terminal.
std::string excerpt(std::string_view text);

// Another program's message (a worker's, a plug-in's, a worker's stderr) for the user's terminal,
// log and corpus entries: control characters (escape sequences included) shown as '?', line ends
// and tabs as spaces (line ends kept where keep_line_ends), a byte that is no UTF-8 as '?', cut at
// a character's end to at most max_bytes and then "...".
std::string printable(std::string_view text, size_t max_bytes = 4096, bool keep_line_ends = false);

// The same checks on a value already in hand; `path` is its full path.
std::string as_string(const nlohmann::json& value, const std::string& path);
int64_t as_int(const nlohmann::json& value, const std::string& path);
int64_t as_count(const nlohmann::json& value, const std::string& path);
uint64_t as_uint64(const nlohmann::json& value, const std::string& path);

}  // namespace bitparity
