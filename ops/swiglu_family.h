// The SwiGLU family's specification, shared by its two ops (swiglu, swiglu_scale): the split of y
// into gate and value halves, the input checks of every contract (spec OP-4, OP-5, OP-6), the
// layout facts a contract's arithmetic depends on, and the pieces of the OpInfo records that
// ops/swiglu.cpp and ops/swiglu_scale.cpp assemble. Checks and traits only: each backend writes
// the arithmetic itself.
#pragma once

#include <string>

#include "core/registry.h"

namespace bitparity::ops {

OpInfo swiglu();        // ops/swiglu.cpp
OpInfo swiglu_scale();  // ops/swiglu_scale.cpp

namespace swiglu_family {

// y is [rows, 2F]: columns [0, F) are the gate a, [F, 2F) the value b (torch.chunk).
struct Split {
  int64_t rows = 0;
  int64_t F = 0;
};
// The split of y; RejectError("shape") naming y when it is not [rows, 2F].
Split split_y(const std::string& who, const Tensor& y);

// PaddleFleet's fused kernel reads 16-byte packets (Packed128): F must be a multiple of the
// elements per packet, and its d_scale order walks the row packet by packet.
inline constexpr int kPaddlePacketBytes = 16;
inline int64_t paddle_packet_elements(DType act) { return kPaddlePacketBytes / dtype_size(act); }

// Whether a contract of swiglu_scale is PaddleFleet's fused kernel (its own checks and order).
bool is_paddle_contract(const ContractInfo& contract);
// paddle_fused_shipped: the stored clamp kernels return d_scale as [rows, 1] for any scale rank.
bool is_shipped_clamp_shape(const ContractInfo& contract);

// --- the pieces of the two OpInfo records ------------------------------------------------------
OutputMetas validate_swiglu(const Case& c, const ContractInfo& contract);
OutputMetas validate_swiglu_scale(const Case& c, const ContractInfo& contract);

// Sets what the two ops share on a record whose name and contracts are set: the sample
// generator and its required tags, the classes, the error and reference inputs, the shape
// shrinker, and the oracle (the exact values under Megatron's semantics, clamp when > 0 and NaN
// propagating, in fp64 with the d_scale row sums in MPFR through Eigen's MPRealSupport).
void add_family_generators(OpInfo& op);

}  // namespace swiglu_family
}  // namespace bitparity::ops
