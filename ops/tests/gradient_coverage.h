// Which backwards the gradient property programs check, so that GradientCoverage can name the
// ones none of them covers: swiglu_gradient_test (the SwiGLU family, by its own predicate) and
// routing_gradient_test (the ops below).
#pragma once

#include <string>

namespace bitparity::ops::gradient_coverage {

// The routing ops whose backward routing_gradient_test checks: permute and unpermute as the
// adjoints of their linear forwards, router_topk's megatron_eager backward against central
// differences of its exact forward.
inline bool routing_gradient_covers(const std::string& op) {
  return op == "permute" || op == "unpermute" || op == "router_topk";
}

}  // namespace bitparity::ops::gradient_coverage
