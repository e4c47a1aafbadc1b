// The bitparity-bench/1 history: import from Google Benchmark's JSON (hand-written fixture in
// bench/testdata/, expected values worked out by hand below), round trip, oldest-first history,
// and hostile files refused with messages that name the file and the key.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/json_strict.h"
#include "reports/bench_history.h"

namespace bitparity::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixture = fs::path(BITPARITY_SOURCE_DIR) / "bench/testdata/gbench_interleaved.json";
constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";

class BenchHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bitparity_bench_history_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  BenchRun fixture_run() {
    BenchContext context;
    context.commit = kCommit;
    context.gpu = "NVIDIA H200";
    context.driver = "570.124.06";
    context.sm_clock_mhz = 1980;
    context.mem_clock_mhz = 3201;
    return bench_run_from_google_benchmark(parse_json_text(read_document(kFixture), "fixture"), context);
  }

  // Writes `text` as a run file and returns the error message read_bench_run gives.
  std::string rejection(const std::string& text) {
    const fs::path file = dir_ / "hostile.json";
    std::ofstream(file) << text;
    try {
      read_bench_run(file);
    } catch (const ParseError& e) {
      return e.what();
    }
    ADD_FAILURE() << "accepted: " << text.substr(0, 200);
    return "";
  }

  std::string mutated(const std::function<void(json&)>& change) {
    json j = bench_run_to_json(fixture_run());
    change(j);
    return rejection(j.dump());
  }

  fs::path dir_;
};

TEST_F(BenchHistoryTest, ImportsGoogleBenchmarkRepetitions) {
  const BenchRun run = fixture_run();
  // The fixture's -05:00 local time, in UTC; its host and library; the given GPU and commit.
  EXPECT_EQ(run.context.date, "2026-12-02T01:15:03Z");
  EXPECT_EQ(run.context.host, "gpu-node-3");
  EXPECT_EQ(run.context.benchmark_library, "v1.7.1");
  EXPECT_EQ(run.context.gpu, "NVIDIA H200");
  EXPECT_EQ(run.context.commit, kCommit);
  // Registration order (family_index), not the interleaved order of the document; the skipped
  // permute benchmark and the aggregate are left out.
  ASSERT_EQ(run.kernels.size(), 3u);
  const BenchKernel& fwd = run.kernels[0];
  EXPECT_EQ(fwd.name, "swiglu_fwd/megatron_eager/rows16384_F1408/ilp:0/min_time:0.100/manual_time");
  EXPECT_EQ(fwd.op, "swiglu");
  EXPECT_EQ(fwd.direction, "fwd");
  EXPECT_EQ(fwd.contract, "megatron_eager");
  EXPECT_EQ(fwd.times_ns, (std::vector<double>{100000, 120000, 110000}));  // 100, 120, 110 us
  EXPECT_DOUBLE_EQ(fwd.time_ns, 110000);
  EXPECT_DOUBLE_EQ(fwd.bytes, 88e6);
  EXPECT_DOUBLE_EQ(*fwd.gb_per_s, 800);       // 88e6 bytes / 110000 ns
  EXPECT_DOUBLE_EQ(*fwd.copy_gb_per_s, 4000);  // median of 4000, 3800, 4200
  EXPECT_DOUBLE_EQ(*fwd.pct_of_copy, 20);
  EXPECT_FALSE(fwd.flops);
  EXPECT_FALSE(fwd.tflop_per_s);

  const BenchKernel& bwd = run.kernels[1];
  EXPECT_EQ(bwd.op, "swiglu_scale");  // the op's own underscore is kept
  EXPECT_EQ(bwd.direction, "bwd");
  EXPECT_EQ(bwd.contract, "paddle_fused");
  EXPECT_DOUBLE_EQ(bwd.time_ns, 45000);  // even count: the mean of 40 and 50 us
  EXPECT_DOUBLE_EQ(*bwd.gb_per_s, 2000);
  EXPECT_DOUBLE_EQ(*bwd.copy_gb_per_s, 3700);
  EXPECT_NEAR(*bwd.pct_of_copy, 54.054054, 1e-6);

  const BenchKernel& launch = run.kernels[2];
  EXPECT_EQ(launch.name, "launch/empty_kernel/manual_time");
  EXPECT_FALSE(launch.op);
  EXPECT_EQ(launch.bytes, 0);
  EXPECT_FALSE(launch.gb_per_s);
  EXPECT_FALSE(launch.copy_gb_per_s);
  EXPECT_DOUBLE_EQ(launch.time_ns, 491000);

  EXPECT_DOUBLE_EQ(*run.copy_gb_per_s, 3850);  // median of 4000 and 3700
}

