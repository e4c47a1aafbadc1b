#include "reports/bench_history.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "core/error.h"
#include "core/json_strict.h"
#include "core/safe_file.h"

namespace bitparity::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Derived fields written by another tool may differ from ours in the last digits; anything more
// means the file was edited by hand or is not what it claims.
constexpr double kDerivedTolerance = 1e-9;
constexpr size_t kShortCommitDigits = 7;
constexpr double kNsPerSecond = 1e9;
// Rates from bytes (or flops) per nanosecond: bytes/ns is GB/s; flops/ns is GFLOP/s.
constexpr double kGflopPerTflop = 1e3;
constexpr double kPercent = 100;

const std::set<std::string> kTopKeys = {"format", "context", "copy_gb_per_s", "kernels"};
const std::set<std::string> kContextKeys = {"date",   "commit",       "host",          "gpu",
                                            "driver", "sm_clock_mhz", "mem_clock_mhz", "benchmark_library"};
const std::set<std::string> kKernelKeys = {"name",     "op",      "direction",   "contract",
                                           "bytes",    "flops",   "times_ns",    "time_ns",
                                           "gb_per_s", "tflop_per_s", "copy_gb_per_s", "pct_of_copy"};

// --- reading ----------------------------------------------------------------------------------

void check_keys(const json& object, const std::set<std::string>& allowed, const std::string& field) {
  if (!object.is_object()) throw ParseError(field, "expected an object, got " + json_type(object));
  for (const auto& [key, value] : object.items())
    if (!allowed.count(key)) throw ParseError(path_of(field, excerpt(key)), "unknown key (format bitparity-bench/1)");
  for (const std::string& key : allowed)
    if (!object.contains(key)) throw ParseError(path_of(field, key), "missing (use null where there is no value)");
}

std::optional<std::string> optional_string(const json& object, const std::string& key, const std::string& field) {
  if (require(object, key, field).is_null()) return std::nullopt;
  return get_string(object, key, field);
}

double non_negative(const json& object, const std::string& key, const std::string& field) {
  const double d = get_number(object, key, field);
  if (d < 0) throw ParseError(path_of(field, key), "expected a number >= 0");
  return d;
}

double positive(const json& object, const std::string& key, const std::string& field) {
  const double d = get_number(object, key, field);
  if (!(d > 0)) throw ParseError(path_of(field, key), "expected a number > 0");
  return d;
}

std::optional<double> optional_positive(const json& object, const std::string& key, const std::string& field) {
  if (require(object, key, field).is_null()) return std::nullopt;
  return positive(object, key, field);
}

std::optional<double> optional_non_negative(const json& object, const std::string& key, const std::string& field) {
  if (require(object, key, field).is_null()) return std::nullopt;
  return non_negative(object, key, field);
}

bool close(double a, double b) { return std::fabs(a - b) <= kDerivedTolerance * std::max(std::fabs(a), std::fabs(b)); }

std::string shown(const std::optional<double>& v) {
  if (!v) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", *v);
  return text;
}

// A stored derived field must be what its inputs give: null exactly when they give none.
void check_derived(const std::optional<double>& stored, const std::optional<double>& expected,
                   const std::string& path, const std::string& rule) {
  if (stored.has_value() == expected.has_value() && (!stored || close(*stored, *expected))) return;
  throw ParseError(path, shown(stored) + " is not " + rule + " (" + shown(expected) + ")");
}

BenchContext context_from_json(const json& j, const std::string& field) {
  check_keys(j, kContextKeys, field);
  BenchContext c;
  c.date = get_string(j, "date", field);
  if (to_utc_date(c.date) != c.date)
    throw ParseError(path_of(field, "date"), "expected an ISO-8601 UTC date such as 2026-12-02T00:57:20Z, got " +
                                                 excerpt(c.date));
  c.commit = get_string(j, "commit", field);
  if (c.commit.empty()) throw ParseError(path_of(field, "commit"), "empty (use \"unknown\")");
  c.host = get_string(j, "host", field);
  c.gpu = optional_string(j, "gpu", field);
  c.driver = optional_string(j, "driver", field);
  c.sm_clock_mhz = optional_positive(j, "sm_clock_mhz", field);
  c.mem_clock_mhz = optional_positive(j, "mem_clock_mhz", field);
  c.benchmark_library = optional_string(j, "benchmark_library", field);
  return c;
}

