// The dashboard's data and page on the hand-written fixtures of reports/dashboard/testdata: what
// each section counts and groups, the replay commands, missing and broken sources, and that no
// string from a file reaches the page as markup. The page in a browser: render_test.mjs.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>

#include <gtest/gtest.h>

#include "core/error.h"
#include "reports/dashboard_data.h"
#include "reports/dashboard_html.h"

namespace bitparity::reports {
namespace {

namespace fs = std::filesystem;

const fs::path kData = BITPARITY_DASHBOARD_TESTDATA;

DashboardSources all_sources(const fs::path& root = kData) {
  return {{root / "report.json"}, root / "bench", root / "corpus"};
}

// Stand-ins for the chart libraries: the page's text, not a browser, is under test here.
const ChartAssets kFakeAssets{"/*vega*/", "/*vega-lite*/", "/*vega-embed*/"};

std::string render(const DashboardData& data) { return render_dashboard(data, kFakeAssets, {"t", "now", "N0nce"}); }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(DashboardData, GroupsFindingsByOpPairAndKind) {
  const DashboardData data = load_dashboard(all_sources());
  ASSERT_TRUE(data.report);
  const std::vector<FindingGroup> groups = finding_groups(*data.report);
  // By hand from report.json: four (op, pair, kind) groups, cases from counts, entries from findings.
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].op, "swiglu");
  EXPECT_EQ(groups[0].pair, "ref:megatron_eager vs ref:megatron_unfused");
  EXPECT_EQ(groups[0].cases, 10);
  EXPECT_EQ(groups[0].entries, 1);
  EXPECT_EQ(groups[0].failures, 0);
  EXPECT_EQ(groups[1].pair, "cuda:paddle_fused vs ref:paddle_fused");  // "c" sorts before "r"
  EXPECT_EQ(groups[1].cases, 1);
  EXPECT_EQ(groups[1].failures, 1);  // pinned open: a bug
  EXPECT_EQ(groups[2].kind, "bit_mismatch");
  EXPECT_EQ(groups[2].cases, 5);
  EXPECT_EQ(groups[3].kind, "error_mismatch");
  EXPECT_EQ(groups[3].cases, 2);
  EXPECT_EQ(groups[3].entries, 1);
}

TEST(DashboardData, OrdersUlpBucketsByTheirLowerBound) {
  EXPECT_LT(ulp_bucket_order("0"), ulp_bucket_order("1"));
  EXPECT_LT(ulp_bucket_order("2"), ulp_bucket_order("3-4"));
  EXPECT_LT(ulp_bucket_order("5-8"), ulp_bucket_order("17-32"));  // not the string order
  EXPECT_LT(ulp_bucket_order("9223372036854775809-18446744073709551616"), ulp_bucket_order("nan"));
  const DashboardData data = load_dashboard(all_sources());
  std::vector<std::string> buckets;
  for (const UlpBar& b : ulp_bars(*data.report))
    if (b.pair == "ref:megatron_eager vs ref:paddle_fused") buckets.push_back(b.bucket);
  EXPECT_EQ(buckets, (std::vector<std::string>{"1", "3-4", "17-32"}));
  EXPECT_EQ(ulp_bars(*data.report).size(), 7u);
}

TEST(DashboardData, CoverageShowsRequiredClassesThatNoCaseReached) {
  const DashboardData data = load_dashboard(all_sources());
  const std::vector<CoverageCell> cells = coverage_cells(*data.report);
  ASSERT_EQ(cells.size(), 8u);  // swiglu: 4 tags seen + "subnormal" required; swiglu_scale: 3
  const CoverageCell* subnormal = nullptr;
  for (const CoverageCell& c : cells)
    if (c.tag == "subnormal") subnormal = &c;
  ASSERT_NE(subnormal, nullptr);
  EXPECT_EQ(subnormal->cases, 0);
  EXPECT_EQ(subnormal->total, 40);
  EXPECT_TRUE(subnormal->required);
  const nlohmann::json rows = chart_data(data)["coverage"];
  int missing = 0;
  for (const auto& row : rows) missing += row["missing"].get<bool>();
  EXPECT_EQ(missing, 1);
  EXPECT_EQ(rows[0]["target"], "swiglu bwd");
  EXPECT_DOUBLE_EQ(rows[0]["share"].get<double>(), 6.0 / 40);  // clamp<=0: 6 of 40
}

