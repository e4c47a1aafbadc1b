#include "core/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "core/error.h"

namespace bitparity {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kLengthBytes = 8;  // the header length that opens every file
constexpr size_t kHeaderAlignment = 8;  // the writer pads the header so the buffer starts aligned
constexpr char kPadding = ' ';  // the only padding the format allows after the header's JSON
constexpr size_t kShownNameChars = 64;  // how much of a tensor's name a message repeats

// Each bitparity dtype with its name in the format, in the format's own order of increasing
// alignment: the writer places tensors in descending order, so each starts aligned.
struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr std::array<DTypeName, 9> kDTypeNames = {{
    {DType::kBool, "BOOL"},
    {DType::kFP8E5M2, "F8_E5M2"},
    {DType::kFP8E4M3, "F8_E4M3"},
    {DType::kFP16, "F16"},
    {DType::kBF16, "BF16"},
    {DType::kI32, "I32"},
    {DType::kFP32, "F32"},
    {DType::kFP64, "F64"},
    {DType::kI64, "I64"},
}};
constexpr std::string_view kKnownDTypes = "BF16, F16, F32, F64, F8_E4M3, F8_E5M2, BOOL, I32, I64";

size_t alignment_rank(DType dtype) {
  for (size_t i = 0; i < kDTypeNames.size(); ++i)
    if (kDTypeNames[i].dtype == dtype) return i;
  throw std::invalid_argument("no .safetensors name for dtype " + std::string(dtype_name(dtype)));
}

// A tensor's name as the path of its fields in messages, cut as the JSON reader cuts keys.
std::string shown(const std::string& name) {
  if (name.empty()) return "\"\"";
  return name.size() > kShownNameChars ? name.substr(0, kShownNameChars) + "..." : name;
}
std::string field_of(const std::string& name, const std::string& key) { return shown(name) + "." + key; }

std::string range_text(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// One tensor as its header entry describes it, before its bytes are taken.
struct Entry {
  std::string name;
  DType dtype = DType::kFP32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

DType parse_entry_dtype(const json& entry, const std::string& name) {
  const std::string text = get_string(entry, "dtype", shown(name));
  if (const std::optional<DType> dtype = parse_safetensors_dtype(text)) return *dtype;
  throw ParseError(field_of(name, "dtype"), "unknown or unsupported dtype " + excerpt(text) + " (bitparity reads " +
                                                std::string(kKnownDTypes) + ")");
}

Shape parse_entry_shape(const json& entry, const std::string& name) {
  const std::string field = field_of(name, "shape");
  const json& dims = require_array(entry, "shape", shown(name));
  if (static_cast<int64_t>(dims.size()) > kMaxTensorRank)
    throw ParseError(field, "a tensor has at most " + std::to_string(kMaxTensorRank) + " dims; got " +
                                std::to_string(dims.size()));
  Shape shape;
  for (size_t i = 0; i < dims.size(); ++i) shape.push_back(as_count(dims[i], field + "[" + std::to_string(i) + "]"));
  try {
    check_shape_limits(shape);  // before anything is sized by the dims
  } catch (const std::invalid_argument& e) {
    throw ParseError(field, e.what());
  }
  return shape;
}

Entry parse_entry(const std::string& name, const json& value, uint64_t buffer_bytes) {
  if (!value.is_object())
    throw ParseError(shown(name), "expected a tensor entry {dtype, shape, data_offsets}, got " + json_type(value));
  for (const auto& [key, unused] : value.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      throw ParseError(field_of(name, key), "unexpected field in a tensor entry (expected dtype, shape, data_offsets)");
  Entry e{name, parse_entry_dtype(value, name), parse_entry_shape(value, name)};

  const std::string field = field_of(name, "data_offsets");
  const json& offsets = require_array(value, "data_offsets", shown(name));
  if (offsets.size() != 2)
    throw ParseError(field, "expected [BEGIN, END], two byte offsets; got " + std::to_string(offsets.size()) + " values");
  e.begin = static_cast<uint64_t>(as_count(offsets[0], field + "[0]"));
  e.end = static_cast<uint64_t>(as_count(offsets[1], field + "[1]"));
  const std::string range = range_text(e.begin, e.end);
  if (e.end < e.begin) throw ParseError(field, range + " ends before it begins");
  if (e.end > buffer_bytes)
    throw ParseError(field, range + " reaches past the end of the byte buffer (" + std::to_string(buffer_bytes) +
                                " bytes)");
  // Within the shape limits: at most 2^26 elements of at most 8 bytes, no overflow.
  const uint64_t needed = static_cast<uint64_t>(shape_numel(e.shape)) * static_cast<uint64_t>(dtype_size(e.dtype));
  if (e.end - e.begin != needed)
    throw ParseError(field, range + " holds " + std::to_string(e.end - e.begin) + " bytes; " +
                                std::string(safetensors_dtype_name(e.dtype)) + " of shape " + shape_string(e.shape) +
                                " takes " + std::to_string(needed));
  return e;
}

std::map<std::string, std::string> parse_metadata(const json& value) {
  const std::string field(kSafetensorsMetadataKey);
  if (!value.is_object()) throw ParseError(field, "expected an object of strings, got " + json_type(value));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, text] : value.items()) metadata[key] = as_string(text, field + "." + shown(key));
  return metadata;
}

// The format's rule that keeps a file from being two files at once: sorted by offset, the ranges
// tile the buffer from its first byte to its last, without overlap or hole.
void check_tiling(std::vector<Entry>& entries, uint64_t buffer_bytes) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t at = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < at)
      throw ParseError(field_of(e.name, "data_offsets"), range_text(e.begin, e.end) + " overlaps tensor " +
                                                             excerpt(previous->name) + " at " +
                                                             range_text(previous->begin, previous->end));
    if (e.begin > at)
      throw ParseError("", "bytes [" + std::to_string(at) + ", " + std::to_string(e.begin) +
                               ") of the byte buffer belong to no tensor (the format allows no holes)");
    at = e.end;
    previous = &e;
  }
  if (at != buffer_bytes)
    throw ParseError("", "the last " + std::to_string(buffer_bytes - at) +
                             " bytes of the file belong to no tensor (the format allows nothing after the last "
                             "tensor's data)");
}