BenchKernel kernel_from_json(const json& j, const std::string& field) {
  check_keys(j, kKernelKeys, field);
  BenchKernel k;
  k.name = get_string(j, "name", field);
  if (k.name.empty()) throw ParseError(path_of(field, "name"), "empty");
  k.op = optional_string(j, "op", field);
  k.direction = optional_string(j, "direction", field);
  k.contract = optional_string(j, "contract", field);
  k.bytes = non_negative(j, "bytes", field);
  k.flops = optional_non_negative(j, "flops", field);
  const json& times = require_array(j, "times_ns", field);
  const std::string times_path = path_of(field, "times_ns");
  if (times.empty()) throw ParseError(times_path, "expected at least one repetition");
  if (times.size() > kMaxBenchRepetitions)
    throw ParseError(times_path, "more than " + std::to_string(kMaxBenchRepetitions) + " repetitions");
  for (size_t i = 0; i < times.size(); ++i) {
    const std::string p = times_path + "[" + std::to_string(i) + "]";
    if (!times[i].is_number()) throw ParseError(p, "expected a number, got " + json_type(times[i]));
    const double t = times[i].get<double>();
    if (!std::isfinite(t) || !(t > 0)) throw ParseError(p, "expected a positive, finite time in ns");
    k.times_ns.push_back(t);
  }
  k.time_ns = positive(j, "time_ns", field);
  k.gb_per_s = optional_positive(j, "gb_per_s", field);
  k.tflop_per_s = optional_non_negative(j, "tflop_per_s", field);
  k.copy_gb_per_s = optional_positive(j, "copy_gb_per_s", field);
  k.pct_of_copy = optional_positive(j, "pct_of_copy", field);
  BenchKernel expected = k;
  complete_kernel(expected);
  check_derived(k.time_ns, expected.time_ns, path_of(field, "time_ns"), "the median of times_ns");
  check_derived(k.gb_per_s, expected.gb_per_s, path_of(field, "gb_per_s"), "bytes / time_ns (null when bytes is 0)");
  check_derived(k.tflop_per_s, expected.tflop_per_s, path_of(field, "tflop_per_s"),
                "flops / time_ns / 1000 (null when flops is)");
  check_derived(k.pct_of_copy, expected.pct_of_copy, path_of(field, "pct_of_copy"),
                "100 * gb_per_s / copy_gb_per_s (null when either is)");
  return k;
}

// --- Google Benchmark's JSON --------------------------------------------------------------------

// "swiglu_scale_bwd/paddle_fused/rows16384/ilp:0/min_time:0.100/manual_time" -> swiglu_scale, bwd,
// paddle_fused; other names (launch/empty_kernel) give nothing.
void parse_kernel_name(BenchKernel& k) {
  const size_t slash = k.name.find('/');
  if (slash == std::string::npos) return;
  const std::string head = k.name.substr(0, slash);
  const size_t under = head.rfind('_');
  if (under == std::string::npos || under == 0) return;
  const std::string direction = head.substr(under + 1);
  if (direction != "fwd" && direction != "bwd") return;
  const size_t next = k.name.find('/', slash + 1);
  const std::string contract = k.name.substr(slash + 1, next == std::string::npos ? std::string::npos : next - slash - 1);
  if (contract.empty()) return;
  k.op = head.substr(0, under), k.direction = direction, k.contract = contract;
}

double ns_per_unit(const std::string& unit, const std::string& path) {
  if (unit == "ns") return 1;
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return kNsPerSecond;
  throw ParseError(path, "unknown time unit " + excerpt(unit) + " (expected ns, us, ms or s)");
}

// One benchmark's repetitions as Google Benchmark reported them.
struct Repetitions {
  std::string name;
  int64_t family = -1, instance = -1;  // registration order, where the document gives it
  size_t first_seen = 0;
  std::vector<double> times_ns, bytes, flops, copy_gb_per_s;
};

bool is_skipped(const json& b, const std::string& field, std::string* message) {
  const bool error = b.contains("error_occurred") && b["error_occurred"].is_boolean() && b["error_occurred"].get<bool>();
  const bool skipped = b.contains("skipped") && b["skipped"].is_boolean() && b["skipped"].get<bool>();
  if (!error && !skipped) return false;
  for (const char* key : {"error_message", "skip_message"})
    if (b.contains(key) && b[key].is_string()) *message = path_of(field, "name") + " " + excerpt(b["name"].get<std::string>()) + ": " + b[key].get<std::string>();
  return true;
}

void optional_counter(const json& b, const std::string& key, const std::string& field, std::vector<double>& into,
                      bool must_be_positive) {
  if (!b.contains(key)) return;
  const double v = must_be_positive ? positive(b, key, field) : non_negative(b, key, field);
  into.push_back(v);
}

