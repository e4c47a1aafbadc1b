#include "reference/numerics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "reference/math/device_math.h"

namespace bitparity::ref {
namespace {

// Rule 7 constants of ATen's Reduce.cuh launch configuration.
constexpr int64_t kMaxThreads = 512;    // threads of one reduction block
constexpr int64_t kWarpLanes = 32;
constexpr int kVectorBytes = 16;                 // bytes of one vectorized load
constexpr int64_t kIterationAccumulators = 4;  // a lane's accumulators where rows are not vectorized
constexpr int64_t kVectorizeFrom = 128; // rows at least this wide load vectors
constexpr size_t kMaxAccumulators = std::max<size_t>(kVectorBytes / 2, kIterationAccumulators);

int64_t pow2_floor_capped(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n && p * 2 <= kMaxThreads) p *= 2;
  return p;
}

}  // namespace

float device_expf(float x) { return math::expf(math::MathModel::kLibdevice, x); }

float device_log1pf(float x) { return math::log1pf(math::MathModel::kLibdevice, x); }

// The formulas as nvcc compiles them (math/device_math.h: the denominator's contraction).
float softplus_f32(float x) { return math::softplus(math::MathModel::kLibdevice, x); }

float sigmoid_f32(float x) { return math::sigmoid(math::MathModel::kLibdevice, x); }

float silu_f32(float x) { return math::silu(math::MathModel::kLibdevice, x); }

math::SiluSigmoid silu_sigmoid_f32(float x) { return math::silu_sigmoid(math::MathModel::kLibdevice, x); }


float cuda_fminf(float x, float y) {
  if (std::isnan(x)) return y;
  if (std::isnan(y)) return x;
  if (x == 0 && y == 0) return std::signbit(x) ? x : y;
  return x < y ? x : y;
}

float cuda_fmaxf(float x, float y) {
  if (std::isnan(x)) return y;
  if (std::isnan(y)) return x;
  if (x == 0 && y == 0) return std::signbit(x) ? y : x;
  return x > y ? x : y;
}

float clamp_max_f32(float v, float hi) { return std::isnan(v) ? v : cuda_fminf(v, hi); }

float clamp_min_max_f32(float v, float lo, float hi) {
  if (std::isnan(v)) return v;
  return cuda_fminf(cuda_fmaxf(v, lo), hi);
}

RowSumPlan torch_row_sum_plan(int64_t width, int64_t rows, int element_bytes) {
  if (element_bytes != 2 && element_bytes != 4)
    throw std::logic_error("rule 7 models rows of 2- or 4-byte elements");
  const int64_t max_width = element_bytes == 2 ? kMaxModelledRowWidth16 : kMaxModelledRowWidth;
  if (width > max_width)
    throw RejectError("unmodelled", "rule 7 models torch.sum rows of " + std::to_string(element_bytes) +
                                        "-byte elements up to " + std::to_string(max_width) + " wide; got " +
                                        std::to_string(width));
  RowSumPlan plan;
  plan.vector = kVectorBytes / element_bytes;
  plan.vectorized = width >= kVectorizeFrom;
  if (plan.vectorized && width % plan.vector != 0)
    throw RejectError("unmodelled", "rule 7 does not model torch.sum over rows of width >= 128 that are not a "
                                    "multiple of " + std::to_string(plan.vector) + " (" +
                                    std::to_string(element_bytes) + "-byte elements); got " + std::to_string(width));
  const int64_t dim0 = plan.vectorized ? width / plan.vector : width;
  const int64_t lanes = std::min(pow2_floor_capped(dim0), kWarpLanes);
  const int64_t height = std::min(pow2_floor_capped(std::max<int64_t>(rows, 1)), kMaxThreads / lanes);
  plan.lanes = std::min(pow2_floor_capped(dim0), kMaxThreads / height);
  return plan;
}

