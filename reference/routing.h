// The reference implementations of the routing ops: each contract's exact sequence of roundings
// and summation orders (spec OP-1, OP-2, OP-3, rules 7 and 9, router-backward-order.md). Inputs
// have passed the op's validate (ops/routing.h).
#pragma once

#include <vector>

#include "core/registry.h"

namespace bitparity::ref {

std::vector<ImplEntry> router_topk_impls();  // reference/router_topk.cpp
std::vector<ImplEntry> permute_impls();      // reference/permute.cpp
std::vector<ImplEntry> unpermute_impls();    // reference/unpermute.cpp

}  // namespace bitparity::ref
