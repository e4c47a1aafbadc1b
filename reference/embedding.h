// The reference implementations of the embedding lookup (spec OP-9): each contract's exact sequence
// of roundings. Inputs have passed the op's validate (ops/embedding.h).
#pragma once

#include <vector>

#include "core/registry.h"

namespace bitparity::ref {

std::vector<ImplEntry> embedding_impls();  // reference/embedding.cpp

}  // namespace bitparity::ref
