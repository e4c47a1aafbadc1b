#include "reports/dashboard_data.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "core/error.h"
#include "core/json_strict.h"
#include "corpus/entry.h"

namespace bitparity::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Digits of a commit hash shown beside a date.
constexpr size_t kShortCommit = 7;

// Prefixes a reader's error with the file it came from, once.
[[noreturn]] void rethrow_for(const fs::path& file, const std::exception& e) {
  const std::string what = e.what(), name = file.string();
  if (what.rfind(name, 0) == 0) throw ParseError("", what);
  throw ParseError("", name + ": " + what);
}

Report read_report(const fs::path& file) {
  try {
    return report_from_json(parse_json_text(read_document(file), "the file"));
  } catch (const std::exception& e) {
    rethrow_for(file, e);
  }
}

// One report, or the shards of one campaign merged, held to what `merge` requires: reports of
// different campaigns, or one shard twice, would sum counts that mean nothing together, and counts
// whose sum wraps would show as anything.
Report read_reports(const std::vector<fs::path>& files) {
  std::vector<Report> reports;
  for (const fs::path& file : files) {
    reports.push_back(read_report(file));
    if (reports.back().run.seed != reports.front().run.seed)
      throw std::runtime_error(file.string() + ": seed " + std::to_string(reports.back().run.seed) + " differs from " +
                               files.front().string() + "'s " + std::to_string(reports.front().run.seed) +
                               "; pass the reports of one campaign (its shards), or one report");
  }
  try {
    if (reports.size() > 1) check_shards(reports);
    check_counts_fit(reports);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("--report: ") + e.what() +
                             "; pass one report, or the reports of one campaign's shards, each once");
  }
  return reports.size() == 1 ? reports.front() : merge_reports(reports);
}

std::string short_commit(const std::string& commit) { return commit.substr(0, kShortCommit); }

std::string shape_text(const json& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].dump();
  return s + "]";
}

std::vector<TensorBits> input_bits(const json& inputs, const std::string& field) {
  std::vector<TensorBits> out;
  for (const auto& [name, tensor] : inputs.items()) {
    const std::string f = path_of(field, name);
    TensorBits bits;
    bits.name = name;
    bits.dtype = get_string(tensor, "dtype", f);
    bits.shape = shape_text(require_array(tensor, "shape", f));
    bits.hex = get_string(tensor, "hex", f);
    if (bits.hex.size() > kMaxHexDigitsShown) bits.hex.resize(kMaxHexDigitsShown), bits.cut = true;
    out.push_back(std::move(bits));
  }
  return out;
}

std::string provenance_text(const json& entry) {
  auto it = entry.find("provenance");
  if (it == entry.end() || !it->is_object()) return "";
  const json& p = *it;
  const std::string f = "provenance";
  // Every field is optional (a hand-written entry has an author and no seed).
  std::vector<std::string> parts;
  if (p.contains("seed")) parts.push_back("seed " + std::to_string(get_uint64(p, "seed", f)));
  if (p.contains("case_index")) parts.push_back("case " + std::to_string(get_count(p, "case_index", f)));
  if (p.contains("shard")) parts.push_back("shard " + get_string(p, "shard", f));
  if (p.contains("author")) parts.push_back("by " + get_string(p, "author", f));
  if (p.contains("device") && !get_string(p, "device", f).empty()) parts.push_back("on " + get_string(p, "device", f));
  if (p.contains("commit")) parts.push_back("commit " + short_commit(get_string(p, "commit", f)));
  if (p.contains("date")) parts.push_back(get_string(p, "date", f));
  std::string s;
  for (const std::string& part : parts) s += (s.empty() ? "" : ", ") + part;
  return s;
}

const json& optional_object(const json& object, const std::string& key) {
  static const json null;
  auto it = object.find(key);
  return it == object.end() ? null : *it;
}

