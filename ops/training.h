// The training-step ops of an MoE layer (spec OP-11, OP-12): the gradient of the three-way clone of
// the layer's input.
#pragma once

#include "core/registry.h"

namespace bitparity::ops {

OpInfo fanout_grad();  // ops/fanout_grad.cpp

}  // namespace bitparity::ops
