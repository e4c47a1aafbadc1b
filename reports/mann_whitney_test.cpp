// The Mann-Whitney U test against values computed independently of this code:
// - scipy.stats.mannwhitneyu's documented example (males/females, exact: U = 17, p = 1/9);
// - R's wilcox.test documented example (Hollander & Wolfe's depression scores: W = 35, one-sided
//   p = 0.1272, so two-sided 0.2544);
// - every other number from a separate Python script (standard library only) that enumerates
//   every split of the pooled sample for the exact p-values, and evaluates the tie-corrected
//   normal approximation with continuity correction (scipy's documented asymptotic method) with
//   math.erfc. Exact p-values are also given as fractions of C(n1 + n2, n1) where they are short.
#include <cmath>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "reports/mann_whitney.h"

namespace bitparity::reports {
namespace {

using Sample = std::vector<double>;

TEST(MannWhitney, ScipyDocumentedExampleIsExact) {
  // scipy.stats.mannwhitneyu docs: males [19, 22, 16, 29, 24], females [20, 11, 17, 12].
  // 7 of the C(9, 4) = 126 splits have U >= 17, so p = 2 * 7 / 126 = 1/9.
  const MannWhitney r = mann_whitney_u(Sample{19, 22, 16, 29, 24}, Sample{20, 11, 17, 12});
  EXPECT_EQ(r.u, 17);
  EXPECT_TRUE(r.exact);
  EXPECT_NEAR(r.p_value, 1.0 / 9, 1e-12);
  // Swapping the samples gives the other U and the same two-sided p.
  const MannWhitney swapped = mann_whitney_u(Sample{20, 11, 17, 12}, Sample{19, 22, 16, 29, 24});
  EXPECT_EQ(swapped.u, 3);
  EXPECT_NEAR(swapped.p_value, 1.0 / 9, 1e-12);
}

TEST(MannWhitney, RDocumentedExampleOneSmallSample) {
  // R: wilcox.test(x, y, alternative = "g") gives W = 35, p = 0.1272; ten against five values is
  // exact in scipy too (one sample has at most 8). Enumeration: 0.2544122544122544.
  const Sample x = {0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46};
  const Sample y = {1.15, 0.88, 0.90, 0.74, 1.21};
  const MannWhitney r = mann_whitney_u(x, y);
  EXPECT_EQ(r.u, 35);
  EXPECT_TRUE(r.exact);
  EXPECT_NEAR(r.p_value, 0.2544122544122544, 1e-12);
}

TEST(MannWhitney, ExactTailsOfSeparatedAndUnevenSamples) {
  // Five against five, fully separated: one split of 252 at each extreme, p = 2 / 252.
  EXPECT_NEAR(mann_whitney_u(Sample{1, 2, 3, 4, 5}, Sample{6, 7, 8, 9, 10}).p_value, 2.0 / 252, 1e-15);
  // Three against twelve (enumeration): U = 23, p = 0.5362637362637362.
  const MannWhitney r =
      mann_whitney_u(Sample{3.1, 4.7, 5.2}, Sample{1.0, 1.5, 2.2, 2.9, 3.3, 3.8, 4.1, 4.4, 6.0, 6.5, 7.2, 0.5});
  EXPECT_EQ(r.u, 23);
  EXPECT_TRUE(r.exact);
  EXPECT_NEAR(r.p_value, 0.5362637362637362, 1e-12);
}

TEST(MannWhitney, NormalApproximationWithoutTies) {
  // Ten against ten is past the exact threshold: U = 0, z = (100 - 50 - 0.5) / sqrt(175),
  // p = erfc(z / sqrt 2) = 0.0001826717911095504.
  Sample x, y;
  for (int i = 1; i <= 10; ++i) x.push_back(i), y.push_back(i + 10);
  const MannWhitney r = mann_whitney_u(x, y);
  EXPECT_EQ(r.u, 0);
  EXPECT_FALSE(r.exact);
  EXPECT_NEAR(r.p_value, 0.0001826717911095504, 1e-15);
}

TEST(MannWhitney, TiesUseTheCorrectedNormalApproximation) {
  // Ties in both samples (12, 13 shared; 15, 14, 17 repeated): U = 72 (ties count one half),
  // p = 0.24250622025990093 from the script.
  const Sample x = {10, 12, 12, 13, 15, 15, 15, 18, 20, 21};
  const Sample y = {9, 10, 11, 12, 12, 13, 14, 14, 16, 17, 17};
  const MannWhitney r = mann_whitney_u(x, y);
  EXPECT_EQ(r.u, 72);
  EXPECT_FALSE(r.exact);
  EXPECT_NEAR(r.p_value, 0.24250622025990093, 1e-12);
  // A tie makes even small samples approximate, as in scipy's method="auto".
  EXPECT_FALSE(mann_whitney_u(Sample{1, 2, 3}, Sample{3, 4, 5}).exact);
}

TEST(MannWhitney, IdenticalValuesTellNothing) {
  const MannWhitney r = mann_whitney_u(Sample(9, 5.0), Sample(9, 5.0));
  EXPECT_EQ(r.u, 40.5);
  EXPECT_EQ(r.p_value, 1);
}

TEST(MannWhitney, RefusesEmptyAndNonFiniteSamples) {
  EXPECT_THROW(mann_whitney_u(Sample{}, Sample{1}), std::invalid_argument);
  EXPECT_THROW(mann_whitney_u(Sample{1, NAN}, Sample{1}), std::invalid_argument);
  EXPECT_THROW(mann_whitney_u(Sample{1}, Sample{INFINITY}), std::invalid_argument);
}

TEST(MannWhitney, SmallestAttainablePValue) {
  EXPECT_NEAR(smallest_two_sided_p(3, 3), 0.1, 1e-15);            // 2 / 20
  EXPECT_NEAR(smallest_two_sided_p(4, 4), 2.0 / 70, 1e-15);       // 0.0286
  EXPECT_NEAR(smallest_two_sided_p(3, 5), 2.0 / 56, 1e-15);       // 0.0357
  EXPECT_EQ(smallest_two_sided_p(1, 1), 1);                        // 2 / 2
  EXPECT_NEAR(smallest_two_sided_p(10, 10), 2.0 / 184756, 1e-15);  // C(20, 10) = 184756
  // It is attained: fully separated samples of those sizes give it.
  EXPECT_NEAR(mann_whitney_u(Sample{1, 2, 3}, Sample{4, 5, 6, 7, 8}).p_value, smallest_two_sided_p(3, 5), 1e-15);
}

TEST(MannWhitney, LargeUnevenSamplesStayExactAndFast) {
  // Eight against 5000 values (the exact branch): x all above y, so p = 2 / C(5008, 8)
  // = 2.049582171044961e-25 (Python's math.comb).
  Sample x, y;
  for (int i = 0; i < 8; ++i) x.push_back(10000 + i);
  for (int i = 0; i < 5000; ++i) y.push_back(i);
  const MannWhitney r = mann_whitney_u(x, y);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.u, 40000);
  EXPECT_NEAR(r.p_value, 2.049582171044961e-25, 1e-35);
  // Interleaved instead (x in the middle of y): far from significant.
  for (int i = 0; i < 8; ++i) x[i] = 2500.5 + i;
  EXPECT_GT(mann_whitney_u(x, y).p_value, 0.5);
}

}  // namespace
}  // namespace bitparity::reports
