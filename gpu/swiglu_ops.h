// The CUDA implementations of the SwiGLU family's contracts: a Case in, a TensorMap out, exactly as
// the reference's functions in reference/swiglu.h. Each one first rejects what the reference
// rejects, in the reference's order and with its error class, then runs the kernels of
// gpu/swiglu_kernels.h. Host code only.
#pragma once

#include "core/case.h"
#include "gpu/swiglu_kernels.h"
#include "reference/swiglu_common.h"

namespace bitparity::gpu {

// How the kernels run: how many work items a thread loads together (a tuning knob: 1, 2 or 4, or
// 0 for each kernel's measured best, gpu/swiglu_kernels.h; the bits are the same).
struct CudaOptions {
  int ilp = 0;
};

// swiglu under megatron_eager (ClampGate::kPositive) or megatron_unfused (kPresent).
TensorMap swiglu_megatron_cuda(const Case& c, ref::swiglu::ClampGate gate, const CudaOptions& options = {});

// swiglu_scale under Megatron's weighted functions.
TensorMap swiglu_scale_megatron_cuda(const Case& c, ref::swiglu::ClampGate gate, const CudaOptions& options = {});

// swiglu_scale under PaddleFleet's fused kernels; `shipped_clamp_shape` for paddle_fused_shipped.
TensorMap swiglu_scale_paddle_cuda(const Case& c, bool shipped_clamp_shape, const CudaOptions& options = {});

}  // namespace bitparity::gpu
