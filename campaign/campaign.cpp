#include "campaign/campaign.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <ostream>
#include <set>
#include <stdexcept>

#include <rapidcheck/Random.h>

#include "core/error.h"
#include "core/outcome.h"
#include "core/random.h"
#include "core/safe_file.h"
#include "corpus/entry.h"
#include "corpus/replay.h"

namespace bitparity::campaign {
namespace {

using Clock = std::chrono::steady_clock;
using corpus::BackendPair;
using corpus::DiffResult;
using corpus::DiffVerdict;

constexpr std::string_view kGenerationFailed = "generation_failed";
// A backend that cannot be used at all (an unknown name: the command line's error), not one that
// failed on a case: that is a kBackendError finding.
constexpr std::string_view kBackendUnusable = "backend_unusable";

struct Target {
  const OpInfo* op = nullptr;
  Direction direction = Direction::kForward;
  std::vector<BackendPair> pairs;
};

void require_available(const Registry& registry, const std::string& backend) {
  const std::string kind = split_backend_name(backend).first;
  if (!registry.backend(kind))
    throw std::runtime_error("unknown backend kind '" + kind + "' in " + backend + " (see `bitparity list`)");
  if (std::optional<std::string> why = corpus::unavailable_here(registry, backend))
    throw std::runtime_error(backend + " cannot run here: " + *why);
}

std::vector<const OpInfo*> selected_ops(const Registry& registry, const std::vector<std::string>& names) {
  std::vector<const OpInfo*> ops;
  if (names.empty()) {
    for (const OpInfo& op : registry.ops()) ops.push_back(&op);
    return ops;
  }
  for (const std::string& name : names) {
    const OpInfo* op = registry.op(name);
    if (!op) throw std::runtime_error("unknown op '" + name + "' in --ops (see `bitparity list`)");
    ops.push_back(op);
  }
  return ops;
}

std::vector<Target> make_targets(const Registry& registry, const CampaignOptions& options) {
  for (const BackendPair& pair : options.pairs)
    require_available(registry, pair.a), require_available(registry, pair.b);
  std::vector<Target> targets;
  std::set<std::string> used_pairs;
  for (const OpInfo* op : selected_ops(registry, options.ops)) {
    const std::vector<BackendPair> pairs = pairs_for(registry, *op, options.pairs);
    if (pairs.empty()) continue;
    for (const BackendPair& p : pairs) used_pairs.insert(p.name());
    for (const auto& [direction, specs] : op->inputs)
      if (op->generate) targets.push_back({op, direction, pairs});
  }
  for (const BackendPair& pair : options.pairs)
    if (!used_pairs.count(pair.name()))
      throw std::runtime_error("--pair " + pair.a + "," + pair.b +
                               " applies to no selected op: no op has both "
                               "implementations (see `bitparity list`)");
  if (targets.empty()) throw std::runtime_error("nothing to run: no selected op has two implementations to compare");
  return targets;
}

void fill_run_info(reports::RunInfo& run, const CampaignOptions& options, const std::vector<Target>& targets) {
  run.seed = options.seed;
  run.budget_seconds = options.budget_seconds;
  run.max_cases = options.max_cases;
  run.shards = {options.shard.name()};
  run.commit = options.commit;
  run.device = options.device;
  run.tool_version = options.tool_version;
  run.date = utc_now();
  std::set<std::string> backends, pairs, ops;
  for (const Target& t : targets) {
    for (const BackendPair& p : t.pairs) backends.insert(p.a), backends.insert(p.b), pairs.insert(p.name());
    if (!ops.insert(t.op->name).second) continue;
    for (const ContractInfo& c : t.op->contracts) run.contracts.push_back({t.op->name, c.name, c.derived_from});
  }
  run.backends.assign(backends.begin(), backends.end());
  run.pairs.assign(pairs.begin(), pairs.end());
}

// What one backend did with the current case (a failure of the backend itself is an outcome of class
// backend_error, which makes a finding); nullopt when the backend cannot be used at all.
using SideOutcome = std::optional<Outcome>;

class Campaign {
 public:
  Campaign(const Registry& registry, const CampaignOptions& options)
      : registry_(registry),
        options_(options),
        targets_(make_targets(registry, options)),
        shard_seed_(shard_seed(options.seed, options.shard)) {
    if (!options.corpus_dir.empty()) {
      check_output_folder(options.corpus_dir);
      known_ = corpus::load_signatures(options.corpus_dir);
    }
    fill_run_info(report_.run, options, targets_);
  }

