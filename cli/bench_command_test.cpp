// `bitparity bench` end to end: record on a Google Benchmark fixture, run over a stand-in
// benchmark program and a stand-in nvidia-smi (bench/testdata/), compare's verdicts and exit
// codes, hostile inputs and --help. The fixtures' numbers are hand-chosen (see
// bench/testdata/compare_*.json): swiglu_fwd 10% faster, swiglu_bwd 15% slower, permute the same,
// router_topk +33% over 2 repetitions (UNSURE), one kernel only in each run.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "cli/app.h"
#include "cli/commands.h"
#include "reports/bench_history.h"
#include "testing/toy_op.h"

namespace bitparity::cli {
namespace {

namespace fs = std::filesystem;

const fs::path kTestdata = fs::path(BITPARITY_SOURCE_DIR) / "bench/testdata";
constexpr const char* kCommit = "89abcdef0123456789abcdef0123456789abcdef";

struct Result {
  int code = 0;
  std::string out, err;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class BenchCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bitparity_bench_command_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const char* path = std::getenv("PATH");
    saved_path_ = path ? path : "";
  }
  void TearDown() override {
    ::setenv("PATH", saved_path_.c_str(), 1);
    ::unsetenv("BITPARITY_FAKE_BENCH_ARGS");
    ::unsetenv("FAKE_BENCH_FAIL");
    fs::remove_all(dir_);
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

  // Records both compare fixtures into one history folder: old first, new second.
  fs::path recorded_history() {
    const fs::path history = dir_ / "history";
    EXPECT_EQ(run({"bench", "record", (kTestdata / "compare_old.json").string(), "--history", history.string(),
                   "--commit", kCommit})
                  .code,
              kExitOk);
    EXPECT_EQ(run({"bench", "record", (kTestdata / "compare_new.json").string(), "--history", history.string(),
                   "--commit", "fedcba9876543210fedcba9876543210fedcba98"})
                  .code,
              kExitOk);
    return history;
  }

  std::string file(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  Registry registry_ = testing::make_fake_registry();
  fs::path dir_;
  std::string saved_path_;
};

TEST_F(BenchCommandTest, RecordKeepsAGoogleBenchmarkJson) {
  const fs::path history = dir_ / "history";
  const Result r = run({"bench", "record", (kTestdata / "gbench_interleaved.json").string(), "--history",
                        history.string(), "--commit", kCommit, "--driver", "570.124.06", "--sm-clock-mhz", "1980"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  // Named by the fixture's date in UTC (20:15:03-05:00) and the short commit.
  const fs::path written = history / "20261202T011503Z_89abcde.json";
  ASSERT_TRUE(fs::exists(written)) << r.out;
  EXPECT_NE(r.out.find("wrote " + written.string()), std::string::npos);
  const reports::BenchRun kept = reports::read_bench_run(written);
  EXPECT_EQ(kept.context.commit, kCommit);
  EXPECT_EQ(kept.context.gpu, "NVIDIA H200");  // from kernel_bench's "device" context
  EXPECT_EQ(kept.context.driver, "570.124.06");
  EXPECT_EQ(kept.context.sm_clock_mhz, 1980);
  EXPECT_EQ(kept.context.mem_clock_mhz, std::nullopt);
  ASSERT_EQ(kept.kernels.size(), 3u);
  EXPECT_EQ(kept.kernels[0].times_ns, (std::vector<double>{100000, 120000, 110000}));
  EXPECT_EQ(*kept.copy_gb_per_s, 3850);
  // The summary table shows the median, the rate and the share of the copy bandwidth.
  EXPECT_NE(r.out.find("110.000      800    20.0     3"), std::string::npos) << r.out;
  // A second record of the same run does not overwrite the first.
  ASSERT_EQ(run({"bench", "record", (kTestdata / "gbench_interleaved.json").string(), "--history", history.string(),
                 "--commit", kCommit})
                .code,
            kExitOk);
  EXPECT_TRUE(fs::exists(history / "20261202T011503Z_89abcde-2.json"));
}

TEST_F(BenchCommandTest, RecordRefusesBadInputs) {
  const std::string out = (dir_ / "run.json").string();
  Result r = run({"bench", "record", file("cut.json", R"({"benchmarks": [{"name": )"), "--out", out});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find((dir_ / "cut.json").string() + ": the file is not valid JSON"), std::string::npos) << r.err;
  r = run({"bench", "record", file("types.json", R"({"benchmarks": [{"name": "a", "real_time": "fast"}]})"), "--out", out});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("types.json: benchmarks[0].real_time: expected a number, got string"), std::string::npos) << r.err;
  r = run({"bench", "record", (kTestdata / "gbench_interleaved.json").string()});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("give --history DIR or --out FILE"), std::string::npos) << r.err;
  r = run({"bench", "record", (kTestdata / "gbench_interleaved.json").string(), "--out", out, "--sm-clock-mhz", "fast"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("--sm-clock-mhz"), std::string::npos) << r.err;
  r = run({"bench", "record", (kTestdata / "gbench_interleaved.json").string(), "--out", out, "--commit", "../x"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(BenchCommandTest, CompareOfAHistoryFindsTheRegression) {
  const fs::path history = recorded_history();
  const Result r = run({"bench", "compare", history.string()});
  EXPECT_EQ(r.code, kExitDifferent) << r.out << r.err;
  auto line_of = [&](const std::string& kernel) {
    const size_t at = r.out.find("\n" + kernel);
    return at == std::string::npos ? std::string() : r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line_of("swiglu_fwd/").find("-10.0%"), std::string::npos) << r.out;
  EXPECT_NE(line_of("swiglu_fwd/").find("FASTER"), std::string::npos) << r.out;
  EXPECT_NE(line_of("swiglu_bwd/").find("+15.0%"), std::string::npos) << r.out;
  EXPECT_NE(line_of("swiglu_bwd/").find("SLOWER"), std::string::npos) << r.out;
  EXPECT_NE(line_of("permute_fwd/").find("SAME"), std::string::npos) << r.out;
  EXPECT_NE(line_of("router_topk_fwd/").find("UNSURE  (2 vs 2 repetitions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("only in the old run: unpermute_fwd/"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("only in the new run: embedding_fwd/"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("old: 2026-11-30T10:00:00Z commit 89abcdef0123"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 kernels compared: 1 SLOWER, 1 FASTER, 1 SAME, 1 UNSURE"), std::string::npos) << r.out;

  // The same two runs named one by one (a run file and the folder's latest), and as raw JSON.
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(history)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(run({"bench", "compare", files[0].string(), history.string()}).code, kExitDifferent);
  EXPECT_EQ(run({"bench", "compare", (kTestdata / "compare_old.json").string(),
                 (kTestdata / "compare_new.json").string()})
                .code,
            kExitDifferent);
  // A 20% minimum effect leaves swiglu_bwd's 15% SAME: nothing is slower.
  const Result lenient = run({"bench", "compare", history.string(), "--min-effect", "20"});
  EXPECT_EQ(lenient.code, kExitOk) << lenient.out;
  EXPECT_NE(lenient.out.find("0 SLOWER, 0 FASTER, 3 SAME, 1 UNSURE"), std::string::npos) << lenient.out;
}

TEST_F(BenchCommandTest, CompareExitCodes) {
  const std::string old_run = (kTestdata / "compare_old.json").string();
  // A run against itself: every kernel SAME, except router_topk's 2 and unpermute's 1 repetition
  // (UNSURE).
  Result r = run({"bench", "compare", old_run, old_run});
  EXPECT_EQ(r.code, kExitOk) << r.out;
  EXPECT_NE(r.out.find("0 SLOWER, 0 FASTER, 3 SAME, 2 UNSURE"), std::string::npos) << r.out;
  EXPECT_EQ(run({"bench", "compare", old_run, old_run, "--fail-on-unsure"}).code, kExitDifferent);
  // Reversed, swiglu_fwd is the slower one.
  r = run({"bench", "compare", (kTestdata / "compare_new.json").string(), old_run});
  EXPECT_EQ(r.code, kExitDifferent);
  EXPECT_NE(r.out.find("1 SLOWER, 1 FASTER"), std::string::npos) << r.out;
}

TEST_F(BenchCommandTest, CompareRefusesWhatItCannotRead) {
  const std::string good = (kTestdata / "compare_old.json").string();
  Result r = run({"bench", "compare", good, file("garbage.json", "\x01\x02 not json")});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("garbage.json: the file is not valid JSON"), std::string::npos) << r.err;
  r = run({"bench", "compare", good, file("other.json", R"({"format": "bitparity-report/1"})")});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("other.json: format: expected \"bitparity-bench/1\""), std::string::npos) << r.err;
  r = run({"bench", "compare", good, (dir_ / "missing.json").string()});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("missing.json: cannot read the file"), std::string::npos) << r.err;
  // No kernel in common.
  r = run({"bench", "compare", good,
           file("elsewhere.json", R"({"benchmarks": [{"name": "other", "real_time": 5, "time_unit": "us"}]})")});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("no kernel appears in both runs (5 and 1 kernels)"), std::string::npos) << r.err;
  // One run in a folder, an empty folder, a file where a folder is needed, bad options.
  const fs::path one = dir_ / "one";
  ASSERT_EQ(run({"bench", "record", good, "--history", one.string()}).code, kExitOk);
  EXPECT_NE(run({"bench", "compare", one.string()}).err.find("the history holds one run"), std::string::npos);
  fs::create_directories(dir_ / "empty");
  EXPECT_NE(run({"bench", "compare", (dir_ / "empty").string(), good}).err.find("holds no run file"), std::string::npos);
  EXPECT_EQ(run({"bench", "compare", good}).code, kExitError);
  EXPECT_EQ(run({"bench", "compare", good, good, "--alpha", "2"}).code, kExitError);
  EXPECT_EQ(run({"bench", "compare", good, good, "--min-effect", "-1"}).code, kExitError);
  EXPECT_EQ(run({"bench", "compare", good, good, "--alpha", "nan"}).code, kExitError);
  EXPECT_EQ(run({"bench", "compare", good, good, good}).code, kExitError);
  // A hostile run file in a history folder is named.
  std::ofstream(one / "zz_hostile.json") << R"({"format": "bitparity-bench/1", "context": 5, "copy_gb_per_s": null, "kernels": []})";
  r = run({"bench", "compare", one.string(), good});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("zz_hostile.json: context: expected an object, got integer"), std::string::npos) << r.err;
}

TEST_F(BenchCommandTest, RunInterleavesRepetitionsAndAddsTheGpu) {
  ::setenv("PATH", ((kTestdata / "fake_bin").string() + ":" + saved_path_).c_str(), 1);
  const fs::path args = dir_ / "args.txt";
  ::setenv("BITPARITY_FAKE_BENCH_ARGS", args.c_str(), 1);
  const fs::path history = dir_ / "history", out = dir_ / "run.json";
  const Result r = run({"bench", "run", "--benchmark", (kTestdata / "fake_kernel_bench.sh").string(), "--filter",
                        "swiglu.*/ilp:0", "--repetitions", "7", "--history", history.string(), "--out", out.string(),
                        "--commit", kCommit});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const std::string given = read_text(args);
  for (const char* expected : {"--benchmark_repetitions=7\n", "--benchmark_enable_random_interleaving=true\n",
                               "--benchmark_out_format=json\n", "--benchmark_filter=swiglu.*/ilp:0\n"})
    EXPECT_NE(given.find(expected), std::string::npos) << expected << " not in\n" << given;
  EXPECT_EQ(given.find("--benchmark_report_aggregates_only=true"), std::string::npos);  // repetitions are kept
  const reports::BenchRun kept = reports::read_bench_run(out);
  // nvidia-smi's first GPU.
  EXPECT_EQ(kept.context.gpu, "NVIDIA H200");
  EXPECT_EQ(kept.context.driver, "570.124.06");
  EXPECT_EQ(kept.context.sm_clock_mhz, 1980);
  EXPECT_EQ(kept.context.mem_clock_mhz, 3201);
  EXPECT_EQ(kept.context.commit, kCommit);
  EXPECT_EQ(kept.kernels.size(), 5u);
  EXPECT_EQ(std::distance(fs::directory_iterator(history), fs::directory_iterator()), 1);
  // The temporary Google Benchmark file is gone.
  const std::string temp = given.substr(given.find("--benchmark_out=") + 16);
  EXPECT_FALSE(fs::exists(temp.substr(0, temp.find('\n'))));
}

TEST_F(BenchCommandTest, RunWithoutNvidiaSmiKeepsNulls) {
  if (fs::exists("/usr/bin/nvidia-smi") || fs::exists("/bin/nvidia-smi")) GTEST_SKIP() << "this machine has nvidia-smi";
  ::setenv("PATH", "/bin:/usr/bin", 1);  // the stand-in benchmark's sh, cp and dirname; no nvidia-smi
  const fs::path out = dir_ / "run.json";
  const Result r = run({"bench", "run", "--benchmark", (kTestdata / "fake_kernel_bench.sh").string(), "--out",
                        out.string(), "--commit", kCommit});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const reports::BenchRun kept = reports::read_bench_run(out);
  EXPECT_EQ(kept.context.gpu, "NVIDIA H200");  // kernel_bench's own context still names it
  EXPECT_EQ(kept.context.driver, std::nullopt);
  EXPECT_EQ(kept.context.sm_clock_mhz, std::nullopt);
  EXPECT_NE(r.err.find("note: nvidia-smi"), std::string::npos) << r.err;
}

TEST_F(BenchCommandTest, RunFailuresKeepNothing) {
  const fs::path out = dir_ / "run.json";
  ::setenv("FAKE_BENCH_FAIL", "1", 1);
  Result r = run({"bench", "run", "--benchmark", (kTestdata / "fake_kernel_bench.sh").string(), "--out", out.string()});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("fake_kernel_bench.sh exited with status 3; nothing was kept"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  ::unsetenv("FAKE_BENCH_FAIL");
  r = run({"bench", "run", "--benchmark", (dir_ / "absent").string(), "--out", out.string()});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("absent does not exist"), std::string::npos) << r.err;
  r = run({"bench", "run", "--benchmark", (kTestdata / "fake_kernel_bench.sh").string(), "--out", out.string(),
           "--repetitions", "0"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("--repetitions"), std::string::npos) << r.err;
  r = run({"bench", "run", "--benchmark", (kTestdata / "fake_kernel_bench.sh").string(), "--out",
           (dir_ / "no/such/folder/run.json").string()});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(BenchCommandTest, HelpExplainsEachSubcommand) {
  for (const char* sub : {"run", "record", "compare"}) {
    const Result r = run({"bench", sub, "--help"});
    EXPECT_EQ(r.code, kExitOk) << sub;
    EXPECT_NE(r.out.find("Example"), std::string::npos) << sub;
    EXPECT_NE(r.out.find("bitparity bench " + std::string(sub)), std::string::npos) << r.out;
  }
  const Result compare = run({"bench", "compare", "--help"});
  for (const char* word : {"Mann-Whitney", "FASTER", "SLOWER", "SAME", "UNSURE", "Exit status: 0", "1 at least one",
                           "2 an input"})
    EXPECT_NE(compare.out.find(word), std::string::npos) << word;
  const Result bench = run({"bench", "--help"});
  EXPECT_EQ(bench.code, kExitOk);
  EXPECT_NE(bench.out.find("Examples"), std::string::npos);
  EXPECT_EQ(run({"bench"}).code, kExitError);  // a subcommand is required
  EXPECT_EQ(run({"bench", "compare", "a", "b", "--no-such-flag"}).code, kExitError);
}

}  // namespace
}  // namespace bitparity::cli
