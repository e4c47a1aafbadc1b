// harness_registry() for the programs that prove the harnesses generic: the toy op's registry
// (testing/toy_op.h) in place of the builtin one.
#include "core/registry.h"
#include "testing/toy_op.h"

namespace bitparity {

const Registry& harness_registry() {
  static const Registry registry = testing::make_fake_registry();
  return registry;
}

}  // namespace bitparity
