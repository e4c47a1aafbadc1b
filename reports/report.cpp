#include "reports/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <set>
#include <tuple>

#include "core/error.h"
#include "core/json_strict.h"

namespace bitparity::reports {
namespace {

using nlohmann::json;

// Finding kinds that get their own column in the text table, in the order they are shown.
const std::vector<std::string> kTableKinds = {"bit_mismatch", "ulp_over_budget", "shape_mismatch", "error_mismatch"};

void add_counts(std::map<std::string, int64_t>& into, const std::map<std::string, int64_t>& from) {
  for (const auto& [name, n] : from) into[name] += n;
}

int64_t sum(const std::map<std::string, int64_t>& counts) {
  int64_t total = 0;
  for (const auto& [name, n] : counts) total += n;
  return total;
}

json run_to_json(const RunInfo& run) {
  json contracts = json::array();
  for (const ContractNote& c : run.contracts)
    contracts.push_back({{"op", c.op}, {"contract", c.contract}, {"derived_from", c.derived_from}});
  return {{"seed", run.seed},
          {"budget_seconds", run.budget_seconds},
          {"elapsed_seconds", run.elapsed_seconds},
          {"max_cases", run.max_cases ? json(*run.max_cases) : json(nullptr)},
          {"shards", run.shards},
          {"backends", run.backends},
          {"pairs", run.pairs},
          {"contracts", contracts},
          {"commit", run.commit},
          {"date", run.date},
          {"device", run.device},
          {"tool_version", run.tool_version},
          {"interrupted", run.interrupted},
          {"error", run.error ? json(*run.error) : json(nullptr)},
          {"batch_failures", run.batch_failures}};
}

RunInfo run_from_json(const json& j) {
  const std::string f = "run";
  RunInfo run;
  run.seed = get_uint64(j, "seed", f);
  run.budget_seconds = get_number(j, "budget_seconds", f);
  run.elapsed_seconds = get_number(j, "elapsed_seconds", f);
  if (const json& m = require(j, "max_cases", f); !m.is_null()) run.max_cases = get_count(j, "max_cases", f);
  run.shards = get_strings(j, "shards", f);
  run.backends = get_strings(j, "backends", f);
  run.pairs = get_strings(j, "pairs", f);
  const json& contracts = require_array(j, "contracts", f);
  for (size_t i = 0; i < contracts.size(); ++i) {
    const std::string p = "run.contracts[" + std::to_string(i) + "]";
    run.contracts.push_back({get_string(contracts[i], "op", p), get_string(contracts[i], "contract", p),
                             get_string(contracts[i], "derived_from", p)});
  }
  run.commit = get_string(j, "commit", f);
  run.date = get_string(j, "date", f);
  run.device = get_string(j, "device", f);
  run.tool_version = get_string(j, "tool_version", f);
  run.interrupted = get_bool(j, "interrupted", f);
  // Reports written before runs could end in an error have no "error" field.
  if (auto it = j.find("error"); it != j.end() && !it->is_null()) run.error = get_string(j, "error", f);
  // Nor have reports written before batch failures were kept.
  if (j.contains("batch_failures")) run.batch_failures = get_count_map(j, "batch_failures", f);
  return run;
}

json counts_to_json(const PairCounts& c) {
  return {{"op", c.op},
          {"direction", c.direction},
          {"pair", {c.a, c.b}},
          {"cases", c.cases},
          {"agreements", c.agreements},
          {"bounded_agreements", c.bounded_agreements},
          {"skips", c.skips},
          {"mismatches", c.mismatches},
          {"new_findings", c.new_findings},
          {"known_findings", c.known_findings},
          {"ulp_histogram", c.ulp_histogram}};
}

std::pair<std::string, std::string> get_pair(const json& object, const std::string& field) {
  const std::vector<std::string> pair = get_strings(object, "pair", field);
  if (pair.size() != 2) throw ParseError(path_of(field, "pair"), "expected two backend names [a, b]");
  return {pair[0], pair[1]};
}

PairCounts counts_from_json(const json& j, const std::string& f) {
  PairCounts c;
  c.op = get_string(j, "op", f);
  c.direction = get_string(j, "direction", f);
  std::tie(c.a, c.b) = get_pair(j, f);
  c.cases = get_count(j, "cases", f);
  c.agreements = get_count(j, "agreements", f);
  // Reports written before error bounds have no "bounded_agreements".
  if (j.contains("bounded_agreements")) c.bounded_agreements = get_count(j, "bounded_agreements", f);
  c.skips = get_count_map(j, "skips", f);
  c.mismatches = get_count_map(j, "mismatches", f);
  c.new_findings = get_count_map(j, "new_findings", f);
  c.known_findings = get_count(j, "known_findings", f);
  // Reports written before histograms were kept have no "ulp_histogram".
  if (j.contains("ulp_histogram")) c.ulp_histogram = get_count_map(j, "ulp_histogram", f);
  // Each case of a pair is one agreement, skip or mismatch, and each mismatch is known or new: the
  // parts cannot exceed the whole (sums checked for overflow, each count being non-negative).
  auto sum = [&f](std::initializer_list<int64_t> parts, std::initializer_list<const std::map<std::string, int64_t>*> maps) {
    int64_t total = 0;
    auto add = [&](int64_t n) {
      if (__builtin_add_overflow(total, n, &total)) throw ParseError(f, "counts whose sum overflows a 64-bit count");
    };
    for (int64_t n : parts) add(n);
    for (const auto* m : maps)
      for (const auto& [name, n] : *m) add(n);
    return total;
  };
  const int64_t outcomes = sum({c.agreements, c.bounded_agreements}, {&c.skips, &c.mismatches});
  if (outcomes > c.cases)
    throw ParseError(path_of(f, "cases"), std::to_string(c.cases) + " cases, fewer than their " + std::to_string(outcomes) +
                                              " agreements, skips and mismatches");
  const int64_t mismatches = sum({}, {&c.mismatches}), findings = sum({c.known_findings}, {&c.new_findings});
  if (findings > mismatches)
    throw ParseError(path_of(f, "mismatches"), std::to_string(mismatches) + " mismatches, fewer than their " +
                                                   std::to_string(findings) + " known and new findings");
  return c;
}

json coverage_to_json(const Coverage& c) {
  return {{"op", c.op}, {"direction", c.direction}, {"cases", c.cases}, {"tags", c.tags}, {"required", c.required}};
}

Coverage coverage_from_json(const json& j, const std::string& f) {
  Coverage c;
  c.op = get_string(j, "op", f);
  c.direction = get_string(j, "direction", f);
  c.cases = get_count(j, "cases", f);
  c.tags = get_count_map(j, "tags", f);
  for (const auto& [tag, n] : c.tags)
    if (n > c.cases)
      throw ParseError(path_of(f, "tags"), "tag " + excerpt(tag) + " counts " + std::to_string(n) + " cases of " +
                                               std::to_string(c.cases));
  c.required = get_strings(j, "required", f);
  std::sort(c.required.begin(), c.required.end());
  return c;
}

void add_coverage(Coverage& into, const Coverage& from) {
  into.cases += from.cases;
  add_counts(into.tags, from.tags);
  std::set<std::string> required(into.required.begin(), into.required.end());
  required.insert(from.required.begin(), from.required.end());
  into.required.assign(required.begin(), required.end());
}

json finding_to_json(const FindingRecord& r) {
  return {{"signature", r.signature}, {"file", r.file},  {"op", r.op},         {"direction", r.direction},
          {"pair", {r.a, r.b}},       {"kind", r.kind},  {"output", r.output}, {"pins", r.pins},
          {"message", r.message},     {"first", r.first}};
}

FindingRecord finding_from_json(const json& j, const std::string& f) {
  FindingRecord r;
  r.signature = get_string(j, "signature", f);
  r.file = get_string(j, "file", f);
  r.op = get_string(j, "op", f);
  r.direction = get_string(j, "direction", f);
  std::tie(r.a, r.b) = get_pair(j, f);
  r.kind = get_string(j, "kind", f);
  r.output = get_string(j, "output", f);
  r.pins = get_string(j, "pins", f);
  r.message = get_string(j, "message", f);
  r.first = require(j, "first", f);
  return r;
}

// Totals over every row, written beside the rows for readers; recomputed, never read back.
json totals_json(const Report& report) {
  PairCounts total;
  for (const PairCounts& c : report.counts) {
    total.cases += c.cases;
    total.agreements += c.agreements;
    total.bounded_agreements += c.bounded_agreements;
    total.known_findings += c.known_findings;
    add_counts(total.skips, c.skips);
    add_counts(total.mismatches, c.mismatches);
    add_counts(total.new_findings, c.new_findings);
  }
  return {
      {"cases", total.cases},           {"agreements", total.agreements},     {"skips", total.skips},
      {"bounded_agreements", total.bounded_agreements},
      {"mismatches", total.mismatches}, {"new_findings", total.new_findings}, {"known_findings", total.known_findings}};
}

// --- JUnit XML ---------------------------------------------------------------------------------

std::string xml_escape(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const unsigned char u = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters other than tab and newline are not allowed in XML 1.0 at all.
        if (u < 0x20 && ch != '\n' && ch != '\t')
          out += "?";
        else
          out += ch;
    }
  }
  return out;
}

