// Scratch files for tests: an empty folder of this process's own, and a file's whole text.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace bitparity::testing {

// <tmp>/bitparity_<suite>_<name>_<pid>, emptied and created.
inline std::filesystem::path fresh_dir(const std::string& suite, const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("bitparity_" + suite + "_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace bitparity::testing
