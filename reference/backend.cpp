#include "reference/backend.h"

namespace bitparity::ref {

BackendKind backend() {
  return {"ref", "the CPU reference: each contract's exact sequence of roundings and reduction orders", nullptr,
          kAnyNumberOfCalls};
}

}  // namespace bitparity::ref
