#include "core/recording.h"

#include <zlib.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

namespace bitparity {

bool is_recording(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  const auto ends_with = [&](const std::string& tail) {
    return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends_with(".jsonl") || ends_with(".jsonl.gz");
}

std::vector<std::filesystem::path> recordings_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && is_recording(e.path())) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<RecordedLine> read_recording(const std::filesystem::path& path) {
  // gzread passes a file that is not gzip through unchanged.
  const std::unique_ptr<gzFile_s, int (*)(gzFile)> in(gzopen(path.c_str(), "rb"), gzclose);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const int n = gzread(in.get(), buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      throw std::runtime_error("cannot read " + path.string() + ": " + gzerror(in.get(), &code));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  // A stream cut short ends like a whole one, with the error left behind (Z_BUF_ERROR).
  int code = Z_OK;
  const char* message = gzerror(in.get(), &code);
  if (code != Z_OK) throw std::runtime_error("cannot read " + path.string() + ": " + message);
  std::vector<RecordedLine> lines;
  int line = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    ++line;
    if (end > at) lines.push_back({line, text.substr(at, end - at)});
    at = end + 1;
  }
  return lines;
}

}  // namespace bitparity
