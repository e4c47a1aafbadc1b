// What one case showed when its op's reference contracts ran on it, as features for libFuzzer's
// extra counters (case_fuzzer.cpp): libFuzzer keeps an input that lights a counter no earlier input
// lit, so with these its guidance follows numeric behaviour (a new op and direction, shape class,
// value class, finding kind between two contracts, or ulp bucket of their largest difference), not
// only new code paths. Each feature is a line of text; its counter is the text's hash.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/registry.h"

namespace bitparity::fuzz {

// "op|dir|shape_class|value_class" for the case, then for every pair of the op's reference
// contracts (corpus::reference_pairs, each contract run once) "op|dir|a vs b|shape|value|verdict"
// with the verdict "agree", "skip:<reason>" or "<kind>|<output>|ulp=<bucket of the largest
// difference>". An op without classes gives empty classes; a case its classes cannot read (one the
// op's validate rejects, as decoded fuzz input may be) gives "rejected:<class>|".
std::vector<std::string> numeric_features(const Registry& registry, const Case& c);

// The counter of a feature among `slots` (FNV-1a of its text, modulo `slots`).
size_t feature_slot(const std::string& feature, size_t slots);

}  // namespace bitparity::fuzz
