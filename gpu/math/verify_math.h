// Compares the CPU emulation (reference/math/) with the GPU's own fp32 math over a range of fp32
// bit patterns, all 2^32 by default (no CUDA types here).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "reference/math/ex2_tables.h"

namespace bitparity::gpu::math {

struct SweepCount {
  std::string name;       // "expf", or "expf cr" for an informational count
  bool must_match = true;  // false: documents how far another model is from the GPU
  uint64_t checked = 0;
  uint64_t mismatches = 0;
  uint64_t max_ulp = 0;  // largest distance over mismatches where neither side is NaN
  uint64_t nan_mismatches = 0;  // mismatches where one side is NaN and the other is not
  // Up to kMaxExamples mismatches in input order: {input bits, GPU bits, model bits}.
  std::vector<std::array<uint32_t, 3>> examples;
};

inline constexpr size_t kMaxExamples = 4;

struct SweepOptions {
  uint64_t begin = 0;             // first fp32 bit pattern
  uint64_t end = 1ull << 32;      // one past the last
  unsigned threads = 0;           // CPU threads that run the emulation; 0 = all cores
  // Called after each chunk with the number of patterns done so far (progress reports).
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// The must-match counts (ex2, expf, logf, log1pf, sigmoid, silu, softplus: the kLibdevice model
// with `tables` against the GPU) followed by informational ones (the cr model, and sigmoid and
// silu without nvcc's fma contraction, against the GPU). False with `error` set when the GPU
// cannot be used.
bool sweep_math(const ref::math::Ex2Tables& tables, const SweepOptions& options, std::vector<SweepCount>* counts,
                std::string* error);

// A table of the counts, one line per count, with the first examples of each mismatch.
std::string format_sweep(const std::vector<SweepCount>& counts);

}  // namespace bitparity::gpu::math
