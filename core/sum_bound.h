// The error bound of a sum whose order is unknown: the atomic additions of an order-of-arrival
// contract (ContractInfo::arrival_order_bound), which any order of arrival keeps within.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace bitparity {

// How each order computes a sum of n addends a_1..a_n (exact values: data elements, or their exact
// products with probs).
struct AnyOrderSum {
  // Each addend is an fp32 product, rounded (or flushed, as fp32 atomics do) before it is added.
  bool rounded_addends = false;
  // The dtype each addition rounds to, from +0 (a bf16 or fp16 addition may pass through fp32 first).
  DType step = DType::kFP32;
  // The sum's dtype: where it is not `step`, the sum is rounded once more, to it.
  DType out = DType::kFP32;
};

// The largest |result - truth| that any order of the n additions gives (any permutation, any
// grouping a sequence of atomic additions can take), where S is the sum of the finite addends'
// magnitudes and truth their sum, both in fp64 (plain fp64 sums in any order: their own errors are
// inside the bound).
// INFINITY where a partial sum may overflow `step` in some order; 0 where truth is NaN or an
// infinity (every order gives it). kAnyOrderBoundDoc states the derivation.
double any_order_bound(const AnyOrderSum& arithmetic, int64_t n, double S, double truth);

// The derivation of any_order_bound, as `list` and reports quote it.
extern const char* const kAnyOrderBoundDoc;

}  // namespace bitparity
