// compute-sanitizer's racecheck output as CUDA 13 prints it with host backtraces (the default), made
// up for the tests of its parsing (peers/exec/worker_process.h) and for the fault worker that plays
// a sanitized worker: one report, the tool's banner, its summary line.
#pragma once

#include <string>

namespace bitparity::testing {

inline constexpr const char* kSanitizerBanner = "========= COMPUTE-SANITIZER\n";

// A WAR hazard inside `kernel`, launched from host frame `launcher` (the first past the driver).
inline std::string racecheck_report(const std::string& kernel, const std::string& launcher) {
  return "========= Error: Potential WAR hazard detected at __shared__ 0x1034488 in block (1,63,0) :\n"
         "=========     Read Thread (63,0,0) at " + kernel + "+0xaf0\n"
         "=========     Write Thread (256,0,0) at " + kernel + "+0x29b0\n"
         "=========     Current Value : 127, Incoming Value : 127\n"
         "=========     Saved host backtrace up to driver entry point at kernel launch time\n"
         "=========         Host Frame: cuLaunchKernelEx [0x39fc2f] in libcuda.so.1\n"
         "=========         Host Frame: " + launcher + "\n"
         "=========         Host Frame: main [0x88a4f] in bitparity\n"
         "=========\n";
}

// racecheck's analysis report of `kernel` (--racecheck-report all prints one after the hazard reports it
// sums up), as CUDA 13's compute-sanitizer printed it for a cuBLAS kernel on an H100: no host backtrace.
inline std::string racecheck_analysis(const std::string& kernel) {
  return "========= Error: Race reported between Read access at " + kernel + "+0xaf0\n"
         "=========     and Write access at " + kernel + "+0x29b0 [128 hazards]\n"
         "=========\n";
}

inline std::string racecheck_summary(int hazards) {
  return "========= RACECHECK SUMMARY: " + std::to_string(hazards) + " hazards displayed (" +
         std::to_string(3 * hazards) + " errors, 0 warnings)\n";
}

// Host frames: one of cuBLAS's (a closed library's), one of bitparity's own code.
inline constexpr const char* kCublasLaunch = " [0x32c9090] in /usr/local/cuda/lib64/libcublasLt.so.13";
inline constexpr const char* kOwnLaunch =
    "bitparity::gpu::launch_cross_entropy(bitparity::gpu::CrossEntropy const&) [0xd8d1a] in bitparity";
inline constexpr const char* kCublasKernel = "nvjet_sm90_tst_64x32_64x16_1x2_h_bz_NNT";

}  // namespace bitparity::testing
