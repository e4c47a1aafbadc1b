// Recorded peer outputs (peers/<peer>/*.jsonl.gz, one bitparity-case/1 document per line): which
// files are recordings, and their lines. Gzip keeps the recordings small (hex of tensors compresses
// four- to fivefold); a plain .jsonl is read too, so a fresh recording can be replayed before it is
// compressed.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace bitparity {

// Whether `path` names a recording: *.jsonl or *.jsonl.gz.
bool is_recording(const std::filesystem::path& path);

// The recordings in `dir`, sorted by name.
std::vector<std::filesystem::path> recordings_in(const std::filesystem::path& dir);

struct RecordedLine {
  int line = 0;  // 1-based
  std::string text;
};

// The non-empty lines of a recording, decompressed where it is gzip. std::runtime_error naming the
// file when it cannot be read or its compressed stream is broken.
std::vector<RecordedLine> read_recording(const std::filesystem::path& path);

}  // namespace bitparity
