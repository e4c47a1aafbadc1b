// GPU tests of the device-math emulation: the emulation against the GPU's own expf, logf,
// log1pf, ex2.approx and the rule 2 formulas over all 2^32 fp32 inputs, and the capture paths.
// Every test skips, with the reason, where no CUDA device exists.
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <filesystem>
#include <string>

#include "gpu/math/capture_math.h"
#include "gpu/math/device_info.h"
#include "gpu/math/verify_math.h"
#include "reference/math/device_math.h"
#include "reference/math/device_sample.h"
#include "reference/math/ex2_tables.h"

namespace bitparity::gpu::math {
namespace {

namespace rm = ref::math;

// The default tables when they mirror the present device; otherwise the test skips.
#define REQUIRE_DEVICE_AND_TABLES(tables_ptr)                                            \
  do {                                                                                   \
    std::string reason;                                                                  \
    if (!cuda_device_present(&reason)) GTEST_SKIP() << reason;                           \
    rm::Ex2Metadata device;                                                              \
    ASSERT_TRUE(read_device_metadata(&device, &reason)) << reason;                       \
    try {                                                                                \
      tables_ptr = &rm::ex2_tables_for_device(device.arch);                              \
    } catch (const rm::Ex2TableError& e) {                                               \
      GTEST_SKIP() << e.what();                                                          \
    }                                                                                    \
  } while (0)

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("bitparity_") + name)).string();
}

TEST(MathGpu, EmulationMatchesTheGpuOnAll2To32Inputs) {
  const rm::Ex2Tables* tables = nullptr;
  REQUIRE_DEVICE_AND_TABLES(tables);
  std::vector<SweepCount> counts;
  std::string error;
  ASSERT_TRUE(sweep_math(*tables, SweepOptions{}, &counts, &error)) << error;
  std::printf("%s", format_sweep(counts).c_str());
  for (const auto& c : counts) {
    EXPECT_EQ(c.checked, 1ull << 32) << c.name;
    if (c.must_match) {
      EXPECT_EQ(c.mismatches, 0u) << c.name << " differs from the GPU";
    }
  }
}

TEST(MathGpu, CapturedTablesEqualTheCommittedOnes) {
  const rm::Ex2Tables* tables = nullptr;
  REQUIRE_DEVICE_AND_TABLES(tables);
  const std::string path = temp_path("ex2_capture.bin");
  std::string error;
  ASSERT_EQ(capture_math(path, &error), 0) << error;
  const rm::Ex2Tables fresh = rm::load_ex2_tables_file(path, /*verify_hashes=*/true);
  std::filesystem::remove(path);
  EXPECT_EQ(fresh.meta.tp_hash, tables->meta.tp_hash);
  EXPECT_EQ(fresh.meta.tn_hash, tables->meta.tn_hash);
  EXPECT_TRUE(fresh.tp == tables->tp && fresh.tn == tables->tn);
}

TEST(MathGpu, CapturedSampleReplaysWithoutMismatch) {
  const rm::Ex2Tables* tables = nullptr;
  REQUIRE_DEVICE_AND_TABLES(tables);
  const std::string path = temp_path("math_sample.bin");
  std::string error;
  ASSERT_EQ(capture_math_sample(path, &error), 0) << error;
  const rm::DeviceSample s = rm::load_device_sample_file(path);
  std::filesystem::remove(path);
  const std::vector<uint32_t> inputs = rm::sample_inputs(s.spec);
  for (int k = 0; k < rm::kSampleFunctionCount; ++k) {
    size_t mismatches = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const float y = rm::emulate_sample_function(*tables, rm::kSampleFunctions[k], std::bit_cast<float>(inputs[i]));
      mismatches += std::bit_cast<uint32_t>(y) != s.outputs[k][i];
    }
    EXPECT_EQ(mismatches, 0u) << rm::sample_function_name(rm::kSampleFunctions[k]);
  }
}

}  // namespace
}  // namespace bitparity::gpu::math
