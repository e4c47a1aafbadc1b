// Exhaustive CPU sweeps (label "slow"): over all 2^32 fp32 inputs, the emulated libdevice
// functions differ from the correctly rounded model on exactly as many inputs as the GPU itself
// does (counts measured on the H200 by gpu/math/run_on_device.sh, see kGpuVsCr), and never by
// more than the ulps libdevice documents. This pins the committed tables and every branch of the
// emulation on machines without a GPU. The cr side uses the host's fp64 libm (glibc here).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "reference/math/device_math.h"
#include "reference/math/device_sample.h"

namespace bitparity::ref::math {
namespace {

struct Expected {
  SampleFunction f;
  uint64_t gpu_vs_cr;  // inputs where the H200's result differs from the cr model
  int64_t max_ulp;     // largest difference between them (NaNs excluded)
};

// From gpu/math/run_on_device.sh on the H200 (informational rows of sweep_sm90.txt).
constexpr Expected kGpuVsCr[] = {
    {SampleFunction::kExpf, 159912805, 2},
    {SampleFunction::kLogf, 72516688, 1},
    {SampleFunction::kLog1pf, 42499897, 1},
    {SampleFunction::kSigmoid, 52710369, 4},
    {SampleFunction::kSilu, 61494692, 4},
    {SampleFunction::kSoftplus, 116962654, 2},
};

float cr(SampleFunction f, float x) {
  switch (f) {
    case SampleFunction::kExpf: return expf(MathModel::kCorrectlyRounded, x);
    case SampleFunction::kLogf: return logf(MathModel::kCorrectlyRounded, x);
    case SampleFunction::kLog1pf: return log1pf(MathModel::kCorrectlyRounded, x);
    case SampleFunction::kSigmoid: return sigmoid(MathModel::kCorrectlyRounded, x);
    case SampleFunction::kSilu: return silu(MathModel::kCorrectlyRounded, x);
    case SampleFunction::kSoftplus: return softplus(MathModel::kCorrectlyRounded, x);
    default: return 0.0f;
  }
}

// Position of a finite float on the integer line, so that ulp distance is a subtraction.
int64_t ordinal(float v) {
  const int32_t i = std::bit_cast<int32_t>(v);
  return i < 0 ? -static_cast<int64_t>(i & 0x7FFFFFFF) : i;
}

TEST(DeviceMathExhaustive, EmulationDiffersFromCrExactlyWhereTheGpuDoes) {
  const Ex2Tables& tables = ex2_tables_for_device("sm_90");
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  constexpr int kN = sizeof(kGpuVsCr) / sizeof(kGpuVsCr[0]);
  std::vector<std::array<uint64_t, kN>> counts(threads);
  std::vector<std::array<int64_t, kN>> max_ulp(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    counts[t].fill(0);
    max_ulp[t].fill(0);
    pool.emplace_back([&, t] {
      const uint64_t lo = (1ull << 32) * t / threads, hi = (1ull << 32) * (t + 1) / threads;
      for (uint64_t b = lo; b < hi; ++b) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(b));
        for (int k = 0; k < kN; ++k) {
          const float e = emulate_sample_function(tables, kGpuVsCr[k].f, x);
          const float c = cr(kGpuVsCr[k].f, x);
          if (std::bit_cast<uint32_t>(e) == std::bit_cast<uint32_t>(c)) continue;
          ++counts[t][k];
          if (!std::isnan(e) && !std::isnan(c)) max_ulp[t][k] = std::max<int64_t>(max_ulp[t][k], std::llabs(ordinal(e) - ordinal(c)));
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  for (int k = 0; k < kN; ++k) {
    uint64_t n = 0;
    int64_t u = 0;
    for (unsigned t = 0; t < threads; ++t) {
      n += counts[t][k];
      u = std::max(u, max_ulp[t][k]);
    }
    const char* name = sample_function_name(kGpuVsCr[k].f);
    std::printf("%-8s differs from cr on %llu inputs, by up to %lld ulp\n", name, static_cast<unsigned long long>(n),
                static_cast<long long>(u));
    EXPECT_EQ(n, kGpuVsCr[k].gpu_vs_cr) << name;
    EXPECT_EQ(u, kGpuVsCr[k].max_ulp) << name;
  }
}

}  // namespace
}  // namespace bitparity::ref::math
