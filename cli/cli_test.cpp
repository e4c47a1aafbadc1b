// The command line end to end on the fake "toy" registry: exit codes, messages, files.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli/app.h"
#include "core/case_json.h"
#include "corpus/entry.h"
#include "testing/toy_op.h"
#include "reports/report.h"

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
  EXPECT_EQ(corpus::load_signatures(path("merged")).size(), merged.findings.size());
  for (const reports::FindingRecord& f : merged.findings) EXPECT_TRUE(fs::exists(f.file)) << f.file;
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

}  // namespace
}  // namespace bitparity::cli
