// What every property harness takes from the registry: the (op, direction, implementation)
// targets to iterate, an implementation's outcome on a case (its outputs or its rejection), bit
// identity of two outcomes, and a RapidCheck property run as one parameterized GoogleTest.
#pragma once

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
#include "core/registry.h"
#include "properties/show.h"

namespace bitparity::props {

const Registry& registry();  // builtin_registry()
const OpInfo& op_info(const std::string& op);

// One op in one direction, and where a property is about an implementation, which one
// ("ref:megatron_eager"). Every target the registry has is a test parameter.
struct Target {
  std::string op;
  Direction direction = Direction::kForward;
  std::string impl;  // empty for op x direction targets

  std::string contract() const;  // "megatron_eager" of "ref:megatron_eager"
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

// An implementation's result on a case: its outputs, or the RejectError it threw.
struct Outcome {
  std::optional<TensorMap> outputs;
  std::string reject_class;  // "shape", "dtype", "attr", "unmodelled" when rejected
  std::string message;
  bool rejected() const { return !outputs.has_value(); }
};
Outcome run_outcome(const std::string& impl, const Case& c);
std::string describe(const Outcome& outcome);  // "rejected (shape): ..." or the outputs in hex

// Empty when both outcomes are bit-identical (NaN payloads included) or both reject with the
// same error class; otherwise the PyTorch-style message naming the first difference.
std::optional<std::string> difference(const Outcome& a, const Outcome& b, const std::string& title);

// Bit identity of two tensors: dtype, shape and every bit pattern.
bool bit_identical(const Tensor& a, const Tensor& b);

// How hard the suites look. The cpu label runs a few cases per registry target; the slow label
// runs the same executables with BITPARITY_DEEP=1 (many more). RC_PARAMS, when set, wins.
bool deep_run();
rc::detail::TestParams property_params();

// Runs a RapidCheck property inside the current GoogleTest, as RC_GTEST_PROP does, so that a
// parameterized test checks one property per registry target and still shrinks.
template <typename Property>
void check_property(Property&& property) {
  const auto* test = testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(test->test_suite_name()) + "/" + test->name();
  metadata.description = test->name();
  const auto result = rc::detail::checkProperty(rc::detail::toProperty(std::forward<Property>(property)), metadata,
                                                property_params());
  if (result.template is<rc::detail::SuccessResult>()) {
    if (!result.template get<rc::detail::SuccessResult>().distribution.empty()) {
      rc::detail::printResultMessage(result, std::cout);
      std::cout << std::endl;
    }
  } else {
    std::ostringstream message;
    rc::detail::printResultMessage(result, message);
    const rc::detail::TestParams params = property_params();
    FAIL() << message.str() << "\nTo rerun: RC_PARAMS=\"seed=" << params.seed << " max_success=" << params.maxSuccess
           << "\" <this test binary> --gtest_filter='" << test->test_suite_name() << "." << test->name() << "'";
  }
}

// Skips the current GoogleTest, visibly, when the target's backend cannot run here.
#define BITPARITY_SKIP_IF_UNAVAILABLE(target)                                   \
  do {                                                                          \
    if (const auto why = ::bitparity::props::unavailable((target).impl))        \
      GTEST_SKIP() << (target).impl << " cannot run here: " << *why;            \
  } while (false)

}  // namespace bitparity::props
