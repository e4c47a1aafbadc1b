// `bitparity bench`: the kernel benchmarks' performance history and the regression check.
//
//   bench run      runs kernel_bench with interleaved repetitions and keeps the run
//   bench record   keeps a Google Benchmark JSON that was produced elsewhere
//   bench compare  FASTER / SLOWER / SAME / UNSURE per kernel between two runs
//
// Runs are bitparity-bench/1 files (reports/bench_history.h); a history is a folder of them.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/numbers.h"
#include "cli/util.h"
#include "core/error.h"
#include "core/json_strict.h"
#include "core/safe_file.h"
#include "reports/bench_compare.h"
#include "reports/bench_history.h"

extern char** environ;

namespace bitparity::cli {
namespace {

namespace fs = std::filesystem;
using reports::BenchContext;
using reports::BenchRun;

constexpr const char* kDefaultRepetitions = "10";
// nvidia-smi prints one short line per GPU; more than this is not its answer.
constexpr size_t kMaxCapturedBytes = size_t{64} << 10;
constexpr double kMaxClockMhz = 1e6;
constexpr double kPercent = 100;

struct RunFlags {
  std::string benchmark, filter, repetitions = kDefaultRepetitions, history, out, commit;
};

struct RecordFlags {
  std::string gbench, history, out, commit, gpu, driver, sm_clock, mem_clock;
};

struct CompareFlags {
  std::vector<std::string> runs;
  std::string alpha = "0.05", min_effect = "5";
  bool fail_on_unsure = false;
};

// --- child processes ----------------------------------------------------------------------------

struct ProgramResult {
  int status = -1;  // the exit status, or -1 when it did not exit normally
  std::string description;  // "exited with status 3", "was killed by signal 9"
  std::string output;       // stdout, when captured
};

// Runs argv[0] (a path, or a name searched in PATH) without a shell, so that no argument is ever
// interpreted; stdout is captured (up to kMaxCapturedBytes) or passed through, stderr passes through.
ProgramResult run_program(const std::vector<std::string>& args, bool capture) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int pipe_fds[2] = {-1, -1};
  if (capture) {
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("cannot create a pipe: " + std::string(std::strerror(errno)));
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  }
  pid_t pid = 0;
  const int error = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ProgramResult result;
  if (capture) ::close(pipe_fds[1]);
  if (error != 0) {
    if (capture) ::close(pipe_fds[0]);
    result.description = "could not be started (" + std::string(std::strerror(error)) + ")";
    return result;
  }
  if (capture) {
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (result.output.size() < kMaxCapturedBytes) result.output.append(buffer, static_cast<size_t>(n));
    }
    ::close(pipe_fds[0]);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.status = WEXITSTATUS(status);
    result.description = "exited with status " + std::to_string(result.status);
  } else if (WIFSIGNALED(status)) {
    result.description = "was killed by signal " + std::to_string(WTERMSIG(status));
  }
  return result;
}

// --- the machine --------------------------------------------------------------------------------

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// "1980 MHz" -> 1980; "[N/A]" or anything else -> nullopt.
std::optional<double> parse_clock(const std::string& text) {
  const std::string t = trim(text);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || !(v > 0 && v < kMaxClockMhz)) return std::nullopt;
  const std::string rest = trim(end);
  if (!rest.empty() && rest != "MHz") return std::nullopt;
  return v;
}