// One JUnit testcase: the counts of one op x pair over both directions, and its findings.
struct CaseRow {
  std::string op, a, b;
  PairCounts counts;  // directions summed
  std::vector<const FindingRecord*> failures, divergences;
  bool skipped() const { return counts.cases > 0 && counts.cases == sum(counts.skips); }
};

std::vector<CaseRow> junit_rows(const Report& report) {
  std::map<std::tuple<std::string, std::string, std::string>, CaseRow> rows;
  for (const PairCounts& c : report.counts) {
    CaseRow& row = rows[{c.op, c.a, c.b}];
    row.op = c.op, row.a = c.a, row.b = c.b;
    row.counts.cases += c.cases;
    row.counts.agreements += c.agreements;
    row.counts.bounded_agreements += c.bounded_agreements;
    row.counts.known_findings += c.known_findings;
    add_counts(row.counts.skips, c.skips);
    add_counts(row.counts.mismatches, c.mismatches);
  }
  for (const FindingRecord& f : report.findings) {
    CaseRow& row = rows[{f.op, f.a, f.b}];
    row.op = f.op, row.a = f.a, row.b = f.b;
    (is_failure(f) ? row.failures : row.divergences).push_back(&f);
  }
  std::vector<CaseRow> out;
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  return out;
}

std::string counts_text(const PairCounts& c) {
  std::string s = "cases=" + std::to_string(c.cases) + " agreements=" + std::to_string(c.agreements);
  if (c.bounded_agreements) s += " within_bound=" + std::to_string(c.bounded_agreements);
  for (const auto& [reason, n] : c.skips) s += " skipped(" + reason + ")=" + std::to_string(n);
  for (const auto& [kind, n] : c.mismatches) s += " " + kind + "=" + std::to_string(n);
  s += " known=" + std::to_string(c.known_findings);
  return s;
}

