#include "properties/harness.h"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>

#include <rapidcheck.h>

#include "core/compare.h"
#include "core/error.h"
#include "corpus/differential.h"
#include "corpus/entry.h"
#include "corpus/reproducer.h"

namespace bitparity::props {

const OpInfo& op_info(const std::string& op) {
  const OpInfo* info = harness_registry().op(op);
  if (!info) throw std::logic_error("op not in the registry: " + op);
  return *info;
}

std::string Target::contract() const { return impl.empty() ? "" : split_backend_name(impl).second; }

const ContractInfo& Target::contract_info() const {
  const ContractInfo* info = op_info(op).contract(contract());
  if (!info) throw std::logic_error(op + " has no contract '" + contract() + "'");
  return *info;
}

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
  for (const OpInfo& op : harness_registry().ops())
    for (const auto& [direction, inputs] : op.inputs) targets.push_back({op.name, direction, ""});
  return targets;
}

std::vector<Target> op_direction_impls() {
  std::vector<Target> targets;
  for (const Target& t : op_directions())
    for (const std::string& impl : harness_registry().impls_of(t.op)) targets.push_back({t.op, t.direction, impl});
  return targets;
}

std::vector<Target> targets_where(const std::function<bool(const Target&)>& keep) {
  std::vector<Target> targets;
  for (const Target& t : op_direction_impls())
    if (keep(t)) targets.push_back(t);
  return targets;
}

std::optional<std::string> unavailable(const std::string& impl) {
  const BackendKind* backend = harness_registry().backend(split_backend_name(impl).first);
  if (!backend) return "no backend kind " + impl;
  if (backend->unavailable_reason) return backend->unavailable_reason();
  return std::nullopt;
}

std::optional<std::string> arrival_order_varies(const Target& target) {
  if (target.impl.empty() || !target.contract_info().order_of_arrival) return std::nullopt;
  if (split_backend_name(target.impl).first == corpus::kReferenceKind) return std::nullopt;
  return target.impl + " adds in the order its atomic additions arrive; this property fixes one order";
}

Outcome run(const Target& target, const Case& c) { return run_outcome(harness_registry(), target.impl, c); }

Metas output_metas(const Target& target, const Case& c) {
  const OpInfo& op = op_info(target.op);
  if (!op.validate) throw std::logic_error(op.name + " has no validate");
  try {
    return {op.validate(c, target.contract_info()), ""};
  } catch (const RejectError& e) {
    return {std::nullopt, e.error_class()};
  }
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

// The case the running property named, and that of the last run that failed. RapidCheck shrinks
// greedily (the first failing candidate is taken), so the last failing run is the counterexample
// it reports.
struct Subject {
  Case c;
  std::string kind;
  std::optional<corpus::BackendPair> pair;
};
thread_local std::optional<Subject> g_current, g_last_failed;

// The shrink bound of the property being checked: when it first failed, the runs since, and
// whether the bound cut shrinking short.
thread_local ShrinkBound g_shrink{kShrinkRuns, kShrinkSeconds};  // the current property_failure's

bool fresh_seed() {
  const char* fresh = std::getenv("BITPARITY_FRESH_SEED");
  return deep_run() || (fresh != nullptr && std::string(fresh) == "1");
}
}  // namespace

double shrink_seconds() {
  const char* v = std::getenv("BITPARITY_SHRINK_SECONDS");
  if (!v) return kShrinkSeconds;
  try {
    return std::stod(v);
  } catch (const std::exception&) {
    throw std::invalid_argument(std::string("BITPARITY_SHRINK_SECONDS must be a number of seconds; got '") + v + "'");
  }
}

void ShrinkBound::run_bounded(const std::function<void()>& run, const std::function<void()>& on_failure) {
  using Clock = std::chrono::steady_clock;
  if (first_failure_) {
    const double seconds = std::chrono::duration<double>(Clock::now() - *first_failure_).count();
    if (cut_ || ++runs_since_ > runs_ || seconds > seconds_) {
      cut_ = true;
      return;  // a passing run: RapidCheck keeps the smallest failure found so far
    }
  }
  auto failed = [&] {
    if (on_failure) on_failure();
    if (!first_failure_) first_failure_ = Clock::now();
  };
  try {
    run();
  } catch (const rc::detail::CaseResult& result) {
    if (result.type == rc::detail::CaseResult::Type::Failure) failed();
    throw;
  } catch (const rc::GenerationFailure&) {
    throw;  // a generator that gave up: RapidCheck discards the run
  } catch (...) {
    failed();
    throw;
  }
}

std::string ShrinkBound::cut_note() const {
  if (!cut_) return "";
  return "Shrinking stopped at its bound (" + std::to_string(runs_) + " runs or " +
         std::to_string(static_cast<int>(seconds_)) + " s, BITPARITY_SHRINK_SECONDS): the case above may not be minimal.\n";
}

bool deep_run() {
  const char* deep = std::getenv("BITPARITY_DEEP");
  return deep != nullptr && std::string(deep) == "1";
}

rc::detail::TestParams property_params() {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  if (std::getenv("RC_PARAMS") != nullptr) return params;
  params.maxSuccess = deep_run() ? kDeepCases : kQuickCases;
  if (!fresh_seed()) {
    // A seed of the test's own: the same cases on every run and every machine (CI reproduces).
    const auto* test = testing::UnitTest::GetInstance()->current_test_info();
    const std::string id = test ? std::string(test->test_suite_name()) + "/" + test->name() : "";
    params.seed = corpus::fnv1a64(id);  // not std::hash, which differs between standard libraries
  }
  return params;
}

bool bit_identical(const Tensor& a, const Tensor& b) { return a == b; }

void reproduce_with(const Case& c, const std::string& kind, const std::optional<corpus::BackendPair>& pair) {
  g_current = Subject{c, kind, pair};
}

namespace detail {

void begin_property() { g_shrink = ShrinkBound{}; }

void run_recording_failure(const std::function<void()>& property) {
  g_shrink.run_bounded(
      [&] {
        g_current.reset();
        property();
      },
      [] { g_last_failed = g_current; });
}

std::string shrink_cut_note() { return g_shrink.cut_note(); }

std::string last_failure_reproducer(const std::string& message) {
  std::optional<Subject> failed = std::move(g_last_failed);
  g_last_failed.reset();
  if (!failed) return "";
  return corpus::write_reproducer(failed->c, failed->kind, failed->pair, message) + "\n";
}

}  // namespace detail
}  // namespace bitparity::props