// The first GPU as nvidia-smi reports it; where nvidia-smi is missing or fails, the fields stay
// null: the run is still kept, with what is known.
void query_gpu(BenchContext& context) {
  const ProgramResult r =
      run_program({"nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem", "--format=csv,noheader"}, true);
  if (r.status != 0) {
    std::cerr << "note: nvidia-smi " << r.description << "; the run's GPU, driver and clocks stay null\n";
    return;
  }
  const std::string line = r.output.substr(0, r.output.find('\n'));
  std::vector<std::string> fields;
  for (size_t start = 0;;) {
    const size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (fields.size() != 4 || fields[0].empty()) {
    std::cerr << "note: nvidia-smi's answer is not name, driver, clocks; the run's GPU fields stay null\n";
    return;
  }
  context.gpu = fields[0];
  if (!fields[1].empty() && fields[1] != "[N/A]") context.driver = fields[1];
  context.sm_clock_mhz = parse_clock(fields[2]);
  context.mem_clock_mhz = parse_clock(fields[3]);
}

// kernel_bench of the build this bitparity belongs to: build/<preset>/bench/kernel_bench beside
// build/<preset>/cli/bitparity.
fs::path default_benchmark() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  const fs::path guess = error ? fs::path("bench/kernel_bench") : self.parent_path().parent_path() / "bench/kernel_bench";
  if (!fs::exists(guess))
    throw std::runtime_error("no kernel benchmark at " + guess.string() +
                             " (build it with `cmake --build build/default --target kernel_bench`, which needs nvcc, "
                             "or give --benchmark PATH)");
  return guess;
}

std::string commit_or_current(const std::string& flag) {
  if (flag.empty()) return current_commit();
  if (flag.size() > 64 || flag.find_first_of(" \t\r\n/") != std::string::npos)
    throw std::runtime_error("--commit: " + excerpt(flag) + " is not a commit (a hash or a short name)");
  return flag;
}

// --- outputs ------------------------------------------------------------------------------------

void check_outputs(const std::string& history, const std::string& out) {
  if (history.empty() && out.empty()) throw ParseError("", "give --history DIR or --out FILE (or both): where the run goes");
  if (!history.empty()) check_output_folder(history);
  if (!out.empty()) check_output_file(out);
}

// `<dir>/<date>_<shortcommit>.json`, with -2, -3, ... when a run of the same second and commit is there.
fs::path free_history_path(const fs::path& dir, const BenchContext& context) {
  const std::string name = reports::history_file_name(context);
  const std::string stem = name.substr(0, name.size() - std::string(".json").size());
  fs::path path = dir / name;
  for (int n = 2; fs::exists(fs::symlink_status(path)); ++n) path = dir / (stem + "-" + std::to_string(n) + ".json");
  return path;
}

