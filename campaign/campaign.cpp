#include "campaign/campaign.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <ctime>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <ostream>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include <rapidcheck/Random.h>

#include "campaign/case_runner.h"
#include "campaign/generation_pool.h"
#include "campaign/ordered_work.h"
#include "core/error.h"
#include "core/gen.h"
#include "core/outcome.h"
#include "core/random.h"
#include "core/safe_file.h"
#include "corpus/entry.h"
#include "corpus/replay.h"

namespace bitparity::campaign {
namespace {

using Clock = std::chrono::steady_clock;
using corpus::BackendPair;
using corpus::DiffResult;
using corpus::DiffVerdict;

constexpr std::string_view kGenerationFailed = "generation_failed";
// A backend that cannot be used at all (an unknown name: the command line's error), not one that
// failed on a case: that is a kBackendError finding.
constexpr std::string_view kBackendUnusable = "backend_unusable";

struct Target {
  const OpInfo* op = nullptr;
  Direction direction = Direction::kForward;
  std::vector<BackendPair> pairs;
  std::vector<const ContractInfo*> contracts;  // those the pairs name, each once
};

// Whether every contract of the target's pairs accepts the case (OpInfo::validate).
bool accepted_by_every_side(const Target& target, const Case& c) {
  for (const ContractInfo* contract : target.contracts) {
    try {
      target.op->validate(c, *contract);
    } catch (const RejectError&) {
      return false;
    }
  }
  return true;
}

void require_available(const Registry& registry, const std::string& backend) {
  const std::string kind = split_backend_name(backend).first;
  if (!registry.backend(kind))
    throw std::runtime_error("unknown backend kind '" + kind + "' in " + backend + " (see `bitparity list`)");
  if (std::optional<std::string> why = corpus::unavailable_here(registry, backend))
    throw std::runtime_error(backend + " cannot run here: " + *why);
}

std::vector<const OpInfo*> selected_ops(const Registry& registry, const std::vector<std::string>& names) {
  std::vector<const OpInfo*> ops;
  if (names.empty()) {
    for (const OpInfo& op : registry.ops()) ops.push_back(&op);
    return ops;
  }
  for (const std::string& name : names) {
    const OpInfo* op = registry.op(name);
    if (!op) throw std::runtime_error("unknown op '" + name + "' in --ops (see `bitparity list`)");
    ops.push_back(op);
  }
  return ops;
}

std::vector<Target> make_targets(const Registry& registry, const CampaignOptions& options) {
  for (const BackendPair& pair : options.pairs)
    require_available(registry, pair.a), require_available(registry, pair.b);
  std::vector<Target> targets;
  std::set<std::string> used_pairs;
  for (const OpInfo* op : selected_ops(registry, options.ops)) {
    const std::vector<BackendPair> pairs = pairs_for(registry, *op, options.pairs);
    if (pairs.empty()) continue;
    for (const BackendPair& p : pairs) used_pairs.insert(p.name());
    for (const BackendPair& p : options.pairs)  // K:*,L:* is used where it gave a pair
      if (p.every_contract() && !pairs_for(registry, *op, {p}).empty()) used_pairs.insert(p.name());
    std::vector<const ContractInfo*> contracts;
    for (const BackendPair& p : pairs)
      for (const std::string& backend : {p.a, p.b})
        if (const ContractInfo* k = op->contract(split_backend_name(backend).second);
            k && std::find(contracts.begin(), contracts.end(), k) == contracts.end())
          contracts.push_back(k);
    for (const auto& [direction, specs] : op->inputs)
      if (op->generate) targets.push_back({op, direction, pairs, contracts});
  }
  for (const BackendPair& pair : options.pairs)
    if (!used_pairs.count(pair.name()))
      throw std::runtime_error("--pair " + pair.a + "," + pair.b +
                               " applies to no selected op: no op has both "
                               "implementations (see `bitparity list`)");
  if (targets.empty()) throw std::runtime_error("nothing to run: no selected op has two implementations to compare");
  return targets;
}

void fill_run_info(reports::RunInfo& run, const CampaignOptions& options, const std::vector<Target>& targets) {
  run.seed = options.seed;
  run.budget_seconds = options.budget_seconds;
  run.max_cases = options.max_cases;
  run.shards = {options.shard.name()};
  run.commit = options.commit;
  run.device = options.device;
  run.tool_version = options.tool_version;
  run.date = utc_now();
  std::set<std::string> backends, pairs, ops;
  for (const Target& t : targets) {
    for (const BackendPair& p : t.pairs) backends.insert(p.a), backends.insert(p.b), pairs.insert(p.name());
    if (!ops.insert(t.op->name).second) continue;
    for (const ContractInfo& c : t.op->contracts) run.contracts.push_back({t.op->name, c.name, c.derived_from});
  }
  run.backends.assign(backends.begin(), backends.end());
  run.pairs.assign(pairs.begin(), pairs.end());
}

// What one pair concluded on a case, as the thread that ran it saw it.
struct PairOutcome {
  const BackendPair* pair = nullptr;
  DiffVerdict verdict = DiffVerdict::kSkip;
  bool bounded = false;                           // judged by a contract's error bound (DiffResult)
  std::string kind;                               // the finding kind, or the skip reason
  std::map<std::string, int64_t> ulp_histogram;   // over the outputs that differ in bits
  std::string signature;                          // findings only
  // Findings this thread shrank (see Campaign::claim): the case and result an entry records.
  std::optional<std::pair<Case, DiffResult>> shrunk;
};

// Everything one case produced; applied to the report in case order (Campaign::commit).
struct CaseResult {
  int64_t global = 0;
  const Target* target = nullptr;
  bool generated = false;
  std::vector<std::string> tags;   // the case's edge classes, each once
  std::vector<PairOutcome> pairs;  // the pairs that ran on it, in the target's order
};

std::map<std::string, int64_t> ulp_histogram_of(const DiffResult& r) {
  std::map<std::string, int64_t> histogram;
  if (r.comparison)
    for (const OutputComparison& out : r.comparison->outputs)
      for (const auto& [bucket, n] : out.ulp_histogram) histogram[bucket] += n;
  return histogram;
}

// The run has two halves. work() is a pure function of the case index (given thread-safe
// backends) and may run on any thread: it generates the case, runs its pairs and shrinks the
// findings it claims. commit() runs in case order, one case at a time, and alone touches the
// report, the corpus and the set of known signatures, so the output does not depend on the jobs.
class Campaign {
 public:
  Campaign(const Registry& registry, const CampaignOptions& options)
      : options_(options),
        targets_(make_targets(registry, options)),
        runner_(registry, CompareOptions{options.strict_nan},
                [this](const std::string& backend, const std::string& what) { warn_once(backend, what); },
                [this](const std::string& backend, size_t cases, const std::string& what) {
                  batch_failed(backend, cases, what);
                }) {
    if (!options.corpus_dir.empty()) {
      check_output_folder(options.corpus_dir);
      corpus_signatures_ = corpus::load_signatures(options.corpus_dir);
      known_ = corpus_signatures_;
    }
    fill_run_info(report_.run, options, targets_);
    batching_ = batching_of_targets();
    block_ = block_size();
    target_period_ = target_period();
    if (block_ > 1 && block_ % target_period_ != 0) throw std::logic_error("campaign: a block is not a whole number of target periods");
    units_at_once_ = units_at_once(registry);
  }

