// The command line end to end on the fake "toy" registry: exit codes, messages, files.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli/app.h"
#include "core/case_json.h"
#include "core/safetensors.h"
#include "corpus/entry.h"
#include "corpus/reproducer.h"
#include "reports/dashboard_assets.h"
#include "reports/report.h"
#include "testing/toy_op.h"

namespace bitparity::cli {
namespace {

namespace fs = std::filesystem;

struct Result {
  int code = 0;
  std::string out, err;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bitparity_cli_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    testing::set_fake_gpu_available(true);
  }

  Result run(std::vector<std::string> args) {
    args.insert(args.begin(), "bitparity");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    Result r;
    r.code = run_command_line(registry_, static_cast<int>(argv.size()), argv.data());
    r.out = ::testing::internal::GetCapturedStdout();
    r.err = ::testing::internal::GetCapturedStderr();
    return r;
  }

  std::string write_case(const std::string& name, const Case& c) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << case_to_json(c).dump();
    return path.string();
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  Registry registry_ = testing::make_fake_registry();
  fs::path dir_;
};

TEST_F(CliTest, ListShowsOpsContractsBackendsAndImplementations) {
  testing::set_fake_gpu_available(false);
  const Result r = run({"list"});
  EXPECT_EQ(r.code, 0);
  for (const char* text : {"toy - y = x * scale", "fwd: inputs x; outputs y", "scale (float)",
                           "exact: one rounding [derived from arithmetic]",
                           "fake_gpu - test double of a GPU backend: "
                           "unavailable (no fake device)",
                           "implementations: fake_gpu:exact, ref:exact"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
}

TEST_F(CliTest, RunWritesTheCaseWithItsOutputs) {
  const std::string c = write_case("case.json", testing::toy_case(1, 2, {3.0f, 1.0f}, 2.0));
  Result r = run({"run", "--case", c, "--backend", "ref:exact"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["outputs"]["y"]["hex"], "40c04000");  // bf16 6.0, 2.0
  EXPECT_EQ(j["inputs"]["x"]["hex"], "40403f80");

  r = run({"run", "--case", c, "--backend", "ref:exact", "--out", path("out.json")});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(fs::exists(path("out.json")));
}

TEST_F(CliTest, RunReportsRejectsAndParseErrorsWithExitTwo) {
  Case rank3 = testing::toy_case(1, 1, {});
  rank3.inputs["x"] = Tensor(DType::kBF16, {1, 1, 1});
  Result r = run({"run", "--case", write_case("rank3.json", rank3), "--backend", "ref:exact"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error (shape): x must have rank 2; got [1, 1, 1]\n");

  const std::string broken = path("broken.json");
  std::ofstream(broken) << R"({"format": "bitparity-case/1", "op": "toy", "direction": "fwd", "inputs": {}})";
  r = run({"run", "--case", broken, "--backend", "ref:exact"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(broken + ": inputs.x: missing required input"), std::string::npos) << r.err;

  r = run({"run", "--case", path("missing.json"), "--backend", "ref:exact"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot read"), std::string::npos) << r.err;

  r = run({"run", "--case", broken, "--backend", "exact"});
  EXPECT_EQ(r.code, 2);
}

TEST_F(CliTest, DiffExitsByVerdictAndArbitrates) {
  Result r = run(
      {"diff", "--case", write_case("three.json", testing::toy_case(1, 2, {3.0f, 1.0f})), "ref:exact", "ref:sloppy"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("First mismatch at y[0, 0]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ref:exact is closer"), std::string::npos) << r.out;

  r = run({"diff", "--case", write_case("two.json", testing::toy_case(1, 2, {2.0f, 1.0f})), "ref:exact", "ref:sloppy"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("bit-identical"), std::string::npos) << r.out;

  r = run({"diff", "--case", path("two.json"), "ref:exact", "cuda:exact"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown backend kind 'cuda'"), std::string::npos) << r.err;
}

TEST_F(CliTest, FlagsAreStrict) {
  // --max-cases 0 keeps a wrongly accepted command from running a real campaign.
  auto campaign = [&](std::vector<std::string> flags) {
    flags.insert(flags.begin(), "campaign");
    flags.insert(flags.end(), {"--max-cases", "0", "-q"});
    return run(flags).code;
  };
  EXPECT_EQ(campaign({}), 0);
  EXPECT_EQ(campaign({"--budget-seconds", "ten"}), 2);
  EXPECT_EQ(campaign({"--budget-seconds", "-1"}), 2);
  EXPECT_EQ(campaign({"--seed", "-3"}), 2);
  EXPECT_EQ(campaign({"--seed", "12x"}), 2);
  EXPECT_EQ(run({"campaign", "--max-cases", "1e3"}).code, 2);
  EXPECT_EQ(campaign({"--bogus"}), 2);
  EXPECT_EQ(campaign({"--shard", "4/4"}), 2);
  EXPECT_EQ(campaign({"--pair", "ref:exact"}), 2);
  EXPECT_EQ(campaign({"--same-contract-pin", "maybe"}), 2);
  EXPECT_EQ(campaign({"--ops", "nope"}), 2);
  EXPECT_EQ(run({}).code, 2);  // a command is required
  const Result help = run({"campaign", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("Example"), std::string::npos);
}

TEST_F(CliTest, CampaignReplayAndMerge) {
  const std::vector<std::string> common = {"--pair", "ref:exact,ref:sloppy", "--max-cases", "200", "-q"};
  auto campaign = [&](const std::string& shard) {
    std::vector<std::string> args = {"campaign",
                                     "--seed",
                                     "5",
                                     "--shard",
                                     shard,
                                     "--corpus",
                                     path("s" + shard.substr(0, 1) + "/corpus"),
                                     "--report",
                                     path("s" + shard.substr(0, 1) + "/report.json"),
                                     "--junit",
                                     path("s" + shard.substr(0, 1) + "/junit.xml")};
    args.insert(args.end(), common.begin(), common.end());
    return run(args);
  };
  Result r = campaign("0/2");
  ASSERT_EQ(r.code, 0) << r.err;  // contract divergences are not failures
  EXPECT_NE(r.out.find("ref:exact vs ref:sloppy"), std::string::npos) << r.out;
  ASSERT_EQ(campaign("1/2").code, 0);
  const nlohmann::json report = nlohmann::json::parse(std::ifstream(path("s0/report.json")));
  EXPECT_EQ(report["totals"]["cases"], 100);
  EXPECT_TRUE(fs::exists(path("s0/junit.xml")));

  r = run({"replay", path("s0/corpus")});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS "), std::string::npos) << r.out;

  r = run({"merge", "--out", path("merged"), "--report", path("merged.json"), path("s0"), path("s1")});
  ASSERT_EQ(r.code, 0) << r.err;
  const reports::Report merged = reports::report_from_json(nlohmann::json::parse(std::ifstream(path("merged.json"))));
  int64_t cases = 0;
  for (const reports::PairCounts& c : merged.counts) cases += c.cases;
  EXPECT_EQ(cases, 200);
  // The dashboard's histograms and coverage are summed too: each shard's, bucket by bucket.
  ASSERT_EQ(merged.coverage.size(), 1u);
  EXPECT_EQ(merged.coverage[0].cases, 200);
  int64_t shard_elements = 0, merged_elements = 0;
  for (const char* shard : {"s0/report.json", "s1/report.json"}) {
    const nlohmann::json doc = nlohmann::json::parse(std::ifstream(path(shard)));
    for (const auto& row : doc["counts"])
      for (const auto& item : row["ulp_histogram"].items()) shard_elements += item.value().get<int64_t>();
  }
  for (const reports::PairCounts& c : merged.counts)
    for (const auto& [bucket, n] : c.ulp_histogram) merged_elements += n;
  EXPECT_GT(shard_elements, 0);
  EXPECT_EQ(merged_elements, shard_elements);
  EXPECT_EQ(corpus::load_signatures(path("merged")).size(), merged.findings.size());
  for (const reports::FindingRecord& f : merged.findings) EXPECT_TRUE(fs::exists(f.file)) << f.file;
}

TEST_F(CliTest, CampaignBaselineExitsWhenSignaturesAppearOrVanish) {
  auto campaign = [&](const std::string& max_cases, std::vector<std::string> extra) {
    std::vector<std::string> args = {"campaign", "--pair", "ref:exact,ref:sloppy", "--seed", "5", "--max-cases", max_cases, "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  ASSERT_EQ(campaign("200", {"--corpus", path("base")}).code, 0);
  ASSERT_FALSE(corpus::load_signatures(path("base")).empty());
  // The same seed and cases: the same signatures, so a contract-vs-contract run exits 0.
  Result r = campaign("200", {"--baseline", path("base")});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" 0 appeared, 0 vanished"), std::string::npos) << r.out;
  // Against an empty baseline every signature appeared.
  fs::create_directories(path("empty"));
  r = campaign("200", {"--baseline", path("empty")});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("baseline: appeared toy|fwd|ref:exact|ref:sloppy|"), std::string::npos) << r.out;
  // Three cases of the same stream see fewer of them: the rest vanished.
  r = campaign("3", {"--baseline", path("base")});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("baseline: vanished toy|fwd|ref:exact|ref:sloppy|"), std::string::npos) << r.out;
  EXPECT_EQ(campaign("3", {"--baseline", path("no_such_folder")}).code, 2);
}

TEST_F(CliTest, CampaignGroupsNewFindingsByCauseAcrossPairs) {
  // The toy op's two pairs diverge on the same inputs (a 3.0): one cause seen through both pairs.
  const Result r = run({"campaign", "--pair", "ref:exact,ref:sloppy", "--pair", "fake_gpu:exact,ref:exact", "--seed",
                        "5", "--max-cases", "200", "-q", "--corpus", path("grouped")});
  ASSERT_EQ(r.code, 1) << r.out;  // fake_gpu:exact vs ref:exact is a same-contract pair: a bug
  const size_t line = r.out.find("new finding: toy fwd, bit_mismatch in y, classes ");
  ASSERT_NE(line, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(2 pairs)", line), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  open  fake_gpu:exact vs ref:exact  To reproduce: bitparity replay "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  divergence  ref:exact vs ref:sloppy  To reproduce: bitparity replay "), std::string::npos)
      << r.out;
}

TEST_F(CliTest, ReplayFailsWithAReproduceLineAndRefusesEmptyFolders) {
  const std::string c = write_case("two.json", testing::toy_case(1, 2, {2.0f, 1.0f}));
  // A divergence pinned on a case where the contracts agree: replay must fail.
  nlohmann::json entry = nlohmann::json::parse(std::ifstream(c));
  entry["finding"] = {{"kind", "bit_mismatch"},
                      {"pair", {"ref:exact", "ref:sloppy"}},
                      {"output", "y"},
                      {"signature", "toy|fwd|ref:exact|ref:sloppy|bit_mismatch|y|rows=1|plain"}};
  entry["pins"] = "divergence";
  const std::string stale = path("corpus/toy/stale.json");
  corpus::write_file_atomically(stale, entry.dump());
  Result r = run({"replay", stale});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("FAIL " + stale), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("To reproduce: bitparity replay " + stale), std::string::npos) << r.out;

  entry.erase("pins");
  corpus::write_file_atomically(stale, entry.dump());
  r = run({"replay", stale});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(stale + ": pins: missing"), std::string::npos) << r.out;

  fs::create_directories(path("empty"));
  r = run({"replay", path("empty")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no corpus entries"), std::string::npos) << r.err;
}

// Issue 10 #5 and #10: every numeric flag rejects NaN, Inf, negative and out-of-range values with
// an error naming the flag, never a silent saturation or wrap.
TEST_F(CliTest, NumericFlagsRejectNonFiniteNegativeAndOutOfRangeValues) {
  auto campaign = [&](const std::string& flag, const std::string& value) {
    std::vector<std::string> args = {"campaign", "-q", "--pair", "ref:exact,ref:sloppy"};
    if (flag != "--max-cases") args.insert(args.end(), {"--max-cases", "0"});
    args.insert(args.end(), {flag, value});
    return run(args);
  };
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--budget-seconds", "nan"},  {"--budget-seconds", "inf"},        {"--budget-seconds", "-inf"},
      {"--budget-seconds", "1e999"}, {"--budget-seconds", "-0.5"},       {"--budget-seconds", "1e10"},
      {"--seed", "18446744073709551616"}, {"--seed", "-1"},             {"--seed", "+1"},
      {"--seed", "0x10"},           {"--max-cases", "9223372036854775808"}, {"--max-cases", "-1"},
      {"--max-cases", "nan"},       {"--max-shrink-calls", "0"},       {"--max-shrink-calls", "2147483648"},
      {"--shard", "0/9999999999"},  {"--shard", "-1/2"}};
  for (const auto& [flag, value] : bad) {
    const Result r = campaign(flag, value);
    EXPECT_EQ(r.code, 2) << flag << " " << value;
    EXPECT_NE(r.err.find(flag), std::string::npos) << flag << " " << value << ": " << r.err;
  }
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--seed", "18446744073709551615"}, {"--budget-seconds", "0.5"}, {"--max-shrink-calls", "1"}})
    EXPECT_EQ(campaign(flag, value).code, 0) << flag << " " << value << ": " << campaign(flag, value).err;
}

// Issue 10 #10: a folder given as a case file says so; an unreadable file gives the system's reason.
TEST_F(CliTest, CaseFilesThatCannotBeReadSayWhy) {
  Result r = run({"run", "--case", dir_.string(), "--backend", "ref:exact"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is a folder"), std::string::npos) << r.err;
  std::ofstream(path("plain")) << "x";
  r = run({"diff", "--case", path("plain") + "/case.json", "ref:exact", "ref:sloppy"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("Not a directory"), std::string::npos) << r.err;  // strerror(ENOTDIR)
}

// Issue 10 #8: every output path is checked before any case runs.
TEST_F(CliTest, OutputPathsAreCheckedBeforeTheCampaignStarts) {
  const std::vector<std::string> common = {"campaign", "-q", "--pair", "ref:exact,ref:sloppy", "--max-cases", "50"};
  auto campaign = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  fs::create_directories(path("a_folder"));
  std::ofstream(path("a_file")) << "x";
  for (const std::vector<std::string>& outputs :
       {std::vector<std::string>{"--report", path("a_folder")}, {"--junit", path("a_folder")},
        {"--corpus", path("a_file")}, {"--report", path("a_file") + "/report.json"}}) {
    std::vector<std::string> args = outputs;
    args.insert(args.end(), {"--corpus", path("corpus")});
    if (outputs[0] == "--corpus") args = outputs;
    const Result r = campaign(args);
    EXPECT_EQ(r.code, 2) << outputs[0] << " " << outputs[1];
    EXPECT_NE(r.err.find(outputs[1]), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << "work started: " << r.out;  // no table: no case ran
    EXPECT_FALSE(fs::exists(path("corpus/toy"))) << "a finding was written before the error";
  }
  const std::string c = write_case("case.json", testing::toy_case(1, 2, {3.0f, 1.0f}));
  const Result r = run({"run", "--case", c, "--backend", "ref:exact", "--out", path("a_folder")});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(fs::is_directory(path("a_folder")));
}

// Issue 10 #8: a corpus write that fails mid-campaign still leaves the summary, with the reason.
TEST_F(CliTest, TheSummaryIsWrittenWhenACorpusWriteFails) {
  fs::create_directories(path("corpus"));
  std::ofstream(path("corpus/toy")) << "x";  // a file where the op's folder of entries must go
  const Result r = run({"campaign", "-q", "--pair", "ref:exact,ref:sloppy", "--max-cases", "200", "--corpus",
                        path("corpus"), "--report", path("report.json"), "--junit", path("junit.xml")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the campaign stopped early: cannot write the corpus entry"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Not a directory"), std::string::npos) << r.err;
  const reports::Report report = reports::report_from_json(nlohmann::json::parse(std::ifstream(path("report.json"))));
  ASSERT_TRUE(report.run.error.has_value());
  EXPECT_EQ(report.findings.size(), 1u);
  EXPECT_TRUE(fs::exists(path("junit.xml")));
  EXPECT_NE(r.out.find("the run stopped early"), std::string::npos) << r.out;
}

// Issue 10 #6: a pair naming a backend kind or contract this binary does not know is an error
// (exit 2); a known backend that cannot run here is skipped, and the line says why.
TEST_F(CliTest, ReplayFailsOnUnknownBackendsAndSkipsUnavailableOnes) {
  nlohmann::json entry = case_to_json(testing::toy_case(1, 2, {3.0f, 1.0f}));
  entry["finding"] = {{"kind", "bit_mismatch"},
                      {"pair", {"fake_gpu:exact", "ref:exact"}},
                      {"output", "y"},
                      {"signature", "s"}};
  entry["pins"] = "open";
  auto replay_with_pair = [&](const std::string& a, const std::string& b) {
    entry["finding"]["pair"] = {a, b};
    corpus::write_file_atomically(path("entry.json"), entry.dump());
    return run({"replay", path("entry.json")});
  };
  Result r = replay_with_pair("cuda2:exact", "ref:exact");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("ERROR " + path("entry.json") + ": backend kind 'cuda2'"), std::string::npos) << r.out;
  r = replay_with_pair("ref:exact", "ref:renamed");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("contract 'renamed'"), std::string::npos) << r.out;
  r = replay_with_pair("fake_gpu:sloppy", "ref:sloppy");  // a kind that lacks the contract
  EXPECT_EQ(r.code, 2) << r.out;

  testing::set_fake_gpu_available(false);
  r = replay_with_pair("fake_gpu:exact", "ref:exact");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("SKIP " + path("entry.json") + ": fake_gpu is unavailable here: no fake device"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 skipped"), std::string::npos) << r.out;
}

// Issue 10 #10: a shard folder as the README lays it out (corpus/ and report.json side by side).
TEST_F(CliTest, ReplayOfAShardFolderLeavesItsReportAlone) {
  const Result c = run({"campaign", "-q", "--pair", "ref:exact,ref:sloppy", "--max-cases", "100", "--corpus",
                        path("shard0/corpus"), "--report", path("shard0/report.json")});
  ASSERT_EQ(c.code, 0) << c.err;
  const Result r = run({"replay", path("shard0")});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("report.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 0 errors"), std::string::npos) << r.out;
  // Named explicitly, a report is not a case: an error.
  EXPECT_EQ(run({"replay", path("shard0/report.json")}).code, 2);
}

// The one reproduction path: a bare case runs through every pair, one line each; only errors fail.
TEST_F(CliTest, ReplayOfABareCaseReportsEveryPair) {
  const std::string c = write_case("three.json", testing::toy_case(1, 2, {3.0f, 1.0f}));
  Result r = run({"replay", c});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("CASE " + c + ": toy fwd"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  fake_gpu:exact vs ref:exact: bit_mismatch in y\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  ref:exact vs ref:sloppy: bit_mismatch in y\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  ref:exact vs ref:strict: agree\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  ref:exact vs ref:flat: shape_mismatch in y\n"), std::string::npos) << r.out;
  testing::set_fake_gpu_available(false);
  r = run({"replay", c});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("  fake_gpu:exact vs ref:exact: skipped: fake_gpu is unavailable here"), std::string::npos)
      << r.out;
  testing::set_fake_gpu_available(true);

  // A reproducer with a pair replays as an open entry; one without, as a bare case.
  const std::string with_pair = corpus::write_reproducer(testing::toy_case(1, 2, {3.0f, 1.0f}), "bit_mismatch",
                                                         corpus::BackendPair{"fake_gpu:exact", "ref:exact"}, "",
                                                         dir_ / "failures");
  const std::string file = with_pair.substr(with_pair.rfind(' ') + 1);
  r = run({"replay", file});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS " + file + ": open, still reproduces: bit_mismatch in y"), std::string::npos) << r.out;
  const std::string bare = corpus::write_reproducer(testing::toy_case(1, 2, {3.0f, 1.0f}), "invariance_violation",
                                                    std::nullopt, "", dir_ / "failures");
  r = run({"replay", bare.substr(bare.rfind(' ') + 1)});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(", reported as invariance_violation, 7 pairs"), std::string::npos) << r.out;

  // A backend that disagreed with itself: an open entry on that pair, run twice again.
  const std::string same = corpus::write_reproducer(testing::toy_case(1, 2, {3.0f, 1.0f}), "nondeterminism",
                                                    corpus::BackendPair{"fake_gpu:exact", "fake_gpu:exact"}, "",
                                                    dir_ / "failures");
  const std::string same_file = same.substr(same.rfind(' ') + 1);
  r = run({"replay", same_file});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS " + same_file + ": open, no longer reproduces: the pair agrees"), std::string::npos)
      << r.out;
  const std::string unknown = corpus::write_reproducer(testing::toy_case(1, 2, {3.0f, 1.0f}), "nondeterminism",
                                                       corpus::BackendPair{"gone:exact", "gone:exact"}, "",
                                                       dir_ / "failures");
  r = run({"replay", unknown.substr(unknown.rfind(' ') + 1)});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("backend kind 'gone'"), std::string::npos) << r.out;
}

// ---- .safetensors: `bitparity case import|export`, and run, diff and replay on a .safetensors case ----

std::string slurp(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A toy case whose x carries a NaN payload, -0 and 3.0 (where ref:sloppy is one ulp high).
Case special_toy_case() {
  Case c = testing::toy_case(1, 3, {3.0f, -0.0f, 1.0f}, 2.0);
  c.inputs.at("x").set_bits(2, 0x7fc1);
  return c;
}

TEST_F(CliTest, CaseExportAndImportGiveTheCaseBackBitForBit) {
  const Case c = special_toy_case();
  Result r = run({"case", "export", write_case("case.json", c), "--out", path("case.safetensors")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + path("case.safetensors") + ": toy fwd, 1 tensor\n");
  const Safetensors file = read_safetensors(path("case.safetensors"));
  EXPECT_EQ(file.tensors.at("x"), c.inputs.at("x"));
  EXPECT_EQ(file.metadata.at("attrs"), "{\"scale\":2.0}");

  r = run({"case", "import", path("case.safetensors"), "--out", path("back.json")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(path("back.json"))), case_to_json(c));
  r = run({"case", "import", path("case.safetensors")});  // to stdout
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out), case_to_json(c));
}

TEST_F(CliTest, RunDiffAndReplayReadASafetensorsCase) {
  const std::string json_case = write_case("case.json", special_toy_case());
  ASSERT_EQ(run({"case", "export", json_case, "--out", path("case.safetensors")}).code, 0);
  // Told by its content too: a .safetensors file by another name.
  fs::copy_file(path("case.safetensors"), path("dump.bin"));
  const Result from_json = run({"run", "--case", json_case, "--backend", "ref:exact"});
  ASSERT_EQ(from_json.code, 0) << from_json.err;
  for (const std::string& file : {path("case.safetensors"), path("dump.bin")}) {
    const Result r = run({"run", "--case", file, "--backend", "ref:exact"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, from_json.out) << file;
  }
  Result r = run({"diff", "--case", path("case.safetensors"), "ref:exact", "ref:sloppy"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("First mismatch at y[0, 0]"), std::string::npos) << r.out;
  r = run({"replay", path("case.safetensors")});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("CASE " + path("case.safetensors") + ": toy fwd"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  ref:exact vs ref:sloppy: bit_mismatch in y\n"), std::string::npos) << r.out;
}

TEST_F(CliTest, AResultExportsWithItsOutputs) {
  ASSERT_EQ(run({"run", "--case", write_case("case.json", special_toy_case()), "--backend", "ref:exact", "--out",
                 path("result.json")})
                .code,
            0);
  Result r = run({"case", "export", path("result.json"), "--out", path("result.safetensors")});
  ASSERT_EQ(r.code, 0) << r.err;
  const Safetensors file = read_safetensors(path("result.safetensors"));
  EXPECT_TRUE(file.tensors.count("outputs.y") && file.tensors.count("outputs.y_sum")) << r.out;
  r = run({"case", "import", path("result.safetensors")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::parse(slurp(path("result.json"))));
}

TEST_F(CliTest, ImportTakesWhatTheFileLacksFromItsFlags) {
  Safetensors dump;  // as a PyTorch user's save_file writes it: tensors and a format tag
  dump.metadata["format"] = "pt";
  dump.tensors.emplace("x", special_toy_case().inputs.at("x"));
  std::ofstream(path("dump.safetensors"), std::ios::binary) << safetensors_to_bytes(dump);

  Result r = run({"case", "import", path("dump.safetensors"), "--out", path("case.json")});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: " + path("dump.safetensors") +
                       ": op: missing: the file's __metadata__ has no \"op\" and none was given (--op)\n");
  EXPECT_FALSE(fs::exists(path("case.json")));

  r = run({"case", "import", path("dump.safetensors"), "--op", "toy", "--direction", "fwd", "--attr", "scale=-0.0",
           "--attr", "flag=true", "--out", path("case.json")});
  ASSERT_EQ(r.code, 0) << r.err;
  const Case c = case_from_file(path("case.json"), registry_);
  EXPECT_EQ(f64_bits(*c.float_attr("scale")), f64_bits(-0.0));
  EXPECT_EQ(std::get<bool>(c.attrs.at("flag")), true);
  EXPECT_EQ(c.inputs.at("x"), special_toy_case().inputs.at("x"));

  r = run({"case", "import", path("dump.safetensors"), "--op", "toy", "--direction", "fwd", "--attr", "scale=big"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(path("dump.safetensors") + ": attrs.scale: expected a number or one of"), std::string::npos)
      << r.err;
  EXPECT_EQ(run({"case", "import", path("dump.safetensors"), "--op", "toy", "--attr", "scale"}).code, 2);
  EXPECT_EQ(run({"case", "import", path("dump.safetensors"), "--op", "toy", "--direction", "backward"}).code, 2);
  EXPECT_EQ(run({"case", "export", path("dump.safetensors")}).code, 2);  // --out is required
  EXPECT_EQ(run({"case"}).code, 2);                                        // import or export
  for (const std::string sub : {"import", "export"}) {
    const Result help = run({"case", sub, "--help"});
    EXPECT_EQ(help.code, 0);
    EXPECT_NE(help.out.find("Example"), std::string::npos) << help.out;
  }
}

TEST_F(CliTest, AMalformedSafetensorsFileIsAnErrorNamingIt) {
  const std::string bad = path("bad.safetensors");
  std::ofstream(bad, std::ios::binary) << std::string("\x40\0\0\0\0\0\0\0{}", 10);
  const std::string expected = bad + ": the header length 64 reaches past the end of the file (2 bytes follow the length)";
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"run", "--case", bad, "--backend", "ref:exact"},
        std::vector<std::string>{"diff", "--case", bad, "ref:exact", "ref:sloppy"},
        std::vector<std::string>{"case", "import", bad}, std::vector<std::string>{"case", "export", bad, "--out", path("x")}}) {
    const Result r = run(command);
    EXPECT_EQ(r.code, 2) << command[0];
    EXPECT_EQ(r.err, "error: " + expected + "\n") << command[0];
  }
  const Result r = run({"replay", bad});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("ERROR " + expected), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(path("x")));
}

// --- report --html ------------------------------------------------------------------------------

reports::Report small_report() {
  reports::Report r;
  r.run.seed = 3;
  r.run.shards = {"0/1"};
  reports::PairCounts& c = reports::counts_for(r, "toy", "fwd", "ref:exact", "ref:sloppy");
  c.cases = 20, c.agreements = 17, c.mismatches = {{"bit_mismatch", 3}}, c.ulp_histogram = {{"1", 4}};
  reports::Coverage& k = reports::coverage_for(r, "toy", "fwd");
  k.cases = 20, k.tags = {{"has3", 3}, {"plain", 17}}, k.required = {"has3", "plain"};
  return r;
}

TEST_F(CliTest, ReportHelpExplainsItselfWithAnExample) {
  const Result help = run({"report", "--help"});
  EXPECT_EQ(help.code, 0);
  for (const char* text : {"self-contained HTML", "--bench-history", "--corpus", "Example:",
                           "bitparity report --html out/dashboard.html --report out/report.json"})
    EXPECT_NE(help.out.find(text), std::string::npos) << text << "\n" << help.out;
}

TEST_F(CliTest, ReportWritesTheDashboardAndNamesTheMissingSources) {
  if (!reports::embedded_chart_assets()) GTEST_SKIP() << "this build lacks the chart libraries (scripts/fetch_charts.sh)";
  std::ofstream(path("r.json")) << reports::report_to_json(small_report()).dump();
  const Result r = run({"report", "--html", path("d.html"), "--report", path("r.json")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("bench history (--bench-history)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("corpus (--corpus)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("campaign report"), std::string::npos) << r.out;
  std::ifstream in(path("d.html"));
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("data-chart=\"findings\""), std::string::npos);
  EXPECT_NE(html.find("data-chart=\"ulp\""), std::string::npos);
  EXPECT_NE(html.find("data-chart=\"coverage\""), std::string::npos);
  EXPECT_NE(html.find("No bench history was given"), std::string::npos);
  EXPECT_NE(html.find("vegaEmbed"), std::string::npos);  // the chart libraries are inlined
  EXPECT_EQ(html.find("<script src="), std::string::npos);  // and nothing is loaded from elsewhere
}

// A build without the chart libraries (BITPARITY_DASHBOARD_CHARTS=OFF, or no node_modules when it
// was configured, as on the GPU machine) refuses, saying how to get them; other builds skip this.
TEST_F(CliTest, ReportWithoutChartLibrariesExitsTwoSayingHowToGetThem) {
  if (reports::embedded_chart_assets()) GTEST_SKIP() << "this build embeds the chart libraries";
  std::ofstream(path("r.json")) << reports::report_to_json(small_report()).dump();
  const Result r = run({"report", "--html", path("d.html"), "--report", path("r.json")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("scripts/fetch_charts.sh"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("d.html")));
}

TEST_F(CliTest, ReportExitsTwoOnBrokenSourcesNamingThem) {
  if (!reports::embedded_chart_assets()) GTEST_SKIP() << "this build lacks the chart libraries (scripts/fetch_charts.sh)";
  std::ofstream(path("cut.json")) << R"({"format": "bitparity-report/1", "run": )";
  Result r = run({"report", "--html", path("d.html"), "--report", path("cut.json")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(path("cut.json") + ": "), std::string::npos) << r.err;
  r = run({"report", "--html", path("d.html"), "--corpus", path("no-such-corpus")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no-such-corpus does not exist"), std::string::npos) << r.err;
  r = run({"report", "--html", path("no-such-folder/d.html")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no-such-folder"), std::string::npos) << r.err;
  r = run({"report", "--report", path("cut.json")});  // --html is required
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(fs::exists(path("d.html")));
}

// Issue 15: what two campaigns are compared on. A report without what differs between runs of the
// same cases (run info: shards, dates, times; the folder of each entry), its rows in name order.
reports::Report comparable(reports::Report r) {
  r.run = {};
  for (reports::FindingRecord& f : r.findings) f.file = fs::path(f.file).filename().string();
  auto row = [](const reports::PairCounts& c) { return std::tie(c.op, c.direction, c.a, c.b); };
  std::sort(r.counts.begin(), r.counts.end(), [&](const auto& x, const auto& y) { return row(x) < row(y); });
  auto cov = [](const reports::Coverage& c) { return std::tie(c.op, c.direction); };
  std::sort(r.coverage.begin(), r.coverage.end(), [&](const auto& x, const auto& y) { return cov(x) < cov(y); });
  return r;
}

reports::Report read_report(const std::string& file) {
  return reports::report_from_json(nlohmann::json::parse(std::ifstream(file)));
}

// Every corpus entry by name, without the provenance fields that name the shard and the date.
std::map<std::string, std::string> entry_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const fs::path& p : corpus::find_json_files(dir)) {
    nlohmann::json doc = nlohmann::json::parse(std::ifstream(p));
    if (!doc.contains("provenance")) continue;  // a report beside the corpus
    doc["provenance"].erase("date");
    doc["provenance"].erase("shard");
    files[fs::relative(p, dir).string()] = doc.dump();
  }
  return files;
}

// Issue 15 #1: shard i of 3 runs the unsharded run's case indices i, i+3, ...; merging the three
// gives that run back: its counts, its findings (signatures, order, the representative of each)
// and its corpus entries, whatever the order of the shard folders.
TEST_F(CliTest, MergedShardsEqualTheUnshardedRun) {
  auto campaign = [&](const std::string& folder, const std::string& shard) {
    return run({"campaign", "-q", "--seed", "5", "--max-cases", "300", "--pair", "ref:exact,ref:sloppy", "--pair",
                "ref:exact,ref:strict", "--pair", "ref:sloppy,ref:flat", "--shard", shard, "--corpus",
                path(folder + "/corpus"), "--report", path(folder + "/report.json")})
        .code;
  };
  ASSERT_EQ(campaign("whole", "0/1"), 0);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(campaign("s" + std::to_string(i), std::to_string(i) + "/3"), 0);
  const reports::Report whole = comparable(read_report(path("whole/report.json")));
  ASSERT_GE(whole.findings.size(), 4u);
  for (const std::vector<std::string>& order : {std::vector<std::string>{"s0", "s1", "s2"}, {"s2", "s1", "s0"}}) {
    const std::string out = "merged_" + order[0];
    std::vector<std::string> args = {"merge", "--out", path(out), "--report", path(out + ".json")};
    for (const std::string& dir : order) args.push_back(path(dir));
    const Result r = run(args);
    ASSERT_EQ(r.code, 0) << r.err;
    const reports::Report merged = comparable(read_report(path(out + ".json")));
    EXPECT_EQ(merged.counts, whole.counts) << out;
    EXPECT_EQ(merged.coverage, whole.coverage) << out;
    EXPECT_EQ(merged.findings, whole.findings) << out;
    EXPECT_EQ(entry_files(path(out)), entry_files(path("whole/corpus"))) << out;
  }
  // Not equal by luck: some signature was found by two shards in different cases, so the choice of
  // its representative mattered.
  std::map<std::string, std::set<std::string>> files_by_signature;
  for (const char* shard : {"s0", "s1", "s2"})
    for (const corpus::StoredEntry& e : corpus::read_stored_entries(path(shard)))
      files_by_signature[e.signature].insert(e.path.filename().string());
  EXPECT_TRUE(std::any_of(files_by_signature.begin(), files_by_signature.end(),
                          [](const auto& item) { return item.second.size() > 1; }));
}

// Issue 15 #2: --jobs spreads the cases over threads and changes nothing in the output; its
// number is checked like every other.
TEST_F(CliTest, CampaignJobsGiveTheOutputOfOneJob) {
  auto campaign = [&](const std::string& jobs, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"campaign", "--seed", "3", "--max-cases", "300", "--pair", "ref:exact,ref:sloppy",
                                     "--pair", "ref:exact,ref:flat", "--jobs", jobs, "--corpus",
                                     path("j" + jobs + "/corpus"), "--report", path("j" + jobs + "/report.json")};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  ASSERT_EQ(campaign("1", {"-q"}).code, 0);
  const Result four = campaign("4");
  ASSERT_EQ(four.code, 0) << four.err;
  // The progress line counts the cases applied to the report: all of them at the end.
  EXPECT_NE(four.err.find("campaign 0/1: "), std::string::npos) << four.err;
  EXPECT_NE(four.err.find(" 300 cases ("), std::string::npos) << four.err;
  EXPECT_NE(four.err.find("(done)\n"), std::string::npos) << four.err;
  const reports::Report one = comparable(read_report(path("j1/report.json")));
  EXPECT_EQ(comparable(read_report(path("j4/report.json"))), one);
  EXPECT_FALSE(one.findings.empty());
  EXPECT_EQ(entry_files(path("j4/corpus")), entry_files(path("j1/corpus")));

  for (const char* bad : {"0", "-2", "1025", "many", ""}) {
    const Result r = run({"campaign", "-q", "--max-cases", "0", "--jobs", bad});
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("--jobs"), std::string::npos) << bad << ": " << r.err;
  }
  for (const char* bad : {"-1", "nan", "inf"}) {
    const Result r = run({"campaign", "-q", "--max-cases", "0", "--shrink-seconds", bad});
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("--shrink-seconds"), std::string::npos) << bad << ": " << r.err;
  }
  EXPECT_EQ(run({"campaign", "-q", "--max-cases", "0", "--jobs", "2", "--shrink-seconds", "0.5"}).code, 0);
  const Result help = run({"campaign", "--help"});
  for (const char* flag : {"--jobs", "--shrink-seconds", "DIR|REPORT"})
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
}

// Issue 15 #4: --baseline takes a report as well as a corpus folder: its findings' signatures.
TEST_F(CliTest, CampaignBaselineTakesAReportFile) {
  auto campaign = [&](const std::string& max_cases, std::vector<std::string> extra) {
    std::vector<std::string> args = {"campaign", "--pair", "ref:exact,ref:sloppy", "--seed", "5", "--max-cases",
                                     max_cases, "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  ASSERT_EQ(campaign("200", {"--report", path("base.json")}).code, 0);
  ASSERT_FALSE(read_report(path("base.json")).findings.empty());
  Result r = campaign("200", {"--baseline", path("base.json")});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" 0 appeared, 0 vanished"), std::string::npos) << r.out;
  r = campaign("3", {"--baseline", path("base.json")});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("baseline: vanished toy|fwd|ref:exact|ref:sloppy|"), std::string::npos) << r.out;
  // A merged report is a baseline too.
  ASSERT_EQ(campaign("200", {"--shard", "0/2", "--report", path("h0/report.json")}).code, 0);
  ASSERT_EQ(campaign("200", {"--shard", "1/2", "--report", path("h1/report.json")}).code, 0);
  ASSERT_EQ(run({"merge", "--out", path("hm"), "--report", path("hm.json"), path("h0"), path("h1")}).code, 0);
  r = campaign("200", {"--baseline", path("hm.json")});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" 0 appeared, 0 vanished"), std::string::npos) << r.out;

  const std::string a_case = write_case("case.json", testing::toy_case(1, 1, {1.0f}));
  r = campaign("3", {"--baseline", a_case});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a corpus folder or a bitparity-report/1 file"), std::string::npos) << r.err;
  std::ofstream(path("cut.json")) << R"({"format": "bitparity-report/1", "run": )";
  r = campaign("3", {"--baseline", path("cut.json")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(path("cut.json")), std::string::npos) << r.err;
  EXPECT_EQ(campaign("3", {"--baseline", path("nothing_here")}).code, 2);
}

}  // namespace
}  // namespace bitparity::cli