CorpusRow corpus_row(const corpus::StoredEntry& stored) {
  const json& doc = stored.document;
  CorpusRow row;
  row.file = stored.path.string();
  row.op = stored.op;
  row.signature = stored.signature;
  row.direction = get_string(doc, "direction", "");
  row.pins = get_string(doc, "pins", "");
  const json& finding = require_object(doc, "finding", "");
  row.kind = get_string(finding, "kind", "finding");
  const std::vector<std::string> pair = get_strings(finding, "pair", "finding");
  if (pair.size() != 2) throw ParseError("finding.pair", "expected two backend names [a, b]");
  row.a = pair[0], row.b = pair[1];
  if (finding.contains("output")) row.output = get_string(finding, "output", "finding");
  if (finding.contains("message")) row.message = get_string(finding, "message", "finding");
  row.first = optional_object(finding, "first");
  row.arbitration = optional_object(finding, "arbitration");
  row.attrs = doc.contains("attrs") ? require_object(doc, "attrs", "").dump() : "{}";
  row.inputs = input_bits(require_object(doc, "inputs", ""), "inputs");
  row.provenance = provenance_text(doc);
  row.replay = replay_command(row.file);
  return row;
}

std::vector<CorpusRow> read_corpus(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error("corpus folder " + dir.string() + " does not exist");
  std::vector<CorpusRow> rows;
  for (const corpus::StoredEntry& stored : corpus::read_stored_entries(dir)) try {
      rows.push_back(corpus_row(stored));
    } catch (const std::exception& e) {
      rethrow_for(stored.path, e);
    }
  std::sort(rows.begin(), rows.end(),
            [](const CorpusRow& x, const CorpusRow& y) { return std::tie(x.op, x.file) < std::tie(y.op, y.file); });
  return rows;
}

json optional_number(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }

}  // namespace

DashboardData load_dashboard(const DashboardSources& sources) {
  DashboardData data;
  if (!sources.reports.empty()) {
    data.report = read_reports(sources.reports);
    for (const fs::path& file : sources.reports) data.report_files.push_back(file.string());
  }
  if (sources.bench_history) {
    if (!fs::is_directory(*sources.bench_history))
      throw std::runtime_error("bench history folder " + sources.bench_history->string() + " does not exist");
    data.bench = read_bench_history(*sources.bench_history);
    data.bench_dir = sources.bench_history->string();
  }
  if (sources.corpus) {
    data.corpus = read_corpus(*sources.corpus);
    data.corpus_dir = sources.corpus->string();
  }
  return data;
}

std::vector<FindingGroup> finding_groups(const Report& report) {
  std::map<std::tuple<std::string, std::string, std::string>, FindingGroup> groups;
  auto group = [&groups](const std::string& op, const std::string& pair, const std::string& kind) -> FindingGroup& {
    FindingGroup& g = groups[{op, pair, kind}];
    g.op = op, g.pair = pair, g.kind = kind;
    return g;
  };
  for (const PairCounts& c : report.counts) {
    for (const auto& [kind, n] : c.mismatches)
      if (n > 0) group(c.op, c.a + " vs " + c.b, kind).cases += n;
    // Cases that differed in bits within a contract's error bound: apart from the findings, never
    // a failure.
    if (c.bounded_agreements > 0) group(c.op, c.a + " vs " + c.b, "within_bound").cases += c.bounded_agreements;
  }
  for (const FindingRecord& f : report.findings) {
    FindingGroup& g = group(f.op, f.a + " vs " + f.b, f.kind);
    ++g.entries;
    g.failures += is_failure(f);
  }
  std::vector<FindingGroup> out;
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  return out;
}

int64_t ulp_bucket_order(std::string_view bucket) {
  constexpr int64_t kLast = INT64_MAX;
  if (bucket.empty() || !std::isdigit(static_cast<unsigned char>(bucket.front()))) return kLast;
  int64_t value = 0;
  for (const char ch : bucket) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) break;
    if (value > (kLast - 9) / 10) return kLast - 1;  // a bound past int64: after every other number
    value = value * 10 + (ch - '0');
  }
  return value;
}

