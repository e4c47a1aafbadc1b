#include "core/allocator.h"

#include <sys/resource.h>

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc

#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/tensor.h"

namespace bitparity {
namespace {

long page_faults_of_this_thread() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

// Cases as an embedding backward's: four zero-filled tables of one size alive at once, a size
// between 200 KB and 2.2 MB each case, all freed when the case ends. On a fresh thread (its own
// malloc arena, as a campaign's job). With glibc's defaults this took about 880 page faults a case
// on the 2-core development machine; with keep_freed_memory the tables are reused in place.
TEST(Allocator, FreedTensorsAreReusedWithoutPageFaults) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "keep_freed_memory sets glibc's malloc only";
#endif
  ASSERT_TRUE(keep_freed_memory());
  double faults_per_case = -1;
  std::thread([&] {
    uint32_t s = 1;
    long before = 0;
    constexpr int kWarmUp = 50, kCases = 400;
    for (int i = 0; i < kWarmUp + kCases; ++i) {
      if (i == kWarmUp) before = page_faults_of_this_thread();
      s = s * 1103515245u + 12345u;
      const int64_t elements = 50'000 + (s >> 8) % 500'000;  // fp32: 200 KB .. 2.2 MB
      std::vector<Tensor> tables;
      for (int k = 0; k < 4; ++k) tables.emplace_back(DType::kFP32, Shape{elements});
    }
    faults_per_case = static_cast<double>(page_faults_of_this_thread() - before) / kCases;
  }).join();
  EXPECT_LT(faults_per_case, 4.0);
}

}  // namespace
}  // namespace bitparity
