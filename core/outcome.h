// What a backend did with a case: its outputs, or the RejectError it threw. The one
// "outputs or a rejection" type of bitparity: properties, the differential run, the campaign, the
// fuzz invariants and the GPU tests all hold results in it.
#pragma once

#include <optional>
#include <string>

#include "core/registry.h"

namespace bitparity {

struct Outcome {
  std::optional<TensorMap> outputs;
  std::string reject_class;  // "shape", "dtype", "attr", "unmodelled" when rejected
  std::string message;       // the RejectError's message when rejected
  bool rejected() const { return !outputs.has_value(); }
};

// Runs `backend_contract` ("ref:megatron_eager") on the case through run_impl. RejectError
// becomes a rejected Outcome; every other exception (unknown names, an unavailable backend, a
// device fault) propagates.
Outcome run_outcome(const Registry& registry, const std::string& backend_contract, const Case& c);

// "rejected (shape): ..." or each output's name, dtype and shape.
std::string describe(const Outcome& outcome);

}  // namespace bitparity
