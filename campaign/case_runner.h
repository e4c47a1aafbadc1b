// One case through backend pairs, as a campaign runs it on each of its threads: each backend runs
// once per case (a self pair's second run aside), then each pair is classified. Shared by the
// campaign engine and its benchmark (bench/campaign_bench.cpp), so the benchmark times the
// campaign's own path.
//
// Thread safety: one CaseRunner may be used from several threads at once. A kind's calls run at most
// BackendKind::concurrent_calls at a time (the reference's and the CUDA kernels' without a limit;
// one worker or a plug-in one at a time; a pool of N workers N at a time).
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/compare.h"
#include "core/outcome.h"
#include "corpus/differential.h"

namespace bitparity::campaign {

// Why a backend could not be used at all (an unknown name, an unusable kind): the caller reports it.
using OnUnusable = std::function<void(const std::string& backend, const std::string& what)>;
// A batch that failed as a whole (run_batches), whose cases then run alone: the caller reports it,
// since a fault of the batch path alone shows nowhere else when each case passes alone.
using OnBatchFailed = std::function<void(const std::string& backend, size_t cases, const std::string& what)>;

class CaseRunner {
 public:
  // The kinds' call slots are made here, for every kind the registry has now: add exec workers,
  // plug-ins and peers to the registry first.
  CaseRunner(const Registry& registry, CompareOptions options, OnUnusable on_unusable = {},
             OnBatchFailed on_batch_failed = {});

  // corpus::run_side under the kind's lock; nullopt (after on_unusable) when the backend cannot be
  // used at all.
  std::optional<Outcome> run_side(const std::string& backend, const Case& c) const;
  // Both sides, a then b, and the classification; throws (as corpus::diff_case) for a backend that
  // cannot be used at all.
  corpus::DiffResult diff(const Case& c, const corpus::BackendPair& pair) const;
  // Outcomes of backends on one case computed before run_pairs (by run_batches), by backend name.
  using Ready = std::map<std::string, Outcome>;
  // Every pair on the case, each backend run once (a self pair runs its backend twice): the result
  // per pair, nullopt where a side could not be used at all. A backend whose outcome `ready` holds
  // is not run again, and a self pair whose second run `again` holds (a second batch, run_batches)
  // is not run a second time here; the outcomes are moved out of both.
  std::vector<std::optional<corpus::DiffResult>> run_pairs(const Case& c, const std::vector<corpus::BackendPair>& pairs,
                                                           Ready* ready = nullptr, Ready* again = nullptr) const;
  // Whether `backend` has a batch path for `op` (Registry::batch_impl) and its kind can run here.
  bool batches(const std::string& op, const std::string& backend) const;
  // Each of `backends` that batches() the cases' op (one op and direction), run once on all of
  // `cases` under its kind's slot (run_batch_impl): per case the outcome run_side would give, in
  // ready[i][backend]. Backends without a batch path are left for run_pairs, and so is a backend
  // whose batch fails as a whole (a staging allocation, a worker's fault): on_batch_failed is told,
  // and its cases then run alone, where the failure, if it is theirs, shows as it does without batches.
  std::vector<Ready> run_batches(const std::vector<const Case*>& cases, const std::vector<std::string>& backends) const;

  const CompareOptions& compare_options() const { return options_; }

 private:
  // A kind's free calls: taken for one call, given back when it ends.
  class Slots {
   public:
    explicit Slots(int n) : free_(n) {}
    void take();
    void give();

   private:
    std::mutex mutex_;
    std::condition_variable freed_;
    int free_;
  };
  class Held;  // one call's slot (nothing for a kind without a limit)
  Held slot_for(const std::string& backend) const;

  const Registry& registry_;
  CompareOptions options_;
  OnUnusable on_unusable_;
  OnBatchFailed on_batch_failed_;
  // The kinds with a limit; the map itself is never changed after construction.
  std::unique_ptr<std::map<std::string, Slots>> kind_slots_;
  std::unique_ptr<Slots> unknown_kind_slot_;  // a kind the registry did not have at construction: one call at a time
};

}  // namespace bitparity::campaign
