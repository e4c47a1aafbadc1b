// The property harness's own guarantees: shrinking ends at its bound with the smallest failure found
// so far (a property whose shrinking would take minutes cannot hang the suite), and a quick run's
// seed is the test's own (derived from its name), not RapidCheck's random one.
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <gtest/gtest-spi.h>
#include <rapidcheck.h>

#include "properties/harness.h"

namespace bitparity::props {
namespace {

// Fails for every vector with an element above 1000, and takes 20 ms a run: shrinking 200
// elements toward the one failing element would take tens of seconds.
void slow_failing_property() {
  check_property([] {
    const auto v = *rc::gen::container<std::vector<int>>(200, rc::gen::inRange(0, 1'000'000));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int x : v) RC_ASSERT(x <= 1000);
  });
}

TEST(HarnessTest, ShrinkingStopsAtItsBoundAndSaysSo) {
  ASSERT_EQ(setenv("BITPARITY_SHRINK_SECONDS", "0.5", 1), 0);
  EXPECT_FATAL_FAILURE(slow_failing_property(), "Shrinking stopped at its bound");
  unsetenv("BITPARITY_SHRINK_SECONDS");
}

TEST(HarnessTest, AQuickRunsSeedIsTheTestsOwnNotRapidChecksRandomOne) {
  if (std::getenv("RC_PARAMS") || std::getenv("BITPARITY_FRESH_SEED") || deep_run()) GTEST_SKIP() << "seed chosen outside";
  const uint64_t seed = property_params().seed;
  EXPECT_EQ(property_params().seed, seed);
  // Without RC_PARAMS RapidCheck draws its configuration's seed at random in every process.
  EXPECT_NE(seed, rc::detail::configuration().testParams.seed);
}

}  // namespace
}  // namespace bitparity::props
