// The campaign engine: random cases from every op's generator through backend pairs, for a time
// budget, with minimized new findings written to a corpus and a summary report (design.md,
// "Campaigns"). `bitparity campaign` is a thin command line over it.
//
// Reproducibility: case j (its global index) is generated from rc::Random(generation_seed(seed, j,
// attempt)) at size j / targets % 101 for target j % targets, whatever the shard and however many
// jobs run, so (seed, case index) in an entry's provenance names the exact case. The attempt is 0,
// or the first that every contract of the target's pairs accepts (at most kAcceptAttempts draws,
// the size growing by kRedrawSizeStep each; every kKeepRejectionsEvery-th case keeps its first
// draw, so rejections are still tested). Tensors are filled from one drawn seed whatever their size
// (gen::SeededTensors): the campaign's findings shrink through the op's shrinker, not RapidCheck's. Shard i of n runs the global
// indices i, i + n, i + 2n, ...: the shards of a campaign run exactly the cases of the unsharded
// run, and `bitparity merge` of their outputs equals it (but for run.batch_failures: each shard
// forms its own batches). (A shard count with a factor in common with the number of targets gives
// each shard some of the targets; the shards together run all.)
//
// A signature is shrunk once, from the first case (lowest index) that shows it: shrinking keeps
// the signature, so a later case's shrink could only find the entry already written.
//
// Parallelism (`jobs`): cases are generated (in processes of their own: `generators`), run,
// compared and shrunk on several threads, and
// their results are applied to the report and the corpus in case order, so that a run's output is
// the same for every number of jobs (a time budget changes only how many cases ran). Threads share
// the registry under one rule (BackendKind::concurrent_calls): the builtin CPU reference runs
// concurrently, whose implementations are pure functions of the case, and so do bitparity's CUDA
// kernels (each thread on its own stream with its own buffers, gpu/runtime.h); exec workers and the
// torch peer (one process and pipe each) and plug-ins (code we cannot vouch for) one call at a
// time, each kind under its own lock; a kind served by a pool of workers (`--devices N`: one a GPU)
// as many at once as it has workers.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "corpus/differential.h"
#include "fuzz/shrink.h"
#include "reports/report.h"

