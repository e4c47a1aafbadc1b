// Launchers of the SwiGLU-family kernels (gpu/swiglu.cu, gpu/swiglu_scale.cu), which the family's
// kernel records (gpu/swiglu_records.cpp) bind. No CUDA types here, so that host code compiled by
// g++ can call them, and nothing of C++20, which nvcc compiles as C++17 here.
//
// Every pointer is device memory; tensors are row-major and contiguous. expf is libdevice's
// __nv_expf, with the fma that nvcc makes of sigmoid's and silu's denominator written out (rule
// 12). A launcher checks its launch (runtime.h: check_launch) and throws gpu::CudaError on
// failure; it never validates a case: the op's validate (ops/) has rejected what no contract
// accepts before a record binds a launch. A launcher writes every element of its outputs.
// Streams are cudaStream_t values passed as void*; nullptr is the default stream.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "gpu/common/ilp.h"
#include "gpu/common/row_sum.h"

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
  RowSumPlan plan;              // rule7_row_sum_plan(F, rows)
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
