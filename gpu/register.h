// Registers the "cuda" backend kind and the CUDA implementations of the ops that have kernels.
#pragma once

#include "core/registry.h"

namespace bitparity::gpu {

void register_cuda(Registry& registry);

}  // namespace bitparity::gpu
