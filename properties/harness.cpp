#include "properties/harness.h"

#include <cctype>
#include <cstdlib>
#include <sstream>

#include "core/compare.h"
#include "core/error.h"
#include "ops/builtin.h"

namespace bitparity::props {

const Registry& registry() { return builtin_registry(); }

const OpInfo& op_info(const std::string& op) {
  const OpInfo* info = registry().op(op);
  if (!info) throw std::logic_error("op not in the registry: " + op);
  return *info;
}

std::string Target::contract() const { return impl.empty() ? "" : split_backend_name(impl).second; }

std::string Target::name() const {
  std::string n = op + "_" + std::string(direction_name(direction));
  if (!impl.empty()) n += "_" + impl;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

void PrintTo(const Target& target, std::ostream* os) {
  *os << target.op << " " << direction_name(target.direction) << (target.impl.empty() ? "" : " " + target.impl);
}

std::vector<Target> op_directions() {
  std::vector<Target> targets;
  for (const OpInfo& op : registry().ops())
    for (const auto& [direction, inputs] : op.inputs) targets.push_back({op.name, direction, ""});
  return targets;
}

std::vector<Target> op_direction_impls() {
  std::vector<Target> targets;
  for (const Target& t : op_directions())
    for (const std::string& impl : registry().impls_of(t.op)) targets.push_back({t.op, t.direction, impl});
  return targets;
}

std::vector<Target> targets_where(const std::function<bool(const Target&)>& keep) {
  std::vector<Target> targets;
  for (const Target& t : op_direction_impls())
    if (keep(t)) targets.push_back(t);
  return targets;
}

std::optional<std::string> unavailable(const std::string& impl) {
  const BackendKind* backend = registry().backend(split_backend_name(impl).first);
  if (!backend) return "no backend kind " + impl;
  if (backend->unavailable_reason) return backend->unavailable_reason();
  return std::nullopt;
}

Outcome run_outcome(const std::string& impl, const Case& c) {
  try {
    return {run_impl(registry(), impl, c), "", ""};
  } catch (const RejectError& e) {
    return {std::nullopt, e.error_class(), e.what()};
  }
}

std::string describe(const Outcome& outcome) {
  if (outcome.rejected()) return "rejected (" + outcome.reject_class + "): " + outcome.message;
  std::ostringstream os;
  showValue(*outcome.outputs, os);
  return os.str();
}

std::optional<std::string> difference(const Outcome& a, const Outcome& b, const std::string& title) {
  if (a.rejected() || b.rejected()) {
    if (a.rejected() && b.rejected() && a.reject_class == b.reject_class) return std::nullopt;
    return title + ": one side rejects, the other does not (or for another reason)\n  a: " + describe(a) +
           "\n  b: " + describe(b);
  }
  const Comparison cmp = compare_outputs(*a.outputs, *b.outputs, {.strict_nan = true});
  if (cmp.verdict == Verdict::kIdentical) return std::nullopt;
  return format_comparison(cmp, title, "a", "b");
}

namespace {
constexpr int kQuickCases = 30;   // per property and registry target, label cpu
constexpr int kDeepCases = 500;   // the same with BITPARITY_DEEP=1, label slow
}  // namespace

bool deep_run() {
  const char* deep = std::getenv("BITPARITY_DEEP");
  return deep != nullptr && std::string(deep) == "1";
}

rc::detail::TestParams property_params() {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  if (std::getenv("RC_PARAMS") == nullptr) params.maxSuccess = deep_run() ? kDeepCases : kQuickCases;
  return params;
}

bool bit_identical(const Tensor& a, const Tensor& b) { return a == b; }

}  // namespace bitparity::props
