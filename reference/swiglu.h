// The reference implementations of the SwiGLU family: each contract's exact sequence of roundings
// (spec OP-4, OP-5, OP-6). Inputs have passed the op's validate (ops/swiglu_family.h).
#pragma once

#include <vector>

#include "core/registry.h"

namespace bitparity::ref {

// swiglu under megatron_eager and megatron_unfused: Megatron's eager functions, with the clamp
// gate the contract names (reference/swiglu.cpp).
std::vector<ImplEntry> swiglu_impls();

// swiglu_scale under Megatron's eager weighted functions and PaddleFleet's fused kernel
// (reference/swiglu_scale.cpp).
std::vector<ImplEntry> swiglu_scale_impls();

}  // namespace bitparity::ref
