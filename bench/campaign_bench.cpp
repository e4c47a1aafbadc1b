// Throughput of the campaign's differential path (campaign/case_runner.h) on one thread: a case
// through every pair of its op's reference contracts, each backend once, then the comparison;
// what one `--jobs` thread of a contract-vs-contract campaign spends per case, shrinking aside.
//
//   Small/OP/DIR   cases of at most kSmallElements input elements, drawn by the op's generator as
//                  a campaign draws them: `cases` is differential cases per second.
//   Large/OP/DIR   the op's first GPU-test reference input, cut to at most kLargeRows rows:
//                  `elements` is input elements per second.
//   Device/OP/DIR  the small cases through a campaign's default device pairs (each available
//                  non-reference kind against the reference, K:C vs ref:C, as a GPU campaign runs
//                  them), on 1 thread and on as many threads as the machine has cores (threads:N):
//                  `cases` is differential cases per second of the whole process. Skipped where no
//                  such kind is available (no GPU). Device/OP/DIR/batch:N: each thread takes N cases
//                  at a time and runs them through the sides with a batch path together (the CUDA
//                  kernels: one copy in, one synchronization), then pairs each, as a campaign's
//                  block does under `--batch N`.
//   Side/OP/DIR/B  one backend B of the op (every implementation the registry has, references
//                  included) on the small cases, one thread: `cases` is that side's runs per second,
//                  what each side adds to a Device/ or Small/ case. Skipped where B's kind is not
//                  available here.
//   Bound/OP/DIR/C the error bound of contract C (a contract whose order is unknown, judged within a
//                  derived bound) on the small cases, one thread: `cases` is bounds a second, what
//                  the comparison adds to a device case whose sides differ in bits.
//   Campaign/OP    a whole campaign (campaign/campaign.h) of the op's small cases: its default
//                  pairs (the device's against the reference and the sampled self pair where a
//                  device is there, else the reference contracts), --batch 16, as many jobs and
//                  generator processes as the machine has cores, shrinks off. Its generator picks
//                  each case from the small cases of Small/ (a copy: Generate/ measures the op's
//                  generator), so `cases`, cases a second from the campaign's start to its report,
//                  is what the campaign's engine (generator processes, batches, sides, comparison,
//                  commit in case order) does with small cases. An untimed campaign of 256 cases
//                  runs first, so that what the process pays once is not counted against one op.
//   Campaign/every_op  the same with every op's small cases, in the turns a default campaign
//                  (no --ops) takes: the mixed rate a nightly campaign of small cases sees.
//   Generate/OP/DIR the op's generator drawing cases as a campaign draws them (every size in turn,
//                  each case its own seed, the first draw), one thread: `cases` is draws a second. A
//                  process generates one case at a time (RapidCheck's implicit parameters are
//                  process-wide), so this bounds what one of a campaign's --generators processes draws.
//
// BITPARITY_BENCH_GENERATORS=N gives Campaign/ N generator processes (0: it draws in its own
// process) in place of the campaign's default; BITPARITY_BENCH_JOBS=N gives it N jobs in place of
// one a core; BITPARITY_BENCH_CAMPAIGN_CASES=N runs N cases a campaign in place of 100,000. A
// campaign's start and end (its generator processes started and ended, its jobs' threads and
// their buffers made, its report built) are part of its rate: about 40 ms with 16 generator
// processes on a 16-core GPU host, under 5 % of 100,000 cases at 100,000 a second, but a fifth of
// 20,000 (bench/NOTES.md, 2026-12-06 eighth entry).
//
// BITPARITY_BENCH_ITERATIONS=N runs every benchmark for exactly N iterations in a single run (no
// trial runs, no time target): the same cases in the same order every time, so that an instruction
// count (valgrind --tool=callgrind) divided by N compares two builds exactly (not Campaign/'s: its
// threads and processes wait on each other as the scheduler has them).
//
// Every op of the registry is benchmarked; none is named here.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <thread>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <rapidcheck/Gen.h>
#include <rapidcheck/Random.h>

#include "campaign/campaign.h"
#include "campaign/case_runner.h"
#include "core/gen.h"
#include "core/registry.h"
#include "corpus/differential.h"
#include "properties/harness.h"
#include "properties/rows.h"