std::vector<UlpBar> ulp_bars(const Report& report) {
  std::vector<UlpBar> bars;
  for (const PairCounts& c : report.counts)
    for (const auto& [bucket, n] : c.ulp_histogram)
      if (n > 0) bars.push_back({c.op, c.direction, c.a + " vs " + c.b, bucket, ulp_bucket_order(bucket), n});
  std::stable_sort(bars.begin(), bars.end(), [](const UlpBar& x, const UlpBar& y) {
    return std::tie(x.op, x.direction, x.pair, x.order) < std::tie(y.op, y.direction, y.pair, y.order);
  });
  return bars;
}

std::vector<CoverageCell> coverage_cells(const Report& report) {
  std::vector<CoverageCell> cells;
  for (const Coverage& c : report.coverage) {
    std::set<std::string> tags(c.required.begin(), c.required.end());
    for (const auto& [tag, n] : c.tags) tags.insert(tag);
    const std::set<std::string> required(c.required.begin(), c.required.end());
    for (const std::string& tag : tags) {
      auto it = c.tags.find(tag);
      cells.push_back({c.op, c.direction, tag, it == c.tags.end() ? 0 : it->second, c.cases, required.count(tag) > 0});
    }
  }
  return cells;
}

std::vector<BenchPoint> bench_points(const std::vector<BenchRun>& history) {
  std::vector<BenchPoint> points;
  for (const BenchRun& run : history)
    for (const BenchKernel& k : run.kernels)
      if (k.pct_of_copy)
        points.push_back({run.context.date, short_commit(run.context.commit), k.name, *k.pct_of_copy,
                          k.gb_per_s, k.copy_gb_per_s});
  return points;
}

std::string shell_quote(std::string_view text) {
  const bool safe = !text.empty() && std::all_of(text.begin(), text.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::string_view("/._-+:,=@%").find(ch) != std::string_view::npos;
  });
  if (safe) return std::string(text);
  std::string out = "'";
  for (const char ch : text) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string replay_command(const std::string& file) { return "bitparity replay " + shell_quote(file); }

json chart_data(const DashboardData& data) {
  json out = {{"findings", nullptr}, {"ulp", nullptr}, {"coverage", nullptr}, {"bench", nullptr}};
  if (data.report) {
    json findings = json::array(), ulp = json::array(), coverage = json::array();
    for (const FindingGroup& g : finding_groups(*data.report))
      if (g.cases > 0 || g.entries > 0)
        findings.push_back({{"op", g.op}, {"pair", g.pair}, {"kind", g.kind}, {"cases", g.cases}, {"entries", g.entries}});
    for (const UlpBar& b : ulp_bars(*data.report))
      ulp.push_back({{"panel", b.op + " " + b.direction + " | " + b.pair},
                     {"bucket", b.bucket},
                     {"order", b.order},
                     {"elements", b.elements}});
    for (const CoverageCell& c : coverage_cells(*data.report))
      coverage.push_back({{"target", c.op + " " + c.direction},
                          {"tag", c.tag},
                          {"cases", c.cases},
                          {"share", c.total > 0 ? static_cast<double>(c.cases) / static_cast<double>(c.total) : 0.0},
                          {"required", c.required},
                          {"missing", c.required && c.cases == 0}});
    out["findings"] = findings, out["ulp"] = ulp, out["coverage"] = coverage;
  }
  if (data.bench) {
    json points = json::array();
    for (const BenchPoint& p : bench_points(*data.bench))
      points.push_back({{"date", p.date},
                        {"commit", p.commit},
                        {"kernel", p.kernel},
                        {"pct_of_copy", p.pct_of_copy},
                        {"gb_per_s", optional_number(p.gb_per_s)},
                        {"copy_gb_per_s", optional_number(p.copy_gb_per_s)}});
    out["bench"] = points;
  }
  return out;
}

}  // namespace bitparity::reports
