// A tiny registry for the tests of the generic harnesses (shrinker, campaign, replay, reports), so
// they test the harness and not the reference. One op, "toy": y = x * scale, elementwise, in bf16,
// with contracts that differ in known, documented ways:
//   exact    y = bf(x * scale); rejects a rank other than 2 ("shape")
//   sloppy   like exact, but an element whose input is exactly 3.0 comes out one ulp high; rejects
//            more than kToyModelledCols columns as "unmodelled"
//   strict   like exact, but also rejects zero rows ("shape")
//   flat     like exact, but y has shape [rows * cols] instead of [rows, cols]
// Backend kinds: "ref" (every contract) and "fake_gpu" (exact, with the sloppy bug; available
// unless set_fake_gpu_available(false)).
#pragma once

#include "core/registry.h"

namespace bitparity::testing {

inline constexpr int64_t kToyModelledCols = 64;

Registry make_fake_registry();
void set_fake_gpu_available(bool available);

// A toy case with the given bf16 values (row-major) in shape [rows, cols].
Case toy_case(int64_t rows, int64_t cols, const std::vector<float>& values, std::optional<double> scale = std::nullopt);

}  // namespace bitparity::testing
