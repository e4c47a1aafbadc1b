// What the HTML dashboard (`bitparity report --html`) shows, read from its three optional sources
// and reduced to the rows that its tables and charts draw: findings by op, contract pair and kind,
// ulp histograms and edge-class coverage from a campaign's report; each corpus entry with its bits,
// its arbitration and the command that replays it; every kernel's share of the copy roofline over
// the bench history. The sources are other people's files: reading is strict (errors name the file
// and the key), and nothing read here is trusted as markup (dashboard_html escapes it all).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/bench_history.h"
#include "reports/report.h"

namespace bitparity::reports {

// Each source is optional; a section whose source is absent says so instead of failing.
struct DashboardSources {
  std::vector<std::filesystem::path> reports;          // one report, or the shard reports of one campaign
  std::optional<std::filesystem::path> bench_history;  // a folder of bitparity-bench/1 run files
  std::optional<std::filesystem::path> corpus;         // a corpus folder (entries under <op>/)
};

// The hex digits of one input tensor shown in the corpus table: at most this many, then a cut.
inline constexpr size_t kMaxHexDigitsShown = 256;

struct TensorBits {
  std::string name, dtype, shape;  // shape as "[1, 4]"
  std::string hex;                 // the bit patterns, cut to kMaxHexDigitsShown digits
  bool cut = false;
};

// One corpus entry as the dashboard lists it.
struct CorpusRow {
  std::string file;  // the path under the corpus folder as given
  std::string op, direction, a, b, kind, output, pins, signature, message;
  std::string attrs;                   // the attributes as compact JSON ("{}" when none)
  nlohmann::json first, arbitration;   // finding.first and finding.arbitration; null when absent
  std::vector<TensorBits> inputs;
  std::string provenance;              // "seed 11, case 1, shard 0/1, commit abade01, 2026-11-29T19:48:13Z"
  std::string replay;                  // the one-line command that replays it
};

struct DashboardData {
  std::optional<Report> report;  // the reports, merged when several
  std::vector<std::string> report_files;
  std::optional<std::vector<BenchRun>> bench;  // oldest first
  std::string bench_dir;
  std::optional<std::vector<CorpusRow>> corpus;  // sorted by op, then file
  std::string corpus_dir;
};

// Reads every source that is given. A report that is not bitparity-report/1, reports of different
// campaigns (seeds), a broken run file or corpus entry, or a source that does not exist is an
// exception whose message names the file (and the key); a source not given is simply absent.
DashboardData load_dashboard(const DashboardSources& sources);

// --- the rows that the charts and tables draw ---------------------------------------------------

// Cases of one op and contract pair (directions summed) that showed one finding kind, and the
// corpus entries (distinct signatures) the report kept for it, of which `failures` are bugs. The
// kind "within_bound" counts the cases that differed in bits within a contract's error bound
// (PairCounts::bounded_agreements): shown apart, never a finding.
struct FindingGroup {
  std::string op, pair, kind;
  int64_t cases = 0, entries = 0, failures = 0;
};
std::vector<FindingGroup> finding_groups(const Report& report);

// Mismatching elements of one op x direction x pair in one ulp bucket; `order` sorts the buckets
// ("0", "1", "2", "3-4", ... by their lower bound, "nan" last).
struct UlpBar {
  std::string op, direction, pair, bucket;
  int64_t order = 0, elements = 0;
};
std::vector<UlpBar> ulp_bars(const Report& report);
int64_t ulp_bucket_order(std::string_view bucket);

// Cases of one op x direction in one edge class, out of `total`; a required class that no case
// reached is a cell with 0 cases.
struct CoverageCell {
  std::string op, direction, tag;
  int64_t cases = 0, total = 0;
  bool required = false;
};
std::vector<CoverageCell> coverage_cells(const Report& report);

// One kernel's share of the copy roofline in one run; kernels without one (no copy measured, or
// a benchmark that moves no bytes) are left out.
struct BenchPoint {
  std::string date, commit, kernel;
  double pct_of_copy = 0;
  std::optional<double> gb_per_s, copy_gb_per_s;
};
std::vector<BenchPoint> bench_points(const std::vector<BenchRun>& history);

// `text` as one shell word: unchanged when it is made of safe characters only, else in single
// quotes (a quote inside as '\'').
std::string shell_quote(std::string_view text);
// "bitparity replay FILE", FILE quoted for a POSIX shell.
std::string replay_command(const std::string& file);

// The data the page's script draws its charts from: each chart's rows, or null for a section
// without data. Strings are the files' own; the caller embeds this with script_json.
nlohmann::json chart_data(const DashboardData& data);

}  // namespace bitparity::reports
