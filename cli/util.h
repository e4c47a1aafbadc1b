// Small helpers the commands share: files, provenance, and the description of this machine.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/registry.h"

namespace bitparity::cli {

// A case file (read within the document limits), bitparity-case/1 JSON or .safetensors (told by
// looks_like_safetensors), validated against the registry; ParseError messages start with the path
// and give the reason: "case.json: is a folder", "Permission denied".
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