Tensor take_tensor(const Entry& e, std::string_view buffer) {
  Tensor tensor(e.dtype, e.shape);
  if (tensor.nbytes() > 0) std::memcpy(tensor.data(), buffer.data() + e.begin, tensor.nbytes());  // an empty one has no data()
  if (e.dtype == DType::kBool)
    for (int64_t i = 0; i < tensor.numel(); ++i)
      if (tensor.bits(i) > 1)
        throw ParseError(shown(e.name), "BOOL element " + std::to_string(i) + " is " +
                                            std::to_string(tensor.bits(i)) + "; a bool is 0 or 1");
  return tensor;
}

// The header's JSON object. The JSON parser also skips newlines and tabs after the object, which
// the format does not allow as padding: a valid object without its spaces ends in '}'. And it stops
// at a NUL byte as at the end of its input, so "{}\0junk" would pass for "{}": JSON text holds no
// NUL, and a header that does is refused first.
json parse_header(std::string_view header) {
  if (header.empty() || header.front() != '{') throw ParseError("", "the header does not begin with '{'");
  if (const size_t nul = header.find('\0'); nul != std::string_view::npos)
    throw ParseError("", "the header holds a NUL byte at offset " + std::to_string(nul) + " (JSON text has none)");
  json parsed = parse_json_text(header, "the header");
  if (header[header.find_last_not_of(kPadding)] != '}')
    throw ParseError("", "the header is padded with bytes other than spaces (0x20) after its JSON object");
  return parsed;
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) { return kDTypeNames[alignment_rank(dtype)].name; }

