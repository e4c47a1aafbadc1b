// placeholder: replaced by the op's record
#include <stdexcept>
#include "ops/routing.h"
namespace bitparity::ops {
OpInfo unpermute() { throw std::logic_error("unpermute: not yet written"); }
}  // namespace bitparity::ops
