#include "reports/bench_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "reports/mann_whitney.h"

namespace bitparity::reports {
namespace {

constexpr double kNsPerUs = 1e3;
constexpr double kPercent = 100;

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

std::string percent(double fraction) { return format("%+.1f%%", kPercent * fraction); }

KernelComparison compare_kernel(const BenchKernel& old_k, const BenchKernel& new_k, const CompareOptions& options) {
  KernelComparison c;
  c.name = new_k.name;
  c.old_repetitions = old_k.times_ns.size();
  c.new_repetitions = new_k.times_ns.size();
  c.old_time_ns = median(old_k.times_ns);
  c.new_time_ns = median(new_k.times_ns);
  c.change = c.new_time_ns / c.old_time_ns - 1;
  const std::string reps = std::to_string(c.old_repetitions) + " vs " + std::to_string(c.new_repetitions);
  if (smallest_two_sided_p(c.old_repetitions, c.new_repetitions) >= options.alpha) {
    c.verdict = Verdict::kUnsure;
    c.reason = reps + " repetitions: no U test of so few reaches p < " + format("%g", options.alpha) +
               "; run more repetitions (10 each is a good start)";
    return c;
  }
  c.p_value = mann_whitney_u(old_k.times_ns, new_k.times_ns).p_value;
  const bool significant = *c.p_value < options.alpha;
  if (std::fabs(c.change) < options.min_effect) {
    c.verdict = Verdict::kSame;
  } else if (significant) {
    c.verdict = c.change > 0 ? Verdict::kSlower : Verdict::kFaster;
  } else {
    c.verdict = Verdict::kUnsure;
    c.reason = "a " + percent(c.change) + " change that the noise hides (p = " + format("%.3g", *c.p_value) + ", " +
               reps + " repetitions)";
  }
  return c;
}

void compare_context(const BenchRun& old_run, const BenchRun& new_run, const CompareOptions& options,
                     std::vector<std::string>& warnings) {
  const BenchContext &a = old_run.context, &b = new_run.context;
  if (a.gpu && b.gpu && *a.gpu != *b.gpu) warnings.push_back("the runs are on different GPUs: " + *a.gpu + " and " + *b.gpu);
  if (a.driver && b.driver && *a.driver != *b.driver)
    warnings.push_back("the driver changed: " + *a.driver + " to " + *b.driver);
  if (a.sm_clock_mhz && b.sm_clock_mhz && *a.sm_clock_mhz != *b.sm_clock_mhz)
    warnings.push_back("the SM clock differs: " + format("%g", *a.sm_clock_mhz) + " and " +
                       format("%g", *b.sm_clock_mhz) + " MHz");
  if (a.mem_clock_mhz && b.mem_clock_mhz && *a.mem_clock_mhz != *b.mem_clock_mhz)
    warnings.push_back("the memory clock differs: " + format("%g", *a.mem_clock_mhz) + " and " +
                       format("%g", *b.mem_clock_mhz) + " MHz");
  if (old_run.copy_gb_per_s && new_run.copy_gb_per_s) {
    const double moved = *new_run.copy_gb_per_s / *old_run.copy_gb_per_s - 1;
    if (std::fabs(moved) >= options.min_effect)
      warnings.push_back("the copy bandwidth measured in the same runs moved by " + percent(moved) + " (" +
                         format("%.0f", *old_run.copy_gb_per_s) + " to " + format("%.0f", *new_run.copy_gb_per_s) +
                         " GB/s): the machine changed, not only the code");
  }
}

std::string describe(const char* label, const BenchRun& run) {
  const BenchContext& c = run.context;
  std::string text = std::string(label) + c.date + " commit " + c.commit.substr(0, 12) + " on " +
                     (c.gpu ? *c.gpu : std::string("an unknown GPU"));
  if (c.driver) text += ", driver " + *c.driver;
  if (run.copy_gb_per_s) text += ", copy " + format("%.0f", *run.copy_gb_per_s) + " GB/s";
  return text + "\n";
}

std::string pad(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

std::string pad_left(const std::string& text, size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

}  // namespace

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kFaster: return "FASTER";
    case Verdict::kSlower: return "SLOWER";
    case Verdict::kSame: return "SAME";
    case Verdict::kUnsure: return "UNSURE";
  }
  return "UNSURE";
}

size_t Comparison::count(Verdict verdict) const {
  return static_cast<size_t>(
      std::count_if(kernels.begin(), kernels.end(), [verdict](const KernelComparison& k) { return k.verdict == verdict; }));
}

Comparison compare_runs(const BenchRun& old_run, const BenchRun& new_run, const CompareOptions& options) {
  if (!(options.alpha > 0 && options.alpha < 1))
    throw std::invalid_argument("the significance level must lie in (0, 1), got " + format("%g", options.alpha));
  if (!(options.min_effect >= 0 && std::isfinite(options.min_effect)))
    throw std::invalid_argument("the minimum effect must be a finite fraction >= 0, got " + format("%g", options.min_effect));
  std::map<std::string, const BenchKernel*> old_by_name;
  for (const BenchKernel& k : old_run.kernels) old_by_name[k.name] = &k;
  Comparison result;
  for (const BenchKernel& k : new_run.kernels) {
    auto it = old_by_name.find(k.name);
    if (it == old_by_name.end()) {
      result.only_new.push_back(k.name);
      continue;
    }
    result.kernels.push_back(compare_kernel(*it->second, k, options));
    old_by_name.erase(it);
  }
  for (const BenchKernel& k : old_run.kernels)
    if (old_by_name.count(k.name)) result.only_old.push_back(k.name);
  compare_context(old_run, new_run, options, result.warnings);
  return result;
}

std::string comparison_text(const Comparison& comparison, const BenchRun& old_run, const BenchRun& new_run,
                            const CompareOptions& options) {
  std::string out = describe("old: ", old_run) + describe("new: ", new_run);
  size_t width = std::string("kernel").size();
  for (const KernelComparison& k : comparison.kernels) width = std::max(width, k.name.size());
  out += pad("kernel", width) + "  " + pad_left("old us", 12) + pad_left("new us", 12) + pad_left("change", 9) +
         pad_left("p", 9) + pad_left("reps", 9) + "  verdict\n";
  for (const KernelComparison& k : comparison.kernels) {
    out += pad(k.name, width) + "  " + pad_left(format("%.3f", k.old_time_ns / kNsPerUs), 12) +
           pad_left(format("%.3f", k.new_time_ns / kNsPerUs), 12) + pad_left(percent(k.change), 9) +
           pad_left(k.p_value ? format("%.2g", *k.p_value) : "-", 9) +
           pad_left(std::to_string(k.old_repetitions) + "/" + std::to_string(k.new_repetitions), 9) + "  " +
           std::string(verdict_name(k.verdict)) + (k.reason.empty() ? "" : "  (" + k.reason + ")") + "\n";
  }
  for (const std::string& name : comparison.only_old) out += "only in the old run: " + name + "\n";
  for (const std::string& name : comparison.only_new) out += "only in the new run: " + name + "\n";
  for (const std::string& warning : comparison.warnings) out += "warning: " + warning + "\n";
  out += std::to_string(comparison.kernels.size()) + " kernels compared: " +
         std::to_string(comparison.count(Verdict::kSlower)) + " SLOWER, " +
         std::to_string(comparison.count(Verdict::kFaster)) + " FASTER, " +
         std::to_string(comparison.count(Verdict::kSame)) + " SAME, " +
         std::to_string(comparison.count(Verdict::kUnsure)) + " UNSURE (U test at p < " + format("%g", options.alpha) +
         ", minimum effect " + format("%g", kPercent * options.min_effect) + "% of the median time)\n";
  return out;
}

}  // namespace bitparity::reports