  reports::Report run() {
    start_ = last_progress_ = Clock::now();
    OrderedWork<CaseResult> w;
    w.may_start = [this](int64_t local) { return may_start(case_index(options_.shard, local)); };
    w.work = [this](int64_t local) {
      const int64_t global = case_index(options_.shard, local);
      if (block_ == 1 || !batches(target_of(global))) return run_case(global);
      Prepared p = take_prepared(local);
      return finish(p);
    };
    w.commit = [this](int64_t, CaseResult& r) { return commit(r); };
    // A unit's cases are a group: the job that starts its first case prepares it (its batches);
    // the jobs that start its other cases meanwhile set them aside and go on, and once it is
    // prepared they are open to every job. A target with no batch path here runs its cases alone.
    // The budget stops cases from starting (those started still finish, as without batches); an
    // interrupt also ends the run before a started case that has not begun, so that it ends
    // promptly however many cases are set aside.
    if (block_ > 1) {
      w.group = [this](int64_t local) -> int64_t {
        return batches(target_of(case_index(options_.shard, local))) ? unit_first(local) : -1;
      };
      w.prepare = [this](int64_t first) {
        std::unique_lock<std::mutex> lock(units_mutex_);
        ready_unit(unit_key(first), lock);
      };
    }
    w.may_go_on = [this](int64_t) { return !interrupted(); };
    // Forked before the jobs' threads start; ended (its processes too) before the report is returned.
    std::unique_ptr<GenerationPool> pool = start_generators();
    pool_ = pool.get();
    run_ordered(options_.jobs, kCasesInFlightPerJob * options_.jobs, w, block_, units_at_once_);
    pool_ = nullptr;
    pool.reset();
    report_.run.elapsed_seconds = elapsed();
    report_.run.interrupted = interrupted();
    report_.run.batch_failures = batch_failures_;
    report_progress(true);
    if (options_.progress)
      for (const auto& [backend, n] : batch_failures_)
        *options_.progress << "warning: " << n << " batch" << (n == 1 ? "" : "es") << " on " << backend
                           << " failed as a whole; their cases ran again alone\n";
    return report_;
  }

 private:
  bool interrupted() const { return options_.stop && options_.stop->load(); }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // A corpus write that failed ends the run through commit's false.
  bool may_start(int64_t global) const {
    return !interrupted() && elapsed() < options_.budget_seconds &&
           !(options_.max_cases && global >= *options_.max_cases);
  }

  const Target& target_of(int64_t global) const { return targets_[static_cast<size_t>(global) % targets_.size()]; }

