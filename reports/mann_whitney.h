// The Mann-Whitney U test (Wilcoxon rank-sum), two-sided, as Google Benchmark's compare.py runs
// it through scipy.stats.mannwhitneyu: the exact distribution of U when either sample has at most
// kExactMaxSize values and no value is tied, else the normal approximation with the tie correction
// and the continuity correction. It asks whether one sample's values tend to be larger than the
// other's without assuming a distribution, which suits benchmark times (skewed, with outliers).
#pragma once

#include <cstddef>
#include <span>

namespace bitparity::reports {

// scipy's method="auto" threshold for the exact distribution.
inline constexpr size_t kExactMaxSize = 8;

struct MannWhitney {
  double u = 0;        // U of the first sample: pairs (x, y) with x > y, a tie counting one half
  double p_value = 1;  // two-sided
  bool exact = false;  // the exact distribution (else the normal approximation)
};

// Both samples need at least one value, and every value must be finite (std::invalid_argument).
MannWhitney mann_whitney_u(std::span<const double> x, std::span<const double> y);

// The smallest two-sided p-value any data of these sizes can give under the exact distribution:
// 2 / C(n1 + n2, n1). When it is not below the significance level, no outcome of so few
// repetitions is significant (3 and 3 repetitions give 0.1).
double smallest_two_sided_p(size_t n1, size_t n2);

}  // namespace bitparity::reports
