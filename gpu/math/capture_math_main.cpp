// bitparity_capture_math: reads the GPU's ex2 tables and a sample of its math results.
//
//   bitparity_capture_math --tables ex2_sm90.bin [--sample device_sample_sm90.bin]
//
// Beside the table file it writes its header as a JSON sidecar (ex2_sm90.json) for people to read.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "gpu/math/capture_math.h"
#include "reference/math/ex2_tables.h"

namespace {

int usage() {
  std::fprintf(stderr, "usage: bitparity_capture_math [--tables FILE] [--sample FILE]\n");
  return 2;
}

std::string sidecar_path(const std::string& path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_ext ? path.substr(0, dot) : path) + ".json";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string tables_path, sample_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tables") == 0 && i + 1 < argc) {
      tables_path = argv[++i];
    } else if (std::strcmp(argv[i], "--sample") == 0 && i + 1 < argc) {
      sample_path = argv[++i];
    } else {
      std::fprintf(stderr, "unknown argument '%s'\n", argv[i]);
      return usage();
    }
  }
  if (tables_path.empty() && sample_path.empty()) return usage();
  std::string error;
  if (!tables_path.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    if (bitparity::gpu::math::capture_math(tables_path, &error) != 0) {
      std::fprintf(stderr, "capture of the ex2 tables failed: %s\n", error.c_str());
      return 1;
    }
    auto tables = bitparity::ref::math::load_ex2_tables_file(tables_path, /*verify_hashes=*/true);
    std::ofstream(sidecar_path(tables_path)) << bitparity::ref::math::ex2_metadata_json(tables.meta);
    std::printf("ex2 tables of %s (%s) written to %s in %.2f s; TP %s, TN %s\n", tables.meta.gpu_name.c_str(),
                tables.meta.arch.c_str(), tables_path.c_str(), seconds_since(t0), tables.meta.tp_hash.c_str(),
                tables.meta.tn_hash.c_str());
  }
  if (!sample_path.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    if (bitparity::gpu::math::capture_math_sample(sample_path, &error) != 0) {
      std::fprintf(stderr, "capture of the device sample failed: %s\n", error.c_str());
      return 1;
    }
    std::printf("device sample written to %s in %.2f s\n", sample_path.c_str(), seconds_since(t0));
  }
  return 0;
}