  // Whether a side of the target's pairs has a batch path here (CaseRunner::batches); known from
  // the constructor on (batching_).
  bool batches(const Target& t) const { return batching_[static_cast<size_t>(&t - targets_.data())] != 0; }
  std::vector<char> batching_of_targets() const {
    std::vector<char> out;
    for (const Target& t : targets_) {
      bool any = false;
      for (const BackendPair& pair : t.pairs)
        any = any || runner_.batches(t.op->name, pair.a) || runner_.batches(t.op->name, pair.b);
      out.push_back(any ? 1 : 0);
    }
    return out;
  }

  // Local case indices a block spans: 1 (every case alone), or options.batch cases of every target
  // where some target batches(). The results do not depend on it.
  int64_t block_size() const {
    if (options_.batch <= 1) return 1;
    for (const Target& t : targets_)
      if (batches(t)) return static_cast<int64_t>(options_.batch) * static_cast<int64_t>(targets_.size());
    return 1;
  }

  // Units prepared at once: as many as the batch paths' kinds take calls at once (pools of workers:
  // the sum of their workers), so that later units do not queue beside the ones next in line; no
  // limit where some such kind takes any number (the CUDA kernels).
  int units_at_once(const Registry& registry) const {
    std::map<std::string, int> calls;  // limited kinds with a batch path in the pairs
    for (const Target& t : targets_)
      for (const BackendPair& pair : t.pairs)
        for (const std::string& side : {pair.a, pair.b}) {
          if (!runner_.batches(t.op->name, side)) continue;
          const std::string name = split_backend_name(side).first;
          const BackendKind* kind = registry.backend(name);
          if (kind && kind->concurrent_calls == kAnyNumberOfCalls) return std::numeric_limits<int>::max();
          calls[name] = kind ? std::max(kind->concurrent_calls, 1) : 1;
        }
    if (calls.empty()) return std::numeric_limits<int>::max();
    int sum = 0;
    for (const auto& [name, n] : calls) sum += n;
    return sum;
  }

  // A case generated, with the pairs that run on it; the outcomes of sides already run on it
  // (a batch's) in `ready`.
  struct Prepared {
    CaseResult result;
    std::optional<Case> c;
    std::vector<const BackendPair*> runs;  // into target.pairs, which outlives every result
    std::vector<BackendPair> pairs;
    CaseRunner::Ready ready;
    CaseRunner::Ready again;  // the second runs of its self pairs, where a second batch ran them
  };

  // Any thread.
  Prepared prepare(int64_t global) {
    Prepared p;
    p.result.global = global;
    p.result.target = &target_of(global);
    const Target& target = *p.result.target;
    p.c = generate(target, global);
    p.result.generated = p.c.has_value();
    if (p.c && target.op->classes) {
      const std::vector<std::string> tags = target.op->classes(*p.c).tags;
      const std::set<std::string> unique(tags.begin(), tags.end());
      p.result.tags.assign(unique.begin(), unique.end());
    }
    for (const BackendPair& pair : target.pairs)
      if (!pair.twice() || runs_twice_on(*target.op, pair, global)) p.runs.push_back(&pair), p.pairs.push_back(pair);
    return p;
  }

  // Any thread: the case's pairs (the sides in p.ready not run again) and their findings shrunk.
  CaseResult finish(Prepared& p) {
    const Target& target = *p.result.target;
    std::vector<std::optional<DiffResult>> diffs(p.pairs.size());
    if (p.c) diffs = runner_.run_pairs(*p.c, p.pairs, &p.ready, &p.again);
    for (size_t i = 0; i < p.runs.size(); ++i) {
      PairOutcome o;
      if (p.c && diffs[i]) o = outcome_of(target, *p.runs[i], *p.c, *diffs[i], p.result.global);
      else o.kind = p.c ? kBackendUnusable : kGenerationFailed;
      o.pair = p.runs[i];
      p.result.pairs.push_back(std::move(o));
    }
    p.c.reset();  // a batched case's tensors are let go as it finishes
    p.ready.clear();
    return std::move(p.result);
  }

  CaseResult run_case(int64_t global) {
    Prepared p = prepare(global);
    return finish(p);
  }

  // Up to options.batch of a block's cases of one target (a unit), prepared together
  // (prepare_unit) by the job that starts its first case, and taken by each case's own work, on
  // any job.
  struct Unit {
    bool ready = false;            // under units_mutex_
    std::exception_ptr error;      // preparing the unit failed: every case of it fails so
    std::map<int64_t, Prepared> cases;  // by local index; a case's work takes its own
  };
  // Block, target, and which options.batch cases of the block's cases of the target (a shard sees
  // each of its targets once a target period, and may never see some).
  using UnitKey = std::tuple<int64_t, const Target*, int64_t>;

  // Local index l's target is targets_[(l * shard.count + shard.index) % targets], so the local
  // indices of one target recur every target_period_ = targets / gcd(shard.count, targets): a
  // block's cases of l's target are l's residue modulo the period from the block's start on.
  int64_t target_period() const {
    const auto targets = static_cast<int64_t>(targets_.size());
    return targets / std::gcd(options_.shard.count, targets);
  }

