// The campaign on the builtin registry with several jobs: every op's generator, reference and
// shrinker on several threads at once give the output of one thread. (campaign_test covers the
// engine on the toy op; this one covers the real ops' code, which the threads share.)
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "campaign/campaign.h"
#include "corpus/entry.h"
#include "ops/builtin.h"

namespace bitparity::campaign {
namespace {

namespace fs = std::filesystem;

// Case indices: a few per registry target, at the generators' small sizes.
constexpr int64_t kCases = 150;
// Contract-vs-contract divergences are many; a short shrink of each keeps the test fast.
constexpr int kShrinkCalls = 40;

std::map<std::string, std::string> corpus_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const fs::path& p : corpus::find_json_files(dir)) {
    nlohmann::json doc = nlohmann::json::parse(std::ifstream(p));
    doc["provenance"].erase("date");
    files[fs::relative(p, dir).string()] = doc.dump();
  }
  return files;
}

reports::Report run_with(int jobs, const fs::path& dir) {
  CampaignOptions o;
  o.budget_seconds = 600;  // bounded by max_cases, not by time
  o.max_cases = kCases;
  o.seed = 11;
  o.max_shrink_calls = kShrinkCalls;
  o.jobs = jobs;
  o.corpus_dir = dir;
  reports::Report r = run_campaign(builtin_registry(), o);
  r.run.elapsed_seconds = 0;
  r.run.date.clear();
  for (reports::FindingRecord& f : r.findings) f.file = fs::relative(f.file, dir).string();
  return r;
}

TEST(BuiltinCampaign, FourJobsGiveTheReportAndCorpusOfOne) {
  const fs::path base = fs::temp_directory_path() / ("bitparity_campaign_builtin_" + std::to_string(::getpid()));
  fs::remove_all(base);
  const reports::Report one = run_with(1, base / "one");
  const reports::Report four = run_with(4, base / "four");
  EXPECT_FALSE(one.findings.empty());
  EXPECT_GE(one.coverage.size(), 10u) << "every op and direction ran";
  EXPECT_EQ(four.counts, one.counts);
  EXPECT_EQ(four.coverage, one.coverage);
  EXPECT_EQ(four.findings, one.findings);
  EXPECT_EQ(four.run, one.run);
  EXPECT_EQ(corpus_files(base / "four"), corpus_files(base / "one"));
  fs::remove_all(base);
}

// Which builtin kinds run concurrently: the reference (pure functions of the case) and the CUDA
// kernels (each thread on its own stream with its own buffers) with no limit.
TEST(BuiltinCampaign, TheReferenceAndTheCudaKernelsRunWithoutALimit) {
  const Registry& r = builtin_registry();
  ASSERT_NE(r.backend("ref"), nullptr);
  ASSERT_NE(r.backend("cuda"), nullptr);
  EXPECT_EQ(r.backend("ref")->concurrent_calls, kAnyNumberOfCalls);
#ifdef BITPARITY_HAVE_CUDA
  EXPECT_EQ(r.backend("cuda")->concurrent_calls, kAnyNumberOfCalls);
#else
  // Built without CUDA, the kind is known but absent: it says why, and runs nothing.
  ASSERT_TRUE(r.backend("cuda")->unavailable_reason);
  EXPECT_EQ(r.backend("cuda")->unavailable_reason().value_or(""), "this binary was built without CUDA (no nvcc)");
#endif
}

}  // namespace
}  // namespace bitparity::campaign
