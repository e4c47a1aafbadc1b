// Registers the reference ops (their OpInfo, generators and oracle) and the "ref" backend.
#pragma once

#include "core/registry.h"

namespace bitparity::ref {

void register_reference(Registry& registry);

}  // namespace bitparity::ref
