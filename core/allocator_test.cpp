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

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizedMalloc = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizedMalloc = true;
#else
constexpr bool kSanitizedMalloc = false;
#endif
#else
constexpr bool kSanitizedMalloc = false;
#endif

// Cases as an embedding backward's: four zero-filled tables of one size alive at once, a size
// between 200 KB and 2.2 MB each case, all freed when the case ends. On a fresh thread (its own
// malloc arena, as a campaign's job). With glibc's defaults this took about 880 page faults a case
// on the 2-core development machine; with keep_freed_memory the tables are reused in place.
TEST(Allocator, FreedTensorsAreReusedWithoutPageFaults) {
#if defined(__GLIBC__)
  if (kSanitizedMalloc) GTEST_SKIP() << "a sanitizer replaces malloc (its mallopt does nothing)";
  if (allocator_tuned_by_user()) GTEST_SKIP() << "malloc is set through the environment (GLIBC_TUNABLES, MALLOC_*_)";
  ASSERT_TRUE(keep_freed_memory());
  double faults_per_case = -1;
  std::thread([&] {
    const auto faults = [] {
      rusage u{};
      getrusage(RUSAGE_THREAD, &u);
      return u.ru_minflt;
    };
    uint32_t s = 1;
    long before = 0;
    constexpr int kWarmUp = 50, kCases = 400;
    for (int i = 0; i < kWarmUp + kCases; ++i) {
      if (i == kWarmUp) before = faults();
      s = s * 1103515245u + 12345u;
      const int64_t elements = 50'000 + (s >> 8) % 500'000;  // fp32: 200 KB .. 2.2 MB
      std::vector<Tensor> tables;
      for (int k = 0; k < 4; ++k) tables.emplace_back(DType::kFP32, Shape{elements});
    }
    faults_per_case = static_cast<double>(faults() - before) / kCases;
  }).join();
  EXPECT_LT(faults_per_case, 4.0);
#else
  EXPECT_FALSE(keep_freed_memory()) << "the settings are glibc's";
#endif
}

}  // namespace
}  // namespace bitparity
