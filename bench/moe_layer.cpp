// A whole MoE layer of GLM-4.5-Air's shape through expert_mlp's kernel records: 128 experts of
// hidden 4096 and intermediate 1408, each with its own weights in device memory, run one after the
// other on one stream as Megatron's SequentialMLP runs them, with the token counts a top-8 router
// gives a batch (every count drawn once from a fixed seed: log-normal loads around T * 8 / 128, so
// that some experts get many tokens, some few, and at small T some fall below the padding
// threshold). One benchmark per contract of expert_mlp that has a CUDA record and per direction,
// at T = 1024 and 4096 tokens: µs per layer and TFLOP/s over the GEMMs at the padded row counts,
// the figure that says what the fixed-order GEMMs cost beside cuBLAS's in a real layer.
//
// A scenario benchmark of one model's layer: unlike kernel_bench's generic loop over records and
// reference inputs, it names its op.
#include "bench/moe_layer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/bench_kernels.h"
#include "core/random.h"
#include "core/registry.h"
#include "gpu/common/device_tensor.h"
#include "gpu/common/ilp.h"
#include "gpu/common/kernel_record.h"
#include "gpu/register.h"
#include "gpu/runtime.h"
#include "ops/expert_mlp.h"

namespace bitparity::bench {
namespace {

constexpr const char* kOp = "expert_mlp";
constexpr int64_t kExperts = 128, kTopK = 8, kHidden = 4096, kIntermediate = 1408;
constexpr double kLoadSpread = 0.5;  // sigma of the log-normal expert loads
constexpr double kMinTimeSeconds = 0.2;

// Tokens per expert for a batch of T tokens: T * kTopK assignments spread by log-normal weights.
std::vector<int64_t> expert_tokens(int64_t T) {
  uint64_t state = 20261203;
  std::vector<double> w(static_cast<size_t>(kExperts));
  for (double& x : w) {
    // Box-Muller from two uniforms in (0, 1].
    const double u1 = (static_cast<double>(splitmix64_next(state) >> 11) + 1) * 0x1p-53;
    const double u2 = static_cast<double>(splitmix64_next(state) >> 11) * 0x1p-53;
    x = std::exp(kLoadSpread * std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2));
  }
  double total = 0;
  for (double x : w) total += x;
  std::vector<int64_t> tokens;
  int64_t assigned = 0;
  for (size_t e = 0; e < w.size(); ++e) {
    const int64_t n = e + 1 < w.size() ? static_cast<int64_t>(std::floor(w[e] / total * static_cast<double>(T * kTopK)))
                                       : T * kTopK - assigned;
    tokens.push_back(std::min(n, T));  // an expert sees a token at most once
    assigned += n;
  }
  return tokens;
}

// One expert: its device inputs and outputs and the bound launch of one contract.
struct Expert {
  Case c;  // attributes and shapes only: the record reads its tensors from the device maps
  gpu::DeviceTensorMap inputs, outputs;
  gpu::BoundLaunch launch;
};

gpu::DeviceTensor random_bf16(Shape shape, uint64_t seed) {
  gpu::DeviceTensor t = gpu::allocate({std::move(shape), DType::kBF16}, 0);
  if (t.numel() > 0) fill_random_bf16(t.data(), static_cast<size_t>(t.numel()), seed);
  return t;
}

void layer_benchmark(benchmark::State& state, const std::string& contract_name, Direction direction, int64_t T) {
  if (const auto why = gpu::unavailable_reason()) return state.SkipWithError(why->c_str());
  const OpInfo* op = harness_registry().op(kOp);
  const gpu::KernelRecord* record = gpu::kernel_record(kOp, contract_name);
  if (!op || !record) return state.SkipWithError("no CUDA record of this contract");
  const ContractInfo& contract = *op->contract(contract_name);
  const std::vector<int64_t> tokens = expert_tokens(T);
  std::vector<std::unique_ptr<Expert>> experts;
  double flops = 0;
  uint64_t seed = 1;
  for (const int64_t M : tokens) {
    auto e = std::make_unique<Expert>();
    e->c.op = kOp;
    e->c.direction = direction;
    e->c.attrs["clamp"] = 7.0;
    // validate reads the host shapes: small host tensors for the tokens, the weights' shapes too.
    e->c.inputs["x"] = Tensor(DType::kBF16, {M, kHidden});
    e->c.inputs["w1"] = Tensor(DType::kBF16, {kHidden, 2 * kIntermediate});
    e->c.inputs["w2"] = Tensor(DType::kBF16, {kIntermediate, kHidden});
    e->c.inputs["probs"] = Tensor(DType::kFP32, {M});
    if (direction == Direction::kBackward) e->c.inputs["d_out"] = Tensor(DType::kBF16, {M, kHidden});
    const OutputMetas metas = op->validate(e->c, contract);
    e->c.inputs.clear();
    e->inputs["x"] = random_bf16({M, kHidden}, seed++);
    e->inputs["w1"] = random_bf16({kHidden, 2 * kIntermediate}, seed++);
    e->inputs["w2"] = random_bf16({kIntermediate, kHidden}, seed++);
    e->inputs["probs"] = gpu::allocate({{M}, DType::kFP32}, 0);  // zero probs: the same work
    if (direction == Direction::kBackward) e->inputs["d_out"] = random_bf16({M, kHidden}, seed++);
    e->outputs = gpu::allocate(metas);
    e->launch = record->bind({e->c, contract, e->inputs, e->outputs, nullptr, gpu::kIlpDefault});
    // fc1 and fc2 forward; the backward recomputes fc1 and runs four more GEMMs.
    const double per_row = 2.0 * kHidden * 2 * kIntermediate + 2.0 * kIntermediate * kHidden;
    flops += static_cast<double>(ops::expert_padded_rows(M)) * per_row * (direction == Direction::kForward ? 1 : 8.0 / 3);
    experts.push_back(std::move(e));
  }
  for (auto& e : experts) e->launch();  // warm-up
  gpu::synchronize();
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (auto& e : experts) e->launch();
    gpu::synchronize();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(t);
    seconds += t;
  }
  const double n = static_cast<double>(state.iterations());
  int64_t padded = 0, rows = 0;
  for (const int64_t M : tokens) {
    padded += M > 0 && ops::expert_padded_rows(M) != M;
    rows += M;
  }
  state.counters["flops"] = flops;
  state.counters["TFLOP/s"] = flops * n / seconds * 1e-12;
  state.counters["experts"] = static_cast<double>(tokens.size());
  state.counters["padded_experts"] = static_cast<double>(padded);
  state.counters["token_rows"] = static_cast<double>(rows);
  state.counters["max_rows"] = static_cast<double>(*std::max_element(tokens.begin(), tokens.end()));
  state.counters["min_rows"] = static_cast<double>(*std::min_element(tokens.begin(), tokens.end()));
}

}  // namespace

void register_moe_layer_benchmarks() {
  const OpInfo* op = harness_registry().op(kOp);
  if (!op) return;
  for (const ContractInfo& contract : op->contracts)
    for (const Direction direction : {Direction::kForward, Direction::kBackward})
      for (const int64_t T : {1024, 4096}) {
        const std::string name = "layer/glm45_air_T" + std::to_string(T) + "/" + kOp + "_" +
                                 std::string(direction_name(direction)) + "/" + contract.name;
        benchmark::RegisterBenchmark(name.c_str(), [c = contract.name, direction, T](benchmark::State& state) {
          layer_benchmark(state, c, direction, T);
        })
            ->UseManualTime()
            ->MinTime(kMinTimeSeconds)
            ->Unit(benchmark::kMillisecond);
      }
}

}  // namespace bitparity::bench
