// The performance history, `bitparity-bench/1`: one file per benchmark run with its context (GPU,
// driver, clocks, commit, date), every kernel's per-repetition times, bytes and rates, and the
// device-to-device copy bandwidth measured in the same run (the roofline the kernels are read
// against). `bitparity bench` writes these files, `bitparity bench compare` and the dashboard read
// them through this header.
//
// A history folder holds one file per run, named `<date>_<shortcommit>.json` with the date in
// ISO-8601 basic form (20261202T005720Z_659022a.json), so that a listing sorts oldest first.
//
// Files travel between machines, so the reader is strict: every key of the format is required
// (null where the format allows it), no other key is accepted, numbers are finite and times
// positive, and every error is a ParseError whose message starts with the file and names the key
// ("h/x.json: kernels[2].times_ns[0]: expected a positive time"). The writer checks the same
// rules first, so that it never writes a file the reader refuses.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace bitparity::reports {

inline constexpr std::string_view kBenchFormat = "bitparity-bench/1";

// A run file is small (a few hundred kernels, each a few dozen repetitions): anything near this
// is not one, and is refused before it is parsed.
inline constexpr size_t kMaxBenchFileBytes = size_t{64} << 20;
inline constexpr size_t kMaxBenchKernels = 100000;
inline constexpr size_t kMaxBenchRepetitions = 10000;
// A history folder with more files than this is refused rather than read for minutes.
inline constexpr size_t kMaxHistoryRuns = 100000;

struct BenchContext {
  std::string date;    // ISO-8601 UTC, "2026-12-02T00:57:20Z"
  std::string commit;  // the full hash, or "unknown"
  std::string host;
  std::optional<std::string> gpu;     // "NVIDIA H200"
  std::optional<std::string> driver;  // "570.124.06"
  std::optional<double> sm_clock_mhz, mem_clock_mhz;
  std::optional<std::string> benchmark_library;  // Google Benchmark's library_version
  bool operator==(const BenchContext&) const = default;
};

struct BenchKernel {
  std::string name;  // <op>_<direction>/<contract>/<reference input>/ilp:<n>
  // Parsed from the name; null for a benchmark named otherwise (launch latency).
  std::optional<std::string> op, direction, contract;
  double bytes = 0;  // effective bytes per iteration (0: the benchmark moves none)
  std::optional<double> flops;  // floating-point operations per iteration
  std::vector<double> times_ns;  // per repetition: real time per iteration, in ns
  double time_ns = 0;            // the median of times_ns
  std::optional<double> gb_per_s, tflop_per_s;  // bytes / time_ns, flops / time_ns
  std::optional<double> copy_gb_per_s;          // median of the same run's copy bandwidth
  std::optional<double> pct_of_copy;            // 100 * gb_per_s / copy_gb_per_s
  bool operator==(const BenchKernel&) const = default;
};

struct BenchRun {
  BenchContext context;
  std::optional<double> copy_gb_per_s;  // median of the kernels' copy_gb_per_s; null if none
  std::vector<BenchKernel> kernels;
  bool operator==(const BenchRun&) const = default;
};

// Strict reading of one run file; errors are ParseErrors naming the file and the key.
BenchRun read_bench_run(const std::filesystem::path& file);
// Writes the run atomically (a temporary file, synced and renamed); refuses (std::invalid_argument)
// a run that read_bench_run would refuse.
void write_bench_run(const BenchRun& run, const std::filesystem::path& file);
// Every run file (`*.json`, hidden files skipped) directly in `dir`, oldest first (by
// context.date, then by file name). A file that is not a run file is an error naming it.
std::vector<BenchRun> read_bench_history(const std::filesystem::path& dir);

// A run from Google Benchmark's JSON (--benchmark_out_format=json). Repetitions of one benchmark
// (entries of run_type "iteration" with one run_name) become one kernel; aggregates (mean,
// median, stddev) are ignored, since they are recomputed from the repetitions; a benchmark that
// was skipped with an error is left out, and a document in which every benchmark was is an
// error that quotes the first message. Counters read: bytes, flops, copy_GB/s. Empty fields of
// `context` (date, host, benchmark_library, gpu) are filled from the document's context (its date
// converted to UTC; the GPU from kernel_bench's "device" entry). Errors are ParseErrors naming the key ("benchmarks[3].real_time").
BenchRun bench_run_from_google_benchmark(const nlohmann::json& gbench, BenchContext context);

// --- helpers shared with the commands -----------------------------------------------------------

nlohmann::json bench_run_to_json(const BenchRun& run);
// Strict; ParseErrors name the key but not the file (read_bench_run adds it).
BenchRun bench_run_from_json(const nlohmann::json& document);
// The kernel's derived fields (time_ns, gb_per_s, tflop_per_s, pct_of_copy) from times_ns, bytes,
// flops and copy_gb_per_s; the run's copy_gb_per_s from its kernels'.
void complete_kernel(BenchKernel& kernel);
void complete_run(BenchRun& run);
double median(std::vector<double> values);

// "2026-12-02T00:57:20Z" -> "20261202T005720Z_659022a.json" (a commit that is not hex gives
// "unknown"). A date that is not in the format's form is std::invalid_argument.
std::string history_file_name(const BenchContext& context);
// An ISO-8601 date with a zone ("2026-12-02T01:57:20+01:00", "...Z") as UTC "2026-12-02T00:57:20Z";
// nullopt when `text` is in no such form.
std::optional<std::string> to_utc_date(std::string_view text);
// The present time in the format's form.
std::string utc_now();

}  // namespace bitparity::reports