  // The local indices of the unit `key`, in order, up to the case bound: at most options.batch, a
  // period apart.
  std::vector<int64_t> unit_cases_of(const UnitKey& key) const {
    const auto& [block, target, sub] = key;
    std::vector<int64_t> locals;
    const int64_t start = block * block_;
    int64_t first = start;  // the block's first case of the target
    while (first < start + target_period_ && &target_of(case_index(options_.shard, first)) != target) ++first;
    if (first == start + target_period_) throw std::logic_error("campaign: a unit of a target its shard never sees");
    for (int64_t j = 0, local = first + sub * options_.batch * target_period_;
         j < options_.batch && local < start + block_; ++j, local += target_period_) {
      if (options_.max_cases && case_index(options_.shard, local) >= *options_.max_cases) break;
      locals.push_back(local);
    }
    return locals;
  }

  // The unit of the case at local index `local`.
  UnitKey unit_key(int64_t local) const {
    const int64_t block = local / block_;
    const int64_t position = (local - block * block_) / target_period_;  // among the block's cases of the target
    return {block, &target_of(case_index(options_.shard, local)), position / options_.batch};
  }

  // Any thread, with units_mutex_ held through `lock`: unit `key`, prepared on this thread if no
  // other started it, else waited for.
  std::shared_ptr<Unit> ready_unit(const UnitKey& key, std::unique_lock<std::mutex>& lock) {
    const auto [it, fresh] = units_.try_emplace(key, std::make_shared<Unit>());
    const std::shared_ptr<Unit> unit = it->second;
    if (fresh) {
      lock.unlock();
      std::exception_ptr error;
      std::map<int64_t, Prepared> cases;
      try {
        cases = prepare_unit(key);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      unit->cases = std::move(cases);
      unit->error = error;
      unit->ready = true;
      unit_ready_.notify_all();
    }
    unit_ready_.wait(lock, [&] { return unit->ready; });
    return unit;
  }

  // The first local index of the unit of `local` (run_ordered's group).
  int64_t unit_first(int64_t local) const {
    const int64_t position = (local - local / block_ * block_) / target_period_;
    return local - position % options_.batch * target_period_;
  }

  // Any thread, with block_ > 1: the case at local index `local`, prepared with its unit (by the
  // group's prepare, so found ready). Each case then finishes on the thread that takes it.
  Prepared take_prepared(int64_t local) {
    const UnitKey key = unit_key(local);
    std::unique_lock<std::mutex> lock(units_mutex_);
    const std::shared_ptr<Unit> unit = ready_unit(key, lock);
    if (unit->error) std::rethrow_exception(unit->error);
    const auto mine = unit->cases.find(local);
    if (mine == unit->cases.end()) throw std::logic_error("campaign: case " + std::to_string(local) + " is not in its unit");
    Prepared p = std::move(mine->second);
    unit->cases.erase(mine);
    if (unit->cases.empty()) units_.erase(key);
    return p;
  }

  // Any thread: unit `key`'s cases generated, with each backend that has a batch path run on them
  // together (each batch the cases whose pairs name that backend), and again where the backend's
  // self pair runs on every case (a second batch); its outcomes wait in each case's `ready` and
  // `again`. After a stop request no batch runs: the cases that still start run their sides alone.
  std::map<int64_t, Prepared> prepare_unit(const UnitKey& key) {
    const auto& target = std::get<1>(key);
    const std::vector<int64_t> locals = unit_cases_of(key);
    std::vector<Prepared> prepared;
    prepared.reserve(locals.size());
    for (const int64_t local : locals) prepared.push_back(prepare(case_index(options_.shard, local)));
    std::vector<std::string> backends;
    for (const BackendPair& pair : target->pairs)
      for (const std::string& side : {pair.a, pair.b})
        if (runner_.batches(target->op->name, side) &&
            std::find(backends.begin(), backends.end(), side) == backends.end())
          backends.push_back(side);
    for (const std::string& backend : backends) {
      if (interrupted()) break;
      std::vector<Prepared*> users;
      for (Prepared& p : prepared)
        if (p.c && std::any_of(p.pairs.begin(), p.pairs.end(),
                               [&](const BackendPair& q) { return q.a == backend || q.b == backend; }))
          users.push_back(&p);
      if (users.empty()) continue;
      std::vector<const Case*> cases;
      for (const Prepared* p : users) cases.push_back(&*p->c);
      std::vector<CaseRunner::Ready> ready = runner_.run_batches(cases, {backend});
      for (size_t k = 0; k < users.size(); ++k)
        for (auto& [name, outcome] : ready[k]) users[k]->ready.emplace(name, std::move(outcome));
      // The second runs of the backend's self pair where it runs on every case (an order-of-arrival
      // contract, a self pair asked for), a batch of their own: those cases would otherwise each pay
      // a round trip alone. A self pair sampled on one case in --nondeterminism-every keeps its
      // second run on the job that finishes the case, which a batch of one or two cases on the job
      // preparing the unit would not make cheaper. A case whose first batch failed as a whole runs
      // both alone, as under --batch 1.
      const auto self = std::find_if(target->pairs.begin(), target->pairs.end(),
                                     [&](const BackendPair& q) { return q.twice() && q.a == backend; });
      if (self == target->pairs.end() || !runs_twice_always(*target->op, *self) || interrupted()) continue;
      std::vector<Prepared*> twice;
      for (Prepared* p : users)
        if (p->ready.count(backend)) twice.push_back(p);
      if (twice.empty()) continue;
      cases.clear();
      for (const Prepared* p : twice) cases.push_back(&*p->c);
      ready = runner_.run_batches(cases, {backend});
      for (size_t k = 0; k < twice.size(); ++k)
        for (auto& [name, outcome] : ready[k]) twice[k]->again.emplace(name, std::move(outcome));
    }
    std::map<int64_t, Prepared> out;
    for (size_t i = 0; i < locals.size(); ++i) out.emplace(locals[i], std::move(prepared[i]));
    return out;
  }

  // Case `global`, drawn by the generator processes (pool_) or, without them, here under
  // generate_mutex_: RapidCheck keeps its implicit parameters (gen::exec's handler) in process-wide
  // stacks that are not synchronized, so a process draws one case at a time.
  std::optional<Case> generate(const Target& target, int64_t global) {
    std::optional<Drawn> d;
    if (pool_) d = pool_->take((global - options_.shard.index) / options_.shard.count);
    if (!d) {
      const std::lock_guard<std::mutex> lock(generate_mutex_);
      d = draw(target, global);
    }
    if (!d->c) warn_once((d->lost ? "generator process of " : "generator of ") + target.op->name, d->error);
    return std::move(d->c);
  }

  // One process at a time. Aimed at inputs that every side accepts (a rejection compares no
  // arithmetic): a case that a contract of the pairs rejects is drawn again, from the next seed of
  // generation_seed, up to kAcceptAttempts times, each at a larger size; one case in
  // kKeepRejectionsEvery keeps its first draw, so that rejections (error_mismatch: the sides' input
  // checks) are still tested.
  // Tensors are filled from one seed whatever their size (gen::SeededTensors): a campaign shrinks
  // its findings with the op's shrinker, never through RapidCheck.
  Drawn draw(const Target& target, int64_t global) const {
    const gen::SeededTensors seeded;
    const int size = static_cast<int>((global / static_cast<int64_t>(targets_.size())) % (kMaxGenSize + 1));
    const bool keep_first_draw = global % kKeepRejectionsEvery == 0;
    try {
      for (int attempt = 0;; ++attempt) {
        // A small size may draw the rejected shape every time (zero rows): each draw again grows it.
        const int draw_size = std::min(kMaxGenSize, size + kRedrawSizeStep * attempt);
        Case c = target.op->generate(target.direction)(rc::Random(generation_seed(options_.seed, global, attempt)),
                                                        draw_size)
                     .value();
        if (keep_first_draw || attempt + 1 >= kAcceptAttempts || accepted_by_every_side(target, c)) return {c, {}};
      }
    } catch (const std::exception& e) {
      return {std::nullopt, e.what()};
    } catch (...) {
      return {std::nullopt, "an exception that is not a std::exception"};
    }
  }

  // The generator processes: options.generators, or as many as the jobs (at most the cores) when
  // they are more than one.
  std::unique_ptr<GenerationPool> start_generators() {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int processes = options_.generators.value_or(options_.jobs > 1 ? std::min(options_.jobs, cores) : 0);
    if (processes == 0) return nullptr;
    std::optional<int64_t> end;  // the first local index past the case bound
    if (options_.max_cases)
      end = std::max<int64_t>(0, (*options_.max_cases - options_.shard.index + options_.shard.count - 1) /
                                     options_.shard.count);
    auto pool = std::make_unique<GenerationPool>(
        processes, std::max<int64_t>(2 * block_, kPoolLookaheadPerProcess * int64_t{processes}), end, [this](int64_t local) {
          const int64_t global = case_index(options_.shard, local);
          return draw(target_of(global), global);
        });
    if (const int alive = pool->alive(); alive < processes && options_.progress) {
      const std::lock_guard<std::mutex> lock(output_mutex_);
      *options_.progress << "warning: " << processes - alive << " of " << processes
                         << " generator processes could not be started ("
                         << (pool->failure().empty() ? "ended at once" : pool->failure()) << ")"
                         << (alive == 0 ? "; cases are drawn in this process" : "") << "\n";
    }
    return pool;
  }

  PairOutcome outcome_of(const Target& target, const BackendPair& pair, const Case& c, const DiffResult& r,
                         int64_t global) {
    PairOutcome o;
    o.pair = &pair;
    o.verdict = r.verdict;
    o.bounded = r.bounded;
    o.kind = r.kind;
    o.ulp_histogram = ulp_histogram_of(r);
    if (r.verdict != DiffVerdict::kFinding) return o;
    // Shrinking keeps the signature, so the one seen here is the one an entry records.
    o.signature = corpus::finding_signature(*target.op, c, pair, r);
    if (claim(o.signature, global)) o.shrunk = shrink(*target.op, pair, c, r, o.signature);
    return o;
  }

  // Whether the case `global` shrinks its finding: when the signature is not in the corpus and no
  // earlier case claimed it. The earliest case showing a signature always claims it, and it is the
  // one whose finding commit writes; a later case that claimed it first (on another thread) shrank
  // in vain. One thread shrinks each signature, as a sequential run does.
  bool claim(const std::string& signature, int64_t global) {
    if (corpus_signatures_.count(signature)) return false;
    const std::lock_guard<std::mutex> lock(claims_mutex_);
    const auto [it, first] = claims_.try_emplace(signature, global);
    if (first) return true;
    if (global >= it->second) return false;
    it->second = global;
    return true;
  }

  // Case order, one case at a time. False ends the run (a corpus write failed).
  bool commit(CaseResult& r) {
    ++cases_;
    const Target& target = *r.target;
    if (r.generated) count_coverage(target, r.tags);
    for (PairOutcome& o : r.pairs) {
      reports::PairCounts& counts = counts_for(target, *o.pair);
      ++counts.cases;
      for (const auto& [bucket, n] : o.ulp_histogram) counts.ulp_histogram[bucket] += n;
      if (o.verdict == DiffVerdict::kAgree) ++(o.bounded ? counts.bounded_agreements : counts.agreements);
      if (o.verdict == DiffVerdict::kSkip) ++counts.skips[o.kind];
      if (o.verdict == DiffVerdict::kFinding) commit_finding(target, o, counts, r.global);
    }
    report_progress(false);
    return !report_.run.error;
  }

  void commit_finding(const Target& target, const PairOutcome& o, reports::PairCounts& counts, int64_t global) {
    ++counts.mismatches[o.kind];
    if (options_.signatures_seen) options_.signatures_seen->insert(o.signature);
    if (!known_.insert(o.signature).second) {
      ++counts.known_findings;
      return;
    }
    // claim() guarantees it: this case is the earliest that showed the signature.
    if (!o.shrunk) throw std::logic_error("campaign: the first finding of " + o.signature + " was not shrunk");
    const auto& [smallest, result] = *o.shrunk;
    write_finding(target, *o.pair, smallest, result, o.signature, global);
    ++counts.new_findings[result.kind];
  }

  // The edge classes the case is in (the op's classify/tag labels), counted once per case
  // however many pairs run it.
  void count_coverage(const Target& target, const std::vector<std::string>& tags) {
    const OpInfo& op = *target.op;
    const std::string direction(direction_name(target.direction));
    reports::Coverage& coverage = reports::coverage_for(report_, op.name, direction);
    if (coverage.cases == 0 && coverage.required.empty() && op.required_tags) {
      coverage.required = op.required_tags(target.direction);
      std::sort(coverage.required.begin(), coverage.required.end());
      coverage.required.erase(std::unique(coverage.required.begin(), coverage.required.end()), coverage.required.end());
    }
    ++coverage.cases;
    for (const std::string& tag : tags) ++coverage.tags[tag];
  }

  reports::PairCounts& counts_for(const Target& target, const BackendPair& pair) {
    return reports::counts_for(report_, target.op->name, std::string(direction_name(target.direction)), pair.a, pair.b);
  }

  // Whether the self pair (K:C vs K:C) runs on every case: when the user asked for it or the
  // contract depends on the order of arrival.
  bool runs_twice_always(const OpInfo& op, const BackendPair& pair) const {
    if (!options_.pairs.empty()) return true;
    const ContractInfo* contract = op.contract(split_backend_name(pair.a).second);
    return contract && contract->order_of_arrival;
  }

  // Whether the self pair runs on case `global`: always (runs_twice_always), else on one case in
  // nondeterminism_every.
  bool runs_twice_on(const OpInfo& op, const BackendPair& pair, int64_t global) const {
    if (runs_twice_always(op, pair)) return true;
    return options_.nondeterminism_every > 0 && global % options_.nondeterminism_every == 0;
  }

  void warn_once(const std::string& who, const std::string& what) {
    const std::lock_guard<std::mutex> lock(output_mutex_);
    if (!warned_.insert(who).second || !options_.progress) return;
    *options_.progress << "warning: " << who << " failed (counted as skipped; later failures are not shown): " << what
                       << "\n";
  }

  // A batch that failed as a whole; its cases ran again alone. The first of each backend is shown,
  // and the count at the end of the run: where every case then passed alone, the fault is the batch
  // path's own (a staging or arena bug, a worker that cannot take a batch), which no count shows.
  void batch_failed(const std::string& backend, size_t cases, const std::string& what) {
    const std::lock_guard<std::mutex> lock(output_mutex_);
    if (batch_failures_[backend]++ == 0 && options_.progress)
      *options_.progress << "warning: a batch of " << cases << " cases on " << backend
                         << " failed as a whole; its cases ran again alone (later batch failures are counted at the end): "
                         << what << "\n";
  }

  // Shrinks while the finding keeps its signature (kind, output and the op's shape and value
  // classes: a NaN clamp's finding does not become a clamp = -1 one), for at most max_shrink_calls
  // runs and shrink_seconds; returns the case and its result.
  std::pair<Case, DiffResult> shrink(const OpInfo& op, const BackendPair& pair, const Case& c, const DiffResult& r,
                                     const std::string& signature) {
    const fuzz::StillFails still_fails = [&](const Case& candidate) {
      const DiffResult d = runner_.diff(candidate, pair);
      return d.verdict == DiffVerdict::kFinding && corpus::finding_signature(op, candidate, pair, d) == signature;
    };
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.shrink_seconds));
    const fuzz::ShrinkOptions shrink_options{options_.max_shrink_calls,
                                             [this, deadline] { return interrupted() || Clock::now() >= deadline; }};
    Case smallest = fuzz::shrink_case(op, c, still_fails, shrink_options).smallest;
    DiffResult result = runner_.diff(smallest, pair);
    // A backend that does not reproduce its own result (nondeterminism) keeps the original case.
    if (result.verdict != DiffVerdict::kFinding || corpus::finding_signature(op, smallest, pair, result) != signature)
      return {c, r};
    return {std::move(smallest), std::move(result)};
  }

