// The report formats: JSON round trip and strictness, well-formed JUnit with the right counts,
// the text table, and merging shards.
#include <cctype>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "reports/report.h"

namespace bitparity::reports {
namespace {

FindingRecord finding(const std::string& signature, const std::string& name, const std::string& a, const std::string& b,
                      const std::string& pins) {
  FindingRecord f;
  f.signature = signature;
  f.file = "corpus/toy/" + name + ".json";
  f.op = "toy", f.direction = "fwd", f.a = a, f.b = b;
  f.kind = "bit_mismatch", f.output = "y", f.pins = pins;
  f.message = "toy fwd " + a + " vs " + b + ": not bit-identical\nFirst mismatch at y[0, 0]: <a> & \"b\"";
  f.first = {{"index", 0}, {"position", {0, 0}}, {"a_bits", "0x4040"}, {"b_bits", "0x4041"}, {"ulps", 1}};
  return f;
}

Report sample() {
  Report r;
  r.run.seed = 42;
  r.run.budget_seconds = 10;
  r.run.elapsed_seconds = 9.5;
  r.run.max_cases = 1000;
  r.run.shards = {"0/1"};
  r.run.backends = {"fake_gpu:exact", "ref:exact", "ref:sloppy"};
  r.run.pairs = {"ref:exact vs ref:sloppy", "fake_gpu:exact vs ref:exact"};
  r.run.contracts = {{"toy", "exact", "arithmetic"}, {"toy", "sloppy", ""}};
  r.run.commit = "0123456789abcdef0123456789abcdef01234567";
  r.run.date = "2026-05-04T12:00:00Z";
  r.run.device = "host test; backends: ref";
  r.run.tool_version = "bitparity 0.1.0";
  r.run.batch_failures = {{"fake_gpu:exact", 2}};
  PairCounts& divergence = counts_for(r, "toy", "fwd", "ref:exact", "ref:sloppy");
  divergence.cases = 500, divergence.agreements = 300, divergence.skips = {{"unmodelled", 20}};
  divergence.mismatches = {{"bit_mismatch", 180}}, divergence.new_findings = {{"bit_mismatch", 1}};
  divergence.known_findings = 179;
  PairCounts& gpu = counts_for(r, "toy", "fwd", "fake_gpu:exact", "ref:exact");
  gpu.cases = 500, gpu.agreements = 499, gpu.mismatches = {{"bit_mismatch", 1}},
  gpu.new_findings = {{"bit_mismatch", 1}};
  r.counts[0].ulp_histogram = {{"1", 150}, {"3-4", 25}, {"nan", 5}};  // counts_for may have moved the rows
  r.counts[1].ulp_histogram = {{"0", 2}};
  Coverage& fwd = coverage_for(r, "toy", "fwd");
  fwd.cases = 500, fwd.tags = {{"rows=0", 40}, {"nan", 120}}, fwd.required = {"nan", "rows<17", "rows=0"};
  r.findings = {finding("toy|divergence", "3f9a0c1d2e3f4a5b", "ref:exact", "ref:sloppy", "divergence"),
                finding("toy|bug", "00aa11bb22cc33dd", "fake_gpu:exact", "ref:exact", "open")};
  return r;
}

TEST(ReportJson, RoundTrips) {
  const Report report = sample();
  const nlohmann::json j = report_to_json(report);
  EXPECT_EQ(j["format"], "bitparity-report/1");
  EXPECT_EQ(j["totals"]["cases"], 1000);
  EXPECT_EQ(j["totals"]["mismatches"]["bit_mismatch"], 181);
  EXPECT_EQ(report_from_json(nlohmann::json::parse(j.dump())), report);
  EXPECT_EQ(j["run"]["batch_failures"]["fake_gpu:exact"], 2);
  // A count that is not one is an error naming the field.
  nlohmann::json broken = j;
  broken["run"]["batch_failures"]["fake_gpu:exact"] = -1;
  EXPECT_THROW(report_from_json(broken), std::exception);
}

TEST(ReportJson, CarriesUlpHistogramsAndCoverage) {
  const nlohmann::json j = report_to_json(sample());
  EXPECT_EQ(j["counts"][0]["ulp_histogram"]["3-4"], 25);
  EXPECT_EQ(j["coverage"][0]["tags"]["nan"], 120);
  EXPECT_EQ(j["coverage"][0]["required"], nlohmann::json({"nan", "rows<17", "rows=0"}));
  const Report back = report_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_EQ(back.coverage.size(), 1u);
  EXPECT_EQ(back.coverage[0].cases, 500);
  EXPECT_EQ(back.counts[0].ulp_histogram.at("nan"), 5);
}

// A report as campaigns wrote it before ulp histograms and coverage were kept, written by hand.
TEST(ReportJson, AReportWithoutTheNewKeysStillReads) {
  const nlohmann::json old = nlohmann::json::parse(R"({
    "format": "bitparity-report/1",
    "run": {"seed": 7, "budget_seconds": 60, "elapsed_seconds": 60.2, "max_cases": null, "shards": ["0/1"],
            "backends": ["ref:a", "ref:b"], "pairs": ["ref:a vs ref:b"], "contracts": [],
            "commit": "abc", "date": "2026-11-01T00:00:00Z", "device": "host", "tool_version": "bitparity 0.1.0",
            "interrupted": false, "error": null},
    "totals": {},
    "counts": [{"op": "toy", "direction": "fwd", "pair": ["ref:a", "ref:b"], "cases": 12, "agreements": 10,
                "skips": {}, "mismatches": {"bit_mismatch": 2}, "new_findings": {"bit_mismatch": 1},
                "known_findings": 1}],
    "findings": []})");
  const Report r = report_from_json(old);
  ASSERT_EQ(r.counts.size(), 1u);
  EXPECT_EQ(r.counts[0].cases, 12);
  EXPECT_TRUE(r.counts[0].ulp_histogram.empty());
  EXPECT_TRUE(r.coverage.empty());
  EXPECT_TRUE(r.run.batch_failures.empty());
}

TEST(ReportJson, MalformedCoverageAndHistogramsNameTheField) {
  nlohmann::json j = report_to_json(sample());
  j["coverage"][0]["tags"]["nan"] = 501;  // more cases in a class than cases
  try {
    report_from_json(j);
    FAIL() << "accepted a tag counting more cases than the row has";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.field(), "coverage[0].tags");
  }
  j = report_to_json(sample());
  j["counts"][0]["ulp_histogram"]["1"] = -3;
  EXPECT_THROW(report_from_json(j), ParseError);
  j = report_to_json(sample());
  j["coverage"].push_back(j["coverage"][0]);  // the same op and direction twice
  EXPECT_THROW(report_from_json(j), ParseError);
  j = report_to_json(sample());
  j["coverage"] = "everything";
  EXPECT_THROW(report_from_json(j), ParseError);
}

