// `bitparity campaign`: the nightly job, a command line over the campaign engine
// (campaign/campaign.h).
#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "campaign/campaign.h"
#include "campaign/generation_pool.h"
#include "cli/commands.h"
#include "cli/numbers.h"
#include "cli/util.h"
#include "core/error.h"
#include "core/json_strict.h"
#include "core/safe_file.h"
#include "corpus/entry.h"
#include "corpus/replay.h"
#include "reports/report.h"

namespace bitparity::cli {
namespace {

using campaign::CampaignOptions;

// The longest budget a campaign accepts (about 30 years): past it a number is a typo.
constexpr double kMaxBudgetSeconds = 1e9;

// Set by SIGINT/SIGTERM; the campaign finishes its case, writes its summary and returns.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void request_stop(int signal_number) {
  g_stop.store(true);
  // A second signal of the same kind ends the process the usual way.
  std::signal(signal_number, SIG_DFL);
}

// Installs the stop handlers for the lifetime of the object.
class StopOnSignals {
 public:
  StopOnSignals() {
    g_stop.store(false);
    previous_int_ = std::signal(SIGINT, request_stop);
    previous_term_ = std::signal(SIGTERM, request_stop);
  }
  ~StopOnSignals() {
    std::signal(SIGINT, previous_int_);
    std::signal(SIGTERM, previous_term_);
  }

 private:
  void (*previous_int_)(int) = SIG_DFL;
  void (*previous_term_)(int) = SIG_DFL;
};

// Every core, as the default of --jobs (hardware_concurrency may not know: then one).
int all_cores() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, unsigned{campaign::kMaxJobs}));
}

// Numbers stay text until options_from parses them strictly (cli/numbers.h).
struct CampaignFlags {
  std::string budget_seconds = "60", seed = "0", max_cases,
              max_shrink_calls = std::to_string(fuzz::kDefaultMaxShrinkCalls),
              shrink_seconds = std::to_string(static_cast<int>(campaign::kDefaultShrinkSeconds)),
              jobs = std::to_string(all_cores()), batch = std::to_string(campaign::kDefaultBatch),
              nondeterminism_every = std::to_string(campaign::kDefaultNondeterminismEvery), generators;
  std::vector<std::string> pairs;
  std::vector<std::string> ops;
  std::string corpus_dir, report_file, junit_file, baseline_dir, shard = "0/1", same_contract_pin = "open";
  bool strict_nan = false, quiet = false;
};

CampaignOptions options_from(const Registry& registry, const CampaignFlags& flags) {
  CampaignOptions o;
  o.budget_seconds = parse_number(flags.budget_seconds, "--budget-seconds", 0, kMaxBudgetSeconds);
  o.seed = parse_unsigned(flags.seed, "--seed");
  if (!flags.max_cases.empty()) o.max_cases = parse_integer(flags.max_cases, "--max-cases");
  o.max_shrink_calls = static_cast<int>(
      parse_integer(flags.max_shrink_calls, "--max-shrink-calls", 1, std::numeric_limits<int>::max()));
  o.shrink_seconds = parse_number(flags.shrink_seconds, "--shrink-seconds", 0, kMaxBudgetSeconds);
  o.jobs = static_cast<int>(parse_integer(flags.jobs, "--jobs", 1, campaign::kMaxJobs));
  o.batch = static_cast<int>(parse_integer(flags.batch, "--batch", 1, campaign::kMaxBatch));
  if (!flags.generators.empty())
    o.generators = static_cast<int>(parse_integer(flags.generators, "--generators", 0, campaign::kMaxJobs));
  o.nondeterminism_every = parse_integer(flags.nondeterminism_every, "--nondeterminism-every", 0,
                                         std::numeric_limits<int64_t>::max());
  for (const std::string& p : flags.pairs) {
    o.pairs.push_back(corpus::parse_pair(p, "--pair"));
    const bool a_every = split_backend_name(o.pairs.back().a).second == "*";
    if (a_every != (split_backend_name(o.pairs.back().b).second == "*"))
      throw ParseError("--pair", "a wildcard pair names every contract on both sides (K:*,L:*); got '" + p + "'");
  }
  o.ops = flags.ops;
  o.corpus_dir = flags.corpus_dir;
  o.shard = campaign::parse_shard(flags.shard);
  o.same_contract_pin = flags.same_contract_pin;
  o.strict_nan = flags.strict_nan;
  o.stop = &g_stop;
  o.progress = flags.quiet ? nullptr : &std::cerr;
  o.commit = current_commit();
  o.device = describe_device(registry);
  o.tool_version = tool_version();
  return o;
}

