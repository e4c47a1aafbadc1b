// `plugin:` backends: a shared library of compiled kernels, opened with dlopen, whose one entry point
// (bitparity/plugin.h, `bitparity_plugin_v1`) names a backend kind and the (op, contract) pairs it
// computes. Each pair becomes an implementation KIND:CONTRACT of the registry: bitparity validates
// the case, hands the plug-in its inputs (host or device copies), lets it allocate and write its
// outputs, and reads them back, so a plug-in is compared like any other backend.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/registry.h"

namespace bitparity::peers {

// What `list` and reports say of a loaded plug-in.
struct PluginInfo {
  std::string kind;           // the plug-in's name: the backend kind
  std::filesystem::path path; // the library, as opened (absolute)
  bool device_memory = false; // BITPARITY_MEMORY_CUDA
  std::vector<std::pair<std::string, std::string>> impls;  // (op, contract)
};

// Opens the library at `path`, calls its entry point with this host's ABI version and adds its
// backend kind and implementations to `registry`. Throws std::runtime_error with a message naming
// the file for a file that is missing or not a shared library, a missing entry point, an entry that
// returns NULL, an ABI version this host does not speak, a kind name that is malformed or taken, an
// op or contract the registry lacks, a pair listed twice, a memory kind this build cannot serve
// (device memory without CUDA). A library is never closed: its code may run until the process ends.
PluginInfo add_plugin_backend(Registry& registry, const std::filesystem::path& path);

}  // namespace bitparity::peers