TEST_F(BenchHistoryTest, TakesTheGpuFromKernelBenchContext) {
  json gbench = parse_json_text(read_document(kFixture), "fixture");
  EXPECT_EQ(bench_run_from_google_benchmark(gbench, BenchContext{}).context.gpu, "NVIDIA H200");
  gbench["context"]["device"] = "no CUDA device (cudaGetDeviceCount: no CUDA-capable device is detected)";
  EXPECT_EQ(bench_run_from_google_benchmark(gbench, BenchContext{}).context.gpu, std::nullopt);
}

TEST_F(BenchHistoryTest, RoundTripsThroughTheWriter) {
  BenchRun run = fixture_run();
  run.kernels[1].flops = 3e9;
  complete_run(run);
  EXPECT_DOUBLE_EQ(*run.kernels[1].tflop_per_s, 3e9 / 45000 / 1000);
  const fs::path file = dir_ / history_file_name(run.context);
  EXPECT_EQ(file.filename(), "20261202T011503Z_0123456.json");
  write_bench_run(run, file);
  EXPECT_EQ(read_bench_run(file), run);
  // No temporary file is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(BenchHistoryTest, WriterRefusesWhatTheReaderWouldRefuse) {
  BenchRun run = fixture_run();
  run.kernels[0].time_ns = 1;  // not the median of its times
  EXPECT_THROW(write_bench_run(run, dir_ / "bad.json"), std::invalid_argument);
  run = fixture_run();
  run.kernels[0].times_ns[0] = -5;
  EXPECT_THROW(write_bench_run(run, dir_ / "bad.json"), std::invalid_argument);
  EXPECT_FALSE(fs::exists(dir_ / "bad.json"));
}

TEST_F(BenchHistoryTest, HistoryIsOldestFirst) {
  const fs::path history = dir_ / "history";
  fs::create_directories(history);
  BenchRun run = fixture_run();
  // Written newest first, and one file name that would sort first by name but is the newest.
  for (const char* date : {"2026-12-03T00:00:00Z", "2026-11-30T23:59:59Z", "2026-12-01T12:00:00Z"}) {
    run.context.date = date;
    write_bench_run(run, history / history_file_name(run.context));
  }
  run.context.date = "2026-12-04T00:00:00Z";
  write_bench_run(run, history / "0_renamed.json");
  std::ofstream(history / ".0_renamed.json.tmp.1.2") << "partial";  // an interrupted write
  std::ofstream(history / "notes.txt") << "not a run";
  const std::vector<BenchRun> runs = read_bench_history(history);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].context.date, "2026-11-30T23:59:59Z");
  EXPECT_EQ(runs[1].context.date, "2026-12-01T12:00:00Z");
  EXPECT_EQ(runs[2].context.date, "2026-12-03T00:00:00Z");
  EXPECT_EQ(runs[3].context.date, "2026-12-04T00:00:00Z");
  EXPECT_THROW(read_bench_history(dir_ / "absent"), ParseError);
}

TEST_F(BenchHistoryTest, HistoryNamesTheBrokenFile) {
  const fs::path history = dir_ / "history";
  fs::create_directories(history);
  write_bench_run(fixture_run(), history / "good.json");
  std::ofstream(history / "broken.json") << R"({"format": "bitparity-bench/1", "context": )";
  try {
    read_bench_history(history);
    FAIL() << "read a history with a truncated file";
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: the file is not valid JSON"), std::string::npos) << e.what();
  }
}

// Documents that are not run files at all.
TEST_F(BenchHistoryTest, NonRunFilesAreRefusedNamingTheFile) {
  const std::string file = (dir_ / "hostile.json").string() + ": ";
  auto starts_with = [](const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; };
  EXPECT_PRED2(starts_with, rejection(R"({"format": "bitparity-bench/1", "context": {"date": )"),
               file + "the file is not valid JSON");
  EXPECT_PRED2(starts_with, rejection(R"({"format": "bitparity-bench/1", "copy_gb_per_s": NaN})"),
               file + "the file is not valid JSON");
  EXPECT_PRED2(starts_with, rejection("[1, 2]"), file + "expected a bitparity-bench/1 object, got array");
  EXPECT_PRED2(starts_with, rejection(R"({"format": "bitparity-report/1"})"),
               file + "format: expected \"bitparity-bench/1\", got \"bitparity-report/1\"");
  EXPECT_PRED2(starts_with, rejection(R"({"format": 1})"), file + "format: expected a string, got integer");
  EXPECT_PRED2(starts_with, rejection(R"({"format": "bitparity-bench/1", "format": "bitparity-bench/1"})"),
               file + "format: duplicate key");
}

