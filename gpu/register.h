// Registers the "cuda" backend kind and the CUDA implementations of the ops that have kernels.
#pragma once

#include <string>

#include "core/registry.h"

namespace bitparity::gpu {

void register_cuda(Registry& registry);

// The same implementation with CUDA's expf replaced by a correctly rounded exp, the model the
// reference's device_expf uses until it emulates libdevice (spec rule 12). Not a backend: a probe
// that tells whether a mismatch of cuda:<contract> comes from expf alone. Empty when the op and
// contract have no CUDA implementation.
Impl cuda_impl_with_reference_expf(const std::string& op, const std::string& contract);

}  // namespace bitparity::gpu