void keep(const BenchRun& run, const std::string& history, const std::string& out) {
  if (!history.empty()) {
    fs::create_directories(history);
    const fs::path path = free_history_path(history, run.context);
    reports::write_bench_run(run, path);
    std::cout << "wrote " << path.string() << "\n";
  }
  if (!out.empty()) {
    reports::write_bench_run(run, out);
    std::cout << "wrote " << out << "\n";
  }
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

void print_summary(const BenchRun& run) {
  size_t width = std::string("kernel").size();
  for (const reports::BenchKernel& k : run.kernels) width = std::max(width, k.name.size());
  auto cell = [](const std::string& text, size_t w) { return std::string(w > text.size() ? w - text.size() : 0, ' ') + text; };
  std::cout << "kernel" << std::string(width - 6, ' ') << cell("median us", 12) << cell("GB/s", 9) << cell("% copy", 8)
            << cell("reps", 6) << "\n";
  for (const reports::BenchKernel& k : run.kernels)
    std::cout << k.name << std::string(width - k.name.size(), ' ') << cell(format("%.3f", k.time_ns / 1e3), 12)
              << cell(k.gb_per_s ? format("%.0f", *k.gb_per_s) : "-", 9)
              << cell(k.pct_of_copy ? format("%.1f", *k.pct_of_copy) : "-", 8)
              << cell(std::to_string(k.times_ns.size()), 6) << "\n";
  std::cout << run.kernels.size() << " benchmarks on " << (run.context.gpu ? *run.context.gpu : "an unknown GPU")
            << "; copy bandwidth "
            << (run.copy_gb_per_s ? format("%.0f GB/s", *run.copy_gb_per_s) : std::string("not measured")) << "\n";
}

// Google Benchmark's JSON from `path`, converted; errors name the file.
BenchRun import_google_benchmark(const fs::path& path, BenchContext context) {
  try {
    return reports::bench_run_from_google_benchmark(
        parse_json_text(read_document(path, reports::kMaxBenchFileBytes), "the file"), std::move(context));
  } catch (const ParseError& e) {
    throw ParseError("", path.string() + ": " + e.what());
  }
}

// --- the subcommands ----------------------------------------------------------------------------

// Removed on every way out of bench_run.
struct TemporaryFile {
  fs::path path;
  ~TemporaryFile() {
    std::error_code ignored;
    fs::remove(path, ignored);
  }
};

int bench_run(const RunFlags& flags) {
  const int64_t repetitions =
      parse_integer(flags.repetitions, "--repetitions", 1, static_cast<int64_t>(reports::kMaxBenchRepetitions));
  check_outputs(flags.history, flags.out);
  const fs::path benchmark = flags.benchmark.empty() ? default_benchmark() : fs::path(flags.benchmark);
  if (!fs::exists(benchmark)) throw std::runtime_error("--benchmark: " + benchmark.string() + " does not exist");
  BenchContext context;
  context.date = reports::utc_now();
  context.commit = commit_or_current(flags.commit);
  query_gpu(context);

  std::string temp = (fs::temp_directory_path() / "bitparity-bench-XXXXXX.json").string();
  const int fd = ::mkstemps(temp.data(), 5);
  if (fd < 0) throw std::runtime_error("cannot create a temporary file in " + fs::temp_directory_path().string());
  ::close(fd);
  const TemporaryFile remove_temp{temp};
  // The benchmark's path as given: a bare name would be searched in PATH, which is not what was asked.
  std::vector<std::string> args = {benchmark.has_parent_path() ? benchmark.string() : "./" + benchmark.string(),
                                   "--benchmark_repetitions=" + std::to_string(repetitions),
                                   "--benchmark_enable_random_interleaving=true",
                                   "--benchmark_display_aggregates_only=true",
                                   "--benchmark_out_format=json",
                                   "--benchmark_out=" + temp};
  if (!flags.filter.empty()) args.push_back("--benchmark_filter=" + flags.filter);
  std::cerr << "running " << args[0] << " (" << repetitions << " interleaved repetitions)\n";
  const ProgramResult r = run_program(args, false);
  if (r.status != 0) throw std::runtime_error(benchmark.string() + " " + r.description + "; nothing was kept");
  const BenchRun run = import_google_benchmark(temp, context);
  print_summary(run);
  keep(run, flags.history, flags.out);
  return kExitOk;
}

int bench_record(const RecordFlags& flags) {
  check_outputs(flags.history, flags.out);
  BenchContext context;
  context.commit = commit_or_current(flags.commit);
  if (!flags.gpu.empty()) context.gpu = flags.gpu;
  if (!flags.driver.empty()) context.driver = flags.driver;
  if (!flags.sm_clock.empty()) context.sm_clock_mhz = parse_number(flags.sm_clock, "--sm-clock-mhz", 1, kMaxClockMhz);
  if (!flags.mem_clock.empty())
    context.mem_clock_mhz = parse_number(flags.mem_clock, "--mem-clock-mhz", 1, kMaxClockMhz);
  const BenchRun run = import_google_benchmark(flags.gbench, context);
  print_summary(run);
  keep(run, flags.history, flags.out);
  return kExitOk;
}

// A run file, a Google Benchmark JSON (imported as it stands) or a history folder (its runs).
std::vector<BenchRun> load_runs(const fs::path& path) {
  if (fs::is_directory(path)) {
    std::vector<BenchRun> runs = reports::read_bench_history(path);
    if (runs.empty()) throw ParseError("", path.string() + ": the history folder holds no run file");
    return runs;
  }
  nlohmann::json document;
  try {
    document = parse_json_text(read_document(path, reports::kMaxBenchFileBytes), "the file");
  } catch (const ParseError& e) {
    throw ParseError("", path.string() + ": " + e.what());
  }
  if (document.is_object() && !document.contains("format") && document.contains("benchmarks")) {
    BenchContext context;
    context.commit = "unknown";
    return {import_google_benchmark(path, context)};
  }
  try {
    return {reports::bench_run_from_json(document)};
  } catch (const ParseError& e) {
    throw ParseError("", path.string() + ": " + e.what());
  }
}

int bench_compare(const CompareFlags& flags) {
  reports::CompareOptions options;
  options.alpha = parse_number(flags.alpha, "--alpha", 1e-12, 0.5);
  options.min_effect = parse_number(flags.min_effect, "--min-effect", 0, 1000) / kPercent;
  BenchRun old_run, new_run;
  if (flags.runs.size() == 1) {
    if (!fs::is_directory(flags.runs[0]))
      throw ParseError("", "give OLD and NEW, or one history folder (whose latest two runs are compared)");
    std::vector<BenchRun> runs = load_runs(flags.runs[0]);
    if (runs.size() < 2) throw ParseError("", flags.runs[0] + ": the history holds one run; nothing to compare it with");
    old_run = runs[runs.size() - 2], new_run = runs.back();
  } else {
    old_run = load_runs(flags.runs[0]).back();
    new_run = load_runs(flags.runs[1]).back();
  }
  const reports::Comparison comparison = reports::compare_runs(old_run, new_run, options);
  if (comparison.kernels.empty())
    throw std::runtime_error("no kernel appears in both runs (" + std::to_string(old_run.kernels.size()) + " and " +
                             std::to_string(new_run.kernels.size()) + " kernels): nothing to compare");
  std::cout << reports::comparison_text(comparison, old_run, new_run, options);
  const size_t slower = comparison.count(reports::Verdict::kSlower);
  const size_t unsure = comparison.count(reports::Verdict::kUnsure);
  if (slower > 0) {
    std::cout << "result: " << slower << " kernel(s) SLOWER (exit 1)\n";
    return kExitDifferent;
  }
  if (unsure > 0 && flags.fail_on_unsure) {
    std::cout << "result: " << unsure << " kernel(s) UNSURE and --fail-on-unsure (exit 1)\n";
    return kExitDifferent;
  }
  std::cout << "result: no kernel is slower (exit 0)\n";
  return kExitOk;
}

constexpr const char* kExitCodes =
    "Exit status: 0 no kernel is SLOWER (FASTER, SAME and UNSURE pass); 1 at least one kernel is SLOWER (or "
    "UNSURE, with --fail-on-unsure); 2 an input is unreadable or malformed, or no kernel appears in both runs.";

}  // namespace

