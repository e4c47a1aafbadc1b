// Google Benchmark programs for every CUDA kernel record and for kernel launch latency.
//
// A kernel benchmark runs one kernel record (op, contract) on one of its op's reference inputs
// (the large realistic shapes its spec declares, for the direction and contracts the input names),
// at one ILP. It counts effective bytes (every input read once, every output written once, from
// the tensors' sizes, unless the reference input declares its own count), times the bound launch
// with CUDA events (UseManualTime), and in the same loop times a device-to-device cudaMemcpy that
// moves the same number of bytes (half read, half written): the roofline the kernel is compared
// with. The inputs are uploaded once and copied into rotating sets, so that each launch starts
// with cold L2. Counters: bytes, GB/s, copy_GB/s, pct_of_copy; for a reference input that declares
// its floating-point operations (a GEMM), also flops, TFLOP/s and pct_of_peak (of the H200's dense
// bf16 rate). Each kernel runs at every ILP the
// launchers offer (work items whose loads a thread issues together; same bits, different speed);
// ilp:0 is what the backend ships, each kernel's measured best. Names read
// <op>_<direction>/<contract>/<reference input>/ilp:<n>.
//
// A scenario benchmark (OpInfo::reference_scenarios: a model's sequence of cases of one op, such as
// a MoE layer's experts) launches every case of the scenario one after the other on one stream and
// times the whole, wall clock to a synchronization, as scenario/<name>/<op>_<direction>/<contract>;
// counters: the scenario's own, and TFLOP/s where it declares its floating-point operations.
// Run with --benchmark_out=FILE --benchmark_out_format=json for Google Benchmark's own JSON.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <rapidcheck.h>
#include <cuda_runtime_api.h>

#include "bench/bench_kernels.h"
#include "core/error.h"
#include "core/registry.h"
#include "gpu/common/device_tensor.h"
#include "gpu/common/ilp.h"
#include "gpu/common/kernel_record.h"
#include "gpu/register.h"
#include "gpu/runtime.h"

