// placeholder: replaced by the op's record
#include <stdexcept>
#include "ops/routing.h"
namespace bitparity::ops {
OpInfo permute() { throw std::logic_error("permute: not yet written"); }
}  // namespace bitparity::ops
