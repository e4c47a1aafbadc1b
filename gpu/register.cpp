#include "gpu/register.h"

#include "gpu/runtime.h"

namespace bitparity::gpu {

void register_cuda(Registry& registry) {
  registry.add_backend({"cuda", "bitparity's CUDA kernels (sm_90)", [] { return unavailable_reason(); }});
}

}  // namespace bitparity::gpu