TEST(DashboardData, BenchPointsFollowTheHistoryOldestFirst) {
  const DashboardData data = load_dashboard(all_sources());
  ASSERT_TRUE(data.bench);
  ASSERT_EQ(data.bench->size(), 3u);
  const std::vector<BenchPoint> points = bench_points(*data.bench);
  ASSERT_EQ(points.size(), 6u);
  // 3 MB in a median of 1000, 960 and 937.5 ns against a 4000 GB/s copy; 2 MB in 1000, 800, 1000 ns.
  const double expected[] = {75, 50, 78.125, 62.5, 80, 50};
  for (size_t i = 0; i < points.size(); ++i) EXPECT_DOUBLE_EQ(points[i].pct_of_copy, expected[i]) << i;
  EXPECT_EQ(points[0].date, "2026-11-30T10:00:00Z");
  EXPECT_EQ(points[0].commit, "1111111");
  EXPECT_EQ(points[1].kernel, "permute_fwd/megatron_eager/tokens4096/ilp:2");
}

TEST(DashboardData, CorpusEntriesCarryBitsArbitrationAndReplay) {
  const DashboardData data = load_dashboard(all_sources());
  ASSERT_TRUE(data.corpus);
  ASSERT_EQ(data.corpus->size(), 2u);
  const CorpusRow& swiglu = data.corpus->at(0);
  EXPECT_EQ(swiglu.op, "swiglu");
  EXPECT_EQ(swiglu.a, "ref:megatron_eager");
  EXPECT_EQ(swiglu.b, "ref:megatron_unfused");
  EXPECT_EQ(swiglu.pins, "divergence");
  EXPECT_EQ(swiglu.first["b_bits"], "0x80000000");
  EXPECT_EQ(swiglu.arbitration["closer"], "tie");
  ASSERT_EQ(swiglu.inputs.size(), 2u);
  EXPECT_EQ(swiglu.inputs[1].name, "y");
  EXPECT_EQ(swiglu.inputs[1].shape, "[1, 2]");
  EXPECT_EQ(swiglu.inputs[1].hex, "0000000000000000");
  EXPECT_EQ(swiglu.attrs, "{\"clamp\":-1.0}");
  EXPECT_EQ(swiglu.provenance,
            "seed 11, case 1, shard 0/1, on host vm; backends: ref, cuda (unavailable: no CUDA device: CUDA driver "
            "version is insufficient for CUDA runtime version), commit abade01, 2026-11-29T19:48:13Z");
  const std::string file = (kData / "corpus" / "swiglu" / "7eb9f4442988bd8d.json").string();
  EXPECT_EQ(swiglu.replay, "bitparity replay " + file);
  EXPECT_TRUE(data.corpus->at(1).arbitration.is_null());  // this entry has no oracle verdict
}

// The project's own corpus: campaign entries, hand-written ones (an author, no seed) and the GPU's
// invariance entries (a device, the rows cut out) all load, each with its provenance shown.
TEST(DashboardData, TheProjectsOwnCorpusLoads) {
  DashboardSources sources;
  sources.corpus = fs::path(BITPARITY_SOURCE_DIR) / "corpus";
  const DashboardData data = load_dashboard(sources);
  ASSERT_TRUE(data.corpus);
  ASSERT_GE(data.corpus->size(), 30u);
  bool hand_written = false, on_a_gpu = false;
  for (const CorpusRow& row : *data.corpus) {
    EXPECT_FALSE(row.provenance.empty()) << row.file;
    hand_written = hand_written || row.provenance.rfind("by ", 0) == 0;
    on_a_gpu = on_a_gpu || row.provenance.find("on NVIDIA H200") != std::string::npos;
  }
  EXPECT_TRUE(hand_written);
  EXPECT_TRUE(on_a_gpu);
}

TEST(DashboardData, ReplayCommandsQuoteForTheShell) {
  EXPECT_EQ(replay_command("corpus/swiglu/7eb9.json"), "bitparity replay corpus/swiglu/7eb9.json");
  EXPECT_EQ(replay_command("my corpus/a.json"), "bitparity replay 'my corpus/a.json'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$(rm -rf ~)"), "'$(rm -rf ~)'");
  EXPECT_EQ(shell_quote(""), "''");
}

TEST(DashboardData, AbsentSourcesAreAbsentSections) {
  const DashboardData data = load_dashboard({});
  EXPECT_FALSE(data.report);
  EXPECT_FALSE(data.bench);
  EXPECT_FALSE(data.corpus);
  const std::string html = render(data);
  for (std::string_view id : kDashboardSections)
    EXPECT_NE(html.find("<section id=\"" + std::string(id) + "\">"), std::string::npos) << id;
  EXPECT_NE(html.find("No bench history was given"), std::string::npos);
  EXPECT_NE(html.find("No campaign report was given"), std::string::npos);
  EXPECT_NE(html.find("No corpus was given"), std::string::npos);
  EXPECT_EQ(html.find("class=\"chart\""), std::string::npos);  // nothing to draw, so no chart
  const nlohmann::json rows = chart_data(data);
  EXPECT_TRUE(rows["findings"].is_null() && rows["bench"].is_null());
}

