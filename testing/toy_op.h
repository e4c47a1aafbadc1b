// The toy op: a whole op specification in a test-only registry, small enough to reason about, on
// which the generic harnesses (properties, shrinker, campaign, replay, reports, CLI) are tested,
// and through which the property programs prove that an op needs no harness edit.
//
// One op, "toy", forward only, in bf16, with inputs and outputs declared rows-first:
//   x      bf16 [rows, cols]                              input
//   y      bf16 [rows, cols]   y = bf(x * scale)          elementwise
//   y_sum  bf16 [rows]         the sum of y's row, each partial sum rounded to bf16, from the first
//                              column when the tensor has an odd row count and from the last when
//                              it is even: invariant to the other rows' values, not to their number
//                              (row_count_dependent, like rule 7's row sums)
// Contracts, which differ in known, documented ways:
//   exact    as above; validate rejects a rank other than 2 ("shape") and a dtype other than bf16
//   sloppy   like exact, but an element whose input is exactly 3.0 comes out one ulp high (and
//            y_sum sums the sloppy y); rejects more than kToyModelledCols columns as "unmodelled"
//   strict   like exact, but validate also rejects zero rows ("shape")
//   flat     like exact, but y has shape [rows * cols] instead of [rows, cols]
// Backend kinds: "ref" (every contract) and "fake_gpu" (exact, with the sloppy bug; available
// unless set_fake_gpu_available(false)).
#pragma once

#include <optional>
#include <vector>

#include "core/registry.h"

namespace bitparity::testing {

inline constexpr int64_t kToyModelledCols = 64;

// The toy's OpInfo, and a registry holding it with both backend kinds.
OpInfo toy_op();
Registry make_fake_registry();
void set_fake_gpu_available(bool available);

// A toy case with the given bf16 values (row-major) in shape [rows, cols].
Case toy_case(int64_t rows, int64_t cols, const std::vector<float>& values, std::optional<double> scale = std::nullopt);

}  // namespace bitparity::testing
