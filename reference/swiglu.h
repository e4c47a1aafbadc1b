// The reference implementations of the SwiGLU family, one function per contract.
#pragma once

#include "core/case.h"
#include "reference/swiglu_common.h"

namespace bitparity::ref {

// swiglu: Megatron's eager functions with the clamp gate of the fused functions (kPositive,
// contract megatron_eager) or of the unfused glu() (kPresent, contract megatron_unfused).
TensorMap swiglu_megatron(const Case& c, swiglu::ClampGate gate);

// swiglu_scale under Megatron's eager weighted functions (OP-5, OP-6).
TensorMap swiglu_scale_megatron(const Case& c, swiglu::ClampGate gate);

// swiglu_scale under PaddleFleet's fused kernel. `shipped_clamp_shape`: the stored kernel's clamp
// path returns d_scale as [rows, 1] whatever scale's rank (contract paddle_fused_shipped).
TensorMap swiglu_scale_paddle(const Case& c, bool shipped_clamp_shape);

}  // namespace bitparity::ref
