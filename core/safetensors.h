// The .safetensors format, in which PyTorch and Paddle users already store tensors (bf16 included):
//
//   8 bytes   N, the header's length: an unsigned 64-bit integer, little-endian
//   N bytes   the header: a UTF-8 JSON object that begins with '{' and may be padded at its end with
//             spaces (0x20). Each tensor's name maps to {"dtype", "shape", "data_offsets": [BEGIN,
//             END]}; the optional key "__metadata__" maps strings to strings.
//   the rest  the byte buffer: each tensor's elements, row-major and little-endian, at [BEGIN, END)
//             counted from the buffer's first byte
//
// The reader is strict, as the format's notes ask: every name once, the tensors' ranges tile the
// buffer exactly (no overlap, no hole, no byte after the last tensor: a file is never two files
// at once), each range as long as its dtype and shape say. Beyond the format it keeps bitparity's
// own limits (kMaxTensorRank, kMaxTensorElements, kMaxDocumentBytes) and its dtypes: a BOOL byte is
// 0 or 1. Every problem is a ParseError naming the tensor and what is wrong. Element bits travel
// byte for byte, so NaN payloads, -0 and subnormals survive reading and writing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/case.h"
#include "core/json_strict.h"

namespace bitparity {

// The largest header read: the limit of the format's reference reader, so a file it writes is
// never refused for its header alone.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// The largest file read, header and buffer together: the limit of every document bitparity reads.
inline constexpr size_t kMaxSafetensorsBytes = kMaxDocumentBytes;
// The header key that holds the string-to-string metadata, never a tensor.
inline constexpr std::string_view kSafetensorsMetadataKey = "__metadata__";

struct Safetensors {
  TensorMap tensors;
  std::map<std::string, std::string> metadata;
  bool operator==(const Safetensors&) const = default;
};

// The format's dtype names of bitparity's dtypes: BF16, F16, F32, F64, F8_E4M3, F8_E5M2, BOOL, I32,
// I64. parse_safetensors_dtype is empty for a name without a bitparity counterpart (U8, C64, ...).
std::string_view safetensors_dtype_name(DType dtype);
std::optional<DType> parse_safetensors_dtype(std::string_view name);

// Parses a whole file held in memory. Messages do not name a file: callers prefix it.
Safetensors safetensors_from_bytes(std::string_view bytes);
// The file's bytes: tensors in descending order of element size, then by name, so that every
// tensor starts at a multiple of its element size; the header padded with spaces to a multiple of
// 8 bytes; "__metadata__" first and only when there is metadata. A tensor named "__metadata__" is a
// std::invalid_argument.
std::string safetensors_to_bytes(const Safetensors& file);

// The file at `path`, read within kMaxSafetensorsBytes; a ParseError's message starts with the path.
Safetensors read_safetensors(const std::filesystem::path& path);

// Whether `path` is to be read as .safetensors rather than JSON: its name ends in ".safetensors",
// or one of its first 8 bytes is 0 (JSON text holds no NUL byte; a header length below 2^56 does)
// and the 9th is the header's '{' (UTF-16 text, which holds NUL bytes too, goes to the JSON reader,
// which names its encoding).
// False for a file that cannot be read: the JSON reader reports why.
bool looks_like_safetensors(const std::filesystem::path& path);

}  // namespace bitparity
