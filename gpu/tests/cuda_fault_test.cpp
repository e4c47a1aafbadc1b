// A GPU campaign survives real device faults: a worker whose kernel stores through a bad pointer
// (cudaErrorIllegalAddress), executes `trap` (cudaErrorLaunchFailure) or never ends
// (cuda_fault_worker.cu, on every case holding 3.0) is restarted, the campaign finishes every case,
// and the case that killed the worker is a device_fault entry, shrunk in fresh workers, that replays
// as still faulting. Kernels that break nothing visible (a race, an invalid read) run under
// compute-sanitizer and become sanitizer_hazard entries. Skipped where no CUDA device exists.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "campaign/campaign.h"
#include "corpus/entry.h"
#include "corpus/replay.h"
#include "gpu/runtime.h"
#include "peers/exec/exec_backend.h"
#include "testing/fault_campaign.h"
#include "testing/toy_op.h"

namespace bitparity {
namespace {

namespace fs = std::filesystem;

// The worker beside a staged test (scripts/gpu_check.sh sets the variable), else the one built here.
std::string worker_path() {
  const char* env = std::getenv("BITPARITY_CUDA_FAULT_WORKER");
  return env && *env ? env : BITPARITY_CUDA_FAULT_WORKER;
}

bool holds_three(const Tensor& x) {
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.f32(i) == 3.0f) return true;
  return false;
}

TEST(CudaFaultCampaign, SurvivesStickyErrorsAndHangsAndRecordsTheCase) {
  if (const auto why = gpu::unavailable_reason()) GTEST_SKIP() << *why;
  ASSERT_TRUE(fs::is_regular_file(worker_path())) << "no worker at " << worker_path();
  for (const char* mode : {"illegal_address", "trap", "hang"}) {
    SCOPED_TRACE(mode);
    const bool hang = std::string(mode) == "hang";
    Registry r = testing::make_fake_registry();
    peers::WorkerOptions worker;
    worker.name = "faulty";
    worker.argv = {worker_path(), mode};
    worker.request_seconds = hang ? 1.0 : 30.0;
    const auto backend = peers::add_exec_backend(r, "faulty", worker);
    // Each shrink step starts a CUDA context; each hang costs the timeout.
    campaign::CampaignOptions o = testing::toy_fault_campaign("faulty", "cuda_fault_" + std::string(mode), 60, 5, 20);
    const fs::path dir = o.corpus_dir;
    const reports::Report report = campaign::run_campaign(r, o);
    ASSERT_EQ(report.counts.size(), 1u);
    const reports::PairCounts& counts = report.counts.at(0);
    EXPECT_EQ(counts.cases, 60) << "cases were lost";
    ASSERT_GT(counts.mismatches.count("device_fault"), 0u) << "no case held 3.0, or the fault went unseen";
    EXPECT_GT(counts.agreements, 0) << "no case ran after a fault";
    EXPECT_TRUE(counts.skips.empty());
    ASSERT_FALSE(report.findings.empty());
    for (const reports::FindingRecord& f : report.findings) {
      EXPECT_EQ(f.kind, "device_fault");
      const corpus::Entry entry = corpus::load_entry(f.file, r);
      EXPECT_TRUE(holds_three(*entry.c.input("x"))) << f.file;
      const corpus::ReplayResult replayed = corpus::replay_entry(r, entry);
      EXPECT_EQ(replayed.status, corpus::ReplayStatus::kPass) << replayed.summary;
    }
    EXPECT_GT(backend->starts(), 1) << "the worker was never restarted";
    fs::remove_all(dir);
  }
}

// compute-sanitizer: BITPARITY_COMPUTE_SANITIZER, else on PATH, else the toolkit's; empty if none.
std::string compute_sanitizer() {
  const char* env = std::getenv("BITPARITY_COMPUTE_SANITIZER");
  if (env && *env) return env;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  dirs += ":/usr/local/cuda/bin";
  for (size_t start = 0; start < dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / "compute-sanitizer";
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return "";
}

// Kernels that break nothing visible: a shared-memory read without its barrier (racecheck) and a
// read one element past a buffer (memcheck). Under compute-sanitizer with --error-exitcode (one
// case a worker, as `bitparity --sanitizer TOOL` runs them) the cases that run them become
// sanitizer_hazard entries with the tool's report, shrunk, that replay as still hazardous; the
// other cases agree.
TEST(CudaSanitizerCampaign, RecordsRacesAndInvalidAccessesAsFindings) {
  if (const auto why = gpu::unavailable_reason()) GTEST_SKIP() << *why;
  const std::string sanitizer = compute_sanitizer();
  if (sanitizer.empty()) GTEST_SKIP() << "no compute-sanitizer on PATH nor in /usr/local/cuda/bin";
  ASSERT_TRUE(fs::is_regular_file(worker_path())) << "no worker at " << worker_path();
  for (const auto& [mode, tool, says] : {std::tuple{"race", "racecheck", "hazard detected"},
                                         std::tuple{"out_of_bounds", "memcheck", "Invalid __global__ read"}}) {
    SCOPED_TRACE(mode);
    Registry r = testing::make_fake_registry();
    // The options `bitparity --sanitizer TOOL` runs its workers with.
    peers::add_exec_backend(r, tool, peers::sanitized_worker(sanitizer, tool, {worker_path(), mode}, 60));
    // Each shrink call a process under the sanitizer.
    campaign::CampaignOptions o = testing::toy_fault_campaign(tool, "cuda_hazard_" + std::string(mode), 24, 11, 6);
    const fs::path dir = o.corpus_dir;
    const reports::Report report = campaign::run_campaign(r, o);
    ASSERT_EQ(report.counts.size(), 1u);
    const reports::PairCounts& counts = report.counts.at(0);
    EXPECT_EQ(counts.cases, 24) << "cases were lost";
    ASSERT_GT(counts.mismatches.count("sanitizer_hazard"), 0u) << "the hazard went unseen";
    EXPECT_GT(counts.agreements, 0) << "a case without the planted kernel did not agree";
    ASSERT_FALSE(report.findings.empty());
    for (const reports::FindingRecord& f : report.findings) {
      EXPECT_EQ(f.kind, "sanitizer_hazard");
      std::ifstream file(f.file);
      const std::string message = nlohmann::json::parse(file)["finding"].value("message", "");
      EXPECT_NE(message.find(says), std::string::npos) << message;
      const corpus::Entry entry = corpus::load_entry(f.file, r);
      EXPECT_TRUE(holds_three(*entry.c.input("x"))) << f.file;
      const corpus::ReplayResult replayed = corpus::replay_entry(r, entry);
      EXPECT_EQ(replayed.status, corpus::ReplayStatus::kPass) << replayed.summary;
    }
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace bitparity
