// libFuzzer target for `bitparity merge`, whose inputs come from other machines: bytes -> up to
// three files split at "\n#file\n" lines (a corpus entry and a report in shard folder s0, a report
// in s1), then the merge command on them. It may succeed (exit 0) or refuse (exit 2); it may not
// crash, hang, exit otherwise, or write anything but --out's entries and the --report file.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/app.h"

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSeparator = "\n#file\n";
constexpr size_t kMaxFiles = 3;

// tmpfs where there is one: merge syncs every file it writes.
fs::path scratch_root() {
  const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  return base / ("bitparity_merge_fuzzer_" + std::to_string(::getpid()));
}

std::vector<std::string_view> split_files(std::string_view text) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < kMaxFiles) {
    const size_t at = text.find(kSeparator);
    if (at == std::string_view::npos) break;
    parts.push_back(text.substr(0, at));
    text.remove_prefix(at + kSeparator.size());
  }
  parts.push_back(text);
  return parts;
}

void write_file(const fs::path& path, std::string_view text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(text.data(), static_cast<std::streamsize>(text.size()));
}

[[noreturn]] void violation(const std::string& message) {
  std::fprintf(stderr, "merge_fuzzer: %s\n", message.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path root = scratch_root(), work = root / "work";
  fs::remove_all(root);
  const std::vector<std::string_view> files =
      split_files(std::string_view(reinterpret_cast<const char*>(data), size));
  write_file(work / "s0" / "corpus" / "toy" / "entry.json", files[0]);
  fs::create_directories(work / "s1");
  if (files.size() > 1) write_file(work / "s0" / "report.json", files[1]);
  if (files.size() > 2) write_file(work / "s1" / "report.json", files[2]);

  const std::string out = (work / "out").string(), report = (work / "merged.json").string();
  const std::string s0 = (work / "s0").string(), s1 = (work / "s1").string();
  const char* argv[] = {"bitparity", "merge", "--out", out.c_str(), "--report", report.c_str(), s0.c_str(), s1.c_str()};
  const int code = bitparity::cli::run_command_line(bitparity::harness_registry(), 8, argv);
  if (code != 0 && code != 2) violation("exit code " + std::to_string(code) + " (expected 0 or 2)");

  for (const fs::directory_entry& e : fs::recursive_directory_iterator(root)) {
    if (e.path() == work) continue;
    const fs::path relative = e.path().lexically_relative(work);
    const std::string first = relative.empty() ? "" : relative.begin()->string();
    if (first != "s0" && first != "s1" && first != "out" && first != "merged.json")
      violation("wrote " + e.path().string() + ", outside --out");
  }
  fs::remove_all(root);
  return 0;
}
