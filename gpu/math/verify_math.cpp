#include "gpu/math/verify_math.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <thread>

#include "gpu/math/cuda_buffer.h"
#include "gpu/math/device_info.h"
#include "gpu/math/math_kernels.h"
#include "reference/math/device_math.h"
#include "reference/math/device_sample.h"

namespace bitparity::gpu::math {
namespace {

namespace rm = ref::math;

constexpr uint32_t kChunk = 1u << 25;  // patterns per launch: 7 x 128 MiB of results

uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }
float canonical(float v) { return std::isnan(v) ? std::bit_cast<float>(rm::kCanonicalNanBits) : v; }

// The informational models, each compared with one GPU function (index into SampleFunction order).
struct InfoModel {
  const char* name;
  int gpu_function;
  float (*model)(const rm::Ex2Tables&, float);
};

const InfoModel kInfoModels[] = {
    {"expf cr", 1, [](const rm::Ex2Tables&, float x) { return rm::expf(rm::MathModel::kCorrectlyRounded, x); }},
    {"logf cr", 2, [](const rm::Ex2Tables&, float x) { return rm::logf(rm::MathModel::kCorrectlyRounded, x); }},
    {"log1pf cr", 3, [](const rm::Ex2Tables&, float x) { return rm::log1pf(rm::MathModel::kCorrectlyRounded, x); }},
    {"sigmoid cr", 4, [](const rm::Ex2Tables&, float x) { return rm::sigmoid(rm::MathModel::kCorrectlyRounded, x); }},
    {"silu cr", 5, [](const rm::Ex2Tables&, float x) { return rm::silu(rm::MathModel::kCorrectlyRounded, x); }},
    {"softplus cr", 6, [](const rm::Ex2Tables&, float x) { return rm::softplus(rm::MathModel::kCorrectlyRounded, x); }},
    // 1 ⊘ (1 ⊕ expf(−x)): libdevice expf, but the denominator rounded separately (no fma).
    {"sigmoid unfused", 4,
     [](const rm::Ex2Tables& t, float x) { return canonical(1.0f / (1.0f + rm::libdevice_expf(t, -x))); }},
    {"silu unfused", 5,
     [](const rm::Ex2Tables& t, float x) { return canonical(x / (1.0f + rm::libdevice_expf(t, -x))); }},
};
constexpr int kInfoCount = sizeof(kInfoModels) / sizeof(kInfoModels[0]);
constexpr int kCountTotal = rm::kSampleFunctionCount + kInfoCount;

// Position of a float on the integer line: ulp distance is a difference of ordinals.
int64_t ordinal(uint32_t b) { return (b >> 31) ? -static_cast<int64_t>(b & 0x7FFFFFFFu) : static_cast<int64_t>(b); }
bool is_nan(uint32_t b) { return (b & 0x7FFFFFFFu) > 0x7F800000u; }

void record(SweepCount& c, uint32_t x, uint32_t gpu, uint32_t model) {
  if (gpu == model) return;
  ++c.mismatches;
  if (is_nan(gpu) != is_nan(model)) {
    ++c.nan_mismatches;
  } else if (!is_nan(gpu)) {
    const int64_t d = ordinal(gpu) - ordinal(model);
    c.max_ulp = std::max<uint64_t>(c.max_ulp, static_cast<uint64_t>(d < 0 ? -d : d));
  }
  if (c.examples.size() < kMaxExamples) c.examples.push_back({x, gpu, model});
}

// Checks patterns [lo, hi) of a chunk that starts at `base`; `out` holds the chunk's GPU results.
void check_slice(const rm::Ex2Tables& tables, uint64_t base, uint32_t n, const uint32_t* out, uint32_t lo, uint32_t hi,
                 std::vector<SweepCount>& counts) {
  for (uint32_t i = lo; i < hi; ++i) {
    const uint32_t xb = static_cast<uint32_t>(base + i);
    const float x = std::bit_cast<float>(xb);
    for (int k = 0; k < rm::kSampleFunctionCount; ++k) {
      record(counts[k], xb, out[size_t(k) * n + i], bits_of(rm::emulate_sample_function(tables, rm::kSampleFunctions[k], x)));
    }
    for (int k = 0; k < kInfoCount; ++k) {
      record(counts[rm::kSampleFunctionCount + k], xb, out[size_t(kInfoModels[k].gpu_function) * n + i],
             bits_of(kInfoModels[k].model(tables, x)));
    }
  }
  for (auto& c : counts) c.checked += hi - lo;
}

std::vector<SweepCount> empty_counts() {
  std::vector<SweepCount> counts(kCountTotal);
  for (int k = 0; k < rm::kSampleFunctionCount; ++k) counts[k].name = rm::sample_function_name(rm::kSampleFunctions[k]);
  for (int k = 0; k < kInfoCount; ++k) {
    counts[rm::kSampleFunctionCount + k].name = kInfoModels[k].name;
    counts[rm::kSampleFunctionCount + k].must_match = false;
  }
  return counts;
}

void check_chunk(const rm::Ex2Tables& tables, uint64_t base, uint32_t n, const uint32_t* out, unsigned threads,
                 std::vector<SweepCount>& total) {
  std::vector<std::vector<SweepCount>> partial(threads, empty_counts());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    const uint32_t lo = static_cast<uint32_t>(uint64_t(n) * t / threads);
    const uint32_t hi = static_cast<uint32_t>(uint64_t(n) * (t + 1) / threads);
    pool.emplace_back([&, t, lo, hi] { check_slice(tables, base, n, out, lo, hi, partial[t]); });
  }
  for (auto& th : pool) th.join();
  for (unsigned t = 0; t < threads; ++t) {  // slices are in input order, so examples stay ordered
    for (size_t k = 0; k < total.size(); ++k) {
      total[k].checked += partial[t][k].checked;
      total[k].mismatches += partial[t][k].mismatches;
      total[k].nan_mismatches += partial[t][k].nan_mismatches;
      total[k].max_ulp = std::max(total[k].max_ulp, partial[t][k].max_ulp);
      for (const auto& e : partial[t][k].examples) {
        if (total[k].examples.size() < kMaxExamples) total[k].examples.push_back(e);
      }
    }
  }
}

}  // namespace