// A finding's signature without its pair, "op dir, kind in output, classes shape / value": what one
// root cause looks like through any pair.
std::string cause_of(const std::string& signature) {
  const std::optional<corpus::SignatureFields> f = corpus::parse_signature(signature);
  if (!f) return signature;
  return f->op + " " + f->direction + ", " + f->kind + (f->output == "-" ? "" : " in " + f->output) + ", classes " +
         f->shape_class + " / " + f->value_class;
}

// The new findings grouped by cause (one root cause often shows through several pairs), causes
// with a bug first; a long list is cut (the report has every finding).
void print_findings(const reports::Report& report) {
  constexpr size_t kMaxCausesListed = 20;
  std::vector<std::string> causes;  // in first-seen order
  std::map<std::string, std::vector<const reports::FindingRecord*>> by_cause;
  for (const reports::FindingRecord& f : report.findings) {
    const std::string cause = cause_of(f.signature);
    if (by_cause[cause].empty()) causes.push_back(cause);
    by_cause[cause].push_back(&f);
  }
  auto has_bug = [&](const std::string& cause) {
    return std::any_of(by_cause[cause].begin(), by_cause[cause].end(), [](const auto* f) { return reports::is_failure(*f); });
  };
  std::stable_partition(causes.begin(), causes.end(), has_bug);
  for (size_t i = 0; i < causes.size() && i < kMaxCausesListed; ++i) {
    const auto& findings = by_cause[causes[i]];
    std::cout << "new finding: " << causes[i] << " (" << findings.size() << (findings.size() == 1 ? " pair" : " pairs")
              << ")\n";
    for (const reports::FindingRecord* f : findings)
      std::cout << "  " << f->pins << "  " << f->a << " vs " << f->b
                << (f->file.empty() ? "" : "  " + corpus::reproduce_line(f->file)) << "\n";
  }
  if (causes.size() > kMaxCausesListed)
    std::cout << "... and " << causes.size() - kMaxCausesListed << " more causes of new findings (see --report)\n";
}

// Every output path is checked before the first case runs: a report path that is a folder must not
// cost a night's campaign (the corpus folder is checked by the engine).
void check_outputs(const CampaignFlags& flags) {
  for (const std::string& file : {flags.report_file, flags.junit_file})
    if (!file.empty()) check_output_file(file, /*create_folders=*/true);
}

// The baseline's signatures that this run could have seen: those of its (op, direction, pair) rows.
std::set<std::string> in_scope(const std::set<std::string>& baseline, const reports::Report& report) {
  using Row = std::tuple<std::string, std::string, std::string, std::string>;
  std::set<Row> rows;  // the pair in name order, as signatures hold it
  for (const reports::PairCounts& c : report.counts) rows.insert({c.op, c.direction, std::min(c.a, c.b), std::max(c.a, c.b)});
  std::set<std::string> out;
  for (const std::string& s : baseline)
    if (const std::optional<corpus::SignatureFields> f = corpus::parse_signature(s))
      if (rows.count({f->op, f->direction, f->a, f->b})) out.insert(s);
  return out;
}

// --baseline: the signatures that appeared (seen now, not in the baseline) and vanished (in the
// baseline for a pair this run covered, not seen now). Returns whether the set changed.
bool compare_with_baseline(const std::set<std::string>& baseline, const std::set<std::string>& seen,
                           const reports::Report& report) {
  const std::set<std::string> expected = in_scope(baseline, report);
  std::vector<std::string> appeared, vanished;
  std::set_difference(seen.begin(), seen.end(), expected.begin(), expected.end(), std::back_inserter(appeared));
  std::set_difference(expected.begin(), expected.end(), seen.begin(), seen.end(), std::back_inserter(vanished));
  for (const std::string& s : appeared) std::cout << "baseline: appeared " << s << "\n";
  for (const std::string& s : vanished) std::cout << "baseline: vanished " << s << "\n";
  std::cout << "baseline: " << seen.size() << " signatures seen, " << expected.size() << " expected; "
            << appeared.size() << " appeared, " << vanished.size() << " vanished\n";
  return !appeared.empty() || !vanished.empty();
}

// The signatures of a bitparity-report/1 file: those of its findings, the new ones of its run
// (every signature it saw when it started from an empty corpus, or after `bitparity merge`).
std::set<std::string> report_signatures(const std::string& file) {
  nlohmann::json doc;
  try {
    doc = parse_json_text(read_document(file), "the file");
  } catch (const ParseError& e) {
    throw ParseError("--baseline", file + ": " + e.what());
  }
  if (!doc.is_object() || !doc.contains("format") || !doc["format"].is_string() ||
      doc["format"].get<std::string>() != reports::kReportFormat)
    throw ParseError("--baseline", file + ": not a corpus folder or a " + std::string(reports::kReportFormat) + " file");
  reports::Report report;
  try {
    report = reports::report_from_json(doc);
  } catch (const ParseError& e) {
    throw ParseError("--baseline", file + ": " + e.what());
  }
  std::set<std::string> signatures;
  for (const reports::FindingRecord& f : report.findings) signatures.insert(f.signature);
  return signatures;
}

