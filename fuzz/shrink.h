// The generic shrinker: makes a failing case smaller while the failure still reproduces.
//
// Greedy, in the order design.md gives ("Shrinking"): the shape first, with the op's own
// OpInfo::shrink_shape candidates (most aggressive first); then the values (blocks and elements
// toward +0, then toward simple numbers: +-1, +-2, small powers of two, fewer significant bits,
// then fewer distinct values); then the attributes (dropped, or replaced by 1.0, 0.0, -1.0, ...).
// Every accepted step strictly lowers a well-founded size measure and the predicate is called at
// most max_calls times, so shrinking always ends.
#pragma once

#include <cstdint>
#include <functional>

#include "core/registry.h"

namespace bitparity::fuzz {

inline constexpr int kDefaultMaxShrinkCalls = 2000;

// True when the candidate still shows the finding (its signature still reproduces). An exception
// thrown by the predicate counts as false.
using StillFails = std::function<bool(const Case&)>;

struct ShrinkOptions {
  int max_calls = kDefaultMaxShrinkCalls;
  std::function<bool()> should_stop;  // e.g. an interrupt; the smallest case so far is returned
};

struct ShrinkResult {
  Case smallest;
  int calls = 0;           // predicate calls made
  int accepted = 0;        // steps that kept failing and were taken
  bool exhausted = false;  // stopped by max_calls or should_stop, not by reaching a fixpoint
};

// `failing` is assumed to fail; it is returned unchanged when nothing smaller does.
ShrinkResult shrink_case(const OpInfo& op, const Case& failing, const StillFails& still_fails,
                         const ShrinkOptions& options = {});

// How far a value is from the simplest ones, for ordering candidates: 0 for +0, then 1, -1, 2,
// -2, 0.5, -0.5, ... (ascending); other finite values by significant bits and exponent; NaN and
// Inf last. Integers: 0, 1, -1, 2, -2, ...
int64_t value_cost(DType dtype, uint64_t bits);

}  // namespace bitparity::fuzz