std::string finding_text(const FindingRecord& f) {
  std::string s = f.signature + "\n" + f.message + "\n";
  if (!f.file.empty()) s += "To reproduce: bitparity replay " + f.file + "\n";
  return s;
}

std::string junit_testcase(const CaseRow& row, const std::string& duration) {
  std::string s = "    <testcase classname=\"bitparity." + xml_escape(row.op) + "\" name=\"" +
                  xml_escape(row.a + " vs " + row.b) + "\" time=\"" + duration + "\">\n";
  if (!row.failures.empty()) {
    std::set<std::string> kinds;
    std::string body;
    for (const FindingRecord* f : row.failures) kinds.insert(f->kind), body += finding_text(*f) + "\n";
    std::string type;
    for (const std::string& k : kinds) type += (type.empty() ? "" : ",") + k;
    s += "      <failure message=\"" + std::to_string(row.failures.size()) + " new finding(s)\" type=\"" +
         xml_escape(type) + "\">" + xml_escape(body) + "</failure>\n";
  } else if (row.skipped()) {
    s += "      <skipped message=\"every case was skipped: " + xml_escape(counts_text(row.counts)) + "\"/>\n";
  }
  std::string out = counts_text(row.counts) + "\n";
  for (const FindingRecord* f : row.divergences) out += "divergence (documented, not a failure): " + finding_text(*f);
  s += "      <system-out>" + xml_escape(out) + "</system-out>\n";
  return s + "    </testcase>\n";
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string pad(const std::string& text, size_t width, bool right) {
  if (text.size() >= width) return text;
  const std::string fill(width - text.size(), ' ');
  return right ? fill + text : text + fill;
}

struct ShardId {
  int64_t index = 0, count = 0;
};

// "2/4" -> {2, 4}; nullopt on any other form, or an index outside [0, count).
std::optional<ShardId> parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size() || slash > 18 || text.size() - slash > 19)
    return std::nullopt;
  const std::string a = text.substr(0, slash), b = text.substr(slash + 1);
  if (a.find_first_not_of("0123456789") != std::string::npos || b.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const ShardId id{std::stoll(a), std::stoll(b)};
  if (id.count < 1 || id.index >= id.count) return std::nullopt;
  return id;
}

}  // namespace