std::optional<DType> parse_safetensors_dtype(std::string_view name) {
  for (const DTypeName& d : kDTypeNames)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

Safetensors safetensors_from_bytes(std::string_view bytes) {
  if (bytes.size() < kLengthBytes)
    throw ParseError("", "the file has " + std::to_string(bytes.size()) +
                             " bytes; a .safetensors file begins with an 8-byte header length");
  uint64_t length = 0;
  for (size_t i = 0; i < kLengthBytes; ++i) length |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  if (length > kMaxSafetensorsHeaderBytes)
    throw ParseError("", "the header length " + std::to_string(length) + " is past the limit of " +
                             std::to_string(kMaxSafetensorsHeaderBytes) + " bytes" +
                             (bytes.front() == '{' ? " (the file begins like JSON: a case document, not .safetensors?)" : ""));
  const uint64_t after_length = bytes.size() - kLengthBytes;
  if (length > after_length)
    throw ParseError("", "the header length " + std::to_string(length) + " reaches past the end of the file (" +
                             std::to_string(after_length) + " bytes follow the length)");
  const std::string_view header = bytes.substr(kLengthBytes, length);
  const std::string_view buffer = bytes.substr(kLengthBytes + length);
  const json doc = parse_header(header);

  Safetensors file;
  std::vector<Entry> entries;
  for (const auto& [name, value] : doc.items()) {
    if (name == kSafetensorsMetadataKey)
      file.metadata = parse_metadata(value);
    else
      entries.push_back(parse_entry(name, value, buffer.size()));
  }
  check_tiling(entries, buffer.size());
  for (const Entry& e : entries) file.tensors.emplace(e.name, take_tensor(e, buffer));
  return file;
}

std::string safetensors_to_bytes(const Safetensors& file) {
  std::vector<std::pair<const std::string*, const Tensor*>> order;
  for (const auto& [name, tensor] : file.tensors) {
    if (name == kSafetensorsMetadataKey)
      throw std::invalid_argument("a tensor may not be named " + std::string(kSafetensorsMetadataKey));
    order.emplace_back(&name, &tensor);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return alignment_rank(a.second->dtype()) > alignment_rank(b.second->dtype());
  });  // the map gave name order; stable keeps it within a dtype size

  // Keys in the order the format's own writer uses: metadata, then tensors in buffer order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) header[std::string(kSafetensorsMetadataKey)] = file.metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : order) {
    const uint64_t end = offset + tensor->nbytes();
    header[*name] = nlohmann::ordered_json{{"dtype", safetensors_dtype_name(tensor->dtype())},
                                           {"shape", tensor->shape()},
                                           {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((kHeaderAlignment - text.size() % kHeaderAlignment) % kHeaderAlignment, kPadding);

  std::string bytes;
  bytes.reserve(kLengthBytes + text.size() + offset);
  const uint64_t length = text.size();
  for (size_t i = 0; i < kLengthBytes; ++i) bytes.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  bytes += text;
  for (const auto& [name, tensor] : order) bytes.append(reinterpret_cast<const char*>(tensor->data()), tensor->nbytes());
  return bytes;
}

Safetensors read_safetensors(const fs::path& path) {
  try {
    return safetensors_from_bytes(read_document(path, kMaxSafetensorsBytes));
  } catch (const ParseError& e) {
    throw ParseError("", path.string() + ": " + e.what());
  }
}

bool looks_like_safetensors(const fs::path& path) {
  if (path.extension() == ".safetensors") return true;
  std::error_code error;
  if (!fs::is_regular_file(path, error)) return false;  // a pipe's first bytes would be lost to the JSON reader
  std::ifstream in(path, std::ios::binary);
  // The 8-byte header length (little-endian: NUL bytes for any header below 2^56 bytes), then the
  // header's '{'. UTF-16 text has NUL bytes too: its byte-order mark sends it to the JSON reader,
  // which names it (without a mark, '{' rarely falls on byte 8).
  std::array<char, kLengthBytes + 1> first{};
  if (!in.read(first.data(), first.size())) return false;
  const std::string_view head(first.data(), first.size());
  if (head.substr(0, 2) == "\xff\xfe" || head.substr(0, 2) == "\xfe\xff") return false;
  return std::find(first.begin(), first.end() - 1, '\0') != first.end() - 1 && first.back() == '{';
}

}  // namespace bitparity