namespace {

using bitparity::Case;
using bitparity::Direction;
using bitparity::OpInfo;
using bitparity::campaign::CaseRunner;
using bitparity::corpus::BackendPair;

constexpr int64_t kSmallElements = 256;
constexpr size_t kSmallPool = 64;      // distinct small cases cycled through by a benchmark
constexpr int kMaxDraws = 4000;        // generator draws to find them
constexpr int64_t kLargeRows = 4096;   // rows of a large case (the reference inputs have 2048 .. 16384)
constexpr uint64_t kSeed = 1;
constexpr double kLargeMinSeconds = 0.5;  // a large case takes milliseconds to seconds

int64_t input_elements(const Case& c) {
  int64_t n = 0;
  for (const auto& [name, t] : c.inputs) n += t.numel();
  return n;
}

// The pairs of the op's reference contracts that `contracts` allows (empty: all).
std::vector<BackendPair> pairs_for(const OpInfo& op, const std::vector<std::string>& contracts) {
  std::vector<BackendPair> pairs;
  for (const BackendPair& p : bitparity::corpus::reference_pairs(bitparity::harness_registry(), op.name)) {
    auto allowed = [&](const std::string& backend) {
      const std::string contract = bitparity::split_backend_name(backend).second;
      return contracts.empty() || std::find(contracts.begin(), contracts.end(), contract) != contracts.end();
    };
    if (allowed(p.a) && allowed(p.b)) pairs.push_back(p);
  }
  return pairs;
}

// Small cases as a campaign draws them: case_seed(seed, j) at size j % (kMaxGenSize + 1), tensors
// filled from one seed.
std::vector<Case> small_cases(const OpInfo& op, Direction d) {
  const bitparity::gen::SeededTensors seeded;  // as a campaign draws
  std::vector<Case> pool;
  for (int j = 0; j < kMaxDraws && pool.size() < kSmallPool; ++j) {
    const int size = j % (bitparity::campaign::kMaxGenSize + 1);
    try {
      Case c = op.generate(d)(rc::Random(bitparity::campaign::case_seed(kSeed, j)), size).value();
      if (input_elements(c) <= kSmallElements) pool.push_back(std::move(c));
    } catch (const std::exception&) {
      // a draw the generator gives up on: the campaign counts it as skipped; here it is not timed
    }
  }
  return pool;
}

void run_small(benchmark::State& state, const OpInfo* op, Direction d) {
  const std::vector<Case> pool = small_cases(*op, d);
  const std::vector<BackendPair> pairs = pairs_for(*op, {});
  if (pool.empty() || pairs.empty()) {
    state.SkipWithError(pool.empty() ? "the generator drew no case of <= 256 elements" : "fewer than two contracts");
    return;
  }
  const CaseRunner runner(bitparity::harness_registry(), {});
  size_t next = 0;
  int64_t elements = 0;
  for (auto _ : state) {
    const Case& c = pool[next++ % pool.size()];
    benchmark::DoNotOptimize(runner.run_pairs(c, pairs));
    elements += input_elements(c);
  }
  state.counters["cases"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["pairs"] = benchmark::Counter(static_cast<double>(pairs.size()));
  state.counters["elements"] = benchmark::Counter(static_cast<double>(elements), benchmark::Counter::kIsRate);
}

// The small cases through K:C vs ref:C for every available kind K but the reference; one CaseRunner
// shared by the benchmark's threads, as a campaign's --jobs threads share theirs.
// The batch of Device/OP/DIR/batch:N.
constexpr int kDeviceBatch = 16;

void run_device(benchmark::State& state, const OpInfo* op, Direction d, int batch) {
  static std::map<std::string, std::vector<Case>> pools;  // per op and direction, drawn by thread 0
  static std::unique_ptr<CaseRunner> runner;
  const std::string key = op->name + "/" + std::string(bitparity::direction_name(d));
  if (state.thread_index() == 0) {
    if (!pools.count(key)) pools[key] = small_cases(*op, d);
    if (!runner) runner = std::make_unique<CaseRunner>(bitparity::harness_registry(), bitparity::CompareOptions{});
  }
  const std::vector<BackendPair> pairs = bitparity::corpus::twin_pairs(bitparity::harness_registry(), op->name, true);
  std::vector<std::string> backends;  // the pairs' sides, each once: those with a batch path run a batch together
  for (const BackendPair& pair : pairs)
    for (const std::string& side : {pair.a, pair.b})
      if (std::find(backends.begin(), backends.end(), side) == backends.end()) backends.push_back(side);
  // Every thread reads the pool only once the loop has started (Google Benchmark starts the loops
  // of all threads together, after thread 0's set-up above).
  size_t next = static_cast<size_t>(state.thread_index()) * 7;
  int64_t elements = 0;
  std::vector<const Case*> cases;
  for (auto _ : state) {
    const std::vector<Case>& pool = pools.at(key);
    if (pool.empty() || pairs.empty()) {
      state.SkipWithError(pool.empty() ? "the generator drew no case of <= 256 elements"
                                       : "no device kind available here (no GPU)");
      break;
    }
    cases.clear();
    for (int i = 0; i < batch; ++i) cases.push_back(&pool[next++ % pool.size()]);
    // As a campaign's block runs a target's cases (campaign.cpp, run_block): the batch paths first.
    std::vector<CaseRunner::Ready> ready =
        batch > 1 ? runner->run_batches(cases, backends) : std::vector<CaseRunner::Ready>(1);
    for (size_t i = 0; i < cases.size(); ++i) {
      benchmark::DoNotOptimize(runner->run_pairs(*cases[i], pairs, &ready[i]));
      elements += input_elements(*cases[i]);
    }
  }
  state.counters["cases"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * batch, benchmark::Counter::kIsRate);
  state.counters["pairs"] = benchmark::Counter(static_cast<double>(pairs.size()), benchmark::Counter::kAvgThreads);
  state.counters["elements"] = benchmark::Counter(static_cast<double>(elements), benchmark::Counter::kIsRate);
}

// One backend on the small cases, alone: where a differential case's time goes.
void run_side(benchmark::State& state, const OpInfo* op, Direction d, std::string backend) {
  if (const std::optional<std::string> why = bitparity::props::unavailable(backend)) {
    state.SkipWithError(("not available here: " + *why).c_str());
    return;
  }
  const std::vector<Case> pool = small_cases(*op, d);
  if (pool.empty()) {
    state.SkipWithError("the generator drew no case of <= 256 elements");
    return;
  }
  const CaseRunner runner(bitparity::harness_registry(), {});
  size_t next = 0;
  for (auto _ : state) benchmark::DoNotOptimize(runner.run_side(backend, pool[next++ % pool.size()]));
  state.counters["cases"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// The error bound of one contract on the small cases: what judging a bit mismatch by it costs.
void run_bound(benchmark::State& state, const OpInfo* op, Direction d, const bitparity::ContractInfo* contract) {
  const std::vector<Case> pool = small_cases(*op, d);
  if (pool.empty()) {
    state.SkipWithError("the generator drew no case of <= 256 elements");
    return;
  }
  size_t next = 0;
  for (auto _ : state) benchmark::DoNotOptimize(contract->error_bound(pool[next++ % pool.size()]));
  state.counters["cases"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// The op's first reference input that is not for benchmarks only, cut to kLargeRows rows where the
// op is row-wise; nullopt when it has none.
std::optional<bitparity::ReferenceInput> large_input(const OpInfo& op, Direction d) {
  if (!op.reference_inputs) return std::nullopt;
  for (const bitparity::ReferenceInput& in : op.reference_inputs(d))
    if (!in.bench_only) return in;
  return std::nullopt;
}

Case cut_rows(const Case& c) {
  try {
    if (bitparity::props::case_rows(c) > kLargeRows) return bitparity::props::take_rows(c, 0, kLargeRows);
  } catch (const std::logic_error&) {
    // not row-wise: the whole case
  }
  return c;
}

void run_large(benchmark::State& state, const OpInfo* op, Direction d) {
  const std::optional<bitparity::ReferenceInput> in = large_input(*op, d);
  // The pairs of the contracts the input is meant for; every pair where it is meant for one.
  std::vector<BackendPair> pairs = in ? pairs_for(*op, in->contracts) : std::vector<BackendPair>{};
  if (in && pairs.empty()) pairs = pairs_for(*op, {});
  if (!in || pairs.empty()) {
    state.SkipWithError(!in ? "no reference input for GPU tests" : "fewer than two contracts");
    return;
  }
  const Case c = cut_rows(in->make());
  const CaseRunner runner(bitparity::harness_registry(), {});
  for (auto _ : state) benchmark::DoNotOptimize(runner.run_pairs(c, pairs));
  const double per_case = static_cast<double>(input_elements(c));
  state.counters["elements"] =
      benchmark::Counter(per_case * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["case_elements"] = benchmark::Counter(per_case);
  state.counters["pairs"] = benchmark::Counter(static_cast<double>(pairs.size()));
}

void run_generate(benchmark::State& state, const OpInfo* op, Direction d) {
  const bitparity::gen::SeededTensors seeded;  // as a campaign draws
  const rc::Gen<Case> gen = op->generate(d);
  int64_t index = 0;
  for (auto _ : state) {
    const int size = static_cast<int>(index % (bitparity::campaign::kMaxGenSize + 1));
    Case c = gen(rc::Random(bitparity::campaign::generation_seed(kSeed, index, 0)), size).value();
    benchmark::DoNotOptimize(c);
    ++index;
  }
  state.counters["cases"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// Environment variable `name` as an integer from lo to hi where it is set; a clear error otherwise.
std::optional<int64_t> env_integer(const char* name, int64_t lo, int64_t hi) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(text, &end, 10);
  if (*end != '\0' || errno == ERANGE || n < lo || n > hi)
    throw std::invalid_argument(std::string(name) + ": not an integer from " + std::to_string(lo) + " to " +
                                std::to_string(hi) + ": " + text);
  return n;
}

// BITPARITY_BENCH_ITERATIONS: a positive integer.
std::optional<int64_t> fixed_iterations() {
  return env_integer("BITPARITY_BENCH_ITERATIONS", 1, std::numeric_limits<int64_t>::max());
}

// BITPARITY_BENCH_GENERATORS=N: Campaign/'s generator processes (0: the campaign's own process);
// unset, the campaign's default.
std::optional<int> bench_generators() {
  const std::optional<int64_t> n = env_integer("BITPARITY_BENCH_GENERATORS", 0, bitparity::campaign::kMaxJobs);
  return n ? std::optional<int>(static_cast<int>(*n)) : std::nullopt;
}

// BITPARITY_BENCH_JOBS=N: Campaign/'s jobs; unset, one a core.
int bench_jobs() {
  const std::optional<int64_t> n = env_integer("BITPARITY_BENCH_JOBS", 1, bitparity::campaign::kMaxJobs);
  return n ? static_cast<int>(*n) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// The cases of one Campaign/OP run: BITPARITY_BENCH_CAMPAIGN_CASES, else 100,000.
int64_t small_campaign_cases() {
  return env_integer("BITPARITY_BENCH_CAMPAIGN_CASES", 1, std::numeric_limits<int64_t>::max()).value_or(100000);
}

// Adds `op` to `r` with its generator picking one of its small cases, and its implementations.
void add_small_cases_op(bitparity::Registry& r, const OpInfo& op) {
  const bitparity::Registry& all = bitparity::harness_registry();
  OpInfo small = op;
  std::map<Direction, std::shared_ptr<const std::vector<Case>>> pools;
  for (const auto& [d, specs] : op.inputs) pools[d] = std::make_shared<const std::vector<Case>>(small_cases(op, d));
  small.generate = [pools](Direction d) {
    const std::shared_ptr<const std::vector<Case>> pool = pools.at(d);
    if (pool->empty()) throw std::runtime_error("the generator drew no case of <= 256 elements");
    // At the nominal size: RapidCheck narrows an integer's range at the campaign's small sizes.
    return rc::gen::map(rc::gen::resize(rc::kNominalSize, rc::gen::inRange<size_t>(0, pool->size())),
                        [pool](size_t i) { return (*pool)[i]; });
  };
  r.add_op(small);
  for (const std::string& name : all.impls_of(op.name)) {
    const auto [kind, contract] = bitparity::split_backend_name(name);
    r.add_impl(op.name, kind, contract, *all.impl(op.name, name));
    if (const bitparity::BatchImpl* batch = all.batch_impl(op.name, name)) r.add_batch_impl(op.name, kind, contract, *batch);
  }
}

// The harness registry with the generator of `op` (every op with a generator where `op` is null)
// picking one of its small cases (Campaign/OP, Campaign/every_op).
bitparity::Registry small_cases_only(const OpInfo* op) {
  const bitparity::Registry& all = bitparity::harness_registry();
  bitparity::Registry r;
  for (const bitparity::BackendKind& kind : all.backends()) r.add_backend(kind);
  for (const OpInfo& o : all.ops())
    if (o.generate && (!op || o.name == op->name)) add_small_cases_op(r, o);
  return r;
}

// The cases of Campaign/'s untimed first campaign.
constexpr int64_t kWarmUpCases = 256;

// `op` null: every op with a generator, the cases taken in turn from each op and direction as a
// default campaign takes them.
void run_campaign_of_small_cases(benchmark::State& state, const OpInfo* op) {
  const bitparity::Registry registry = small_cases_only(op);
  bitparity::campaign::CampaignOptions o;
  if (op) o.ops = {op->name};
  o.max_cases = small_campaign_cases();
  o.budget_seconds = 600;
  o.shrink_seconds = 0;
  o.max_shrink_calls = 1;
  o.jobs = bench_jobs();
  o.generators = bench_generators();
  // A short campaign first, untimed: what a process pays once (a device's context, its kernels'
  // modules loaded at their first launch, the calling thread's buffers) is not counted against
  // one op. The other jobs' threads, and their buffers, are made again by every campaign.
  {
    bitparity::campaign::CampaignOptions warm = o;
    warm.max_cases = kWarmUpCases;
    warm.seed = kSeed - 1;
    bitparity::campaign::run_campaign(registry, warm);
  }
  int64_t cases = 0;
  for (auto _ : state) {
    o.seed = kSeed + static_cast<uint64_t>(cases);
    const bitparity::reports::Report report = bitparity::campaign::run_campaign(registry, o);
    for (const bitparity::reports::Coverage& c : report.coverage) cases += c.cases;
  }
  state.counters["cases"] = benchmark::Counter(static_cast<double>(cases), benchmark::Counter::kIsRate);
  state.counters["jobs"] = benchmark::Counter(o.jobs);
}

// Every op and direction of the registry: the small cases first, then the large ones, then the
// small ones through the device pairs, then each side alone, then each error bound, then whole
// campaigns of small cases, then the generator; exactly
// BITPARITY_BENCH_ITERATIONS iterations each where it is set.
void register_all() {
  // The settings read, so that a bad one ends the program here with its message.
  bench_generators();
  bench_jobs();
  small_campaign_cases();
  const std::optional<int64_t> iterations = fixed_iterations();
  auto fix = [&](benchmark::internal::Benchmark* b) {
    if (iterations) b->Iterations(*iterations);
    return b;
  };
  for (const bool large : {false, true})
    for (const OpInfo& op : bitparity::harness_registry().ops()) {
      if (!op.generate) continue;
      for (const auto& [d, specs] : op.inputs) {
        const std::string name = op.name + "/" + std::string(bitparity::direction_name(d));
        if (!large) fix(benchmark::RegisterBenchmark(("Small/" + name).c_str(), run_small, &op, d));
        else {
          auto* b = fix(benchmark::RegisterBenchmark(("Large/" + name).c_str(), run_large, &op, d))
                        ->Unit(benchmark::kMillisecond)
                        ->UseRealTime();
          if (!iterations) b->MinTime(kLargeMinSeconds);
        }
      }
    }
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  for (const OpInfo& op : bitparity::harness_registry().ops()) {
    if (!op.generate) continue;
    for (const auto& [d, specs] : op.inputs) {
      // Device/OP/DIR: one case at a time; Device/OP/DIR/batch:N: N cases a batch, as `campaign --batch N`.
      for (const int batch : {1, kDeviceBatch}) {
        const std::string name = "Device/" + op.name + "/" + std::string(bitparity::direction_name(d)) +
                                 (batch > 1 ? "/batch:" + std::to_string(batch) : "");
        auto* b = fix(benchmark::RegisterBenchmark(name.c_str(), run_device, &op, d, batch))->UseRealTime()->Threads(1);
        if (cores > 1) b->Threads(cores);
      }
    }
  }
  for (const OpInfo& op : bitparity::harness_registry().ops()) {
    if (!op.generate) continue;
    for (const auto& [d, specs] : op.inputs)
      for (const std::string& backend : bitparity::harness_registry().impls_of(op.name)) {
        const std::string name = "Side/" + op.name + "/" + std::string(bitparity::direction_name(d)) + "/" + backend;
        fix(benchmark::RegisterBenchmark(name.c_str(), run_side, &op, d, backend))->UseRealTime();
      }
  }
  for (const OpInfo& op : bitparity::harness_registry().ops()) {
    if (!op.generate) continue;
    for (const auto& [d, specs] : op.inputs)
      for (const bitparity::ContractInfo& contract : op.contracts) {
        if (!contract.error_bound) continue;
        const std::string name = "Bound/" + op.name + "/" + std::string(bitparity::direction_name(d)) + "/" + contract.name;
        fix(benchmark::RegisterBenchmark(name.c_str(), run_bound, &op, d, &contract))->UseRealTime();
      }
  }
  for (const OpInfo& op : bitparity::harness_registry().ops())
    if (op.generate)
      fix(benchmark::RegisterBenchmark(("Campaign/" + op.name).c_str(), run_campaign_of_small_cases, &op))
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  fix(benchmark::RegisterBenchmark("Campaign/every_op", run_campaign_of_small_cases, nullptr))
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (const OpInfo& op : bitparity::harness_registry().ops()) {
    if (!op.generate) continue;
    for (const auto& [d, specs] : op.inputs) {
      const std::string name = "Generate/" + op.name + "/" + std::string(bitparity::direction_name(d));
      fix(benchmark::RegisterBenchmark(name.c_str(), run_generate, &op, d))->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    register_all();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "campaign_bench: %s\n", e.what());
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
