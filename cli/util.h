// Small helpers the commands share: files, provenance, and the description of this machine.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/registry.h"

namespace bitparity::cli {

// The whole file; std::runtime_error naming it when it cannot be read.
std::string read_file(const std::filesystem::path& path);
// A case file, validated against the registry; ParseError messages start with the path.
Case load_case(const std::filesystem::path& path, const Registry& registry);
// Writes `text` to `path` atomically, or to stdout when `path` is empty.
void write_output(const std::filesystem::path& path, const std::string& text);

// The commit of the checkout: $BITPARITY_COMMIT, else `git rev-parse HEAD` in the source tree,
// else "unknown".
std::string current_commit();
// "host gpu-node-3; backends: ref, cuda (unavailable: no CUDA device)"
std::string describe_device(const Registry& registry);
std::string tool_version();

}  // namespace bitparity::cli
