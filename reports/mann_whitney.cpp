#include "reports/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

namespace bitparity::reports {
namespace {

struct Ranks {
  double rank_sum_x = 0;
  double tie_term = 0;  // sum over groups of tied values of t^3 - t
};

// Average ranks (1-based) of the pooled sample; the rank sum of x and the tie term.
Ranks rank(std::span<const double> x, std::span<const double> y) {
  std::vector<std::pair<double, bool>> pooled;  // value, is from x
  for (double v : x) pooled.push_back({v, true});
  for (double v : y) pooled.push_back({v, false});
  std::sort(pooled.begin(), pooled.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  Ranks r;
  for (size_t i = 0; i < pooled.size();) {
    size_t j = i;
    while (j < pooled.size() && pooled[j].first == pooled[i].first) ++j;
    const double t = static_cast<double>(j - i);
    const double average = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    for (size_t k = i; k < j; ++k)
      if (pooled[k].second) r.rank_sum_x += average;
    r.tie_term += t * t * t - t;
    i = j;
  }
  return r;
}

// C(n, k) in floating point, as a product of ratios.
double binomial(size_t n, size_t k) {
  k = std::min(k, n - k);
  double c = 1;
  for (size_t i = 1; i <= k; ++i) c = c * static_cast<double>(n - k + i) / static_cast<double>(i);
  return c;
}

// P(U >= u) under the null hypothesis for samples of m and n values without ties. The number of
// arrangements with U = k is the coefficient of q^k in the Gaussian binomial
// [m + n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), built factor by factor. U's
// distribution is symmetric, so the upper tail is the lower tail up to m n - u, and a coefficient
// depends only on lower ones: the polynomial is kept to that degree, and the low coefficients,
// which are small integers, come out exact (the high ones would cancel in the subtractions).
double exact_upper_tail(size_t m, size_t n, double u) {
  const double mirrored = static_cast<double>(m) * static_cast<double>(n) - u;
  if (mirrored < 0) return 0;
  const size_t degree = static_cast<size_t>(std::floor(mirrored));
  std::vector<double> c(degree + 1, 0.0);
  c[0] = 1;
  for (size_t i = 1; i <= std::min(m, n); ++i) {
    const size_t grow = std::max(m, n) + i;
    for (size_t k = c.size(); k-- > grow;) c[k] -= c[k - grow];  // times (1 - q^(n+i))
    for (size_t k = i; k < c.size(); ++k) c[k] += c[k - i];      // divided by (1 - q^i)
  }
  double lower = 0;
  for (double count : c) lower += count;
  return lower / binomial(m + n, m);
}

}  // namespace

MannWhitney mann_whitney_u(std::span<const double> x, std::span<const double> y) {
  if (x.empty() || y.empty()) throw std::invalid_argument("the Mann-Whitney U test needs a value in each sample");
  auto finite = [](double v) { return std::isfinite(v); };
  if (!std::all_of(x.begin(), x.end(), finite) || !std::all_of(y.begin(), y.end(), finite))
    throw std::invalid_argument("the Mann-Whitney U test takes finite values only");
  const double n1 = static_cast<double>(x.size()), n2 = static_cast<double>(y.size()), n = n1 + n2;
  const Ranks r = rank(x, y);
  MannWhitney result;
  result.u = r.rank_sum_x - n1 * (n1 + 1) / 2;
  // Two-sided: the upper tail at the larger of the two U statistics, doubled.
  const double larger = std::max(result.u, n1 * n2 - result.u);
  result.exact = (x.size() <= kExactMaxSize || y.size() <= kExactMaxSize) && r.tie_term == 0;
  if (result.exact) {
    result.p_value = std::min(1.0, 2 * exact_upper_tail(x.size(), y.size(), larger));
    return result;
  }
  const double sigma = std::sqrt(n1 * n2 / 12 * ((n + 1) - r.tie_term / (n * (n - 1))));
  if (sigma == 0) return result;  // every value tied: nothing tells the samples apart (p = 1)
  const double z = (larger - n1 * n2 / 2 - 0.5) / sigma;
  result.p_value = std::min(1.0, std::erfc(z / std::sqrt(2.0)));  // 2 * the normal upper tail
  return result;
}

double smallest_two_sided_p(size_t n1, size_t n2) {
  return std::min(1.0, 2 / binomial(n1 + n2, n1));
}

}  // namespace bitparity::reports