struct Hostile {
  const char* what;
  std::function<void(json&)> change;
  const char* message;  // after "<file>: "
};

class HostileRunFile : public BenchHistoryTest, public ::testing::WithParamInterface<int> {};

const std::vector<Hostile>& hostile_cases() {
  static const std::vector<Hostile> cases = {
      {"a time of the wrong type", [](json& j) { j["kernels"][0]["times_ns"][1] = "fast"; },
       "kernels[0].times_ns[1]: expected a number, got string"},
      {"a negative time", [](json& j) { j["kernels"][1]["times_ns"][0] = -40000.0; },
       "kernels[1].times_ns[0]: expected a positive, finite time in ns"},
      {"a zero time", [](json& j) { j["kernels"][1]["times_ns"][0] = 0; },
       "kernels[1].times_ns[0]: expected a positive, finite time in ns"},
      {"no repetitions", [](json& j) { j["kernels"][0]["times_ns"] = json::array(); },
       "kernels[0].times_ns: expected at least one repetition"},
      {"a missing key", [](json& j) { j["kernels"][2].erase("bytes"); }, "kernels[2].bytes: missing"},
      {"a missing context key", [](json& j) { j["context"].erase("gpu"); },
       "context.gpu: missing (use null where there is no value)"},
      {"an unknown key", [](json& j) { j["kernels"][0]["speedup"] = 2; },
       "kernels[0].\"speedup\": unknown key (format bitparity-bench/1)"},
      {"an unknown top-level key", [](json& j) { j["notes"] = "x"; }, "\"notes\": unknown key"},
      {"a median that is not one", [](json& j) { j["kernels"][0]["time_ns"] = 100000; },
       "kernels[0].time_ns: 100000 is not the median of times_ns (110000)"},
      {"a rate that does not follow", [](json& j) { j["kernels"][0]["gb_per_s"] = 900; },
       "kernels[0].gb_per_s: 900 is not bytes / time_ns"},
      {"a run copy bandwidth that is not the median",
       [](json& j) { j["copy_gb_per_s"] = nullptr; },
       "copy_gb_per_s: null is not the median of the kernels' copy_gb_per_s"},
      {"a kernel listed twice", [](json& j) { j["kernels"][1]["name"] = j["kernels"][0]["name"]; },
       "kernels[1].name: \"swiglu_fwd/megatron_eager"},
      {"a local date", [](json& j) { j["context"]["date"] = "2026-12-02T01:15:03+01:00"; },
       "context.date: expected an ISO-8601 UTC date"},
      {"an impossible date", [](json& j) { j["context"]["date"] = "2026-02-30T00:00:00Z"; },
       "context.date: expected an ISO-8601 UTC date"},
      {"a clock of the wrong type", [](json& j) { j["context"]["sm_clock_mhz"] = "1980 MHz"; },
       "context.sm_clock_mhz: expected a number, got string"},
      {"a negative byte count", [](json& j) { j["kernels"][2]["bytes"] = -1; }, "kernels[2].bytes: expected a number >= 0"},
      {"a kernels object", [](json& j) { j["kernels"] = json::object(); }, "kernels: expected an array, got object"},
      {"a huge number", [](json& j) { j["kernels"][0]["bytes"] = 1e308; },
       "kernels[0].gb_per_s"},  // bytes 1e308 is finite, but the stored rate no longer follows
  };
  return cases;
}

TEST_P(HostileRunFile, IsRefused) {
  const Hostile& h = hostile_cases()[GetParam()];
  const std::string message = mutated(h.change);
  const std::string expected = (dir_ / "hostile.json").string() + ": " + h.message;
  EXPECT_EQ(message.rfind(expected, 0), 0u) << h.what << "\n  got:      " << message << "\n  expected: " << expected;
}