// A pair's counts are parts of its cases: each case one agreement, skip or mismatch, each mismatch
// known or new. A report whose parts exceed the whole is refused, naming the field.
TEST(ReportJson, CountsThatExceedTheirCasesAreRefused) {
  auto field_of = [](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = report_to_json(sample());
    edit(j);
    try {
      report_from_json(j);
    } catch (const ParseError& e) {
      return e.field();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(field_of([](nlohmann::json&) {}), "accepted");
  EXPECT_EQ(field_of([](nlohmann::json& j) { j["counts"][0]["agreements"] = 1000; }), "counts[0].cases");
  EXPECT_EQ(field_of([](nlohmann::json& j) { j["counts"][0]["cases"] = 499; }), "counts[0].cases");
  EXPECT_EQ(field_of([](nlohmann::json& j) { j["counts"][0]["skips"]["made_up"] = 1; }), "counts[0].cases");
  EXPECT_EQ(field_of([](nlohmann::json& j) { j["counts"][0]["known_findings"] = 180; }), "counts[0].mismatches");
  EXPECT_EQ(field_of([](nlohmann::json& j) { j["counts"][0]["new_findings"]["bit_mismatch"] = 500; }),
            "counts[0].mismatches");
  // Sums that would wrap are refused, not compared after wrapping.
  EXPECT_EQ(field_of([](nlohmann::json& j) {
              j["counts"][0]["agreements"] = std::numeric_limits<int64_t>::max();
              j["counts"][0]["cases"] = std::numeric_limits<int64_t>::max();
            }),
            "counts[0]");
  // Parts short of the whole are accepted: only parts past it are impossible.
  EXPECT_EQ(field_of([](nlohmann::json& j) { j["counts"][0]["cases"] = 501; }), "accepted");
}

TEST(ReportJson, MalformedDocumentsNameTheField) {
  nlohmann::json j = report_to_json(sample());
  j["counts"][1].erase("cases");
  try {
    report_from_json(j);
    FAIL() << "accepted a count row without cases";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.field(), "counts[1].cases");
  }
  j = report_to_json(sample());
  j["findings"][0]["pair"] = {"ref:exact"};
  EXPECT_THROW(report_from_json(j), ParseError);
  j = report_to_json(sample());
  j["format"] = "bitparity-report/0";
  EXPECT_THROW(report_from_json(j), ParseError);
}

// A small XML well-formedness check: nested, closed tags; quoted attributes; only the five
// predefined entities; no raw '<' or '&' in text. Returns each element's attributes by tag name.
class XmlChecker {
 public:
  explicit XmlChecker(std::string text) : s_(std::move(text)) {}

  bool check() {
    skip_space();
    if (s_.compare(i_, 5, "<?xml") == 0) i_ = s_.find("?>", i_) + 2;
    skip_space();
    if (!element()) return false;
    skip_space();
    return i_ == s_.size();
  }
  std::multimap<std::string, std::map<std::string, std::string>> elements;

 private:
  bool element() {
    if (i_ >= s_.size() || s_[i_] != '<') return false;
    ++i_;
    const std::string tag = name();
    if (tag.empty()) return false;
    std::map<std::string, std::string> attrs;
    for (;;) {
      skip_space();
      if (s_.compare(i_, 2, "/>") == 0) return i_ += 2, elements.insert({tag, attrs}), true;
      if (i_ < s_.size() && s_[i_] == '>') break;
      const std::string key = name();
      if (key.empty() || s_.compare(i_, 2, "=\"") != 0) return false;
      i_ += 2;
      const size_t end = s_.find('"', i_);
      if (end == std::string::npos || !text_ok(s_.substr(i_, end - i_))) return false;
      attrs[key] = s_.substr(i_, end - i_);
      i_ = end + 1;
    }
    ++i_;
    elements.insert({tag, attrs});
    for (;;) {
      const size_t lt = s_.find('<', i_);
      if (lt == std::string::npos || !text_ok(s_.substr(i_, lt - i_))) return false;
      i_ = lt;
      if (s_.compare(i_, 2, "</") == 0) {
        i_ += 2;
        if (name() != tag || i_ >= s_.size() || s_[i_] != '>') return false;
        ++i_;
        return true;
      }
      if (!element()) return false;
    }
  }

  static bool text_ok(const std::string& text) {
    for (size_t k = 0; k < text.size(); ++k) {
      if (text[k] == '<') return false;
      if (text[k] != '&') continue;
      bool known = false;
      for (const char* entity : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
        known = known || text.compare(k, std::strlen(entity), entity) == 0;
      if (!known) return false;
    }
    return true;
  }

  std::string name() {
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' || s_[i_] == '_')) ++i_;
    return s_.substr(start, i_ - start);
  }

  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }

  std::string s_;
  size_t i_ = 0;
};

TEST(JUnit, IsWellFormedAndCountsOnlyBugsAsFailures) {
  const std::string xml = junit_xml(sample());
  XmlChecker checker(xml);
  ASSERT_TRUE(checker.check()) << xml;
  const auto suite = checker.elements.find("testsuite");
  ASSERT_NE(suite, checker.elements.end());
  EXPECT_EQ(suite->second.at("tests"), "2");     // one testcase per op x pair
  EXPECT_EQ(suite->second.at("failures"), "1");  // the same-contract finding only
  EXPECT_EQ(checker.elements.count("failure"), 1u);
  EXPECT_EQ(checker.elements.find("failure")->second.at("type"), "bit_mismatch");
  EXPECT_NE(xml.find("divergence (documented, not a failure): toy|divergence"), std::string::npos);
  EXPECT_NE(xml.find("&lt;a&gt; &amp; &quot;b&quot;"), std::string::npos);  // messages are escaped
  EXPECT_NE(xml.find("To reproduce: bitparity replay corpus/toy/00aa11bb22cc33dd.json"), std::string::npos);
}

TEST(JUnit, AllSkippedPairIsReportedAsSkipped) {
  Report r;
  PairCounts& c = counts_for(r, "toy", "fwd", "ref:exact", "ref:sloppy");
  c.cases = 3, c.skips = {{"unmodelled", 3}};
  XmlChecker checker(junit_xml(r));
  ASSERT_TRUE(checker.check());
  EXPECT_EQ(checker.elements.find("testsuite")->second.at("skipped"), "1");
  EXPECT_EQ(checker.elements.count("skipped"), 1u);
}

TEST(TextTable, ShowsEveryPairAndTheTotals) {
  const std::string table = text_table(sample());
  EXPECT_NE(table.find("ref:exact vs ref:sloppy"), std::string::npos) << table;
  EXPECT_NE(table.find("fake_gpu:exact vs ref:exact"), std::string::npos) << table;
  const size_t total = table.find("total");
  ASSERT_NE(total, std::string::npos);
  EXPECT_NE(table.find("1000", total), std::string::npos) << table;  // cases summed
  EXPECT_NE(table.find("181", total), std::string::npos) << table;   // bit mismatches summed
}

// A pair judged by a contract's error bound: its bounded agreements are counted apart from the
// bit-exact ones, in the JSON, the table and the merge, never as findings.
TEST(BoundedAgreements, AreCountedApartFromTheBitExactOnes) {
  Report r = sample();
  PairCounts& bounded = counts_for(r, "toy", "fwd", "fake_gpu:sloppy", "ref:sloppy");
  bounded.cases = 70, bounded.agreements = 20, bounded.bounded_agreements = 43;
  bounded.mismatches = {{"ulp_over_budget", 7}};
  const nlohmann::json j = report_to_json(r);
  EXPECT_EQ(j["totals"]["bounded_agreements"], 43);
  EXPECT_EQ(j["totals"]["agreements"], 300 + 499 + 20);
  EXPECT_EQ(report_from_json(nlohmann::json::parse(j.dump())), r);
  const std::string table = text_table(r);
  EXPECT_NE(table.find("in bound"), std::string::npos) << table;
  EXPECT_NE(table.find("ulp_over_budget"), std::string::npos) << table;
  const size_t row = table.find("fake_gpu:sloppy vs ref:sloppy");
  ASSERT_NE(row, std::string::npos) << table;
  const std::string line = table.substr(row, table.find('\n', row) - row);
  EXPECT_NE(line.find("  43  "), std::string::npos) << line;
  EXPECT_EQ(merge_reports({r, r}).counts.back().bounded_agreements, 86);
}

TEST(Merge, SumsCountsAndDeduplicatesFindings) {
  Report a = sample(), b = sample();
  a.run.shards = {"0/2"}, b.run.shards = {"1/2"};
  b.run.elapsed_seconds = 12;
  b.run.batch_failures = {{"fake_gpu:exact", 3}, {"cuda:exact", 1}};
  b.findings.pop_back();  // shard 1 found only the divergence, which shard 0 found too
  const Report merged = merge_reports({a, b});
  EXPECT_EQ(merged.run.shards, (std::vector<std::string>{"0/2", "1/2"}));
  EXPECT_EQ(merged.run.elapsed_seconds, 12);
  ASSERT_EQ(merged.findings.size(), 2u);
  ASSERT_EQ(merged.counts.size(), 2u);
  const PairCounts& divergence = merged.counts[0];
  EXPECT_EQ(divergence.cases, 1000);
  EXPECT_EQ(divergence.mismatches.at("bit_mismatch"), 360);
  EXPECT_EQ(divergence.new_findings.at("bit_mismatch"), 1);  // one signature, written once
  EXPECT_EQ(divergence.known_findings, 2 * 179 + 1);         // the repeat is a known finding
  EXPECT_EQ(merged.counts[1].new_findings.at("bit_mismatch"), 1);
  EXPECT_EQ(divergence.ulp_histogram.at("1"), 300);  // histograms summed bucket by bucket
  EXPECT_EQ(divergence.ulp_histogram.at("nan"), 10);
  ASSERT_EQ(merged.coverage.size(), 1u);
  EXPECT_EQ(merged.coverage[0].cases, 1000);
  EXPECT_EQ(merged.coverage[0].tags.at("rows=0"), 80);
  EXPECT_EQ(merged.run.batch_failures, (std::map<std::string, int64_t>{{"cuda:exact", 1}, {"fake_gpu:exact", 5}}));  // summed
}

TEST(Merge, JoinsTheRequiredTagsOfShards) {
  Report a = sample(), b = sample();
  b.coverage[0].required = {"clamp<=0"};
  b.coverage.push_back({"toy", "bwd", 3, {{"nan", 1}}, {}});
  const Report merged = merge_reports({a, b});
  ASSERT_EQ(merged.coverage.size(), 2u);
  EXPECT_EQ(merged.coverage[0].required, (std::vector<std::string>{"clamp<=0", "nan", "rows<17", "rows=0"}));
  EXPECT_EQ(merged.coverage[1].direction, "bwd");
  EXPECT_EQ(merged.coverage[1].cases, 3);
}

// A corpus write that failed ends a run early: every view of the summary says so.
TEST(RunError, IsKeptInEveryViewAndInMerges) {
  Report stopped = sample();
  stopped.run.error = "cannot write the corpus entry: No space left on device";
  const nlohmann::json j = report_to_json(stopped);
  EXPECT_EQ(j["run"]["error"], "cannot write the corpus entry: No space left on device");
  EXPECT_EQ(report_from_json(nlohmann::json::parse(j.dump())), stopped);
  EXPECT_TRUE(report_to_json(sample())["run"]["error"].is_null());
  nlohmann::json older = report_to_json(sample());
  older["run"].erase("error");  // a report from before the field existed
  EXPECT_EQ(report_from_json(older), sample());
  older["run"]["error"] = 3;
  EXPECT_THROW(report_from_json(older), ParseError);

  const std::string xml = junit_xml(stopped);
  EXPECT_NE(xml.find("errors=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<error message=\"cannot write the corpus entry: No space left on device\"/>"),
            std::string::npos)
      << xml;
  EXPECT_NE(text_table(stopped).find("the run stopped early: cannot write"), std::string::npos);

  Report other = sample();
  other.run.shards = {"1/2"};
  stopped.run.shards = {"0/2"};
  const Report merged = merge_reports({other, stopped});
  ASSERT_TRUE(merged.run.error.has_value());
  EXPECT_EQ(*merged.run.error, "shard 0/2: cannot write the corpus entry: No space left on device");
  EXPECT_FALSE(merge_reports({other, sample()}).run.error.has_value());
}

}  // namespace
}  // namespace bitparity::reports