// --baseline: a corpus folder's entries, or a report's findings.
std::set<std::string> baseline_signatures(const std::string& path) {
  if (std::filesystem::is_directory(path)) return corpus::load_signatures(path);
  if (!std::filesystem::is_regular_file(path))
    throw ParseError("--baseline", "not a corpus folder or a report file: " + path);
  return report_signatures(path);
}

int campaign(const Registry& registry, const CampaignFlags& flags) {
  CampaignOptions options = options_from(registry, flags);
  check_outputs(flags);
  std::optional<std::set<std::string>> baseline;
  std::set<std::string> seen;
  if (!flags.baseline_dir.empty()) {
    baseline = baseline_signatures(flags.baseline_dir);
    options.signatures_seen = &seen;
  }
  StopOnSignals stop_on_signals;
  const reports::Report report = campaign::run_campaign(registry, options);
  print_findings(report);
  std::cout << reports::text_table(report);  // last, where a long run's output ends
  if (!flags.report_file.empty()) write_output(flags.report_file, reports::report_to_json(report).dump(2) + "\n");
  if (!flags.junit_file.empty()) write_output(flags.junit_file, reports::junit_xml(report));
  if (report.run.error) {
    std::cerr << "error: the campaign stopped early: " << *report.run.error << "\n";
    return kExitError;
  }
  if (report.run.interrupted) return kExitInterrupted;
  const bool changed = baseline && compare_with_baseline(*baseline, seen, report);
  for (const reports::FindingRecord& f : report.findings)
    if (reports::is_failure(f)) return kExitDifferent;
  return changed ? kExitDifferent : kExitOk;
}

}  // namespace

