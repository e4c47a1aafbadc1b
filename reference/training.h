// The reference implementations of the training-step ops (spec OP-8, OP-11, OP-12): each contract's exact
// sequence of roundings. Inputs have passed the op's validate (ops/training.h).
#pragma once

#include <vector>

#include "core/registry.h"

namespace bitparity::ref {

std::vector<ImplEntry> fanout_grad_impls();  // reference/fanout_grad.cpp
std::vector<ImplEntry> adamw_step_impls();   // reference/adamw_step.cpp
std::vector<ImplEntry> grad_finalize_impls();  // reference/grad_finalize.cpp
std::vector<ImplEntry> cross_entropy_impls();  // reference/cross_entropy.cpp

}  // namespace bitparity::ref