std::vector<Repetitions> collect_repetitions(const json& benchmarks, std::string* first_error) {
  std::map<std::string, size_t> index;
  std::vector<Repetitions> out;
  for (size_t i = 0; i < benchmarks.size(); ++i) {
    const std::string field = "benchmarks[" + std::to_string(i) + "]";
    const json& b = benchmarks[i];
    if (!b.is_object()) throw ParseError(field, "expected an object, got " + json_type(b));
    const std::string name = get_string(b, "name", field);
    if (b.contains("run_type") && get_string(b, "run_type", field) == "aggregate") continue;
    std::string message;
    if (is_skipped(b, field, &message)) {
      if (first_error->empty()) *first_error = message.empty() ? path_of(field, "name") + " " + excerpt(name) : message;
      continue;
    }
    const std::string key = b.contains("run_name") ? get_string(b, "run_name", field) : name;
    if (key.empty()) throw ParseError(path_of(field, "name"), "empty");
    auto [it, added] = index.emplace(key, out.size());
    if (added) {
      Repetitions r;
      r.name = key;
      r.first_seen = i;
      if (b.contains("family_index")) r.family = get_count(b, "family_index", field);
      if (b.contains("per_family_instance_index"))
        r.instance = get_count(b, "per_family_instance_index", field);
      out.push_back(std::move(r));
      if (out.size() > kMaxBenchKernels)
        throw ParseError("benchmarks", "more than " + std::to_string(kMaxBenchKernels) + " benchmarks");
    }
    Repetitions& r = out[it->second];
    if (r.times_ns.size() >= kMaxBenchRepetitions)
      throw ParseError(field, "more than " + std::to_string(kMaxBenchRepetitions) + " repetitions of " + excerpt(key));
    const std::string unit = b.contains("time_unit") ? get_string(b, "time_unit", field) : "ns";
    const double t = positive(b, "real_time", field) * ns_per_unit(unit, path_of(field, "time_unit"));
    if (!std::isfinite(t)) throw ParseError(path_of(field, "real_time"), "too large once in ns");
    r.times_ns.push_back(t);
    optional_counter(b, "bytes", field, r.bytes, false);
    optional_counter(b, "flops", field, r.flops, false);
    optional_counter(b, "copy_GB/s", field, r.copy_gb_per_s, true);
  }
  return out;
}

// Google Benchmark's `date` is local time with its zone; older versions wrote no zone at all.
void fill_from_gbench_context(const json& gbench, BenchContext& context) {
  if (!gbench.contains("context")) return;
  const json& c = require_object(gbench, "context", "");
  if (context.date.empty() && c.contains("date") && c["date"].is_string())
    if (auto utc = to_utc_date(c["date"].get<std::string>())) context.date = *utc;
  if (context.host.empty() && c.contains("host_name")) context.host = get_string(c, "host_name", "context");
  if (!context.benchmark_library && c.contains("library_version"))
    context.benchmark_library = get_string(c, "library_version", "context");
  // kernel_bench's own context: "NVIDIA H200 (sm_90), driver 12.8, runtime 12.8" (CUDA versions,
  // not the driver release), or the reason there is no device.
  if (!context.gpu && c.contains("device") && c["device"].is_string()) {
    const std::string device = c["device"].get<std::string>();
    const size_t sm = device.find(" (sm_");
    if (sm != std::string::npos && sm > 0) context.gpu = device.substr(0, sm);
  }
}

// --- dates --------------------------------------------------------------------------------------

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int64_t days_in_month(int64_t y, int64_t m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : kDays[m - 1];
}

