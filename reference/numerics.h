// Shared numerics of the reference: the fp32 formulas of eager PyTorch's transcendentals, the
// clamp kernels' exact comparisons, and the reduction orders of torch.sum on CUDA. Each function
// names the rule of spec/aligned-ops.md that it follows.
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/registry.h"
#include "reference/math/device_math.h"

namespace bitparity::ref {

// expf and log1pf as the CUDA kernels compute them: libdevice's __nv_expf and __nv_log1pf,
// emulated bit for bit (rule 12, reference/math/device_math.h).
float device_expf(float x);
float device_log1pf(float x);

// Rule 2, fp32 formulas as nvcc compiles them from ATen's (and Paddle's) source.
float sigmoid_f32(float x);  // 1 / (1 + expf(-x))
float silu_f32(float x);     // x / (1 + expf(-x)), a division, not x * sigmoid(x)
math::SiluSigmoid silu_sigmoid_f32(float x);  // both from one expf, each bit-identical to its own call
float softplus_f32(float x); // x > 20 ? x : log1pf(expf(x))

// CUDA's fminf/fmaxf (PTX min.f32/max.f32): a NaN operand yields the other operand, and of two
// zeros min gives -0 and max gives +0.
float cuda_fminf(float x, float y);
float cuda_fmaxf(float x, float y);

// ATen's clamp kernels with Python scalar limits (TensorCompare.cu, opmath = fp32). The limit is
// a double converted once to fp32; NaN inputs propagate.
// x.clamp(max=hi) = min(v, hi) and x.clamp(min=lo, max=hi) = min(max(v, lo), hi) with CUDA's
// min/max; lo > hi gives hi. Eager PyTorch 2.11 on an H200 returns clamp(+0, max=-0.0) = -0 and
// clamp(v < 0, min=+0.0, max=-0.0) = -0, which only these forms reproduce (peers/torch).
float clamp_max_f32(float v, float hi);
float clamp_min_max_f32(float v, float lo, float hi);

// The launch shape of ATen's Reduce.cuh for rows of `width` values of `element_bytes` bytes (4 for
// fp32; 2 for a bf16 or fp16 tensor, which torch.sum reduces with fp32 accumulation) in a tensor of
// `rows` rows (rule 7): whether each lane loads 16-byte vectors (4 or 8 elements), and how many
// lanes share a row. Throws RejectError("unmodelled") for the layouts rule 7 does not cover. The
// reference's own: a backend that reproduces torch.sum's order writes its plan itself, so that a
// diff can catch either.
struct RowSumPlan {
  bool vectorized = false;
  int64_t lanes = 1;
  int64_t vector = 4;  // elements a lane loads at once, and its accumulators, when vectorized
};
RowSumPlan torch_row_sum_plan(int64_t width, int64_t rows, int element_bytes = 4);

// Rule 7, last-dim reduce of one contiguous row of width `width` inside a tensor of `rows` rows,
// the values given as fp32 (exact for a bf16 or fp16 tensor, `element_bytes` 2): the lane model with
// one accumulator per position of a 16-byte vector (4 for fp32, 8 for 16-bit values; 4 by iteration
// where rows are too narrow to vectorize), combined left to right, and the halving tree. The row
// count is part of the order (it sets the lane count). Throws RejectError("unmodelled") for the
// layouts rule 7 does not cover (width >= 128 and not a multiple of the vector; rows so wide they
// split blocks).
float torch_row_sum(std::span<const float> row, int64_t rows, int element_bytes = 4);

// Rule 7, middle-dim reduce of a contiguous [T, k, H] over k, for one output: one thread with four
// fp32 accumulators, acc[j mod 4] += x_j for j ascending, each from +0, combined left to right.
float torch_middle_sum(std::span<const float> x);

// torch.sum over dim 1 of a contiguous [T, k, H] (a token's k slot values x): the middle-dim reduce,
// except that with H == 1 the slots are the innermost dim and torch reduces them as a last-dim row
// sum of [T, k] (torch_row_sum with rows T). Eager PyTorch 2.11 on an H200 (peers/torch).
float torch_slot_sum(std::span<const float> x, int64_t H, int64_t T);

// The values added in ascending order from +0, the accumulator rounded to `each` after every
// addition (fp32: a plain sequential fp32 sum): the order a reference fixes for atomic baselines.
float sequential_sum(std::span<const float> x, DType each);

// The values added in ascending order from +0 as the device's atomic adds of `each` compute them:
// bf16 as sequential_sum; fp32 (atom.add.f32 / RED.ADD.F32.FTZ) flushes a subnormal addend and a
// subnormal result to a zero of its sign, so that +0 + a subnormal is +0. Eager PyTorch's fp32
// scatter_add_ and index_add_ on an H200 flush so (peers/torch/routing_atomic.jsonl.gz, and the
// router's gather path in routing.jsonl.gz); its bf16 atomics keep subnormals. The order a
// reference fixes for the atomic baselines.
float atomic_sum(std::span<const float> x, DType each);

// An arithmetic result as the GPU's fp32 units write it: any NaN becomes 0x7FFFFFFF.
float canonical(float v);

// The NaN an arithmetic result has once CUDA stores it in a tensor of `dtype`: fp32 0x7FFFFFFF,
// bf16 and fp16 0x7FFF (__float2bfloat16 and cvt.rn.f16.f32 write these for any NaN). An x86 NaN
// keeps its input's payload; CUDA's does not, and eager PyTorch's outputs carry CUDA's.
void canonicalize_nans(Tensor& t);
// The same for elements first, ..., first + count - 1 only (the rows an output's reference wrote).
void canonicalize_nans(Tensor& t, int64_t first, int64_t count);
// An implementation whose every output is an arithmetic result (never a bit copy of an input):
// `impl` with every NaN of its outputs canonical.
Impl with_canonical_nans(Impl impl);

// The widest row torch_row_sum models exactly: beyond it ATen splits a row across warps. 16-bit rows
// were verified up to 4096 (at 8192 neither vector width reproduces torch on an H200).
inline constexpr int64_t kMaxModelledRowWidth = 8192;
inline constexpr int64_t kMaxModelledRowWidth16 = 4096;

}  // namespace bitparity::ref