INSTANTIATE_TEST_SUITE_P(All, HostileRunFile, ::testing::Range(0, static_cast<int>(hostile_cases().size())));

TEST_F(BenchHistoryTest, HugeAndEndlessFilesAreRefusedBeforeParsing) {
  const fs::path file = dir_ / "huge.json";
  { std::ofstream(file) << "{"; }
  fs::resize_file(file, kMaxBenchFileBytes + 1);  // sparse: no 64 MiB written
  try {
    read_bench_run(file);
    FAIL() << "read a file over the limit";
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string() + ": the file is larger than the limit"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(read_bench_run("/dev/zero"), ParseError);
  EXPECT_THROW(read_bench_run(dir_), ParseError);
}

TEST(GoogleBenchmarkImport, RefusesMalformedDocuments) {
  const auto import = [](const std::string& text) {
    return bench_run_from_google_benchmark(json::parse(text), BenchContext{});
  };
  auto message = [&](const std::string& text) -> std::string {
    try {
      import(text);
    } catch (const ParseError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(message(R"({"context": {}})"), "benchmarks: missing");
  EXPECT_EQ(message(R"({"benchmarks": [{"name": "a", "real_time": 5, "time_unit": "fortnights"}]})"),
            "benchmarks[0].time_unit: unknown time unit \"fortnights\" (expected ns, us, ms or s)");
  EXPECT_EQ(message(R"({"benchmarks": [{"name": "a", "real_time": -5}]})"),
            "benchmarks[0].real_time: expected a number > 0");
  EXPECT_EQ(message(R"({"benchmarks": [{"name": "a", "real_time": 5, "copy_GB/s": "fast"}]})"),
            "benchmarks[0].copy_GB/s: expected a number, got string");
  EXPECT_EQ(message(R"({"benchmarks": [{"real_time": 5}]})"), "benchmarks[0].name: missing");
  EXPECT_EQ(message(R"({"benchmarks": [{"name": "a", "real_time": 5, "error_occurred": true,
                                        "error_message": "no CUDA device"}]})"),
            "benchmarks: every benchmark was skipped; the first: benchmarks[0].name \"a\": no CUDA device");
  EXPECT_EQ(message(R"({"benchmarks": []})"), "benchmarks: no benchmark with a time (only aggregates, or none)");
  // Without a date in the document, the import is dated now (a valid UTC date).
  const BenchRun run = import(R"({"benchmarks": [{"name": "a", "real_time": 5}]})");
  EXPECT_EQ(to_utc_date(run.context.date), run.context.date);
  EXPECT_EQ(run.context.commit, "unknown");
  EXPECT_DOUBLE_EQ(run.kernels[0].time_ns, 5);  // no unit: ns
}

TEST(BenchDates, ConvertToUtc) {
  EXPECT_EQ(to_utc_date("2026-12-02T00:57:20Z"), "2026-12-02T00:57:20Z");
  EXPECT_EQ(to_utc_date("2026-12-01T23:30:00-01:30"), "2026-12-02T01:00:00Z");
  EXPECT_EQ(to_utc_date("2027-01-01T00:30:00+0100"), "2026-12-31T23:30:00Z");  // across a year
  EXPECT_EQ(to_utc_date("2024-02-29T12:00:00.123456Z"), "2024-02-29T12:00:00Z");  // a leap day, fraction dropped
  EXPECT_EQ(to_utc_date("2025-02-29T12:00:00Z"), std::nullopt);
  EXPECT_EQ(to_utc_date("2026-12-02 00:57:20"), std::nullopt);  // Google Benchmark before 1.5: no zone
  EXPECT_EQ(to_utc_date("2026-12-02T24:00:00Z"), std::nullopt);
  EXPECT_EQ(to_utc_date(""), std::nullopt);
  EXPECT_EQ(to_utc_date("2026-12-02T00:57:20Z "), std::nullopt);
}

TEST(BenchHistoryName, UsesDateAndShortCommit) {
  BenchContext c;
  c.date = "2026-12-02T00:57:20Z";
  c.commit = "659022a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6";
  EXPECT_EQ(history_file_name(c), "20261202T005720Z_659022a.json");
  c.commit = "../../etc";  // never part of a path
  EXPECT_EQ(history_file_name(c), "20261202T005720Z_unknown.json");
  c.date = "yesterday";
  EXPECT_THROW(history_file_name(c), std::invalid_argument);
}

}  // namespace
}  // namespace bitparity::reports