// Reads `count` digits at `pos`; -1 when they are not all digits.
int64_t digits(std::string_view text, size_t pos, size_t count) {
  if (pos + count > text.size()) return -1;
  int64_t v = 0;
  for (size_t i = pos; i < pos + count; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

std::string format_utc(int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

// --- public -------------------------------------------------------------------------------------

double median(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("median of no values");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

void complete_kernel(BenchKernel& k) {
  k.time_ns = median(k.times_ns);
  k.gb_per_s = k.bytes > 0 ? std::optional<double>(k.bytes / k.time_ns) : std::nullopt;
  k.tflop_per_s = k.flops ? std::optional<double>(*k.flops / k.time_ns / kGflopPerTflop) : std::nullopt;
  k.pct_of_copy = k.gb_per_s && k.copy_gb_per_s ? std::optional<double>(kPercent * *k.gb_per_s / *k.copy_gb_per_s)
                                                : std::nullopt;
}

void complete_run(BenchRun& run) {
  std::vector<double> copies;
  for (BenchKernel& k : run.kernels) {
    complete_kernel(k);
    if (k.copy_gb_per_s) copies.push_back(*k.copy_gb_per_s);
  }
  run.copy_gb_per_s = copies.empty() ? std::nullopt : std::optional<double>(median(copies));
}

std::optional<std::string> to_utc_date(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM|+HHMM|-HHMM)
  const int64_t y = digits(text, 0, 4), mo = digits(text, 5, 2), d = digits(text, 8, 2);
  const int64_t h = digits(text, 11, 2), mi = digits(text, 14, 2), s = digits(text, 17, 2);
  if (text.size() < 20 || y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || mi < 0 || s < 0) return std::nullopt;
  if (text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' || text[16] != ':') return std::nullopt;
  if (d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 59) return std::nullopt;
  size_t pos = 19;
  if (text[pos] == '.') {
    ++pos;
    const size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
    if (pos == start) return std::nullopt;
  }
  int64_t offset_minutes = 0;
  const std::string_view zone = text.substr(pos);
  if (zone == "Z") {
  } else if (zone.size() == 6 || zone.size() == 5) {
    if (zone[0] != '+' && zone[0] != '-') return std::nullopt;
    const bool colon = zone.size() == 6;
    if (colon && zone[3] != ':') return std::nullopt;
    const int64_t oh = digits(zone, 1, 2), om = digits(zone, colon ? 4 : 3, 2);
    if (oh < 0 || om < 0 || oh > 23 || om > 59) return std::nullopt;
    offset_minutes = (zone[0] == '-' ? -1 : 1) * (oh * 60 + om);
  } else {
    return std::nullopt;
  }
  const int64_t seconds = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset_minutes * 60;
  return format_utc(seconds);
}

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  return format_utc(std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count());
}

std::string history_file_name(const BenchContext& context) {
  if (to_utc_date(context.date) != context.date)
    throw std::invalid_argument("not an ISO-8601 UTC date: " + excerpt(context.date));
  std::string stamp;
  for (char ch : context.date)
    if (ch != '-' && ch != ':') stamp += ch;
  const std::string& commit = context.commit;
  const bool hex = commit.size() >= kShortCommitDigits &&
                   commit.find_first_not_of("0123456789abcdef") == std::string::npos;
  return stamp + "_" + (hex ? commit.substr(0, kShortCommitDigits) : "unknown") + ".json";
}

json bench_run_to_json(const BenchRun& run) {
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  const BenchContext& c = run.context;
  json kernels = json::array();
  for (const BenchKernel& k : run.kernels)
    kernels.push_back({{"name", k.name},
                       {"op", opt(k.op)},
                       {"direction", opt(k.direction)},
                       {"contract", opt(k.contract)},
                       {"bytes", k.bytes},
                       {"flops", opt(k.flops)},
                       {"times_ns", k.times_ns},
                       {"time_ns", k.time_ns},
                       {"gb_per_s", opt(k.gb_per_s)},
                       {"tflop_per_s", opt(k.tflop_per_s)},
                       {"copy_gb_per_s", opt(k.copy_gb_per_s)},
                       {"pct_of_copy", opt(k.pct_of_copy)}});
  return {{"format", kBenchFormat},
          {"context",
           {{"date", c.date},
            {"commit", c.commit},
            {"host", c.host},
            {"gpu", opt(c.gpu)},
            {"driver", opt(c.driver)},
            {"sm_clock_mhz", opt(c.sm_clock_mhz)},
            {"mem_clock_mhz", opt(c.mem_clock_mhz)},
            {"benchmark_library", opt(c.benchmark_library)}}},
          {"copy_gb_per_s", opt(run.copy_gb_per_s)},
          {"kernels", kernels}};
}

BenchRun bench_run_from_json(const json& document) {
  if (!document.is_object()) throw ParseError("", "expected a bitparity-bench/1 object, got " + json_type(document));
  const std::string format = get_string(document, "format", "");
  if (format != kBenchFormat)
    throw ParseError("format", "expected \"" + std::string(kBenchFormat) + "\", got " + excerpt(format));
  check_keys(document, kTopKeys, "");
  BenchRun run;
  run.context = context_from_json(document["context"], "context");
  run.copy_gb_per_s = optional_positive(document, "copy_gb_per_s", "");
  const json& kernels = require_array(document, "kernels", "");
  if (kernels.size() > kMaxBenchKernels)
    throw ParseError("kernels", "more than " + std::to_string(kMaxBenchKernels) + " kernels");
  std::set<std::string> names;
  std::vector<double> copies;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string field = "kernels[" + std::to_string(i) + "]";
    BenchKernel k = kernel_from_json(kernels[i], field);
    if (!names.insert(k.name).second)
      throw ParseError(path_of(field, "name"), excerpt(k.name) + " appears twice (each kernel is listed once)");
    if (k.copy_gb_per_s) copies.push_back(*k.copy_gb_per_s);
    run.kernels.push_back(std::move(k));
  }
  check_derived(run.copy_gb_per_s, copies.empty() ? std::nullopt : std::optional<double>(median(copies)),
                "copy_gb_per_s", "the median of the kernels' copy_gb_per_s (null when none has one)");
  return run;
}

BenchRun read_bench_run(const fs::path& file) {
  try {
    return bench_run_from_json(parse_json_text(read_document(file, kMaxBenchFileBytes), "the file"));
  } catch (const ParseError& e) {
    throw ParseError("", file.string() + ": " + e.what());
  }
}

void write_bench_run(const BenchRun& run, const fs::path& file) {
  json document = bench_run_to_json(run);
  try {
    // What is written must read back: the same rules, on the same document.
    bench_run_from_json(json::parse(document.dump()));
  } catch (const ParseError& e) {
    throw std::invalid_argument("refusing to write " + file.string() + ": " + e.what());
  }
  write_file_safely(file, document.dump(2) + "\n");
}

std::vector<BenchRun> read_bench_history(const fs::path& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error))
    throw ParseError("", dir.string() + ": not a history folder (" +
                             (error ? error.message() : std::string(fs::exists(dir) ? "not a folder" : "does not exist")) +
                             ")");
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || it->path().extension() != ".json") continue;
    if (files.size() == kMaxHistoryRuns)
      throw ParseError("", dir.string() + ": more than " + std::to_string(kMaxHistoryRuns) + " run files");
    files.push_back(it->path());
  }
  if (error) throw ParseError("", dir.string() + ": cannot list the folder (" + error.message() + ")");
  std::vector<std::pair<std::pair<std::string, std::string>, BenchRun>> runs;
  for (const fs::path& file : files) {
    BenchRun run = read_bench_run(file);
    std::string date = run.context.date;
    runs.push_back({{std::move(date), file.filename().string()}, std::move(run)});
  }
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<BenchRun> out;
  for (auto& [key, run] : runs) out.push_back(std::move(run));
  return out;
}

