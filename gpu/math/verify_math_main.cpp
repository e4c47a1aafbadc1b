// bitparity_verify_math: the CPU emulation of CUDA's fp32 math against the GPU, over all 2^32
// inputs by default. Exit status 0 when every must-match count is 0, 1 on a mismatch, 2 on error.
//
//   bitparity_verify_math [--tables FILE] [--begin N] [--end N] [--threads N] [--out FILE]
//
// Without --tables it uses the default tables (BITPARITY_EX2_TABLES, else the committed capture).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "gpu/math/device_info.h"
#include "gpu/math/verify_math.h"
#include "reference/math/ex2_tables.h"

namespace rm = bitparity::ref::math;
namespace gm = bitparity::gpu::math;

int main(int argc, char** argv) {
  std::string tables_path, out_path;
  gm::SweepOptions options;
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (std::strcmp(argv[i], "--tables") == 0) {
      tables_path = next();
    } else if (std::strcmp(argv[i], "--begin") == 0) {
      options.begin = std::strtoull(next(), nullptr, 0);
    } else if (std::strcmp(argv[i], "--end") == 0) {
      options.end = std::strtoull(next(), nullptr, 0);
    } else if (std::strcmp(argv[i], "--threads") == 0) {
      options.threads = static_cast<unsigned>(std::strtoul(next(), nullptr, 0));
    } else if (std::strcmp(argv[i], "--out") == 0) {
      out_path = next();
    } else {
      std::fprintf(stderr, "unknown argument '%s'\nusage: bitparity_verify_math [--tables FILE] [--begin N] "
                           "[--end N] [--threads N] [--out FILE]\n", argv[i]);
      return 2;
    }
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    rm::Ex2Tables loaded;
    if (!tables_path.empty()) loaded = rm::load_ex2_tables_file(tables_path, /*verify_hashes=*/true);
    const rm::Ex2Tables& tables = tables_path.empty() ? rm::default_ex2_tables() : loaded;
    std::printf("tables: %s (%s, driver %s), loaded in %.1f ms\n", tables.meta.arch.c_str(),
                tables.meta.gpu_name.c_str(), tables.meta.driver_version.c_str(),
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!tables_path.empty() && rm::has_embedded_ex2_tables()) {
      const rm::Ex2Tables& committed = rm::default_ex2_tables();
      std::printf("tables vs the committed capture: %s\n",
                  committed.tp == tables.tp && committed.tn == tables.tn ? "identical" : "DIFFERENT");
    }
    rm::Ex2Metadata device;
    std::string error;
    if (!gm::read_device_metadata(&device, &error)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 2;
    }
    rm::require_same_arch(tables, device.arch);
    std::printf("device: %s (%s), driver %s, CUDA driver API %d, runtime %d\n", device.gpu_name.c_str(),
                device.arch.c_str(), device.driver_version.c_str(), device.cuda_driver_api_version,
                device.cuda_runtime_version);
    auto t1 = std::chrono::steady_clock::now();
    options.progress = [&](uint64_t done, uint64_t total) {
      if (done == total || (done & ((1ull << 30) - 1)) == 0) {
        std::fprintf(stderr, "  %llu / %llu patterns, %.0f s\n", static_cast<unsigned long long>(done),
                     static_cast<unsigned long long>(total),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
      }
    };
    std::vector<gm::SweepCount> counts;
    if (!gm::sweep_math(tables, options, &counts, &error)) {
      std::fprintf(stderr, "sweep failed: %s\n", error.c_str());
      return 2;
    }
    const std::string table = gm::format_sweep(counts);
    std::printf("sweep [0x%llx, 0x%llx) in %.1f s\n%s", static_cast<unsigned long long>(options.begin),
                static_cast<unsigned long long>(options.end),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), table.c_str());
    if (!out_path.empty()) std::ofstream(out_path) << table;
    for (const auto& c : counts) {
      if (c.must_match && c.mismatches != 0) return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