namespace bitparity::campaign {

// The generators' size parameter cycles through 0..kMaxGenSize.
inline constexpr int kMaxGenSize = 100;
inline constexpr double kProgressIntervalSeconds = 2.0;
// A shrink stops after this many seconds (or max_shrink_calls runs) with the smallest case so far.
inline constexpr double kDefaultShrinkSeconds = 60;
inline constexpr int kMaxJobs = 1024;
// Cases started but not yet applied, per job: a long shrink holds back the cases after it, and
// this bounds the results waiting for it.
inline constexpr int64_t kCasesInFlightPerJob = 1024;
inline constexpr int64_t kDefaultNondeterminismEvery = 8;
// Cases of one op and direction that a backend with a batch path (Registry::batch_impl: bitparity's
// CUDA kernels, and workers that take batch requests: --devices, --sanitizer) runs in one call (--batch).
inline constexpr int kDefaultBatch = 16;
inline constexpr int kMaxBatch = 1024;

struct Shard {
  int64_t index = 0, count = 1;
  std::string name() const { return std::to_string(index) + "/" + std::to_string(count); }
};
// The largest shard count: shard indices and counts stay far from int64 overflow.
inline constexpr int64_t kMaxShardCount = 999'999'999;
// "i/n" with 0 <= i < n <= kMaxShardCount; ParseError naming --shard otherwise.
Shard parse_shard(const std::string& text);
// The seed of the case with global index `case_index`, in every shard.
uint64_t case_seed(uint64_t seed, int64_t case_index);
// The seed of draw `attempt` of case `case_index`: case_seed for the first, then fresh seeds.
uint64_t generation_seed(uint64_t seed, int64_t case_index, int attempt);
inline constexpr int kAcceptAttempts = 8;
inline constexpr int kRedrawSizeStep = 10;  // a draw again is kRedrawSizeStep larger (up to kMaxGenSize)
inline constexpr int64_t kKeepRejectionsEvery = 8;
// The global case indices shard `shard` runs are case_index(shard, 0), case_index(shard, 1), ...
int64_t case_index(const Shard& shard, int64_t local_index);

struct CampaignOptions {
  double budget_seconds = 60;              // finite and >= 0
  uint64_t seed = 0;
  std::optional<int64_t> max_cases;        // bound on the global case index, over all shards; >= 0
  std::vector<corpus::BackendPair> pairs;  // empty: default_pairs per op
  std::vector<std::string> ops;            // empty: every op
  std::filesystem::path corpus_dir;        // empty: findings are reported, not written
  Shard shard;
  std::string same_contract_pin = "open";  // or "fixed", when the user asks
  bool strict_nan = false;
  int max_shrink_calls = fuzz::kDefaultMaxShrinkCalls;  // >= 1
  double shrink_seconds = kDefaultShrinkSeconds;        // per shrink; finite and >= 0
  int jobs = 1;                                          // threads, 1 .. kMaxJobs
  // Where a side of the pairs has a batch path here (the CUDA kernels: one copy in, every case's
  // launches, one copy out, one synchronization; a worker that takes batch requests: one request),
  // the cases are taken in blocks of `batch` cases of every target; the job that starts a block's
  // first case of a target generates up to `batch` of them and runs them through that side
  // together, and a job that starts another of them meanwhile sets it aside and starts the next
  // rather than wait for another's batch (at most as many batches at once as a worker pool of the
  // batch path takes calls). Each case then finishes (its other sides, the comparison,
  // the shrinking of its findings) on whichever job takes it, as without batches. 1 runs every
  // case alone. The report and the corpus are the same for every value; cases started before the
  // budget ran out finish, and an interrupt ends the run between two cases. 1 .. kMaxBatch.
  int batch = kDefaultBatch;
  // Processes that draw the cases (GenerationPool: copies of this process, forked when the run
  // starts), so that generation, one case at a time in a process, keeps up with the jobs. None: as
  // many as the jobs (at most the cores) when they are more than one, else none; 0 draws in this
  // process. The cases,
  // the report and the corpus are the same for every value. 0 .. kMaxJobs.
  std::optional<int> generators;
  // The default pairs include each non-reference implementation against itself (K:C vs K:C: the
  // case runs twice, a difference is a `nondeterminism` finding). An order-of-arrival contract
  // runs twice on every case; any other on one case in this many (0: never). A self pair asked for
  // with `pairs` runs on every case.
  int64_t nondeterminism_every = kDefaultNondeterminismEvery;  // >= 0
  const std::atomic<bool>* stop = nullptr;  // set by SIGINT/SIGTERM: finish the case, then stop
  std::ostream* progress = nullptr;         // one status line every kProgressIntervalSeconds
  // When set, receives the signature of every finding the run saw, new or known (--baseline).
  std::set<std::string>* signatures_seen = nullptr;
  // Provenance of entries and reports.
  std::string commit = "unknown", device, tool_version;
};

// Without --pair: cuda:C vs ref:C (every non-ref backend kind that is available here, every
// contract both implement) and cuda:C vs cuda:C (the determinism check, sampled: see
// nondeterminism_every); when there is no such backend, every pair of ref contracts.
std::vector<corpus::BackendPair> default_pairs(const Registry& registry, const OpInfo& op);
// The requested pairs that apply to `op` (both sides implement it), or the defaults.
std::vector<corpus::BackendPair> pairs_for(const Registry& registry, const OpInfo& op,
                                           const std::vector<corpus::BackendPair>& requested);

// std::invalid_argument naming the option when a number is out of range (a NaN or infinite
// budget, a negative case bound, no shrink calls, a negative or NaN shrink time, jobs outside
// 1 .. kMaxJobs, generators outside 0 .. kMaxJobs, a batch outside 1 .. kMaxBatch, a shard outside
// 0 <= i < n).
void check_options(const CampaignOptions& options);

// Checks the options and the corpus folder (it must be a folder, or creatable, that takes new
// files) before any case runs. Throws std::runtime_error when nothing can run (unknown op, no
// pair applies, a pair's backend is unavailable, the corpus folder is unusable) and ParseError
// when the corpus holds a broken entry. A corpus write that fails during the run (a full disk)
// ends the run early: the report is still returned, with the error (and the system's reason) in
// run.error.
reports::Report run_campaign(const Registry& registry, const CampaignOptions& options);

// "2026-05-04T12:00:00Z"
std::string utc_now();

}  // namespace bitparity::campaign