PairCounts& counts_for(Report& report, const std::string& op, const std::string& direction, const std::string& a,
                       const std::string& b) {
  for (PairCounts& c : report.counts)
    if (c.op == op && c.direction == direction && c.a == a && c.b == b) return c;
  PairCounts c;
  c.op = op, c.direction = direction, c.a = a, c.b = b;
  report.counts.push_back(std::move(c));
  return report.counts.back();
}

Coverage& coverage_for(Report& report, const std::string& op, const std::string& direction) {
  for (Coverage& c : report.coverage)
    if (c.op == op && c.direction == direction) return c;
  Coverage c;
  c.op = op, c.direction = direction;
  report.coverage.push_back(std::move(c));
  return report.coverage.back();
}

bool is_failure(const FindingRecord& finding) { return finding.pins != "divergence"; }

json report_to_json(const Report& report) {
  json counts = json::array(), findings = json::array();
  for (const PairCounts& c : report.counts) counts.push_back(counts_to_json(c));
  for (const FindingRecord& f : report.findings) findings.push_back(finding_to_json(f));
  json coverage = json::array();
  for (const Coverage& c : report.coverage) coverage.push_back(coverage_to_json(c));
  return {{"format", std::string(kReportFormat)},
          {"run", run_to_json(report.run)},
          {"totals", totals_json(report)},
          {"counts", counts},
          {"findings", findings},
          {"coverage", coverage}};
}

Report report_from_json(const json& j) {
  const std::string format = get_string(j, "format", "");
  if (format != kReportFormat)
    throw ParseError("format", "expected \"" + std::string(kReportFormat) + "\", got \"" + format + "\"");
  Report report;
  report.run = run_from_json(require(j, "run", ""));
  const json& counts = require_array(j, "counts", "");
  for (size_t i = 0; i < counts.size(); ++i)
    report.counts.push_back(counts_from_json(counts[i], "counts[" + std::to_string(i) + "]"));
  const json& findings = require_array(j, "findings", "");
  for (size_t i = 0; i < findings.size(); ++i)
    report.findings.push_back(finding_from_json(findings[i], "findings[" + std::to_string(i) + "]"));
  // Reports written before coverage was kept have no "coverage".
  if (j.contains("coverage")) {
    const json& coverage = require_array(j, "coverage", "");
    for (size_t i = 0; i < coverage.size(); ++i) {
      const std::string f = "coverage[" + std::to_string(i) + "]";
      Coverage c = coverage_from_json(coverage[i], f);
      for (const Coverage& seen : report.coverage)
        if (seen.op == c.op && seen.direction == c.direction)
          throw ParseError(f, "a second row for " + excerpt(c.op + " " + c.direction));
      report.coverage.push_back(std::move(c));
    }
  }
  return report;
}