  void write_finding(const Target& target, const BackendPair& pair, const Case& c, const DiffResult& r,
                     const std::string& signature, int64_t global) {
    const corpus::Provenance provenance{options_.seed,   global,          options_.shard.name(),
                                        options_.commit, options_.device, options_.tool_version,
                                        utc_now()};
    const std::string pins = corpus::default_pin(pair, options_.same_contract_pin);
    const nlohmann::json entry =
        corpus::make_entry(*target.op, c, pair, r, signature, pins, provenance, options_.strict_nan);
    reports::FindingRecord record;
    if (!options_.corpus_dir.empty()) {
      try {
        record.file = corpus::write_entry(options_.corpus_dir, c, entry).string();
      } catch (const std::exception& e) {
        // A full disk or a folder gone read-only: stop here, and keep the finding and the summary.
        report_.run.error = std::string("cannot write the corpus entry: ") + e.what();
        const std::lock_guard<std::mutex> lock(output_mutex_);
        if (options_.progress) *options_.progress << "error: " << *report_.run.error << "\n";
      }
    }
    record.signature = signature;
    record.op = target.op->name;
    record.direction = std::string(direction_name(target.direction));
    record.a = pair.a, record.b = pair.b;
    record.kind = r.kind, record.output = r.output;
    record.pins = pins;
    record.message = r.message;
    record.first = entry["finding"]["first"];
    report_.findings.push_back(std::move(record));
  }

