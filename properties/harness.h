// What every property harness takes from the registry: the (op, direction, implementation)
// targets to iterate, an op's output metas for a case, bit identity of two outcomes, and a
// RapidCheck property run as one parameterized GoogleTest that, when it fails, writes its case
// as a reproducer and prints the command that reruns it.
//
// A property program iterates harness_registry() (core/registry.h): the builtin registry in the
// shipped programs, the toy op's (testing/toy_op.h) in their toy_* twins, built from the same
// sources. Nothing here or in a generic property names an op, an input, an output or a contract:
// what a property needs to know about an op it reads from the OpInfo (validate's output metas,
// required tags, error inputs, TensorSpec traits).
#pragma once

#include <chrono>
#include <functional>
#include <iostream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/case.h"
#include "core/outcome.h"
#include "core/registry.h"
#include "corpus/differential.h"
#include "properties/show.h"

namespace bitparity::props {

const OpInfo& op_info(const std::string& op);  // of harness_registry(); throws when absent

// One op in one direction, and where a property is about an implementation, which one
// ("ref:megatron_eager"). Every target the registry has is a test parameter.
struct Target {
  std::string op;
  Direction direction = Direction::kForward;
  std::string impl;  // empty for op x direction targets

  std::string contract() const;  // "megatron_eager" of "ref:megatron_eager"
  const ContractInfo& contract_info() const;
  std::string name() const;      // "swiglu_scale_bwd_ref_paddle_fused", a GoogleTest name
};
void PrintTo(const Target& target, std::ostream* os);

std::vector<Target> op_directions();
std::vector<Target> op_direction_impls();
// The op x direction x implementation targets for which `keep` holds.
std::vector<Target> targets_where(const std::function<bool(const Target&)>& keep);
inline std::string target_name(const testing::TestParamInfo<Target>& info) { return info.param.name(); }

// Why the implementation's backend cannot run here (no device), or nothing.
std::optional<std::string> unavailable(const std::string& impl);

// The target's implementation on a case, through run_outcome on harness_registry().
Outcome run(const Target& target, const Case& c);

// The shape and dtype of every output the target's contract returns for the case (the op's
// validate), or the RejectError's class when validate refuses the case.
struct Metas {
  std::optional<OutputMetas> metas;
  std::string reject_class;
};
Metas output_metas(const Target& target, const Case& c);

// Empty when both outcomes are bit-identical (NaN payloads included) or both reject with the
// same error class; otherwise the PyTorch-style message naming the first difference.
std::optional<std::string> difference(const Outcome& a, const Outcome& b, const std::string& title);

// Bit identity of two tensors: dtype, shape and every bit pattern.
bool bit_identical(const Tensor& a, const Tensor& b);

// How hard the suites look. The cpu label runs a few cases per registry target with a seed fixed
// per test (CI's runs are reproducible); the slow label runs the same executables with
// BITPARITY_DEEP=1 (many more cases, a fresh seed each run, printed). BITPARITY_FRESH_SEED=1 draws
// a fresh seed in a quick run too. RC_PARAMS, when set, wins.
bool deep_run();
rc::detail::TestParams property_params();

// Shrinking is bounded: once a property has failed, its shrinking stops after kShrinkSeconds (or
// BITPARITY_SHRINK_SECONDS) or kShrinkRuns runs, whichever comes first, and the smallest case
// found so far is reported, marked as possibly not minimal.
inline constexpr double kShrinkSeconds = 60;
inline constexpr int kShrinkRuns = 5000;

// kShrinkSeconds, or BITPARITY_SHRINK_SECONDS where set (std::invalid_argument when it is no number).
double shrink_seconds();

// The bound of one property check: once a run has failed, `runs` more runs or `seconds` of them,
// whichever ends first. Past it every run passes without running, so RapidCheck's shrinking ends and
// reports the smallest failure found so far. property_failure applies one; a test that calls
// rc::check itself wraps each run in run_bounded.
class ShrinkBound {
 public:
  ShrinkBound() : ShrinkBound(kShrinkRuns, shrink_seconds()) {}
  ShrinkBound(int runs, double seconds) : runs_(runs), seconds_(seconds) {}