std::string junit_xml(const Report& report) {
  const std::vector<CaseRow> rows = junit_rows(report);
  size_t failures = 0, skipped = 0;
  for (const CaseRow& row : rows) failures += !row.failures.empty(), skipped += row.failures.empty() && row.skipped();
  // A run that an error ended early (a corpus write that failed) is one more testcase, in error.
  const size_t errors = report.run.error ? 1 : 0;
  const std::string counts = "tests=\"" + std::to_string(rows.size() + errors) + "\" failures=\"" +
                             std::to_string(failures) + "\" errors=\"" + std::to_string(errors) + "\" skipped=\"" +
                             std::to_string(skipped) + "\"";
  const std::string elapsed = fixed(report.run.elapsed_seconds, 3);
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<testsuites name=\"bitparity\" " + counts + " time=\"" + elapsed + "\">\n";
  s += "  <testsuite name=\"bitparity.campaign\" " + counts + " time=\"" + elapsed + "\" timestamp=\"" +
       xml_escape(report.run.date) + "\">\n    <properties>\n";
  auto property = [&s](const std::string& name, const std::string& value) {
    s += "      <property name=\"" + xml_escape(name) + "\" value=\"" + xml_escape(value) + "\"/>\n";
  };
  property("seed", std::to_string(report.run.seed));
  property("commit", report.run.commit);
  property("device", report.run.device);
  property("tool_version", report.run.tool_version);
  for (const ContractNote& c : report.run.contracts)
    property("contract." + c.op + "." + c.contract, c.derived_from.empty() ? "-" : c.derived_from);
  s += "    </properties>\n";
  // Per-testcase time is not measured (cases of all pairs interleave); 0 keeps parsers happy.
  for (const CaseRow& row : rows) s += junit_testcase(row, "0");
  if (report.run.error)
    s += "    <testcase classname=\"bitparity.campaign\" name=\"run\" time=\"" + elapsed +
         "\">\n      <error message=\"" + xml_escape(*report.run.error) + "\"/>\n    </testcase>\n";
  return s + "  </testsuite>\n</testsuites>\n";
}

std::string text_table(const Report& report) {
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> header = {"op", "dir", "pair", "cases", "agree", "in bound", "skip"};
  for (const std::string& kind : kTableKinds) header.push_back(kind);
  header.push_back("new");
  table.push_back(header);
  PairCounts total;
  for (const PairCounts& c : report.counts) {
    std::vector<std::string> row = {c.op,
                                    c.direction,
                                    c.a + " vs " + c.b,
                                    std::to_string(c.cases),
                                    std::to_string(c.agreements),
                                    std::to_string(c.bounded_agreements),
                                    std::to_string(sum(c.skips))};
    for (const std::string& kind : kTableKinds)
      row.push_back(std::to_string(c.mismatches.count(kind) ? c.mismatches.at(kind) : 0));
    row.push_back(std::to_string(sum(c.new_findings)));
    table.push_back(row);
    total.cases += c.cases, total.agreements += c.agreements, total.bounded_agreements += c.bounded_agreements;
    add_counts(total.skips, c.skips), add_counts(total.mismatches, c.mismatches);
    add_counts(total.new_findings, c.new_findings);
  }
  std::vector<std::string> last = {
      "total", "", "", std::to_string(total.cases), std::to_string(total.agreements),
      std::to_string(total.bounded_agreements), std::to_string(sum(total.skips))};
  for (const std::string& kind : kTableKinds)
    last.push_back(std::to_string(total.mismatches.count(kind) ? total.mismatches.at(kind) : 0));
  last.push_back(std::to_string(sum(total.new_findings)));
  table.push_back(last);

  std::vector<size_t> widths(header.size(), 0);
  for (const auto& row : table)
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  std::string s;
  for (const auto& row : table) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) line += (i ? "  " : "") + pad(row[i], widths[i], i >= 3);
    s += line + "\n";
  }
  if (report.run.error) s += "the run stopped early: " + *report.run.error + "\n";
  return s;
}

