// The registry every harness uses: all reference ops and every backend built into this binary.
#pragma once

#include "core/registry.h"

namespace bitparity {

const Registry& builtin_registry();

}  // namespace bitparity
