// The "ref" backend kind: bitparity's CPU reference, always available.
#pragma once

#include "core/registry.h"

namespace bitparity::ref {

BackendKind backend();

}  // namespace bitparity::ref