TEST(DashboardData, BrokenOrMissingSourcesNameTheFile) {
  const fs::path dir = fs::temp_directory_path() / ("bitparity_dashboard_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "cut.json") << R"({"format": "bitparity-report/1", "run": {"seed": )";
  EXPECT_EQ(message_of([&] { load_dashboard({{dir / "cut.json"}, {}, {}}); }).rfind((dir / "cut.json").string() + ": ", 0),
            0u);
  std::ofstream(dir / "wrong.json") << R"({"format": "bitparity-report/1", "run": []})";
  const std::string wrong = message_of([&] { load_dashboard({{dir / "wrong.json"}, {}, {}}); });
  EXPECT_NE(wrong.find("wrong.json: run"), std::string::npos) << wrong;
  EXPECT_NE(message_of([&] { load_dashboard({{}, dir / "nope", {}}); }).find("nope does not exist"), std::string::npos);
  EXPECT_NE(message_of([&] { load_dashboard({{}, {}, dir / "nope"}); }).find("nope does not exist"), std::string::npos);

  // Reports of two campaigns cannot be summed.
  nlohmann::json other = nlohmann::json::parse(std::ifstream(kData / "report.json"));
  other["run"]["seed"] = 12;
  std::ofstream(dir / "other.json") << other.dump();
  const std::string mixed = message_of([&] { load_dashboard({{kData / "report.json", dir / "other.json"}, {}, {}}); });
  EXPECT_NE(mixed.find("other.json: seed 12 differs"), std::string::npos) << mixed;

  // Nor one report twice (every count doubled), nor counts whose sum wraps: what `merge` refuses.
  const std::string twice = message_of([&] { load_dashboard({{kData / "report.json", kData / "report.json"}, {}, {}}); });
  EXPECT_NE(twice.find("--report: "), std::string::npos) << twice;
  nlohmann::json big = nlohmann::json::parse(std::ifstream(kData / "report.json"));
  big["counts"][0]["cases"] = std::numeric_limits<int64_t>::max();
  big["run"]["shards"] = {"0/2"};
  std::ofstream(dir / "big0.json") << big.dump();
  big["run"]["shards"] = {"1/2"};
  std::ofstream(dir / "big1.json") << big.dump();
  const std::string wraps = message_of([&] { load_dashboard({{dir / "big0.json", dir / "big1.json"}, {}, {}}); });
  EXPECT_NE(wraps.find("overflow"), std::string::npos) << wraps;

  // A corpus entry without its finding.
  fs::create_directories(dir / "corpus" / "swiglu");
  nlohmann::json entry = nlohmann::json::parse(std::ifstream(kData / "corpus" / "swiglu" / "7eb9f4442988bd8d.json"));
  entry["finding"].erase("pair");
  std::ofstream(dir / "corpus" / "swiglu" / "e.json") << entry.dump();
  const std::string broken = message_of([&] { load_dashboard({{}, {}, dir / "corpus"}); });
  EXPECT_NE(broken.find("e.json: finding.pair: missing"), std::string::npos) << broken;
  fs::remove_all(dir);
}

TEST(DashboardData, ShardsOfOneCampaignAreMerged) {
  const fs::path dir = fs::temp_directory_path() / ("bitparity_dashboard_shards_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json shard = nlohmann::json::parse(std::ifstream(kData / "report.json"));
  shard["run"]["shards"] = {"0/2"};
  std::ofstream(dir / "s0.json") << shard.dump();
  shard["run"]["shards"] = {"1/2"};
  std::ofstream(dir / "s1.json") << shard.dump();
  const DashboardData data = load_dashboard({{dir / "s0.json", dir / "s1.json"}, {}, {}});
  EXPECT_EQ(data.report->run.shards, (std::vector<std::string>{"0/2", "1/2"}));
  EXPECT_EQ(finding_groups(*data.report)[0].cases, 20);
  EXPECT_EQ(data.report->coverage[0].cases, 80);
  fs::remove_all(dir);
}

// Cases that differed in bits within a contract's error bound are a group of their own, apart from
// the findings, and never a failure.
TEST(DashboardData, BoundedAgreementsAreAGroupApart) {
  reports::Report r;
  reports::PairCounts c;
  c.op = "toy", c.direction = "fwd", c.a = "fake_gpu:sloppy", c.b = "ref:sloppy";
  c.cases = 50, c.agreements = 10, c.bounded_agreements = 38, c.mismatches = {{"ulp_over_budget", 2}};
  r.counts = {c};
  const std::vector<FindingGroup> groups = finding_groups(r);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].kind, "ulp_over_budget");
  EXPECT_EQ(groups[0].cases, 2);
  EXPECT_EQ(groups[1].kind, "within_bound");
  EXPECT_EQ(groups[1].cases, 38);
  EXPECT_EQ(groups[1].failures, 0);
}

TEST(DashboardHtml, EscapesTextAndAttributes) {
  EXPECT_EQ(html_escape("<a href=\"x\" title='y'>&</a>"),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;");
}

TEST(DashboardHtml, ScriptJsonCannotEndItsElement) {
  const nlohmann::json value = {{"op", "</script><script>alert(1)</script>"}, {"x", "a & b <!-- c"}};
  const std::string text = script_json(value);
  EXPECT_EQ(text.find('<'), std::string::npos) << text;
  EXPECT_EQ(text.find('>'), std::string::npos) << text;
  EXPECT_EQ(nlohmann::json::parse(text), value);  // the same data once parsed
}

TEST(DashboardHtml, InlineScriptsCannotEndTheirElement) {
  EXPECT_EQ(inline_script("var s = '</script>'; var t = '</SCRIPT'; var c = '<!--';"),
            "var s = '<\\/script>'; var t = '<\\/SCRIPT'; var c = '<\\!--';");
  EXPECT_EQ(inline_script("a < b && c </ d"), "a < b && c </ d");  // only those two forms change
  const std::string html = render_dashboard({}, {"'</script><b>'", "", ""}, {"t", "", "N"});
  EXPECT_EQ(html.find("</script><b>"), std::string::npos);
}

// Every string of the hostile fixtures (report, corpus entry, bench run) carries markup that would
// run a script or add an element if it were written as it is.
TEST(DashboardHtml, HostileStringsFromFilesStayText) {
  const DashboardData data = load_dashboard(all_sources(kData / "hostile"));
  const std::string html = render(data);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<b>bold"), std::string::npos);
  EXPECT_EQ(html.find("onerror=\""), std::string::npos);
  EXPECT_NE(html.find("&quot;&gt;&lt;svg onload="), std::string::npos);  // the device closes no attribute
  // The only <script> elements are the page's own, each with the nonce, or the data block.
  const std::regex script_tag("<script[^>]*>", std::regex::icase);
  for (auto it = std::sregex_iterator(html.begin(), html.end(), script_tag); it != std::sregex_iterator(); ++it)
    EXPECT_TRUE(it->str() == "<script nonce=\"N0nce\">" ||
                it->str() == "<script type=\"application/json\" id=\"bitparity-data\">")
        << it->str();
  // The text is there, escaped: a reader sees what the file says.
  EXPECT_NE(html.find("&lt;/script&gt;&lt;script&gt;document.title=&#39;PWNED&#39;"), std::string::npos);
  EXPECT_NE(html.find("bitparity replay"), std::string::npos);
  EXPECT_NE(html.find("&#39;corpus/&#39;\\&#39;&#39;; rm -rf ~; &#39;\\&#39;&#39;.json&#39;"), std::string::npos);
}

TEST(DashboardHtml, EverySectionAndChartIsPresentWithAllSources) {
  const std::string html = render(load_dashboard(all_sources()));
  for (std::string_view id : kDashboardSections)
    EXPECT_NE(html.find("<section id=\"" + std::string(id) + "\">"), std::string::npos) << id;
  for (const char* chart : {"bench", "findings", "ulp", "coverage"})
    EXPECT_NE(html.find("data-chart=\"" + std::string(chart) + "\""), std::string::npos) << chart;
  EXPECT_NE(html.find("script-src 'nonce-N0nce' 'unsafe-eval'"), std::string::npos);
  EXPECT_NE(html.find("/*vega-embed*/"), std::string::npos);
  EXPECT_NE(html.find("bitparity replay &#39;my corpus/swiglu_scale/00aa11bb22cc33dd.json&#39;"), std::string::npos);
  EXPECT_NE(html.find("permute_fwd/megatron_eager/tokens4096/ilp:2"), std::string::npos);  // latest run's table
  // The latest run against the one before: swiglu 78.125 -> 80 % of copy, permute 62.5 -> 50.
  EXPECT_NE(html.find("<td>80.0</td><td>+1.9</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>50.0</td><td>-12.5</td>"), std::string::npos);
}

}  // namespace
}  // namespace bitparity::reports