Report merge_reports(const std::vector<Report>& reports) {
  Report merged;
  if (reports.empty()) return merged;
  merged.run = reports.front().run;
  merged.run.shards.clear();
  merged.run.error.reset();
  merged.run.batch_failures.clear();
  std::set<std::string> signatures;
  for (const Report& r : reports) {
    if (r.run.error) {
      const std::string shard = r.run.shards.empty() ? "?" : r.run.shards.front();
      merged.run.error = (merged.run.error ? *merged.run.error + "; " : "") + "shard " + shard + ": " + *r.run.error;
    }
    for (const std::string& shard : r.run.shards) merged.run.shards.push_back(shard);
    merged.run.elapsed_seconds = std::max(merged.run.elapsed_seconds, r.run.elapsed_seconds);
    merged.run.interrupted = merged.run.interrupted || r.run.interrupted;
    add_counts(merged.run.batch_failures, r.run.batch_failures);
    for (const std::string& p : r.run.pairs)
      if (std::find(merged.run.pairs.begin(), merged.run.pairs.end(), p) == merged.run.pairs.end())
        merged.run.pairs.push_back(p);
    for (const std::string& b : r.run.backends)
      if (std::find(merged.run.backends.begin(), merged.run.backends.end(), b) == merged.run.backends.end())
        merged.run.backends.push_back(b);
    for (const PairCounts& c : r.counts) {
      PairCounts& into = counts_for(merged, c.op, c.direction, c.a, c.b);
      into.cases += c.cases;
      into.agreements += c.agreements;
      into.bounded_agreements += c.bounded_agreements;
      into.known_findings += c.known_findings;
      add_counts(into.skips, c.skips);
      add_counts(into.mismatches, c.mismatches);
      add_counts(into.ulp_histogram, c.ulp_histogram);
    }
    for (const Coverage& c : r.coverage) add_coverage(coverage_for(merged, c.op, c.direction), c);
  }
  // Two shards may find the same signature: it is one finding, and the other is a known one.
  for (const Report& r : reports)
    for (const FindingRecord& f : r.findings) {
      PairCounts& row = counts_for(merged, f.op, f.direction, f.a, f.b);
      if (signatures.insert(f.signature).second) {
        merged.findings.push_back(f);
        ++row.new_findings[f.kind];
      } else {
        ++row.known_findings;
      }
    }
  return merged;
}

// Shards of one campaign: the same seed and shard count, each shard once. Returns the count.
int64_t check_shards(const std::vector<Report>& reports) {
  std::set<int64_t> seen;
  int64_t count = 0;
  for (size_t r = 0; r < reports.size(); ++r) {
    const RunInfo& run = reports[r].run;
    if (run.seed != reports.front().run.seed)
      throw std::runtime_error("the reports come from different campaigns: seed " + std::to_string(run.seed) +
                               " and seed " + std::to_string(reports.front().run.seed));
    if (run.shards.empty()) throw std::runtime_error("a report names no shard (run.shards is empty)");
    for (const std::string& text : run.shards) {
      const std::optional<ShardId> id = parse_shard(text);
      if (!id) throw std::runtime_error("run.shards: " + excerpt(text) + " is not INDEX/COUNT with INDEX < COUNT");
      if (count == 0) count = id->count;
      if (id->count != count)
        throw std::runtime_error("the reports split the campaign differently: shard " + text + " of " +
                                 std::to_string(count) + " shards");
      if (!seen.insert(id->index).second)
        throw std::runtime_error("shard " + text + " appears twice; each shard is counted once");
    }
  }
  if (static_cast<int64_t>(seen.size()) != count)
    std::cerr << "warning: merging " << seen.size() << " of " << count << " shards; the counts cover only those\n";
  return count;
}

// Every count of every report added into one int64 (all are non-negative, report_from_json checks
// it): when the grand total fits, so does every sum merge_reports and the totals make.
void check_counts_fit(const std::vector<Report>& reports) {
  int64_t total = 0;
  auto add = [&total](int64_t n) {
    if (n < 0 || __builtin_add_overflow(total, n, &total))
      throw std::runtime_error("the reports' counts overflow a 64-bit count when added; refusing to merge");
  };
  for (const Report& r : reports) {
    for (const PairCounts& c : r.counts) {
      add(c.cases), add(c.agreements), add(c.known_findings);
      for (const auto* counts : {&c.skips, &c.mismatches, &c.new_findings, &c.ulp_histogram})
        for (const auto& [name, n] : *counts) add(n);
    }
    for (const Coverage& c : r.coverage) {
      add(c.cases);
      for (const auto& [tag, n] : c.tags) add(n);
    }
    for (const auto& [backend, n] : r.run.batch_failures) add(n);
    add(static_cast<int64_t>(r.findings.size()));
  }
}

}  // namespace bitparity::reports
