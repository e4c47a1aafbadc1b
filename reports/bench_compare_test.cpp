// Compare verdicts on runs built by hand to be clearly faster, clearly slower, the same, too noisy
// and too short to tell. p-values quoted in comments come from the same independent Python
// enumeration as mann_whitney_test.cpp; the verdicts follow from them and the medians by hand.
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reports/bench_compare.h"

namespace bitparity::reports {
namespace {

using Times = std::vector<double>;

BenchKernel kernel(const std::string& name, Times times_us) {
  BenchKernel k;
  k.name = name;
  for (double t : times_us) k.times_ns.push_back(t * 1000);
  k.bytes = 1e8;
  k.copy_gb_per_s = 4000;
  complete_kernel(k);
  return k;
}

BenchRun run(const std::string& date, std::vector<BenchKernel> kernels) {
  BenchRun r;
  r.context.date = date;
  r.context.commit = "0123456789abcdef0123456789abcdef01234567";
  r.context.host = "gpu-node-3";
  r.context.gpu = "NVIDIA H200";
  r.kernels = std::move(kernels);
  complete_run(r);
  return r;
}

const KernelComparison& find(const Comparison& c, const std::string& name) {
  for (const KernelComparison& k : c.kernels)
    if (k.name == name) return k;
  throw std::runtime_error("no comparison of " + name);
}

const Times kSteady = {100, 101, 99, 102, 100, 98, 101, 100, 99, 103};   // median 100
const Times kTenPercentFaster = {90, 91, 89, 90, 92, 88, 91, 90, 89, 92};  // median 90

TEST(BenchCompare, ClearVerdicts) {
  const BenchRun old_run = run("2026-12-01T00:00:00Z",
                               {kernel("faster", kSteady), kernel("slower", kTenPercentFaster),
                                kernel("same", {100, 101, 99, 102, 100}), kernel("noisy", {100, 140, 90, 130, 95}),
                                kernel("short", {30, 31}), kernel("three", {30, 31, 32}), kernel("gone", {5})});
  const BenchRun new_run = run("2026-12-02T00:00:00Z",
                               {kernel("new", {5}), kernel("faster", kTenPercentFaster), kernel("slower", kSteady),
                                kernel("same", {100.5, 99.5, 101.5, 100, 99}),
                                kernel("noisy", {120, 150, 100.5, 98, 145}), kernel("short", {40, 41}),
                                kernel("three", {40, 41, 42})});
  const Comparison c = compare_runs(old_run, new_run);
  ASSERT_EQ(c.kernels.size(), 6u);
  EXPECT_EQ(c.kernels[0].name, "faster");  // the new run's order

  const KernelComparison& faster = find(c, "faster");  // separated samples: p = 0.00017 (normal approximation)
  EXPECT_EQ(faster.verdict, Verdict::kFaster);
  EXPECT_NEAR(faster.change, -0.10, 1e-12);
  EXPECT_NEAR(*faster.p_value, 0.00016972960866144988, 1e-12);
  EXPECT_EQ(find(c, "slower").verdict, Verdict::kSlower);
  EXPECT_NEAR(find(c, "slower").change, 100.0 / 90 - 1, 1e-12);

  const KernelComparison& same = find(c, "same");  // both medians 100: p = 0.75
  EXPECT_EQ(same.verdict, Verdict::kSame);
  EXPECT_EQ(same.change, 0);

  const KernelComparison& noisy = find(c, "noisy");  // medians 100 and 120, but p = 0.3095 (exact)
  EXPECT_EQ(noisy.verdict, Verdict::kUnsure);
  EXPECT_NEAR(noisy.change, 0.20, 1e-12);
  EXPECT_NEAR(*noisy.p_value, 0.30952380952380953, 1e-12);
  EXPECT_NE(noisy.reason.find("+20.0% change that the noise hides"), std::string::npos) << noisy.reason;

  // +33% but 2 and 2 (best p 1/3) or 3 and 3 (best p 0.1) repetitions cannot show it.
  for (const char* name : {"short", "three"}) {
    const KernelComparison& k = find(c, name);
    EXPECT_EQ(k.verdict, Verdict::kUnsure) << name;
    EXPECT_FALSE(k.p_value) << name;
  }
  EXPECT_NE(find(c, "short").reason.find("2 vs 2 repetitions"), std::string::npos);

  EXPECT_EQ(c.only_old, std::vector<std::string>{"gone"});
  EXPECT_EQ(c.only_new, std::vector<std::string>{"new"});
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(c.count(Verdict::kUnsure), 3u);
}

TEST(BenchCompare, MinimumEffectSeparatesRealFromRelevant) {
  // +2%, fully separated: significant (p = 2/252 = 0.0079), but under the default 5% effect.
  const BenchRun old_run = run("2026-12-01T00:00:00Z", {kernel("k", {100, 100.1, 100.2, 100.3, 100.4})});
  const BenchRun new_run = run("2026-12-02T00:00:00Z", {kernel("k", {102, 102.1, 102.2, 102.3, 102.4})});
  const KernelComparison same = compare_runs(old_run, new_run).kernels.at(0);
  EXPECT_EQ(same.verdict, Verdict::kSame);
  EXPECT_NEAR(*same.p_value, 2.0 / 252, 1e-12);
  EXPECT_EQ(compare_runs(old_run, new_run, {kDefaultAlpha, 0.01}).kernels.at(0).verdict, Verdict::kSlower);
  // A stricter level than the best attainable p (0.0079) makes the same data UNSURE.
  EXPECT_EQ(compare_runs(old_run, new_run, {0.005, 0.01}).kernels.at(0).verdict, Verdict::kUnsure);
}

TEST(BenchCompare, WarnsWhenTheMachineChanged) {
  BenchRun old_run = run("2026-12-01T00:00:00Z", {kernel("k", kSteady)});
  BenchRun new_run = run("2026-12-02T00:00:00Z", {kernel("k", kSteady)});
  new_run.context.gpu = "NVIDIA H100 80GB HBM3";
  old_run.context.driver = "570.124.06", new_run.context.driver = "575.51.03";
  for (BenchKernel& k : new_run.kernels) k.copy_gb_per_s = 3000;
  complete_run(new_run);
  const Comparison c = compare_runs(old_run, new_run);
  ASSERT_EQ(c.warnings.size(), 3u);
  EXPECT_EQ(c.warnings[0], "the runs are on different GPUs: NVIDIA H200 and NVIDIA H100 80GB HBM3");
  EXPECT_EQ(c.warnings[1], "the driver changed: 570.124.06 to 575.51.03");
  EXPECT_EQ(c.warnings[2],
            "the copy bandwidth measured in the same runs moved by -25.0% (4000 to 3000 GB/s): the machine changed, "
            "not only the code");
}

TEST(BenchCompare, TextListsEveryKernelAndTheSummary) {
  const BenchRun old_run = run("2026-12-01T00:00:00Z", {kernel("swiglu_fwd/megatron_eager/r/ilp:0", kSteady),
                                                        kernel("gone", {1})});
  const BenchRun new_run = run("2026-12-02T00:00:00Z", {kernel("swiglu_fwd/megatron_eager/r/ilp:0", kTenPercentFaster)});
  const Comparison c = compare_runs(old_run, new_run);
  const std::string text = comparison_text(c, old_run, new_run, {});
  EXPECT_NE(text.find("old: 2026-12-01T00:00:00Z commit 0123456789ab on NVIDIA H200, copy 4000 GB/s\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("swiglu_fwd/megatron_eager/r/ilp:0       100.000      90.000   -10.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("10/10  FASTER\n"), std::string::npos) << text;
  EXPECT_NE(text.find("only in the old run: gone\n"), std::string::npos) << text;
  EXPECT_NE(text.find("1 kernels compared: 0 SLOWER, 1 FASTER, 0 SAME, 0 UNSURE (U test at p < 0.05, minimum effect 5% "
                      "of the median time)"),
            std::string::npos)
      << text;
}

TEST(BenchCompare, RefusesNonsenseOptions) {
  const BenchRun r = run("2026-12-01T00:00:00Z", {kernel("k", kSteady)});
  EXPECT_THROW(compare_runs(r, r, {0, 0.05}), std::invalid_argument);
  EXPECT_THROW(compare_runs(r, r, {1, 0.05}), std::invalid_argument);
  EXPECT_THROW(compare_runs(r, r, {0.05, -0.1}), std::invalid_argument);
  EXPECT_EQ(compare_runs(r, r).kernels.at(0).verdict, Verdict::kSame);  // a run against itself
}

}  // namespace
}  // namespace bitparity::reports