  reports::Report run() {
    start_ = last_progress_ = Clock::now();
    for (int64_t local = 0;; ++local) {
      const int64_t global = local * options_.shard.count + options_.shard.index;
      if (interrupted() || report_.run.error || elapsed() >= options_.budget_seconds ||
          (options_.max_cases && global >= *options_.max_cases))
        break;
      run_case(local, global);
      report_progress(false);
    }
    report_.run.elapsed_seconds = elapsed();
    report_.run.interrupted = interrupted();
    report_progress(true);
    return report_;
  }

 private:
  bool interrupted() const { return options_.stop && options_.stop->load(); }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  void run_case(int64_t local, int64_t global) {
    const Target& target = targets_[static_cast<size_t>(local) % targets_.size()];
    const int size = static_cast<int>((local / static_cast<int64_t>(targets_.size())) % (kMaxGenSize + 1));
    ++cases_;
    std::optional<Case> c;
    try {
      c = target.op->generate(target.direction)(rc::Random(case_seed(shard_seed_, local)), size).value();
    } catch (const std::exception& e) {
      warn_once("generator of " + target.op->name, e.what());
    }
    if (c) count_coverage(target, *c);
    std::map<std::string, SideOutcome> sides;
    for (const BackendPair& pair : target.pairs) {
      if (pair.twice() && !runs_twice_on(*target.op, pair, local)) continue;
      reports::PairCounts& counts = counts_for(target, pair);
      ++counts.cases;
      if (!c) {
        ++counts.skips[std::string(kGenerationFailed)];
        continue;
      }
      const SideOutcome& a = side(sides, pair.a, *c);
      // A self pair runs its backend a second time; every other side runs once per case.
      SideOutcome again;
      if (pair.twice()) again = side_once(pair.b, *c);
      const SideOutcome& b = pair.twice() ? again : side(sides, pair.b, *c);
      if (!a || !b) {
        ++counts.skips[std::string(kBackendUnusable)];
        continue;
      }
      const DiffResult r = corpus::classify(*c, pair, *a, *b, compare_options());
      if (r.comparison)
        for (const OutputComparison& out : r.comparison->outputs)
          for (const auto& [bucket, n] : out.ulp_histogram) counts.ulp_histogram[bucket] += n;
      if (r.verdict == DiffVerdict::kAgree) ++counts.agreements;
      if (r.verdict == DiffVerdict::kSkip) ++counts.skips[r.kind];
      if (r.verdict == DiffVerdict::kFinding) handle_finding(target, pair, *c, r, global);
    }
  }

  CompareOptions compare_options() const { return CompareOptions{options_.strict_nan}; }

  // The edge classes the case is in (the op's classify/tag labels), counted once per case
  // however many pairs run it.
  void count_coverage(const Target& target, const Case& c) {
    const OpInfo& op = *target.op;
    const std::string direction(direction_name(target.direction));
    reports::Coverage& coverage = reports::coverage_for(report_, op.name, direction);
    if (coverage.cases == 0 && coverage.required.empty() && op.required_tags) {
      coverage.required = op.required_tags(target.direction);
      std::sort(coverage.required.begin(), coverage.required.end());
      coverage.required.erase(std::unique(coverage.required.begin(), coverage.required.end()), coverage.required.end());
    }
    ++coverage.cases;
    if (!op.classes) return;
    const std::vector<std::string> tags = op.classes(c).tags;
    for (const std::string& tag : std::set<std::string>(tags.begin(), tags.end())) ++coverage.tags[tag];
  }

  reports::PairCounts& counts_for(const Target& target, const BackendPair& pair) {
    return reports::counts_for(report_, target.op->name, std::string(direction_name(target.direction)), pair.a, pair.b);
  }

  // Whether the self pair (K:C vs K:C) runs on case `local`: every case when the user asked for it
  // or the contract depends on the order of arrival, else one case in nondeterminism_every.
  bool runs_twice_on(const OpInfo& op, const BackendPair& pair, int64_t local) const {
    if (!options_.pairs.empty()) return true;
    const ContractInfo* contract = op.contract(split_backend_name(pair.a).second);
    if (contract && contract->order_of_arrival) return true;
    return options_.nondeterminism_every > 0 && local % options_.nondeterminism_every == 0;
  }