Command add_campaign(CLI::App& root, const Registry& registry) {
  auto f = std::make_shared<CampaignFlags>();
  CLI::App* app = root.add_subcommand(
      "campaign",
      "Generate random cases from every op's generator and run them through backend pairs for a time "
      "budget; shrink each new finding, write it to the corpus (named by content hash, deduplicated by "
      "signature) and summarize. Default pairs: cuda:C vs ref:C where a GPU backend is available, with "
      "cuda:C vs cuda:C (the case run twice) on a sample of cases (on every case for an order-of-arrival contract), "
      "else every pair of ref contracts. SIGINT/SIGTERM stop after the current case and still write the "
      "summary. Every output path is checked before the first case. Exit 0; 1 when a new same-contract "
      "finding (a bug) was written or, with --baseline, the set of signatures changed; 2 on an error (a corpus write that failed still writes the summary); 130 "
      "when interrupted (after writing the corpus and the summary).");
  app->add_option("--budget-seconds", f->budget_seconds, "wall-clock budget in seconds, finite, >= 0")
      ->type_name("SECONDS")
      ->capture_default_str();
  app->add_option("--seed", f->seed, "seed of the case stream, 0 .. 2^64-1")->type_name("UINT64")->capture_default_str();
  app->add_option("--pair", f->pairs,
                  "A,B backend pair; repeat for several (default: see above). K:*,L:* pairs K:C with L:C for every "
                  "contract C both kinds implement (--pair racecheck:*,ref:* with --sanitizer racecheck). An "
                  "order-of-arrival contract (atomics) differs across kinds as a finding only where an output element "
                  "has at most one addend, whose bits every order gives alike, or where an element of several addends "
                  "is outside the bound every order keeps (ulp_over_budget); a case whose differences all lie "
                  "within it is an arrival_order skip (a contract that does not name its cases of one addend an output, "
                  "arrival_order_free, is left out where K and L differ, as the default pairs do: name such a pair to "
                  "run it)");
  app->add_option("--ops", f->ops, "comma-separated ops (default: every op)")->delimiter(',');
  app->add_option("--corpus", f->corpus_dir,
                  "corpus folder: findings go to DIR/<op>/<hash>.json; signatures "
                  "already there are not written again");
  app->add_option("--report", f->report_file, "write the bitparity-report/1 JSON summary here");
  app->add_option("--baseline", f->baseline_dir,
                  "the signatures this run should see, from a corpus folder (its entries) or a bitparity-report/1 "
                  "file (its findings: a run from an empty corpus, or a merge): exit 1 when one appears that it "
                  "lacks, or one of a pair this run covered vanishes (contract-vs-contract campaigns: a changed set "
                  "is a change in behaviour)")
      ->type_name("DIR|REPORT");
  app->add_option("--junit", f->junit_file, "write JUnit XML here (one testcase per op x pair)");
  app->add_option("--shard", f->shard,
                  "run shard i of n (i/n): the case indices i, i+n, i+2n, ... of the unsharded run with the same "
                  "seed, so that `bitparity merge` of all n shards equals that run")
      ->type_name("I/N")->capture_default_str();
  app->add_option("--max-cases", f->max_cases, "stop after this many case indices (over all shards), >= 0")
      ->type_name("N");
  app->add_option("--max-shrink-calls", f->max_shrink_calls, "predicate calls per shrink, >= 1")
      ->type_name("N")
      ->capture_default_str();
  app->add_option("--shrink-seconds", f->shrink_seconds,
                  "wall-clock bound of one shrink, finite, >= 0: the smallest case so far is kept (a shrink cut by "
                  "time may differ between runs)")
      ->type_name("SECONDS")
      ->capture_default_str();
  app->add_option("--jobs", f->jobs,
                  "threads that generate, run, compare and shrink cases, 1 .. " + std::to_string(campaign::kMaxJobs) +
                      " (default: every core). The report and the corpus are those of --jobs 1; bitparity's CPU "
                      "reference and CUDA kernels run on several threads at once (the kernels each thread on its own "
                      "stream), a pool of N workers (--devices N) N cases at once, every other kind one at a time")
      ->type_name("N")
      ->capture_default_str();
  app->add_option("--generators", f->generators,
                  "processes that draw the cases, 0 .. " + std::to_string(campaign::kMaxJobs) +
                      " (default: as many as --jobs, at most the cores, when it is more than 1, else 0). A process draws one case at a "
                      "time (RapidCheck's generators keep process-wide state), so the campaign forks these copies of "
                      "itself when it starts and each draws the cases it is sent, ahead of the jobs; a case's draw "
                      "depends only on the seed and its index, so the report and the corpus are those of 0, which "
                      "draws in the campaign's own process. A copy that dies, or draws one case for more than " +
                      std::to_string(static_cast<int>(campaign::kPoolDrawSeconds)) +
                      " s (then it is killed), costs that case (counted as not generated, with a warning); the others "
                      "take its cases")
      ->type_name("N");
  app->add_option("--batch", f->batch,
                  "cases of one op and direction that a backend with a batch path runs in one call, 1 .. " +
                      std::to_string(campaign::kMaxBatch) +
                      ": bitparity's CUDA kernels take their inputs in one copy, launch back to back, and give their "
                      "outputs in one copy and one synchronization (a batch too large for the thread's 8 MiB arena runs "
                      "case by case); the workers of --devices and --sanitizer take them in one request (a batch that "
                      "meets a fault runs its cases again alone). A self pair that runs on every case (an order-of-arrival contract, a pair asked "
                      "for) has its second runs in a second batch. The job that starts a batch's first case runs the batch; the others go on to other cases rather than wait for it (with --devices or --sanitizer, no more "
                      "batches run at once than the workers take). Each case is then compared, judged and shrunk "
                      "alone on any job, and the report and the corpus are those of --batch 1. 1 runs every case alone. No effect where no side has a "
                      "batch path (the reference, plug-ins, --exec workers that do not offer batches)")
      ->type_name("N")
      ->capture_default_str();
  app->add_option("--nondeterminism-every", f->nondeterminism_every,
                  "run a GPU implementation twice on one case in N (K:C vs K:C; a difference is a nondeterminism "
                  "finding); order-of-arrival contracts run twice on every case; 0: never")
      ->type_name("N")
      ->capture_default_str();
  app->add_option("--same-contract-pin", f->same_contract_pin,
                  "pin of new same-contract findings: open (reported) or fixed (replay fails until fixed)")
      ->check(CLI::IsMember({"open", "fixed"}))
      ->capture_default_str();
  app->add_flag("--strict-nan", f->strict_nan, "compare NaN payloads and signs bit for bit");
  app->add_flag("-q,--quiet", f->quiet, "no progress lines on stderr");
  app->footer(
      "Examples:\n"
      "  bitparity campaign --budget-seconds 600 --seed 1 --corpus corpus --report report.json --junit junit.xml\n"
      "  bitparity campaign --pair ref:C1,ref:C2 --ops OP --max-cases 10000   (names: bitparity list)\n"
      "  bitparity campaign --shard 3/8 --seed 7 --corpus shard3/corpus --report shard3/report.json\n"
      "  bitparity campaign --pair ref:C1,ref:C2 --max-cases 10000 --jobs 8 --baseline last/report.json\n"
      "  bitparity --sanitizer racecheck campaign --pair racecheck:*,ref:* --budget-seconds 1800 --corpus corpus");
  return {app, [&registry, f] { return campaign(registry, *f); }};
}

}  // namespace bitparity::cli
