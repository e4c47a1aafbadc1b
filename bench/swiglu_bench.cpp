// Google Benchmark programs for the SwiGLU-family kernels and for kernel launch latency.
//
// Each kernel benchmark counts effective bytes (every input read once, every output written once),
// times the kernel with CUDA events (UseManualTime), and in the same loop times a device-to-device
// cudaMemcpy that moves the same number of bytes (half read, half written): the roofline the
// kernel is compared with. Input sets rotate so that each launch starts with cold L2; inputs are
// random moderate values, never zeros. Counters: bytes, GB/s, copy_GB/s, pct_of_copy. Each
// kernel runs at every ILP the launchers offer (work items whose loads a thread issues together;
// same bits, different speed); ilp:0 is what the backend ships, each kernel's measured best.
// Run with --benchmark_out=FILE --benchmark_out_format=json for Google Benchmark's own JSON.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include "bench/bench_kernels.h"
#include "gpu/runtime.h"
#include "gpu/swiglu_kernels.h"

namespace bitparity::bench {
namespace {

using gpu::check_cuda;
using gpu::DeviceBuffer;

constexpr int64_t kRowCounts[] = {16384, 65536};
constexpr int64_t kHiddenSizes[] = {1408, 4096};  // GLM-4.5-Air expert F; a wide expert
constexpr int kWarmUpLaunches = 3;
constexpr double kMinTimeSeconds = 0.1;
constexpr size_t kL2Bytes = size_t{50} << 20;  // H200
constexpr int kColdL2Multiple = 3;             // rotate until the sets exceed 3 L2s
constexpr int kLaunchBatch = 100;              // launches per iteration of the latency benchmarks
constexpr int kIlpValues[] = {0, 1, 2, 4};     // gpu/swiglu_kernels.h: 0 is each kernel's default

enum class Family { kSwiglu, kMegatronScale, kPaddleScale };

struct KernelSpec {
  std::string name;
  Family family;
  bool backward;
};

const std::vector<KernelSpec>& kernels() {
  static const std::vector<KernelSpec> specs = {
      {"swiglu_fwd/megatron", Family::kSwiglu, false},
      {"swiglu_bwd/megatron", Family::kSwiglu, true},
      {"swiglu_scale_fwd/megatron", Family::kMegatronScale, false},
      {"swiglu_scale_bwd/megatron", Family::kMegatronScale, true},
      {"swiglu_scale_fwd/paddle", Family::kPaddleScale, false},
      {"swiglu_scale_bwd/paddle", Family::kPaddleScale, true},
  };
  return specs;
}

// One set of a kernel's inputs and outputs: bf16 activations, fp32 scale (the fp64-denominator
// probs of the aligned router), fp32 d_scale.
struct Set {
  DeviceBuffer y, g, scale, out, d_y, d_scale;
};

struct Sizes {
  size_t read = 0, written = 0;
  size_t total() const { return read + written; }
};

Sizes effective_bytes(const KernelSpec& k, int64_t rows, int64_t F) {
  const auto r = static_cast<size_t>(rows), f = static_cast<size_t>(F);
  const bool scaled = k.family != Family::kSwiglu;
  Sizes s;
  s.read = r * 2 * f * 2 + (scaled ? r * 4 : 0) + (k.backward ? r * f * 2 : 0);
  s.written = k.backward ? r * 2 * f * 2 + (scaled ? r * 4 : 0) : r * f * 2;
  return s;
}

Set make_set(const KernelSpec& k, int64_t rows, int64_t F, uint64_t seed) {
  const auto r = static_cast<size_t>(rows), f = static_cast<size_t>(F);
  Set s;
  s.y = DeviceBuffer(r * 2 * f * 2);
  fill_random_bf16(s.y.get(), r * 2 * f, seed);
  if (k.family != Family::kSwiglu) {
    s.scale = DeviceBuffer(r * 4);
    fill_random_f32(s.scale.get(), r, seed + 1);
  }
  if (k.backward) {
    s.g = DeviceBuffer(r * f * 2);
    fill_random_bf16(s.g.get(), r * f, seed + 2);
    s.d_y = DeviceBuffer(r * 2 * f * 2);
    if (k.family != Family::kSwiglu) s.d_scale = DeviceBuffer(r * 4);
  } else {
    s.out = DeviceBuffer(r * f * 2);
  }
  return s;
}

void launch(const KernelSpec& k, const Set& s, int64_t rows, int64_t F, int ilp, cudaStream_t stream) {
  switch (k.family) {
    case Family::kSwiglu:
    case Family::kMegatronScale:
      if (!k.backward) {
        gpu::MegatronForward p;
        p.rows = rows, p.F = F, p.y = s.y.get(), p.out = s.out.get(), p.stream = stream;
        p.scale = s.scale.get(), p.scale_dtype = DType::kFP32, p.ilp = ilp;
        gpu::launch_megatron_forward(p);
      } else if (k.family == Family::kSwiglu) {
        gpu::MegatronBackward p;
        p.rows = rows, p.F = F, p.y = s.y.get(), p.g = s.g.get(), p.d_y = s.d_y.get(), p.stream = stream;
        p.ilp = ilp;
        gpu::launch_megatron_backward(p);
      } else {
        gpu::MegatronScaleBackward p;
        p.rows = rows, p.F = F, p.y = s.y.get(), p.g = s.g.get(), p.scale = s.scale.get();
        p.scale_dtype = DType::kFP32, p.plan = gpu::torch_row_sum_plan(F, rows);
        p.d_y = s.d_y.get(), p.d_scale = s.d_scale.get(), p.stream = stream, p.ilp = ilp;
        gpu::launch_megatron_scale_backward(p);
      }
      return;
    case Family::kPaddleScale:
      if (!k.backward) {
        gpu::PaddleForward p;
        p.rows = rows, p.F = F, p.y = s.y.get(), p.scale = s.scale.get(), p.out = s.out.get(), p.stream = stream;
        p.ilp = ilp;
        gpu::launch_paddle_forward(p);
      } else {
        gpu::PaddleBackward p;
        p.rows = rows, p.F = F, p.y = s.y.get(), p.g = s.g.get(), p.scale = s.scale.get();
        p.d_y = s.d_y.get(), p.d_scale = s.d_scale.get(), p.stream = stream, p.ilp = ilp;
        gpu::launch_paddle_backward(p);
      }
      return;
  }
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

void kernel_benchmark(benchmark::State& state, const KernelSpec& k, int64_t rows, int64_t F, int ilp) {
  if (const auto why = gpu::unavailable_reason()) {
    state.SkipWithError(why->c_str());
    return;
  }
  const Sizes bytes = effective_bytes(k, rows, F);
  const size_t sets_needed = std::max<size_t>(2, (kColdL2Multiple * kL2Bytes + bytes.total() - 1) / bytes.total());
  std::vector<Set> sets;
  for (size_t i = 0; i < sets_needed; ++i) sets.push_back(make_set(k, rows, F, 1000 * i + 17));
  // The copy's source and destination, rotated the same way: the copy reads and writes half each.
  const size_t copy_bytes = bytes.total() / 2;
  std::vector<DeviceBuffer> copy_src, copy_dst;
  for (size_t i = 0; i < sets_needed; ++i) {
    copy_src.emplace_back(copy_bytes);
    copy_dst.emplace_back(copy_bytes);
    fill_random_bf16(copy_src.back().get(), copy_bytes / 2, 7 + i);
  }
  cudaStream_t stream = nullptr;
  auto copy = [&](size_t i) {
    check_cuda(cudaMemcpyAsync(copy_dst[i].get(), copy_src[i].get(), copy_bytes, cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpyAsync");
  };
  for (int i = 0; i < kWarmUpLaunches; ++i) {
    launch(k, sets[i % sets.size()], rows, F, ilp, stream);
    copy(i % sets.size());
  }
  gpu::synchronize();

  Events events;
  double kernel_seconds = 0, copy_seconds = 0;
  size_t i = 0;
  for (auto _ : state) {
    const size_t set = i++ % sets.size();
    const double t = events.time(stream, [&] { launch(k, sets[set], rows, F, ilp, stream); });
    state.SetIterationTime(t);
    kernel_seconds += t;
    copy_seconds += events.time(stream, [&] { copy(set); });
  }
  check_cuda(cudaGetLastError(), k.name);
  const double n = static_cast<double>(state.iterations());
  const double gbs = static_cast<double>(bytes.total()) * n / kernel_seconds * 1e-9;
  const double copy_gbs = static_cast<double>(2 * copy_bytes) * n / copy_seconds * 1e-9;
  state.SetBytesProcessed(static_cast<int64_t>(bytes.total()) * state.iterations());
  state.counters["bytes"] = static_cast<double>(bytes.total());
  state.counters["GB/s"] = gbs;
  state.counters["copy_GB/s"] = copy_gbs;
  state.counters["pct_of_copy"] = 100.0 * gbs / copy_gbs;
  state.counters["rotated_sets"] = static_cast<double>(sets.size());
  state.counters["ilp"] = ilp;
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
  for (const KernelSpec& k : kernels())
    for (int64_t rows : kRowCounts)
      for (int64_t F : kHiddenSizes)
        for (int ilp : kIlpValues) {
          const std::string name = k.name + "/bf16/rows:" + std::to_string(rows) + "/F:" + std::to_string(F) +
                                   "/ilp:" + std::to_string(ilp);
          benchmark::RegisterBenchmark(name.c_str(), [k, rows, F, ilp](benchmark::State& state) {
            kernel_benchmark(state, k, rows, F, ilp);
          })->UseManualTime()->MinTime(kMinTimeSeconds)->Unit(benchmark::kMicrosecond);
        }
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
