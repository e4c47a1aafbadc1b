// The summary of a campaign, `bitparity-report/1`: what ran, what agreed, what was skipped and why,
// and what was found. One data model with three views: JSON for machines (and for `merge`),
// JUnit XML for CI, and a short text table for people.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace bitparity::reports {

inline constexpr std::string_view kReportFormat = "bitparity-report/1";

// Where a contract's arithmetic comes from, so every report says which library versions it mirrors.
struct ContractNote {
  std::string op, contract, derived_from;
  bool operator==(const ContractNote&) const = default;
};

struct RunInfo {
  uint64_t seed = 0;
  double budget_seconds = 0;
  double elapsed_seconds = 0;
  std::optional<int64_t> max_cases;
  std::vector<std::string> shards;    // "0/4", ...; several after a merge
  std::vector<std::string> backends;  // every "kind:contract" that ran
  std::vector<std::string> pairs;     // "a vs b"
  std::vector<ContractNote> contracts;
  std::string commit, date, device, tool_version;
  bool interrupted = false;
  // Why the run ended early, when an error ended it (a corpus write that failed: "cannot write
  // ...: No space left on device"); the counts and findings up to then are kept.
  std::optional<std::string> error;
  // Batches that failed as a whole, by backend ("cuda:megatron_eager" -> 2): their cases ran again
  // alone and are counted as those runs gave, so a fault of the batch path alone shows only here.
  // Absent in reports written before it.
  std::map<std::string, int64_t> batch_failures;
  bool operator==(const RunInfo&) const = default;
};

// Counts for one op x direction x backend pair.
struct PairCounts {
  std::string op, direction, a, b;
  int64_t cases = 0;
  int64_t agreements = 0;  // bit-identical
  // Cases whose outputs differed in bits but stayed within the error bound of a contract whose order
  // is unknown (ContractInfo::error_bound: cuBLAS), apart from the bit-exact agreements. Absent in
  // reports written before bounds.
  int64_t bounded_agreements = 0;
  std::map<std::string, int64_t> skips;         // reason -> cases ("unmodelled", "generation_failed", ...)
  std::map<std::string, int64_t> mismatches;    // kind -> cases that showed it, before deduplication
  std::map<std::string, int64_t> new_findings;  // kind -> corpus entries this run wrote
  int64_t known_findings = 0;                   // mismatching cases whose signature was already in the corpus
  // Mismatching elements by ulp distance (core/compare.h ulp_bucket: "0", "1", "2", "3-4", ...,
  // "nan"), over every output of every case that differed in bits, before shrinking: the shape of
  // the differences the pair shows, which the dashboard draws. Absent in reports written before it.
  std::map<std::string, int64_t> ulp_histogram;
  bool operator==(const PairCounts&) const = default;
};

// Which edge classes the generator reached for one op x direction: the cases generated and, per
// tag of OpInfo::classes ("rows=0", "clamp<=0", "nan", ...), how many of them were in it. A class
// the op requires (OpInfo::required_tags) but no case reached shows as a gap on the dashboard.
struct Coverage {
  std::string op, direction;
  int64_t cases = 0;
  std::map<std::string, int64_t> tags;
  std::vector<std::string> required;  // sorted
  bool operator==(const Coverage&) const = default;
};

struct FindingRecord {
  std::string signature;
  std::string file;  // the corpus entry, empty when the run kept no corpus
  std::string op, direction, a, b;
  std::string kind, output;
  std::string pins;      // "divergence" (two contracts) is documentation; "open"/"fixed" is a bug
  std::string message;   // format_comparison text
  nlohmann::json first;  // the corpus entry's finding.first (null for error mismatches)
  bool operator==(const FindingRecord&) const = default;
};

struct Report {
  RunInfo run;
  std::vector<PairCounts> counts;
  std::vector<FindingRecord> findings;
  std::vector<Coverage> coverage;  // empty in reports written before it
  bool operator==(const Report&) const = default;
};

// The row for (op, direction, a, b), created empty on first use.
PairCounts& counts_for(Report& report, const std::string& op, const std::string& direction, const std::string& a,
                       const std::string& b);

// The coverage row for (op, direction), created empty on first use.
Coverage& coverage_for(Report& report, const std::string& op, const std::string& direction);

// Whether a finding is a failure (a bug to fix) rather than a documented contract divergence.
bool is_failure(const FindingRecord& finding);

nlohmann::json report_to_json(const Report& report);
// Strict: a malformed document is a ParseError naming the field ("counts[2].cases").
Report report_from_json(const nlohmann::json& j);

// One testsuite; one testcase per op x pair (directions summed). A testcase fails when the run
// found something new that is a bug (is_failure); divergences are listed in its system-out.
std::string junit_xml(const Report& report);

// op, pair, cases, agree, skip, one column per finding kind, new entries; then a total line.
std::string text_table(const Report& report);

// Shards of one campaign: run info of the first with every shard listed and elapsed time the
// maximum (shards run side by side), counts, ulp histograms and coverage summed, findings deduplicated by signature (a
// signature that two shards found is one new finding and one known).
Report merge_reports(const std::vector<Report>& reports);

// What merging reports requires, checked before merge_reports (`merge` and `report` alike): shards
// of one campaign (one seed, one shard count, each shard once; a warning names missing shards),
// returning the shard count; and every count non-negative with a grand total that fits an int64, so
// that no sum merge_reports or a total makes can wrap. Both throw std::runtime_error saying why.
int64_t check_shards(const std::vector<Report>& reports);
void check_counts_fit(const std::vector<Report>& reports);

}  // namespace bitparity::reports