BenchRun bench_run_from_google_benchmark(const json& gbench, BenchContext context) {
  if (!gbench.is_object()) throw ParseError("", "expected Google Benchmark's JSON object, got " + json_type(gbench));
  const json& benchmarks = require_array(gbench, "benchmarks", "");
  fill_from_gbench_context(gbench, context);
  if (context.date.empty()) context.date = utc_now();
  if (context.commit.empty()) context.commit = "unknown";
  std::string first_error;
  std::vector<Repetitions> reps = collect_repetitions(benchmarks, &first_error);
  if (reps.empty())
    throw ParseError("benchmarks", first_error.empty() ? "no benchmark with a time (only aggregates, or none)"
                                                       : "every benchmark was skipped; the first: " + first_error);
  const bool indexed = std::all_of(reps.begin(), reps.end(), [](const Repetitions& r) { return r.family >= 0 && r.instance >= 0; });
  // With interleaved repetitions the document lists benchmarks in the random order they ran;
  // registration order keeps a history's kernels in one order from run to run.
  std::stable_sort(reps.begin(), reps.end(), [indexed](const Repetitions& a, const Repetitions& b) {
    if (indexed) return std::pair(a.family, a.instance) < std::pair(b.family, b.instance);
    return a.first_seen < b.first_seen;
  });
  BenchRun run;
  run.context = std::move(context);
  for (Repetitions& r : reps) {
    BenchKernel k;
    k.name = r.name;
    parse_kernel_name(k);
    k.bytes = r.bytes.empty() ? 0 : median(r.bytes);
    if (!r.flops.empty()) k.flops = median(r.flops);
    if (!r.copy_gb_per_s.empty()) k.copy_gb_per_s = median(r.copy_gb_per_s);
    k.times_ns = std::move(r.times_ns);
    run.kernels.push_back(std::move(k));
  }
  complete_run(run);
  return run;
}

}  // namespace bitparity::reports