float torch_row_sum(std::span<const float> row, int64_t rows, int element_bytes) {
  const int64_t width = static_cast<int64_t>(row.size());
  if (width == 0) return 0.0f;
  const RowSumPlan plan = torch_row_sum_plan(width, rows, element_bytes);
  const int64_t lanes = plan.lanes;
  const int64_t accumulators = plan.vectorized ? plan.vector : kIterationAccumulators;

  // On the stack: a lane count is at most kMaxThreads, a lane's accumulators at most a 16-bit vector's.
  std::array<float, kMaxThreads> lane_value;
  std::array<float, kMaxAccumulators> acc;
  for (int64_t l = 0; l < lanes; ++l) {
    std::fill_n(acc.begin(), accumulators, 0.0f);
    for (int64_t it = 0;; ++it) {
      if (plan.vectorized) {
        const int64_t base = plan.vector * (l + lanes * it);
        if (base >= width) break;
        for (int64_t i = 0; i < plan.vector; ++i) acc[static_cast<size_t>(i)] += row[static_cast<size_t>(base + i)];
      } else {
        const int64_t idx = l + lanes * it;
        if (idx >= width) break;
        acc[static_cast<size_t>(it % kIterationAccumulators)] += row[static_cast<size_t>(idx)];
      }
    }
    float value = acc[0];  // ((acc0 + acc1) + acc2) + ..., left to right
    for (int64_t i = 1; i < accumulators; ++i) value += acc[static_cast<size_t>(i)];
    lane_value[static_cast<size_t>(l)] = value;
  }
  for (int64_t stride = lanes / 2; stride >= 1; stride /= 2)
    for (int64_t l = 0; l < stride; ++l) lane_value[static_cast<size_t>(l)] += lane_value[static_cast<size_t>(l + stride)];
  return lane_value[0];
}

float torch_middle_sum(std::span<const float> x) {
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (size_t j = 0; j < x.size(); ++j) acc[j % 4] += x[j];
  return ((acc[0] + acc[1]) + acc[2]) + acc[3];
}

float torch_slot_sum(std::span<const float> x, int64_t H, int64_t T) {
  return H == 1 ? torch_row_sum(x, T) : torch_middle_sum(x);
}

float sequential_sum(std::span<const float> x, DType each) {
  float acc = 0.0f;
  for (float v : x) acc = round_to(each, acc + v);
  return acc;
}

float atomic_sum(std::span<const float> x, DType each) {
  if (each != DType::kFP32) return sequential_sum(x, each);
  auto flush = [](float v) { return std::fabs(v) < std::numeric_limits<float>::min() ? std::copysign(0.0f, v) : v; };
  float acc = 0.0f;
  for (float v : x) acc = flush(acc + flush(v));
  return acc;
}

float canonical(float v) { return v != v ? f32_from_bits(math::kCanonicalNanBits) : v; }

void canonicalize_nans(Tensor& t, int64_t first, int64_t count) {
  // By element width, without Tensor::bits' per-element dispatch: outputs such as embedding's
  // d_weight [V, H] are large beside their inputs.
  // The dtype read once: a store through the byte pointer may alias the tensor, so t.dtype() in the
  // loop would be loaded, and dispatched on, again for every element.
  const DType dtype = t.dtype();
  auto each = [&]<typename Bits>(Bits nan) {
    uint8_t* p = t.data() + first * static_cast<int64_t>(sizeof(Bits));
    for (int64_t i = 0; i < count; ++i, p += sizeof(Bits)) {
      Bits b;
      std::memcpy(&b, p, sizeof(Bits));
      if (is_nan_bits(dtype, b)) std::memcpy(p, &nan, sizeof(Bits));
    }
  };
  switch (dtype) {
    case DType::kFP32: each(static_cast<uint32_t>(math::kCanonicalNanBits)); break;
    case DType::kBF16:
    case DType::kFP16: each(uint16_t{0x7FFFu}); break;
    default: return;
  }
}

void canonicalize_nans(Tensor& t) { canonicalize_nans(t, 0, t.numel()); }

Impl with_canonical_nans(Impl impl) {
  return [impl = std::move(impl)](const Case& c, const ContractInfo& contract) {
    TensorMap outputs = impl(c, contract);
    for (auto& [name, t] : outputs) canonicalize_nans(t);
    return outputs;
  };
}

}  // namespace bitparity::ref