namespace bitparity::bench {
namespace {

using gpu::check_cuda;
using gpu::DeviceBuffer;
using gpu::DeviceTensorMap;

constexpr int kWarmUpLaunches = 3;
// The H200's dense bf16 tensor-core rate by NVIDIA's datasheet (the H100 SXM's): the roofline of a
// compute-bound kernel. An 8192^3 bf16 torch.matmul measured 769 to 798 TFLOP/s on this machine type.
constexpr double kDenseBf16PeakTflops = 989.0;
constexpr double kMinTimeSeconds = 0.1;
constexpr size_t kL2Bytes = size_t{50} << 20;  // H200
constexpr int kColdL2Multiple = 3;             // rotate until the sets exceed 3 L2s
constexpr int kLaunchBatch = 100;              // launches per iteration of the latency benchmarks
constexpr int kIlpValues[] = {gpu::kIlpDefault, 1, 2, 4};

// One kernel record on one reference input of its op.
struct Subject {
  const gpu::KernelRecord* record;
  const OpInfo* op;
  Direction direction;
  ReferenceInput input;
  std::string name() const {
    return op->name + "_" + std::string(direction_name(direction)) + "/" + record->contract + "/" + input.name;
  }
};

bool applies_to(const std::vector<std::string>& contracts, const std::string& contract) {
  return contracts.empty() || std::find(contracts.begin(), contracts.end(), contract) != contracts.end();
}

// Every kernel record on every reference input meant for its contract, grouped by input so that
// consecutive benchmarks share the uploaded input.
std::vector<Subject> subjects() {
  std::vector<Subject> out;
  for (const OpInfo& op : harness_registry().ops()) {
    if (!op.reference_inputs || !op.validate) continue;  // nothing to run on, or no output shapes
    for (const auto& [direction, inputs] : op.inputs)
      for (const ReferenceInput& input : op.reference_inputs(direction))
        for (const gpu::KernelRecord& record : gpu::kernel_records())
          if (record.op == op.name && applies_to(input.contracts, record.contract))
            out.push_back({&record, &op, direction, input});
  }
  return out;
}

// A reference input built and uploaded once, with as many device copies of its inputs as a
// benchmark's rotation asked for so far. Benchmarks run in registration order, so that one input
// at a time is held.
struct Uploaded {
  std::string key;
  Case c;
  std::vector<DeviceTensorMap> sets;
  void ensure_sets(size_t n) {
    if (sets.empty()) sets.push_back(gpu::upload(c.inputs));
    while (sets.size() < n) sets.push_back(gpu::clone(sets.front()));
  }
};

Uploaded& uploaded(const Subject& s) {
  static Uploaded cache;
  const std::string key = s.op->name + "/" + std::string(direction_name(s.direction)) + "/" + s.input.name;
  if (cache.key != key) {
    cache = Uploaded{};  // frees the previous input's device memory first
    cache.c = s.input.make();
    cache.key = key;
  }
  return cache;
}

class Events {
 public:
  Events() {
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~Events() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  // Seconds that `work` takes on `stream`.
  double time(cudaStream_t stream, const std::function<void()>& work) {
    check_cuda(cudaEventRecord(start_, stream), "cudaEventRecord");
    work();
    check_cuda(cudaEventRecord(stop_, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

void kernel_benchmark(benchmark::State& state, const Subject& s, int ilp) {
  if (const auto why = gpu::unavailable_reason()) {
    state.SkipWithError(why->c_str());
    return;
  }
  Uploaded& input = uploaded(s);
  const ContractInfo& contract = *s.op->contract(s.record->contract);
  const OutputMetas metas = s.op->validate(input.c, contract);
  input.ensure_sets(1);
  size_t output_bytes = 0;
  for (const auto& [name, meta] : metas)
    output_bytes += static_cast<size_t>(shape_numel(meta.shape)) * dtype_size(meta.dtype);
  const size_t total = s.input.bytes ? s.input.bytes : gpu::total_bytes(input.sets.front()) + output_bytes;
  if (total == 0) return state.SkipWithError("a reference input of no bytes");
  const size_t sets_needed = std::max<size_t>(2, (kColdL2Multiple * kL2Bytes + total - 1) / total);
  input.ensure_sets(sets_needed);
  cudaStream_t stream = nullptr;
  std::vector<DeviceTensorMap> outputs;
  std::vector<gpu::BoundLaunch> launches;
  for (size_t i = 0; i < sets_needed; ++i) outputs.push_back(gpu::allocate(metas));
  try {
    for (size_t i = 0; i < sets_needed; ++i)
      launches.push_back(s.record->bind({input.c, contract, input.sets[i], outputs[i], stream, ilp}));
  } catch (const RejectError& e) {
    return state.SkipWithError((s.record->contract + " rejects " + s.input.name + ": " + e.what()).c_str());
  }
  // The copy's source and destination, rotated the same way: the copy reads and writes half each.
  const size_t copy_bytes = total / 2;
  std::vector<DeviceBuffer> copy_src, copy_dst;
  for (size_t i = 0; i < sets_needed; ++i) {
    copy_src.emplace_back(copy_bytes);
    copy_dst.emplace_back(copy_bytes);
    fill_random_bf16(copy_src.back().get(), copy_bytes / 2, 7 + i);
  }
  auto copy = [&](size_t i) {
    check_cuda(cudaMemcpyAsync(copy_dst[i].get(), copy_src[i].get(), copy_bytes, cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpyAsync");
  };
  for (int i = 0; i < kWarmUpLaunches; ++i) {
    launches[i % sets_needed]();
    copy(i % sets_needed);
  }
  gpu::synchronize();

  Events events;
  double kernel_seconds = 0, copy_seconds = 0;
  size_t i = 0;
  for (auto _ : state) {
    const size_t set = i++ % sets_needed;
    const double t = events.time(stream, launches[set]);
    state.SetIterationTime(t);
    kernel_seconds += t;
    copy_seconds += events.time(stream, [&] { copy(set); });
  }
  check_cuda(cudaGetLastError(), s.name());
  const double n = static_cast<double>(state.iterations());
  const double gbs = static_cast<double>(total) * n / kernel_seconds * 1e-9;
  const double copy_gbs = static_cast<double>(2 * copy_bytes) * n / copy_seconds * 1e-9;
  state.SetBytesProcessed(static_cast<int64_t>(total) * state.iterations());
  state.counters["bytes"] = static_cast<double>(total);
  state.counters["GB/s"] = gbs;
  state.counters["copy_GB/s"] = copy_gbs;
  state.counters["pct_of_copy"] = 100.0 * gbs / copy_gbs;
  if (s.input.flops > 0) {
    const double tflops = s.input.flops * n / kernel_seconds * 1e-12;
    state.counters["flops"] = s.input.flops;
    state.counters["TFLOP/s"] = tflops;
    state.counters["pct_of_peak"] = 100.0 * tflops / kDenseBf16PeakTflops;
  }
  state.counters["rotated_sets"] = static_cast<double>(sets_needed);
  state.counters["ilp"] = ilp;
}

// --- scenarios -----------------------------------------------------------------------------------

constexpr double kScenarioMinTimeSeconds = 0.2;

// One case of a scenario: its device tensors and its bound launch.
struct ScenarioCase {
  Case c;  // attributes and shapes; the record reads its tensors from the device maps
  DeviceTensorMap inputs, outputs;
  gpu::BoundLaunch launch;
};

// Integer and bool inputs as made; floating ones random on the device (bf16, fp32), zero otherwise.
DeviceTensorMap scenario_inputs(const Case& c, uint64_t& seed) {
  DeviceTensorMap out;
  for (const auto& [name, host] : c.inputs) {
    if (!is_floating(host.dtype())) {
      out.emplace(name, gpu::upload(host));
      continue;
    }
    gpu::DeviceTensor t = gpu::allocate({host.shape(), host.dtype()}, 0);
    const size_t n = static_cast<size_t>(t.numel());
    if (n > 0 && host.dtype() == DType::kBF16) fill_random_bf16(t.data(), n, seed);
    if (n > 0 && host.dtype() == DType::kFP32) fill_random_fp32(t.data(), n, seed);
    ++seed;
    out.emplace(name, std::move(t));
  }
  return out;
}

void scenario_benchmark(benchmark::State& state, const OpInfo& op, const gpu::KernelRecord& record,
                        Direction direction, const ReferenceScenario& scenario) {
  if (const auto why = gpu::unavailable_reason()) return state.SkipWithError(why->c_str());
  const ContractInfo& contract = *op.contract(record.contract);
  std::vector<std::unique_ptr<ScenarioCase>> cases;
  uint64_t seed = 1;
  try {
    for (size_t i = 0; i < scenario.cases; ++i) {
      auto sc = std::make_unique<ScenarioCase>();
      sc->c = scenario.make(i);
      const OutputMetas metas = op.validate(sc->c, contract);
      sc->inputs = scenario_inputs(sc->c, seed);
      sc->c.inputs.clear();  // the host shapes are no longer needed
      sc->outputs = gpu::allocate(metas);
      sc->launch = record.bind({sc->c, contract, sc->inputs, sc->outputs, nullptr, gpu::kIlpDefault});
      cases.push_back(std::move(sc));
    }
  } catch (const RejectError& e) {
    return state.SkipWithError((record.contract + " rejects a case of " + scenario.name + ": " + e.what()).c_str());
  }
  for (auto& sc : cases) sc->launch();  // warm-up
  gpu::synchronize();
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (auto& sc : cases) sc->launch();
    gpu::synchronize();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(t);
    seconds += t;
  }
  check_cuda(cudaGetLastError(), scenario.name);
  const double n = static_cast<double>(state.iterations());
  if (scenario.flops > 0) {
    state.counters["flops"] = scenario.flops;
    state.counters["TFLOP/s"] = scenario.flops * n / seconds * 1e-12;
  }
  state.counters["cases"] = static_cast<double>(scenario.cases);
  for (const auto& [name, value] : scenario.counters) state.counters[name] = value;
}

void register_scenarios() {
  for (const OpInfo& op : harness_registry().ops()) {
    if (!op.reference_scenarios || !op.validate) continue;
    for (const auto& [direction, inputs] : op.inputs)
      for (const ReferenceScenario& scenario : op.reference_scenarios(direction))
        for (const gpu::KernelRecord& record : gpu::kernel_records()) {
          if (record.op != op.name) continue;
          const std::string name = "scenario/" + scenario.name + "/" + op.name + "_" +
                                   std::string(direction_name(direction)) + "/" + record.contract;
          benchmark::RegisterBenchmark(name.c_str(), [&op, &record, direction, scenario](benchmark::State& state) {
            scenario_benchmark(state, op, record, direction, scenario);
          })
              ->UseManualTime()
              ->MinTime(kScenarioMinTimeSeconds)
              ->Unit(benchmark::kMillisecond);
        }
  }
}

// --- small cases one at a time against batches --------------------------------------------------
// batch/<op>_<direction>/<contract>/cases:<n>: a pool of small generated cases (RapidCheck sizes 0
// to 30) that the record computes, run through the backend's own path: one case a call
// (kernel_impl: a copy in, the launches, a copy out and a synchronization a case) for n = 1, and
// n cases a call for larger n (gpu::run_batch: one copy in, every case's launches, one copy out and
// one synchronization a batch). Launches unchecked, as in a campaign. With /threads:16, every
// thread runs the whole pool on its own stream at once, as a campaign's jobs do. Counters: cases a
// second, the pool's size, and the share of batches staged together.

constexpr int kBatchPoolDraws = 64;
constexpr int kBatchSizes[] = {1, 16};
constexpr int kBatchThreads[] = {1, 16};

struct BatchPool {
  std::vector<Case> cases;
  std::string problem;  // why there is no pool: no device, nothing computed
};

const BatchPool& batch_pool(const gpu::KernelRecord& record, const OpInfo& op, Direction direction) {
  static std::mutex mutex;
  static std::map<std::string, BatchPool> pools;
  const std::lock_guard<std::mutex> lock(mutex);
  const std::string key = record.op + "/" + std::string(direction_name(direction)) + "/" + record.contract;
  const auto found = pools.find(key);
  if (found != pools.end()) return found->second;
  BatchPool& pool = pools[key];
  if (const auto why = gpu::unavailable_reason()) {
    pool.problem = *why;
    return pool;
  }
  const ContractInfo& contract = *op.contract(record.contract);
  const Impl alone = gpu::kernel_impl(record, op.validate);
  for (int j = 0; j < kBatchPoolDraws; ++j) {
    try {
      Case c = op.generate(direction)(rc::Random(uint64_t{0xca5e} + static_cast<uint64_t>(j)), (j * 7) % 31).value();
      alone(c, contract);  // throws on a case the record does not compute
      pool.cases.push_back(std::move(c));
    } catch (const std::exception&) {
      // a draw the generator gives up on, or a case the contract rejects
    }
  }
  if (pool.cases.empty()) pool.problem = "the record computes none of " + std::to_string(kBatchPoolDraws) + " generated cases";
  return pool;
}

void batch_benchmark(benchmark::State& state, const gpu::KernelRecord& record, const OpInfo& op, Direction direction,
                     int batch_size) {
  const BatchPool& pool = batch_pool(record, op, direction);
  if (!pool.problem.empty()) return state.SkipWithError(pool.problem.c_str());
  const ContractInfo& contract = *op.contract(record.contract);
  const Impl alone = gpu::kernel_impl(record, op.validate);
  std::vector<std::vector<const Case*>> batches;
  for (size_t i = 0; i < pool.cases.size(); i += static_cast<size_t>(batch_size)) {
    batches.emplace_back();
    for (size_t j = i; j < std::min(pool.cases.size(), i + static_cast<size_t>(batch_size)); ++j)
      batches.back().push_back(&pool.cases[j]);
  }
  int64_t staged = 0, calls = 0, collected = 0, batched_launches = 0;
  std::string error;
  for (auto _ : state) {
    for (const std::vector<const Case*>& batch : batches) {
      try {
        if (batch_size == 1) {
          benchmark::DoNotOptimize(alone(*batch.front(), contract));
          continue;
        }
        gpu::BatchRunInfo info;
        const std::vector<BatchOutcome> outcomes =
            gpu::run_batch(record, op.validate, contract, batch, gpu::kIlpDefault, &info);
        ++calls;
        staged += info.staged ? 1 : 0;
        collected += info.collected;
        batched_launches += info.batched_launches;
        for (const BatchOutcome& o : outcomes)
          if (o.error) std::rethrow_exception(o.error);
      } catch (const std::exception& e) {
        error = e.what();
        break;
      }
    }
    if (!error.empty()) break;
  }
  if (!error.empty()) return state.SkipWithError(("a case failed: " + error).c_str());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(pool.cases.size()));
  state.counters["cases_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(pool.cases.size()),
                                                     benchmark::Counter::kIsRate);
  state.counters["pool"] =
      benchmark::Counter(static_cast<double>(pool.cases.size()), benchmark::Counter::kAvgThreads);
  if (calls > 0) {
    // A batch's, averaged over the threads (each thread's counters are summed otherwise).
    const auto per_batch = [calls](int64_t n) {
      return benchmark::Counter(static_cast<double>(n) / static_cast<double>(calls), benchmark::Counter::kAvgThreads);
    };
    state.counters["staged"] = per_batch(staged);
    // Launches collected into batched launches, and those batched launches.
    state.counters["collected"] = per_batch(collected);
    state.counters["batched_launches"] = per_batch(batched_launches);
  }
}

void register_batches() {
  for (const gpu::KernelRecord& record : gpu::kernel_records()) {
    const OpInfo* op = harness_registry().op(record.op);
    if (!op || !op->generate || !op->validate) continue;
    // A record whose launches run_batch collects into batched launches also runs its batches with
    // each case's launches made apart (".../separate_launches"), the same cases in the same run.
    static std::deque<gpu::KernelRecord> separate;
    const gpu::KernelRecord* apart = nullptr;
    if (!record.collect_launches.empty()) {
      separate.push_back(record);
      separate.back().collect_launches.clear();
      apart = &separate.back();
    }
    for (const auto& [direction, inputs] : op->inputs)
      for (const int n : kBatchSizes)
        for (const int threads : kBatchThreads)
          for (const gpu::KernelRecord* r : {&record, n > 1 && record.collects(direction) ? apart : nullptr}) {
            if (!r) continue;
            const std::string name = "batch/" + op->name + "_" + std::string(direction_name(direction)) + "/" +
                                     record.contract + "/cases:" + std::to_string(n) +
                                     (r == apart ? "/separate_launches" : "");
            benchmark::RegisterBenchmark(name.c_str(), [r, op, direction = direction, n](benchmark::State& state) {
              batch_benchmark(state, *r, *op, direction, n);
            })
                ->Threads(threads)
                ->UseRealTime()
                ->MinTime(kMinTimeSeconds)
                ->Unit(benchmark::kMicrosecond);
          }
  }
}

// --- launch latency ------------------------------------------------------------------------------

void set_launch_counters(benchmark::State& state, double seconds) {
  const double launches = static_cast<double>(state.iterations()) * kLaunchBatch;
  state.SetItemsProcessed(state.iterations() * kLaunchBatch);
  state.counters["us_per_launch"] = seconds / launches * 1e6;
}

// kLaunchBatch back-to-back launches of an empty kernel, timed on the device.
void BM_LaunchEmptyKernel(benchmark::State& state) {
  if (const auto why = gpu::unavailable_reason()) return state.SkipWithError(why->c_str());
  cudaStream_t stream;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  for (int i = 0; i < kLaunchBatch; ++i) launch_empty_kernel(stream);
  check_cuda(cudaStreamSynchronize(stream), "warm-up");
  Events events;
  double total = 0;
  for (auto _ : state) {
    const double t = events.time(stream, [&] {
      for (int i = 0; i < kLaunchBatch; ++i) launch_empty_kernel(stream);
    });
    state.SetIterationTime(t);
    total += t;
  }
  check_cuda(cudaGetLastError(), "empty kernel");
  set_launch_counters(state, total);
  cudaStreamDestroy(stream);
}

// The same kLaunchBatch launches captured once in a CUDA graph and replayed.
void BM_LaunchEmptyKernelGraph(benchmark::State& state) {
  if (const auto why = gpu::unavailable_reason()) return state.SkipWithError(why->c_str());
  cudaStream_t stream;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  for (int i = 0; i < kLaunchBatch; ++i) launch_empty_kernel(stream);
  check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  check_cuda(cudaStreamSynchronize(stream), "warm-up");
  Events events;
  double total = 0;
  for (auto _ : state) {
    const double t = events.time(stream, [&] { check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); });
    state.SetIterationTime(t);
    total += t;
  }
  set_launch_counters(state, total);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// One launch and a synchronization, timed on the host: what a single small case costs.
void BM_LaunchEmptyKernelRoundTrip(benchmark::State& state) {
  if (const auto why = gpu::unavailable_reason()) return state.SkipWithError(why->c_str());
  launch_empty_kernel(nullptr);
  gpu::synchronize();
  for (auto _ : state) {
    launch_empty_kernel(nullptr);
    check_cuda(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  }
}

void register_benchmarks() {
  for (const Subject& s : subjects())
    for (int ilp : kIlpValues) {
      const std::string name = s.name() + "/ilp:" + std::to_string(ilp);
      benchmark::RegisterBenchmark(name.c_str(), [s, ilp](benchmark::State& state) { kernel_benchmark(state, s, ilp); })
          ->UseManualTime()
          ->MinTime(kMinTimeSeconds)
          ->Unit(benchmark::kMicrosecond);
    }
  register_scenarios();
  register_batches();
  benchmark::RegisterBenchmark("launch/empty_kernel", BM_LaunchEmptyKernel)->UseManualTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("launch/empty_kernel_graph_replay", BM_LaunchEmptyKernelGraph)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("launch/empty_kernel_roundtrip", BM_LaunchEmptyKernelRoundTrip)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace
}  // namespace bitparity::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("device", bitparity::gpu::device_description());
  bitparity::bench::register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