  // From commit (one case at a time) and after the run: the counts are those applied so far.
  void report_progress(bool final) {
    if (!options_.progress) return;
    const Clock::time_point now = Clock::now();
    if (!final && std::chrono::duration<double>(now - last_progress_).count() < kProgressIntervalSeconds) return;
    last_progress_ = now;
    const double seconds = elapsed();
    char line[256];
    std::snprintf(line, sizeof line, "campaign %s: %.1fs / %.0fs, %lld cases (%.0f/s), %zu new findings%s\n",
                  options_.shard.name().c_str(), seconds, options_.budget_seconds, static_cast<long long>(cases_),
                  seconds > 0 ? static_cast<double>(cases_) / seconds : 0.0, report_.findings.size(),
                  final && report_.run.error ? " (stopped by an error)"
                  : final && interrupted()   ? " (interrupted)"
                  : final                ? " (done)"
                                         : "");
    const std::lock_guard<std::mutex> lock(output_mutex_);
    *options_.progress << line << std::flush;
  }

  const CampaignOptions& options_;
  std::vector<Target> targets_;
  CaseRunner runner_;
  std::vector<char> batching_;  // per target: batches()
  int64_t block_ = 1;  // local case indices a block spans (block_size)
  int64_t target_period_ = 1;  // local case indices between two cases of one target (target_period)
  int units_at_once_ = std::numeric_limits<int>::max();  // units_at_once
  std::mutex units_mutex_;
  std::condition_variable unit_ready_;
  // The units prepared or being prepared, until their cases are taken (a unit whose cases an
  // interrupt left untaken stays until the campaign ends).
  std::map<UnitKey, std::shared_ptr<Unit>> units_;
  std::set<std::string> corpus_signatures_;  // in the corpus before the run; read by every thread
  std::mutex generate_mutex_;   // draws in this process
  GenerationPool* pool_ = nullptr;  // run()'s generator processes, while it runs
  std::mutex claims_mutex_;
  std::map<std::string, int64_t> claims_;  // signature -> the earliest case that shrinks it
  std::mutex output_mutex_;                // progress lines and warnings
  std::set<std::string> warned_;           // under output_mutex_
  std::map<std::string, int64_t> batch_failures_;  // backend -> batches failed as a whole; under output_mutex_
  // commit's alone, after the constructor:
  std::set<std::string> known_;  // signatures in the corpus and found so far
  reports::Report report_;
  Clock::time_point start_, last_progress_;
  int64_t cases_ = 0;
};

}  // namespace

