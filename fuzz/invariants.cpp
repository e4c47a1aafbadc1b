#include "fuzz/invariants.h"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>
#include <variant>

#include "core/case_json.h"
#include "core/compare.h"
#include "core/error.h"
#include "core/outcome.h"

namespace bitparity::fuzz {
namespace {

constexpr std::string_view kReferenceKind = "ref";

// One run of one implementation: its Outcome, or the message of an exception other than a
// RejectError (which no implementation may throw).
struct Run {
  Outcome outcome;
  std::optional<std::string> unexpected;
};

Run run_once(const Registry& registry, const std::string& impl, const Case& c) {
  Run run;
  try {
    run.outcome = run_outcome(registry, impl, c);
  } catch (const std::exception& e) {
    run.unexpected = std::string("threw a non-RejectError exception: ") + e.what();
  } catch (...) {
    run.unexpected = "threw a non-standard exception";
  }
  return run;
}

std::optional<std::string> check_output_names(const OpInfo& op, Direction direction, const TensorMap& outputs) {
  auto specs = op.outputs.find(direction);
  std::set<std::string> declared;
  if (specs != op.outputs.end())
    for (const TensorSpec& s : specs->second) {
      declared.insert(s.name);
      if (!s.optional && !outputs.count(s.name)) return "did not return required output " + s.name;
    }
  for (const auto& [name, t] : outputs)
    if (!declared.count(name)) return "returned undeclared output " + name;
  return std::nullopt;
}

std::optional<std::string> check_impl(const Registry& registry, const OpInfo& op, const std::string& impl,
                                      const Case& c) {
  const Run first = run_once(registry, impl, c);
  if (first.unexpected) return impl + " " + *first.unexpected;
  const Run second = run_once(registry, impl, c);
  if (second.unexpected) return impl + " (second run) " + *second.unexpected;
  const Outcome& a = first.outcome;
  const Outcome& b = second.outcome;
  if (a.rejected() != b.rejected() || a.reject_class != b.reject_class)
    return impl + " rejected on one run and not the other (or with another class)";
  if (a.rejected()) return std::nullopt;
  if (std::optional<std::string> names = check_output_names(op, c.direction, *a.outputs))
    return impl + " " + *names;
  const Comparison same = compare_outputs(*a.outputs, *b.outputs, CompareOptions{true});
  if (same.verdict != Verdict::kIdentical)
    return impl + " is nondeterministic:\n" + format_comparison(same, c.op, "run 1", "run 2");
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_reference_invariants(const Registry& registry, const Case& c) {
  const OpInfo* op = registry.op(c.op);
  if (!op) return "decoded a case of an unregistered op " + c.op;
  for (const std::string& impl : registry.impls_of(c.op)) {
    if (split_backend_name(impl).first != kReferenceKind) continue;
    if (std::optional<std::string> violation = check_impl(registry, *op, impl, c)) return violation;
  }
  return std::nullopt;
}

std::optional<std::string> check_json_round_trip(const Registry& registry, const Case& c) {
  const std::string text = case_to_json(c).dump();
  try {
    const std::string again = case_to_json(case_from_text(text, registry)).dump();
    if (again != text) return "JSON round trip changed the case:\n" + text + "\n" + again;
  } catch (const std::exception& e) {
    return std::string("a case written by case_to_json does not parse: ") + e.what() + "\n" + text;
  }
  return std::nullopt;
}

std::optional<std::string> check_parser(const Registry& registry, std::string_view text) {
  try {
    case_from_text(text, registry);
  } catch (const ParseError&) {
  } catch (const RejectError&) {
  } catch (const std::exception& e) {
    return std::string("case_from_text threw neither ParseError nor RejectError: ") + e.what();
  }
  return std::nullopt;
}

int64_t max_input_extent(const Case& c) {
  int64_t largest = 0;
  for (const auto& [name, t] : c.inputs) {
    int64_t extent = 1;
    for (int64_t d : t.shape())
      if (d > 0 && __builtin_mul_overflow(extent, d, &extent)) return std::numeric_limits<int64_t>::max();
    largest = std::max(largest, extent);
  }
  return largest;
}

std::optional<std::string> check_user_file(const Registry& registry, std::string_view text) {
  Case c;
  try {
    c = case_from_text(text, registry);
  } catch (const ParseError&) {
    return std::nullopt;
  } catch (const RejectError&) {
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string("case_from_text threw neither ParseError nor RejectError: ") + e.what();
  }
  for (const auto& [name, t] : c.inputs) try {
      check_shape_limits(t.shape());
    } catch (const std::invalid_argument& e) {
      return "the parser accepted input " + name + " past the limits: " + e.what();
    }
  if (max_input_extent(c) > kMaxFuzzRunExtent) return std::nullopt;
  return check_reference_invariants(registry, c);
}

}  // namespace bitparity::fuzz
