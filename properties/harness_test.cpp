// The property harness's own guarantees: shrinking ends at its bound with the smallest failure found
// so far (a property whose shrinking would take minutes cannot hang the suite), and a quick run's
// seed is the test's own (derived from its name), not RapidCheck's random one.
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
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

// The bound a test that calls rc::check itself wraps each run in (gpu/tests/cuda_vs_ref_test.cpp):
// runs go ahead until the first failure, then `runs` more, then none, and the note says so.
TEST(HarnessTest, AShrinkBoundStopsRunsAfterItsRunsPastTheFirstFailure) {
  ShrinkBound bound(3, 1e9);
  int ran = 0, failures_seen = 0;
  auto pass = [&] { ++ran; };
  auto fail = [&] {
    ++ran;
    throw std::runtime_error("fails");
  };
  for (int i = 0; i < 5; ++i) bound.run_bounded(pass);
  EXPECT_EQ(ran, 5);
  EXPECT_THROW(bound.run_bounded(fail, [&] { ++failures_seen; }), std::runtime_error);
  EXPECT_EQ(failures_seen, 1);
  for (int i = 0; i < 3; ++i) EXPECT_THROW(bound.run_bounded(fail), std::runtime_error);
  EXPECT_EQ(ran, 9);
  EXPECT_FALSE(bound.cut());
  EXPECT_EQ(bound.cut_note(), "");
  bound.run_bounded(fail);  // the fourth run past the first failure: not run, a pass
  bound.run_bounded(pass);
  EXPECT_EQ(ran, 9);
  EXPECT_TRUE(bound.cut());
  EXPECT_NE(bound.cut_note().find("3 runs"), std::string::npos) << bound.cut_note();
}

TEST(HarnessTest, AShrinkBoundStopsRunsAfterItsSeconds) {
  ShrinkBound bound(1000000, 0.5);
  int ran = 0;
  auto fail = [&] {
    ++ran;
    RC_FAIL("fails");
  };
  EXPECT_THROW(bound.run_bounded(fail), rc::detail::CaseResult);
  EXPECT_THROW(bound.run_bounded(fail), rc::detail::CaseResult);  // at once: within the 0.5 s
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  bound.run_bounded(fail);
  EXPECT_EQ(ran, 2);
  EXPECT_TRUE(bound.cut());
}

// A discarded run (RC_DISCARD) and a generator that gave up (rc::GenerationFailure) are no
// failures: neither starts the clock, so a bound of 0 runs still lets every later run go ahead.
TEST(HarnessTest, AShrinkBoundCountsNoDiscardAsAFailure) {
  ShrinkBound bound(0, 1e9);
  int ran = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_THROW(bound.run_bounded([&] {
      ++ran;
      RC_DISCARD("not this one");
    }),
                 rc::detail::CaseResult);
    EXPECT_THROW(bound.run_bounded([&] {
      ++ran;
      throw rc::GenerationFailure("the generator gave up");
    }),
                 rc::GenerationFailure);
  }
  EXPECT_EQ(ran, 6);
  EXPECT_FALSE(bound.cut());
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