  // Each backend runs a case once, however many pairs it is in (a self pair's second run aside).
  const SideOutcome& side(std::map<std::string, SideOutcome>& sides, const std::string& backend, const Case& c) {
    auto it = sides.find(backend);
    if (it != sides.end()) return it->second;
    return sides.emplace(backend, side_once(backend, c)).first->second;
  }

  SideOutcome side_once(const std::string& backend, const Case& c) {
    try {
      return corpus::run_side(registry_, backend, c);
    } catch (const std::exception& e) {
      warn_once(backend, e.what());
    }
    return SideOutcome{};
  }

  void warn_once(const std::string& who, const std::string& what) {
    if (!warned_.insert(who).second || !options_.progress) return;
    *options_.progress << "warning: " << who << " failed (counted as skipped; later failures are not shown): " << what
                       << "\n";
  }

  void handle_finding(const Target& target, const BackendPair& pair, const Case& c, const DiffResult& r,
                      int64_t global) {
    reports::PairCounts& counts = counts_for(target, pair);
    ++counts.mismatches[r.kind];
    const OpInfo& op = *target.op;
    const std::string raw_signature = corpus::finding_signature(op, c, pair, r);
    // Shrinking keeps the signature, so the one seen here is the one an entry records.
    if (options_.signatures_seen) options_.signatures_seen->insert(raw_signature);
    if (++raw_shrinks_[raw_signature] > kShrinksPerRawSignature) {
      ++counts.known_findings;
      return;
    }
    auto [smallest, result] = shrink(op, pair, c, r);
    const std::string signature = corpus::finding_signature(op, smallest, pair, result);
    if (!known_.insert(signature).second) {
      ++counts.known_findings;
      return;
    }
    write_finding(target, pair, smallest, result, signature, global);
    ++counts.new_findings[result.kind];
  }

  // Shrinks while the finding keeps its signature (kind, output and the op's shape and value
  // classes: a NaN clamp's finding does not become a clamp = -1 one); returns the case and its result.
  std::pair<Case, DiffResult> shrink(const OpInfo& op, const BackendPair& pair, const Case& c, const DiffResult& r) {
    const std::string signature = corpus::finding_signature(op, c, pair, r);
    const fuzz::StillFails still_fails = [&](const Case& candidate) {
      const DiffResult d = corpus::diff_case(registry_, candidate, pair, compare_options());
      return d.verdict == DiffVerdict::kFinding && corpus::finding_signature(op, candidate, pair, d) == signature;
    };
    const fuzz::ShrinkOptions shrink_options{options_.max_shrink_calls, [this] { return interrupted(); }};
    Case smallest = fuzz::shrink_case(op, c, still_fails, shrink_options).smallest;
    DiffResult result = corpus::diff_case(registry_, smallest, pair, compare_options());
    // A backend that does not reproduce its own result (nondeterminism) keeps the original case.
    if (result.verdict != DiffVerdict::kFinding || corpus::finding_signature(op, smallest, pair, result) != signature)
      return {c, r};
    return {std::move(smallest), std::move(result)};
  }

  void write_finding(const Target& target, const BackendPair& pair, const Case& c, const DiffResult& r,
                     const std::string& signature, int64_t global) {
    const corpus::Provenance provenance{options_.seed,   global,          options_.shard.name(),
                                        options_.commit, options_.device, options_.tool_version,
                                        utc_now()};
    const std::string pins = corpus::default_pin(pair, options_.same_contract_pin);
    const nlohmann::json entry =
        corpus::make_entry(*target.op, c, pair, r, signature, pins, provenance, options_.strict_nan);
    reports::FindingRecord record;
    if (!options_.corpus_dir.empty()) {
      try {
        record.file = corpus::write_entry(options_.corpus_dir, c, entry).string();
      } catch (const std::exception& e) {
        // A full disk or a folder gone read-only: stop here, and keep the finding and the summary.
        report_.run.error = std::string("cannot write the corpus entry: ") + e.what();
        if (options_.progress) *options_.progress << "error: " << *report_.run.error << "\n";
      }
    }
    record.signature = signature;
    record.op = target.op->name;
    record.direction = std::string(direction_name(target.direction));
    record.a = pair.a, record.b = pair.b;
    record.kind = r.kind, record.output = r.output;
    record.pins = pins;
    record.message = r.message;
    record.first = entry["finding"]["first"];
    report_.findings.push_back(std::move(record));
  }

