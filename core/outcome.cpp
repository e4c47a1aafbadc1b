#include "core/outcome.h"

#include "core/error.h"

namespace bitparity {

Outcome run_outcome(const Registry& registry, const std::string& backend_contract, const Case& c) {
  try {
    return {run_impl(registry, backend_contract, c), "", ""};
  } catch (const RejectError& e) {
    return {std::nullopt, e.error_class(), e.what()};
  }
}

std::string describe(const Outcome& outcome) {
  if (outcome.rejected()) return "rejected (" + outcome.reject_class + "): " + outcome.message;
  std::string text;
  for (const auto& [name, t] : *outcome.outputs) {
    if (!text.empty()) text += ", ";
    text += name + " " + std::string(dtype_name(t.dtype())) + shape_string(t.shape());
  }
  return text.empty() ? "no outputs" : text;
}

}  // namespace bitparity
