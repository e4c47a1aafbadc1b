// The registry of the shipped harness programs (properties, GPU tests, benchmarks): every op.
#include "ops/builtin.h"

namespace bitparity {

const Registry& harness_registry() { return builtin_registry(); }

}  // namespace bitparity