  void report_progress(bool final) {
    if (!options_.progress) return;
    const Clock::time_point now = Clock::now();
    if (!final && std::chrono::duration<double>(now - last_progress_).count() < kProgressIntervalSeconds) return;
    last_progress_ = now;
    const double seconds = elapsed();
    char line[256];
    std::snprintf(line, sizeof line, "campaign %s: %.1fs / %.0fs, %lld cases (%.0f/s), %zu new findings%s\n",
                  options_.shard.name().c_str(), seconds, options_.budget_seconds, static_cast<long long>(cases_),
                  seconds > 0 ? static_cast<double>(cases_) / seconds : 0.0, report_.findings.size(),
                  final && report_.run.error ? " (stopped by an error)"
                  : final && interrupted()   ? " (interrupted)"
                  : final                ? " (done)"
                                         : "");
    *options_.progress << line << std::flush;
  }

  const Registry& registry_;
  const CampaignOptions& options_;
  std::vector<Target> targets_;
  uint64_t shard_seed_;
  std::set<std::string> known_;             // signatures in the corpus and found so far
  std::map<std::string, int> raw_shrinks_;  // unshrunk signature -> times shrunk
  std::set<std::string> warned_;
  reports::Report report_;
  Clock::time_point start_, last_progress_;
  int64_t cases_ = 0;
};

}  // namespace

Shard parse_shard(const std::string& text) {
  const std::string usage = "expected i/n with 0 <= i < n, such as 0/4; got '" + text + "'";
  const size_t slash = text.find('/');
  if (slash == std::string::npos) throw ParseError("--shard", usage);
  auto number = [&](const std::string& part) {
    if (part.empty() || part.size() > 9 || !std::all_of(part.begin(), part.end(), ::isdigit))
      throw ParseError("--shard", usage);
    return std::stoll(part);
  };
  const Shard shard{number(text.substr(0, slash)), number(text.substr(slash + 1))};
  if (shard.count < 1 || shard.index >= shard.count) throw ParseError("--shard", usage);
  return shard;
}

uint64_t shard_seed(uint64_t seed, const Shard& shard) {
  if (shard.count == 1) return seed;  // an unsharded run is shard 0/1 with the seed as given
  return splitmix64_finalize(seed ^ splitmix64_finalize(kSplitmixGamma * static_cast<uint64_t>(shard.index + 1)));
}

uint64_t case_seed(uint64_t shard_seed, int64_t local_index) {
  return splitmix64_finalize(shard_seed + kSplitmixGamma * static_cast<uint64_t>(local_index + 1));
}

std::vector<BackendPair> default_pairs(const Registry& registry, const OpInfo& op) {
  std::vector<BackendPair> pairs = corpus::twin_pairs(registry, op.name, /*available_only=*/true);
  if (pairs.empty()) return corpus::reference_pairs(registry, op.name);
  for (BackendPair& self : corpus::self_pairs(registry, op.name, /*available_only=*/true)) pairs.push_back(std::move(self));
  return pairs;
}

std::vector<BackendPair> pairs_for(const Registry& registry, const OpInfo& op,
                                   const std::vector<BackendPair>& requested) {
  if (requested.empty()) return default_pairs(registry, op);
  std::vector<BackendPair> pairs;
  for (const BackendPair& p : requested)
    if (registry.impl(op.name, p.a) && registry.impl(op.name, p.b)) pairs.push_back(p);
  return pairs;
}

void check_options(const CampaignOptions& options) {
  if (!std::isfinite(options.budget_seconds) || options.budget_seconds < 0)
    throw std::invalid_argument("budget_seconds: expected a finite number of seconds >= 0, got " +
                                std::to_string(options.budget_seconds));
  if (options.max_cases && *options.max_cases < 0)
    throw std::invalid_argument("max_cases: expected an integer >= 0, got " + std::to_string(*options.max_cases));
  if (options.nondeterminism_every < 0)
    throw std::invalid_argument("nondeterminism_every: expected an integer >= 0, got " +
                                std::to_string(options.nondeterminism_every));
  if (options.max_shrink_calls < 1)
    throw std::invalid_argument("max_shrink_calls: expected an integer >= 1, got " +
                                std::to_string(options.max_shrink_calls));
  const Shard& s = options.shard;
  if (s.count < 1 || s.count > kMaxShardCount || s.index < 0 || s.index >= s.count)
    throw std::invalid_argument("shard: expected i/n with 0 <= i < n <= " + std::to_string(kMaxShardCount) +
                                ", got " + s.name());
}

reports::Report run_campaign(const Registry& registry, const CampaignOptions& options) {
  check_options(options);
  return Campaign(registry, options).run();
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace bitparity::campaign