bool sweep_math(const rm::Ex2Tables& tables, const SweepOptions& options, std::vector<SweepCount>* counts,
                std::string* error) {
  if (options.end > (1ull << 32) || options.begin > options.end) {
    if (error) *error = "sweep range must lie within [0, 2^32]";
    return false;
  }
  if (!cuda_device_present(error)) return false;
  const unsigned threads = options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  const size_t per_chunk = size_t(kChunk) * kDeviceFunctionCount;
  DeviceBuffer<float> d_out[2];
  PinnedBuffer<uint32_t> h_out[2];
  for (int b = 0; b < 2; ++b) {
    if (!d_out[b].allocate(per_chunk, error) || !h_out[b].allocate(per_chunk, error)) return false;
  }
  cudaStream_t stream = nullptr;
  if (!cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate", error)) return false;
  cudaEvent_t copied[2] = {nullptr, nullptr};
  struct Guard {
    cudaStream_t s;
    cudaEvent_t* e;
    ~Guard() {
      for (int b = 0; b < 2; ++b) {
        if (e[b]) cudaEventDestroy(e[b]);
      }
      cudaStreamDestroy(s);
    }
  } guard{stream, copied};
  for (int b = 0; b < 2; ++b) {
    if (!cuda_ok(cudaEventCreateWithFlags(&copied[b], cudaEventDisableTiming), "cudaEventCreate", error)) return false;
  }

  *counts = empty_counts();
  const uint64_t total = options.end - options.begin;
  const uint64_t n_chunks = (total + kChunk - 1) / kChunk;
  auto chunk_base = [&](uint64_t c) { return options.begin + c * kChunk; };
  auto chunk_size = [&](uint64_t c) { return static_cast<uint32_t>(std::min<uint64_t>(kChunk, options.end - chunk_base(c))); };
  // Double buffering: the GPU computes chunk c while the CPU checks chunk c - 1.
  for (uint64_t c = 0; c <= n_chunks; ++c) {
    if (c < n_chunks) {
      const int b = static_cast<int>(c % 2);
      const uint32_t n = chunk_size(c);
      if (!cuda_ok(launch_math_sweep(static_cast<uint32_t>(chunk_base(c)), n, d_out[b].get(), stream), "sweep kernel launch",
                   error) ||
          !cuda_ok(cudaMemcpyAsync(h_out[b].get(), d_out[b].get(), size_t(n) * kDeviceFunctionCount * 4,
                                   cudaMemcpyDeviceToHost, stream),
                   "copy results", error) ||
          !cuda_ok(cudaEventRecord(copied[b], stream), "cudaEventRecord", error)) {
        return false;
      }
    }
    if (c > 0) {
      const uint64_t p = c - 1;
      if (!cuda_ok(cudaEventSynchronize(copied[p % 2]), "sweep kernel", error)) return false;
      check_chunk(tables, chunk_base(p), chunk_size(p), h_out[p % 2].get(), threads, *counts);
      if (options.progress) options.progress(chunk_base(p) + chunk_size(p) - options.begin, total);
    }
  }
  return true;
}

std::string format_sweep(const std::vector<SweepCount>& counts) {
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line, "%-16s %-13s %11s %11s %7s %6s  %s\n", "function", "kind", "checked",
                "mismatches", "max_ulp", "nan", "first mismatches (input: gpu vs model)");
  s += line;
  for (const auto& c : counts) {
    std::snprintf(line, sizeof line, "%-16s %-13s %11" PRIu64 " %11" PRIu64 " %7" PRIu64 " %6" PRIu64 " ",
                  c.name.c_str(), c.must_match ? "must-match" : "informational", c.checked, c.mismatches, c.max_ulp,
                  c.nan_mismatches);
    s += line;
    for (const auto& e : c.examples) {
      std::snprintf(line, sizeof line, " 0x%08x: 0x%08x vs 0x%08x;", e[0], e[1], e[2]);
      s += line;
    }
    s += "\n";
  }
  return s;
}

}  // namespace bitparity::gpu::math
