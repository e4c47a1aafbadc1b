// Throughput of the CPU emulation of CUDA's fp32 math (reference/math/), one core: items/s is
// evaluations per second. The inputs are fp32 values where expf is neither 0 nor Inf (the
// activations' range) or raw bit patterns; both sets are larger than a core's L1 but the tables
// (64 MiB) are not, so table lookups hit L2/L3 or memory as they would in a real reference run.
#include <benchmark/benchmark.h>

#include <bit>
#include <random>
#include <vector>

#include "reference/math/device_math.h"
#include "reference/math/ex2_tables.h"

namespace {

namespace rm = bitparity::ref::math;

constexpr size_t kInputs = 1 << 16;

const std::vector<float>& activation_inputs() {
  static const std::vector<float> v = [] {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-30.0f, 30.0f);
    std::vector<float> x(kInputs);
    for (float& e : x) e = d(rng);
    return x;
  }();
  return v;
}

const std::vector<float>& bit_pattern_inputs() {
  static const std::vector<float> v = [] {
    std::mt19937 rng(2);
    std::vector<float> x(kInputs);
    for (float& e : x) e = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    return x;
  }();
  return v;
}

template <float (*Fn)(rm::MathModel, float)>
void run(benchmark::State& state, rm::MathModel model, const std::vector<float>& inputs) {
  rm::default_ex2_tables();  // load outside the timed loop
  for (auto _ : state) {
    for (float x : inputs) benchmark::DoNotOptimize(Fn(model, x));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(inputs.size()));
}

void BM_Expf_Libdevice_Activations(benchmark::State& s) { run<rm::expf>(s, rm::MathModel::kLibdevice, activation_inputs()); }
void BM_Expf_Libdevice_BitPatterns(benchmark::State& s) { run<rm::expf>(s, rm::MathModel::kLibdevice, bit_pattern_inputs()); }
void BM_Expf_Cr_Activations(benchmark::State& s) { run<rm::expf>(s, rm::MathModel::kCorrectlyRounded, activation_inputs()); }
void BM_Logf_Libdevice_BitPatterns(benchmark::State& s) { run<rm::logf>(s, rm::MathModel::kLibdevice, bit_pattern_inputs()); }
void BM_Log1pf_Libdevice_BitPatterns(benchmark::State& s) { run<rm::log1pf>(s, rm::MathModel::kLibdevice, bit_pattern_inputs()); }
void BM_Silu_Libdevice_Activations(benchmark::State& s) { run<rm::silu>(s, rm::MathModel::kLibdevice, activation_inputs()); }

// The batched form: a block's table entries are prefetched before they are read.
void BM_ExpfN_Libdevice_Activations(benchmark::State& state) {
  const std::vector<float>& x = activation_inputs();
  std::vector<float> y(x.size());
  rm::default_ex2_tables();
  for (auto _ : state) {
    rm::expf_n(rm::MathModel::kLibdevice, x, y);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(x.size()));
}

void BM_Ex2TableDecode(benchmark::State& state) {
  const std::vector<unsigned char> bytes = rm::encode_ex2_tables(rm::default_ex2_tables());
  for (auto _ : state) benchmark::DoNotOptimize(rm::decode_ex2_tables(bytes));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes.size()));
}

BENCHMARK(BM_Expf_Libdevice_Activations);
BENCHMARK(BM_Expf_Libdevice_BitPatterns);
BENCHMARK(BM_ExpfN_Libdevice_Activations);
BENCHMARK(BM_Expf_Cr_Activations);
BENCHMARK(BM_Logf_Libdevice_BitPatterns);
BENCHMARK(BM_Log1pf_Libdevice_BitPatterns);
BENCHMARK(BM_Silu_Libdevice_Activations);
BENCHMARK(BM_Ex2TableDecode)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
