// The CUDA runtime as bitparity uses it (device discovery, errors turned into exceptions) and the
// kernels' arithmetic shortcuts checked on every fp32 input. Part of cuda_vs_ref_test; every test
// skips with the reason where no CUDA device exists.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/outcome.h"
#include "core/registry.h"
#include "gpu/register.h"
#include "gpu/runtime.h"
#include "gpu/tests/fast_math_check.h"
#include "gpu/tests/first_rows.h"

namespace bitparity::gpu {
namespace {

// --- the kernels' arithmetic shortcuts, on every fp32 input ----------------------------------------

std::string hex_examples(const testing_support::ExhaustiveResult& r) {
  std::ostringstream os;
  for (uint32_t x : r.examples) os << " 0x" << std::hex << x;
  return os.str();
}

// sigmoid_silu_fast is what the kernels run; it must give sigmoid_silu's bits wherever it claims
// to, and claim it everywhere but the classes its comment excludes (counted here independently).
// Outside silu_fast's and sigmoid_silu_fast's domain: x = +-0, and |x| >= 2^124 with the
// infinities and NaN (biased exponents 251 to 255), both signs.
constexpr uint64_t kOutsideSiluDomain = 2 + (2 * uint64_t{255 - 251 + 1} << 23);

TEST(FastMath, SigmoidSiluShortcutEqualsIeeeDivisionInItsDomain) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_fast_sigmoid_silu();
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) where the shortcut differs:" << hex_examples(r);
  EXPECT_EQ(r.inputs - r.in_domain, kOutsideSiluDomain);
}

TEST(FastMath, SiluShortcutEqualsIeeeDivisionInItsDomain) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_fast_silu();
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) where the shortcut differs:" << hex_examples(r);
  EXPECT_EQ(r.inputs - r.in_domain, kOutsideSiluDomain);
}

// No band is left out: where 1/den is subnormal (x in about [-88.7, -87.3]) sigmoid_fast is exact
// too, and those inputs are in its domain, so that the test above covers them.
TEST(FastMath, SigmoidShortcutEqualsIeeeDivisionInItsDomain) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_fast_sigmoid();
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) where the shortcut differs:" << hex_examples(r);
  const uint64_t nan = 2 * ((uint64_t{1} << 23) - 1);
  EXPECT_EQ(r.inputs - r.in_domain, nan);
}

TEST(FastMath, OneInstructionBf16RoundingEqualsFloat2Bfloat16Rn) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_bf16_rounding();
  EXPECT_EQ(r.in_domain, r.inputs);  // every fp32 input was tried
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) rounded differently:" << hex_examples(r);
}

// --- the runtime ---------------------------------------------------------------------------------

TEST(CudaRuntime, SkipsWithAReasonOrDescribesTheDevice) {
  if (const auto why = unavailable_reason()) {
    EXPECT_NE(why->find("no CUDA device"), std::string::npos) << *why;
    GTEST_SKIP() << *why;
  }
  std::cout << "device: " << device_description() << "\n";
  EXPECT_EQ(device_description().find("no CUDA device"), std::string::npos);
}

TEST(CudaRuntime, ErrorsBecomeExceptionsWithMessages) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  set_checked_launches(true);
  try {
    DeviceBuffer huge(size_t{1} << 62);
    FAIL() << "a 4 EiB allocation succeeded";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMalloc"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cudaErrorMemoryAllocation"), std::string::npos) << e.what();
  }
  // The failed allocation is reported once: the next launch of every kernel (on one row of its
  // op's first reference input) does not inherit it.
  int launched = 0;
  for (const KernelRecord& k : kernel_records()) {
    const OpInfo* op = harness_registry().op(k.op);
    ASSERT_NE(op, nullptr) << k.op;
    for (const auto& [direction, inputs] : op->inputs)
      for (const ReferenceInput& input : op->reference_inputs(direction)) {
        if (input.bench_only || !(input.contracts.empty() || std::count(input.contracts.begin(), input.contracts.end(), k.contract)))
          continue;
        const Case c = bitparity::testing_support::first_rows(*op, input.make(), 1);
        EXPECT_NO_THROW(run_impl(harness_registry(), "cuda:" + k.contract, c)) << k.op << " " << k.contract;
        ++launched;
        break;
      }
  }
  EXPECT_GT(launched, 0);
}

}  // namespace
}  // namespace bitparity::gpu