Shard parse_shard(const std::string& text) {
  const std::string usage = "expected i/n with 0 <= i < n, such as 0/4; got '" + text + "'";
  const size_t slash = text.find('/');
  if (slash == std::string::npos) throw ParseError("--shard", usage);
  auto number = [&](const std::string& part) {
    if (part.empty() || part.size() > 9 || !std::all_of(part.begin(), part.end(), ::isdigit))
      throw ParseError("--shard", usage);
    return std::stoll(part);
  };
  const Shard shard{number(text.substr(0, slash)), number(text.substr(slash + 1))};
  if (shard.count < 1 || shard.index >= shard.count) throw ParseError("--shard", usage);
  return shard;
}

uint64_t case_seed(uint64_t seed, int64_t case_index) {
  return splitmix64_finalize(seed + kSplitmixGamma * static_cast<uint64_t>(case_index + 1));
}

uint64_t generation_seed(uint64_t seed, int64_t case_index, int attempt) {
  const uint64_t first = case_seed(seed, case_index);
  return attempt == 0 ? first : splitmix64_finalize(first + kSplitmixGamma * static_cast<uint64_t>(attempt));
}

int64_t case_index(const Shard& shard, int64_t local_index) { return local_index * shard.count + shard.index; }

std::vector<BackendPair> default_pairs(const Registry& registry, const OpInfo& op) {
  std::vector<BackendPair> pairs = corpus::twin_pairs(registry, op.name, /*available_only=*/true);
  if (pairs.empty()) return corpus::reference_pairs(registry, op.name);
  for (BackendPair& self : corpus::self_pairs(registry, op.name, /*available_only=*/true)) pairs.push_back(std::move(self));
  return pairs;
}

