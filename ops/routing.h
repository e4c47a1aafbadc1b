// The routing ops of an MoE layer (spec OP-1, OP-2, OP-3): the router's scores, top-k and
// normalization, and the permute / unpermute that move tokens to their experts and back.
#pragma once

#include "core/registry.h"

namespace bitparity::ops {

OpInfo router_topk();  // ops/router_topk.cpp
OpInfo permute();      // ops/permute.cpp
OpInfo unpermute();    // ops/unpermute.cpp

}  // namespace bitparity::ops
