// `bitparity report --html`: one self-contained HTML dashboard (reports/dashboard_html.h) from a
// campaign's report, a bench history and a corpus, each optional.
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/util.h"
#include "core/safe_file.h"
#include "reports/dashboard_assets.h"
#include "reports/dashboard_data.h"
#include "reports/dashboard_html.h"

namespace bitparity::cli {
namespace {

struct ReportFlags {
  std::string html, bench_history, corpus, title = "bitparity dashboard";
  std::vector<std::string> reports;
};

// 128 random bits as hex: the page's CSP nonce, new for every page.
std::string random_nonce() {
  std::random_device device;
  std::string nonce;
  for (int i = 0; i < 4; ++i) {
    char part[9];
    std::snprintf(part, sizeof part, "%08x", static_cast<unsigned>(device()));
    nonce += part;
  }
  return nonce;
}

int report(const ReportFlags& flags) {
  const std::optional<reports::ChartAssets> assets = reports::embedded_chart_assets();
  if (!assets) {
    std::cerr << "error: " << reports::missing_chart_assets_message() << "\n";
    return kExitError;
  }
  check_output_file(flags.html);  // before any reading: a bad output path fails at once
  reports::DashboardSources sources;
  for (const std::string& r : flags.reports) sources.reports.emplace_back(r);
  if (!flags.bench_history.empty()) sources.bench_history = flags.bench_history;
  if (!flags.corpus.empty()) sources.corpus = flags.corpus;
  const reports::DashboardData data = reports::load_dashboard(sources);
  const reports::DashboardPage page{flags.title, reports::utc_now(), random_nonce()};
  write_file_safely(flags.html, reports::render_dashboard(data, *assets, page));

  std::string absent;
  if (!data.report) absent += " campaign report (--report)";
  if (!data.bench) absent += " bench history (--bench-history)";
  if (!data.corpus) absent += " corpus (--corpus)";
  std::cout << "wrote " << flags.html;
  if (!absent.empty()) std::cout << "; sections without a source say so:" << absent;
  std::cout << "\n";
  return kExitOk;
}

}  // namespace

Command add_report(CLI::App& root) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* app = root.add_subcommand(
      "report",
      "Write one self-contained HTML dashboard (the chart libraries inlined: it opens offline): each kernel's "
      "share of the copy roofline over the bench history and the latest run's table; findings by op, contract "
      "pair and kind; ulp histograms; every corpus entry with its bits, its arbitration and its replay command; "
      "coverage by edge class. Every source is optional: a section without one says so. Exit status 2 when a "
      "source is broken or this build lacks the chart libraries (scripts/fetch_charts.sh, then rebuild).");
  app->add_option("--html", flags->html, "write the dashboard here (OUT.html)")->required();
  app->add_option("--report", flags->reports,
                  "a campaign's bitparity-report/1 (repeatable: the shard reports of one campaign are merged)");
  app->add_option("--bench-history", flags->bench_history, "a folder of bitparity-bench/1 run files (bitparity bench)");
  app->add_option("--corpus", flags->corpus, "a corpus folder (entries under <op>/)");
  app->add_option("--title", flags->title, "the page's title")->capture_default_str();
  app->footer(
      "Example:\n"
      "  bitparity campaign --budget-seconds 300 --seed 7 --corpus out/corpus --report out/report.json\n"
      "  bitparity report --html out/dashboard.html --report out/report.json --corpus out/corpus \\\n"
      "      --bench-history bench-history");
  return {app, [flags] { return report(*flags); }};
}

}  // namespace bitparity::cli
