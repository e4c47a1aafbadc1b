// `bitparity bench compare`: whether a kernel got faster or slower between two runs, and only
// when the change is real. Per kernel, the two runs' per-repetition times are compared with the
// two-sided Mann-Whitney U test (as Google Benchmark's compare.py does) and the change of the
// median time against a minimum effect size:
//
//   SLOWER / FASTER  p < alpha, and the median moved by at least the minimum effect
//   SAME             the median moved by less than the minimum effect (significant or not: a
//                    change too small to matter)
//   UNSURE           the median moved by at least the minimum effect but p >= alpha (the noise
//                    hides it), or the runs have too few repetitions for any U test to reach
//                    p < alpha (3 and 3 give at best p = 0.1)
//
// Repetitions should be interleaved (`bitparity bench run` does it), so that a drift of the
// machine (clocks, temperature, a neighbour) spreads over every kernel instead of biasing one.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reports/bench_history.h"

namespace bitparity::reports {

enum class Verdict { kFaster, kSlower, kSame, kUnsure };
std::string_view verdict_name(Verdict verdict);  // "FASTER", "SLOWER", "SAME", "UNSURE"

inline constexpr double kDefaultAlpha = 0.05;      // compare.py's default significance level
inline constexpr double kDefaultMinEffect = 0.05;  // a 5% change of the median time

struct CompareOptions {
  double alpha = kDefaultAlpha;
  double min_effect = kDefaultMinEffect;  // relative change of the median time, 0.05 = 5%
};

struct KernelComparison {
  std::string name;
  size_t old_repetitions = 0, new_repetitions = 0;
  double old_time_ns = 0, new_time_ns = 0;  // medians
  double change = 0;                        // new / old - 1 of the medians (+0.10: 10% slower)
  std::optional<double> p_value;            // null when the repetitions are too few for a test
  Verdict verdict = Verdict::kUnsure;
  std::string reason;  // why, in words, for UNSURE ("3 vs 3 repetitions: ...")
};

struct Comparison {
  std::vector<KernelComparison> kernels;  // in the new run's order
  std::vector<std::string> only_old, only_new;
  // Differences of the machine between the runs (GPU, driver, clocks, copy bandwidth) that can
  // explain a change by themselves.
  std::vector<std::string> warnings;
  size_t count(Verdict verdict) const;
};

// Kernels are matched by name. Options out of range (alpha outside (0, 1), a negative effect)
// are std::invalid_argument.
Comparison compare_runs(const BenchRun& old_run, const BenchRun& new_run, const CompareOptions& options = {});

// A table for people: one line per kernel with both medians, the change, p and the verdict, then
// the kernels in one run only, the warnings and a summary line.
std::string comparison_text(const Comparison& comparison, const BenchRun& old_run, const BenchRun& new_run,
                            const CompareOptions& options);

}  // namespace bitparity::reports