Command add_bench(CLI::App& root) {
  CLI::App* bench = root.add_subcommand(
      "bench",
      "Performance history of the kernel benchmarks: run kernel_bench (or read its Google Benchmark JSON), keep one "
      "bitparity-bench/1 file per run (GPU, driver, clocks, commit, date; each kernel's per-repetition times, bytes, "
      "GB/s and the copy bandwidth measured in the same run), and compare two runs for real regressions.");
  bench->require_subcommand(1);
  bench->footer(
      "Examples:\n"
      "  bitparity bench run --history bench-history --filter 'ilp:0' --repetitions 10\n"
      "  bitparity bench record kernel_bench.json --history bench-history\n"
      "  bitparity bench compare bench-history\n"
      "Run `bitparity bench SUBCOMMAND --help` for each one's flags.");

  auto run_flags = std::make_shared<RunFlags>();
  CLI::App* run = bench->add_subcommand(
      "run",
      "Run kernel_bench with interleaved repetitions (--benchmark_enable_random_interleaving, every repetition kept), "
      "add this machine's GPU, driver and clocks (nvidia-smi, null where it is missing) and the commit, and keep the "
      "run in a history folder and/or a file.");
  run->add_option("--benchmark", run_flags->benchmark,
                  "the benchmark program (default: bench/kernel_bench of the build this bitparity is in)")
      ->type_name("PATH");
  run->add_option("--filter", run_flags->filter, "only benchmarks whose name matches this regex (--benchmark_filter)")
      ->type_name("REGEX");
  run->add_option("--repetitions", run_flags->repetitions,
                  "repetitions of each benchmark, interleaved (compare needs 4 or more on each side)")
      ->type_name("N")
      ->capture_default_str();
  run->add_option("--history", run_flags->history, "history folder: the run is written as <date>_<shortcommit>.json")
      ->type_name("DIR");
  run->add_option("--out", run_flags->out, "also (or only) write the run to this file")->type_name("FILE");
  run->add_option("--commit", run_flags->commit, "the commit measured (default: git rev-parse HEAD of the source tree)")
      ->type_name("HASH");
  run->footer(
      "Example:\n  bitparity bench run --history bench-history --filter 'swiglu.*/ilp:0' --repetitions 10\n"
      "Then `bitparity bench compare bench-history` compares it with the run before.");

  auto record_flags = std::make_shared<RecordFlags>();
  CLI::App* record = bench->add_subcommand(
      "record",
      "Keep a Google Benchmark JSON (kernel_bench --benchmark_out=FILE --benchmark_out_format=json, run elsewhere) as a "
      "bitparity-bench/1 run: repetitions become per-kernel times, aggregates are recomputed, skipped benchmarks are "
      "left out. The GPU name comes from kernel_bench's own context unless --gpu is given.");
  record->add_option("gbench", record_flags->gbench, "Google Benchmark JSON file")->required();
  record->add_option("--history", record_flags->history, "history folder: the run is written as <date>_<shortcommit>.json")
      ->type_name("DIR");
  record->add_option("--out", record_flags->out, "also (or only) write the run to this file")->type_name("FILE");
  record->add_option("--commit", record_flags->commit, "the commit measured (default: git rev-parse HEAD of the source tree)")
      ->type_name("HASH");
  record->add_option("--gpu", record_flags->gpu, "the GPU's name, as nvidia-smi gives it")->type_name("NAME");
  record->add_option("--driver", record_flags->driver, "the driver version, as nvidia-smi gives it")->type_name("VERSION");
  record->add_option("--sm-clock-mhz", record_flags->sm_clock, "the SM clock during the run")->type_name("MHZ");
  record->add_option("--mem-clock-mhz", record_flags->mem_clock, "the memory clock during the run")->type_name("MHZ");
  record->footer(
      "Example:\n  kernel_bench --benchmark_repetitions=10 --benchmark_enable_random_interleaving=true \\\n"
      "      --benchmark_out=kb.json --benchmark_out_format=json\n"
      "  bitparity bench record kb.json --history bench-history --commit $(git rev-parse HEAD) --driver 570.124.06");

  auto compare_flags = std::make_shared<CompareFlags>();
  CLI::App* compare = bench->add_subcommand(
      "compare",
      "Compare two runs kernel by kernel: a two-sided Mann-Whitney U test on the per-repetition times (as Google "
      "Benchmark's compare.py) and a minimum effect on the median time. FASTER / SLOWER: p < alpha and the median "
      "moved by at least the minimum effect; SAME: it moved by less; UNSURE: it moved more but p >= alpha, or the "
      "repetitions are too few for any test to reach alpha (3 and 3 cannot). OLD and NEW are run files, Google "
      "Benchmark JSON files or history folders (a folder stands for its latest run); one folder alone compares its "
      "latest two runs.");
  compare->add_option("runs", compare_flags->runs, "OLD NEW, or one history folder")
      ->required()
      ->expected(1, 2)
      ->type_name("RUN");
  compare->add_option("--alpha", compare_flags->alpha, "significance level of the U test, in (0, 0.5]")
      ->type_name("P")
      ->capture_default_str();
  compare->add_option("--min-effect", compare_flags->min_effect, "smallest change of the median time that counts")
      ->type_name("PERCENT")
      ->capture_default_str();
  compare->add_flag("--fail-on-unsure", compare_flags->fail_on_unsure, "exit 1 when a kernel is UNSURE, too");
  compare->footer(std::string(kExitCodes) +
                  "\nExamples:\n"
                  "  bitparity bench compare bench-history                  # its latest two runs\n"
                  "  bitparity bench compare main.json bench-history --min-effect 3\n");

  return {bench, [=] {
            if (run->parsed()) return bench_run(*run_flags);
            if (record->parsed()) return bench_record(*record_flags);
            return bench_compare(*compare_flags);
          }};
}

}  // namespace bitparity::cli