  // Runs `run` unless the bound is passed; a failure of it (an exception other than RapidCheck's
  // success or discard, or a generator's rc::GenerationFailure, which RapidCheck also discards)
  // calls `on_failure`, starts the clock at the first, and propagates.
  void run_bounded(const std::function<void()>& run, const std::function<void()>& on_failure = {});
  bool cut() const { return cut_; }
  // "" while not cut; otherwise a line saying where the bound stopped shrinking.
  std::string cut_note() const;

 private:
  int runs_;
  double seconds_;
  std::optional<std::chrono::steady_clock::time_point> first_failure_;
  int runs_since_ = 0;
  bool cut_ = false;
};

// Names the case the current property run is about: when the run fails, check_property writes
// it as a reproducer (corpus/reproducer.h) of finding `kind`, with `pair` when two
// implementations are compared, and prints "To reproduce: bitparity replay FILE".
void reproduce_with(const Case& c, const std::string& kind, const std::optional<corpus::BackendPair>& pair = {});

namespace detail {
// Starts the shrink bound's clock afresh for one property check.
void begin_property();
// Runs `property` once, remembering the case it named (reproduce_with) when it fails. Past the
// shrink bound it returns without running it, so that RapidCheck's shrinking ends.
void run_recording_failure(const std::function<void()>& property);
// "" when shrinking ran to its end; otherwise a line saying where the bound stopped it.
std::string shrink_cut_note();
// The reproducer line of the last failing run, or "" when it named no case.
std::string last_failure_reproducer(const std::string& message);
}  // namespace detail

// Runs a RapidCheck property inside the current GoogleTest, as RC_GTEST_PROP does, so that a
// parameterized test checks one property per registry target and still shrinks. The property
// takes no arguments and draws its values with `*gen`. Returns nullopt when it held; otherwise the
// shrunk counterexample's message, the reproducer line and the command that reruns the property.
template <typename Property>
std::optional<std::string> property_failure(Property&& property) {
  const auto* test = testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(test->test_suite_name()) + "/" + test->name();
  metadata.description = test->name();
  const std::function<void()> body = std::forward<Property>(property);
  detail::begin_property();
  const rc::detail::TestParams params = property_params();
  const auto result = rc::detail::checkProperty(
      rc::detail::toProperty([&body] { detail::run_recording_failure(body); }), metadata, params);
  if (result.template is<rc::detail::SuccessResult>()) {
    if (!result.template get<rc::detail::SuccessResult>().distribution.empty()) {
      rc::detail::printResultMessage(result, std::cout);
      std::cout << std::endl;
    }
    return std::nullopt;
  }
  std::ostringstream message;
  rc::detail::printResultMessage(result, message);
  return message.str() + "\n" + detail::shrink_cut_note() + detail::last_failure_reproducer(message.str()) +
         "To rerun the property: RC_PARAMS=\"seed=" + std::to_string(params.seed) +
         " max_success=" + std::to_string(params.maxSuccess) + "\" <this test binary> --gtest_filter='" +
         test->test_suite_name() + "." + test->name() + "'";
}

// property_failure, failing the current GoogleTest with its message when the property does not hold.
template <typename Property>
void check_property(Property&& property) {
  if (const std::optional<std::string> failure = property_failure(std::forward<Property>(property))) FAIL() << *failure;
}

// Why a property that fixes the order of additions cannot hold for the target, or nothing: its
// contract adds in the order atomic additions arrive (ContractInfo::order_of_arrival) and its backend
// is not the reference (corpus::kReferenceKind), which fixes one order (ascending position). Such a backend is
// judged by the determinism property and by the properties that hold in any order (bounds, single
// addends, order-insensitive sums), which still run.
std::optional<std::string> arrival_order_varies(const Target& target);

// Skips the current GoogleTest, visibly, for such a target.
#define BITPARITY_SKIP_IF_ARRIVAL_ORDER(target)                                   \
  do {                                                                            \
    if (const auto why = ::bitparity::props::arrival_order_varies(target))        \
      GTEST_SKIP() << *why;                                                       \
  } while (false)

// Skips the current GoogleTest, visibly, when the target's backend cannot run here.
#define BITPARITY_SKIP_IF_UNAVAILABLE(target)                                   \
  do {                                                                          \
    if (const auto why = ::bitparity::props::unavailable((target).impl))        \
      GTEST_SKIP() << (target).impl << " cannot run here: " << *why;            \
  } while (false)

}  // namespace bitparity::props