std::vector<BackendPair> pairs_for(const Registry& registry, const OpInfo& op,
                                   const std::vector<BackendPair>& requested) {
  if (requested.empty()) return default_pairs(registry, op);
  std::vector<BackendPair> pairs;
  for (const BackendPair& p : requested) {
    if (!p.every_contract()) {
      if (registry.impl(op.name, p.a) && registry.impl(op.name, p.b)) pairs.push_back(p);
      continue;
    }
    const std::string kind_a = split_backend_name(p.a).first, kind_b = split_backend_name(p.b).first;
    for (const ContractInfo& contract : op.contracts) {
      // Across two kinds an order-of-arrival contract differs whenever its additions arrive in
      // another order: as in the default pairs, a wildcard pairs it only where it names the cases
      // that order cannot change (arrival_order_free); naming it still pairs it.
      if (contract.order_of_arrival && !contract.arrival_order_free && kind_a != kind_b) continue;
      BackendPair each{kind_a + ":" + contract.name, kind_b + ":" + contract.name};
      if (registry.impl(op.name, each.a) && registry.impl(op.name, each.b) &&
          std::find(pairs.begin(), pairs.end(), each) == pairs.end())
        pairs.push_back(std::move(each));
    }
  }
  return pairs;
}

void check_options(const CampaignOptions& options) {
  if (!std::isfinite(options.budget_seconds) || options.budget_seconds < 0)
    throw std::invalid_argument("budget_seconds: expected a finite number of seconds >= 0, got " +
                                std::to_string(options.budget_seconds));
  if (options.max_cases && *options.max_cases < 0)
    throw std::invalid_argument("max_cases: expected an integer >= 0, got " + std::to_string(*options.max_cases));
  if (options.nondeterminism_every < 0)
    throw std::invalid_argument("nondeterminism_every: expected an integer >= 0, got " +
                                std::to_string(options.nondeterminism_every));
  if (!std::isfinite(options.shrink_seconds) || options.shrink_seconds < 0)
    throw std::invalid_argument("shrink_seconds: expected a finite number of seconds >= 0, got " +
                                std::to_string(options.shrink_seconds));
  if (options.jobs < 1 || options.jobs > kMaxJobs)
    throw std::invalid_argument("jobs: expected an integer from 1 to " + std::to_string(kMaxJobs) + ", got " +
                                std::to_string(options.jobs));
  if (options.generators && (*options.generators < 0 || *options.generators > kMaxJobs))
    throw std::invalid_argument("generators: expected an integer from 0 to " + std::to_string(kMaxJobs) + ", got " +
                                std::to_string(*options.generators));
  if (options.batch < 1 || options.batch > kMaxBatch)
    throw std::invalid_argument("batch: expected an integer from 1 to " + std::to_string(kMaxBatch) + ", got " +
                                std::to_string(options.batch));
  if (options.max_shrink_calls < 1)
    throw std::invalid_argument("max_shrink_calls: expected an integer >= 1, got " +
                                std::to_string(options.max_shrink_calls));
  const Shard& s = options.shard;
  if (s.count < 1 || s.count > kMaxShardCount || s.index < 0 || s.index >= s.count)
    throw std::invalid_argument("shard: expected i/n with 0 <= i < n <= " + std::to_string(kMaxShardCount) +
                                ", got " + s.name());
}

reports::Report run_campaign(const Registry& registry, const CampaignOptions& options) {
  check_options(options);
  return Campaign(registry, options).run();
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace bitparity::campaign
