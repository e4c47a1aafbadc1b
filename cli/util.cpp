#include "cli/util.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/case_json.h"
#include "core/error.h"
#include "core/safetensors_case.h"
#include "corpus/entry.h"

#ifndef BITPARITY_SOURCE_DIR
#define BITPARITY_SOURCE_DIR "."
#endif
#ifndef BITPARITY_VERSION
#define BITPARITY_VERSION "unknown"
#endif

namespace bitparity::cli {
namespace {

constexpr size_t kCommitHexDigits = 40;

// The first line printed by `command`, without its newline; empty when it fails.
std::string first_line_of(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return "";
  std::array<char, 256> buffer{};
  std::string line;
  if (std::fgets(buffer.data(), static_cast<int>(buffer.size()), pipe)) line = buffer.data();
  const int status = ::pclose(pipe);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return status == 0 ? line : "";
}

}  // namespace

Case load_case(const std::filesystem::path& path, const Registry& registry) { return case_from_any_file(path, registry); }

void write_output(const std::filesystem::path& path, const std::string& text) {
  if (path.empty()) {
    std::cout << text << std::flush;
    return;
  }
  corpus::write_file_atomically(path, text);
}

std::string current_commit() {
  if (const char* env = std::getenv("BITPARITY_COMMIT"); env && *env) return env;
  const std::string commit =
      first_line_of("git -C '" + std::string(BITPARITY_SOURCE_DIR) + "' rev-parse HEAD 2>/dev/null");
  return commit.size() == kCommitHexDigits ? commit : "unknown";
}

std::string describe_device(const Registry& registry) {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::string backends;
  for (const BackendKind& b : registry.backends()) {
    backends += (backends.empty() ? "" : ", ") + b.name;
    if (b.unavailable_reason)
      if (std::optional<std::string> why = b.unavailable_reason()) backends += " (unavailable: " + *why + ")";
  }
  return "host " + std::string(host.data()) + "; backends: " + backends;
}

std::string tool_version() { return "bitparity " BITPARITY_VERSION; }

}  // namespace bitparity::cli
