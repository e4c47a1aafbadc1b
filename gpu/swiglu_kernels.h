// Launchers of the SwiGLU-family kernels (gpu/swiglu.cu, gpu/swiglu_scale.cu). No CUDA types
// here, so that host code compiled by g++ (the registry glue, tests, benchmarks) can call them.
//
// Every pointer is device memory; tensors are row-major and contiguous. expf is libdevice's
// __nv_expf, with the fma that nvcc makes of sigmoid's and silu's denominator written out (rule
// 12). A launcher checks its launch (runtime.h: check_launch) and throws gpu::CudaError on
// failure; it never validates a case: the host glue (swiglu_ops.cpp) rejects what the reference
// rejects before launching.
// Streams are cudaStream_t values passed as void*; nullptr is the default stream.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace bitparity::gpu {

// Megatron's clamp (spec OP-6), already gated by the contract: `on` when the attribute is active.
// hi = float(c), lo = float(-c); a NaN limit turns the clamped value half into NaN.
struct MegatronClamp {
  bool on = false;
  bool nan_limit = false;
  float hi = 0, lo = 0;
};

// PaddleFleet's clamp: fminf/fmaxf with cv = float(clamp_value) (spec OP-6).
struct PaddleClamp {
  bool on = false;
  float cv = 0;
};

// Rule 7, last-dim row sum: the lane count and whether lanes load 4-element vectors.
struct RowSumPlan {
  bool vectorized = false;
  int lanes = 1;
};
// The plan of ATen's Reduce.cuh for a row of `width` fp32 values in a tensor of `rows` rows: the
// reference's own (reference/numerics.h torch_row_sum_plan), which throws RejectError("unmodelled")
// for the layouts it does not model. Host code (gpu/swiglu_ops.cpp).
RowSumPlan torch_row_sum_plan(int64_t width, int64_t rows);

// Work items a thread loads together (or, in the elementwise kernels, the group whose loads are
// in flight while the previous group is computed): a tuning knob that changes no bit. 0 asks for
// each kernel's default, the best of 1, 2 and 4 measured on an H200 (bench/NOTES.md).
inline constexpr int kIlpDefault = 0;

// --- Megatron eager (spec OP-4, OP-5, OP-6), gpu/swiglu.cu -------------------------------------

struct MegatronForward {
  DType act = DType::kBF16;      // y, bias and out: bf16, fp16 or fp32
  int64_t rows = 0, F = 0;
  const void* y = nullptr;       // [rows, 2F]
  const void* bias = nullptr;    // [2F] or nullptr: y <- act(y + bias) first
  const void* scale = nullptr;   // [rows] or nullptr: out <- act(f32(swiglu) * scale)
  DType scale_dtype = DType::kFP32;
  MegatronClamp clamp;
  void* out = nullptr;           // [rows, F]
  int ilp = 0;  // kIlpDefault: the kernel's own; or 1, 2, 4 work items loaded together (same bits)
  void* stream = nullptr;
};
void launch_megatron_forward(const MegatronForward& args);

// swiglu_back_eager / clamped_swiglu_back without a scale (the swiglu op): elementwise.
struct MegatronBackward {
  DType act = DType::kBF16;
  int64_t rows = 0, F = 0;
  const void* y = nullptr;     // [rows, 2F]
  const void* bias = nullptr;  // [2F] or nullptr
  const void* g = nullptr;     // [rows, F]
  MegatronClamp clamp;
  void* d_y = nullptr;         // [rows, 2F]
  int ilp = 0;  // kIlpDefault: the kernel's own; or 1, 2, 4 work items loaded together (same bits)
  void* stream = nullptr;
};
void launch_megatron_backward(const MegatronBackward& args);

// --- swiglu_scale, gpu/swiglu_scale.cu ----------------------------------------------------------

// Megatron's weighted backward: d_y and d_scale (rule-7 row sum of act(swiglu) * g.to(w)).
struct MegatronScaleBackward {
  DType act = DType::kBF16;
  DType scale_dtype = DType::kFP32;  // w; the chain dtype is promote(act, w)
  int64_t rows = 0, F = 0;
  const void* y = nullptr;      // [rows, 2F]
  const void* scale = nullptr;  // [rows]
  const void* g = nullptr;      // [rows, F]
  MegatronClamp clamp;
  RowSumPlan plan;              // torch_row_sum_plan(F, rows)
  void* d_y = nullptr;          // [rows, 2F]
  void* d_scale = nullptr;      // [rows], scale_dtype
  int ilp = 0;  // kIlpDefault: the kernel's own; or 1, 2, 4 work items loaded together (same bits)
  void* stream = nullptr;
};
void launch_megatron_scale_backward(const MegatronScaleBackward& args);

// PaddleFleet fuse_swiglu_scale.cu: act bf16 (scale bf16 or fp32) or fp32 (scale fp32); F a
// multiple of the 16-byte vector (8 for bf16, 4 for fp32).
struct PaddleForward {
  DType act = DType::kBF16;
  DType scale_dtype = DType::kFP32;
  int64_t rows = 0, F = 0;
  const void* y = nullptr;
  const void* scale = nullptr;  // [rows]
  PaddleClamp clamp;
  void* out = nullptr;          // [rows, F]
  int ilp = 0;  // kIlpDefault: the kernel's own; or 1, 2, 4 work items loaded together (same bits)
  void* stream = nullptr;
};
void launch_paddle_forward(const PaddleForward& args);

struct PaddleBackward {
  DType act = DType::kBF16;
  DType scale_dtype = DType::kFP32;
  int64_t rows = 0, F = 0;
  const void* y = nullptr;
  const void* scale = nullptr;  // [rows]
  const void* g = nullptr;      // dout, [rows, F]
  PaddleClamp clamp;
  void* d_y = nullptr;          // [rows, 2F]
  void* d_scale = nullptr;      // [rows], scale_dtype
  int ilp = 0;  // kIlpDefault: the kernel's own; or 1, 2, 4 work items loaded together (same bits)
  void* stream = nullptr;
};
void launch_paddle_backward(const PaddleBackward& args);

}  // namespace bitparity::gpu
