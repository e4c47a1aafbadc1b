#include "ops/builtin.h"

#include "reference/register.h"
#ifdef BITPARITY_HAVE_CUDA
#include "gpu/register.h"
#endif

namespace bitparity {

const Registry& builtin_registry() {
  static const Registry registry = [] {
    Registry r;
    ref::register_reference(r);
#ifdef BITPARITY_HAVE_CUDA
    gpu::register_cuda(r);
#endif
    return r;
  }();
  return registry;
}

}  // namespace bitparity
