// Registers the "cuda" backend kind and the CUDA implementations of the ops that have kernels.
#pragma once

#include <string>

#include "core/registry.h"

namespace bitparity::gpu {

void register_cuda(Registry& registry);

// The implementation of cuda:<contract> with `ilp` work items loaded together per thread (1, 2
// or 4; the registered one uses 0, each kernel's default): a tuning knob that must not change a
// bit. Not a backend.
// Empty when the op and contract have no CUDA implementation.
Impl cuda_impl_with_ilp(const std::string& op, const std::string& contract, int ilp);

}  // namespace bitparity::gpu
