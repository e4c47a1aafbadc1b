#include "corpus/replay.h"

#include <optional>

#include "core/case_json.h"
#include "core/error.h"
#include "core/json_strict.h"
#include "core/safetensors_case.h"

namespace bitparity::corpus {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string describe(const DiffResult& r) {
  switch (r.verdict) {
    case DiffVerdict::kAgree:
      return "the pair agrees";
    case DiffVerdict::kSkip:
      return "skipped (" + r.kind + ")";
    case DiffVerdict::kFinding:
      return r.kind + (r.output.empty() ? "" : " in " + r.output);
  }
  return "?";
}

// An entry that names no output (a reproducer written by a test) matches its kind in any output.
bool same_finding(const Entry& entry, const DiffResult& r) {
  return r.verdict == DiffVerdict::kFinding && r.kind == entry.kind && (entry.output.empty() || r.output == entry.output);
}

ReplayResult judge_divergence(const Entry& entry, const DiffResult& r) {
  if (same_finding(entry, r)) return {ReplayStatus::kPass, "divergence still shows: " + describe(r), r.message};
  return {ReplayStatus::kFail,
          "pinned divergence " + entry.kind + (entry.output.empty() ? "" : " in " + entry.output) +
              " no longer shows; now: " + describe(r),
          r.message};
}

ReplayResult judge_fixed(const DiffResult& r) {
  if (r.verdict == DiffVerdict::kAgree) return {ReplayStatus::kPass, "fixed: the pair agrees", r.message};
  return {ReplayStatus::kFail, "pinned as fixed but the pair differs: " + describe(r), r.message};
}

ReplayResult judge_open(const Entry& entry, const DiffResult& r) {
  if (same_finding(entry, r)) return {ReplayStatus::kPass, "open, still reproduces: " + describe(r), r.message};
  if (r.verdict == DiffVerdict::kAgree)
    return {ReplayStatus::kPass, "open, no longer reproduces: the pair agrees (pin it \"fixed\")", r.message};
  return {ReplayStatus::kPass, "open, reproduces differently: " + describe(r), r.message};
}

}  // namespace

std::string_view replay_status_name(ReplayStatus status) {
  switch (status) {
    case ReplayStatus::kPass:
      return "PASS";
    case ReplayStatus::kFail:
      return "FAIL";
    case ReplayStatus::kSkip:
      return "SKIP";
    case ReplayStatus::kError:
      return "ERROR";
  }
  return "?";
}

std::optional<std::string> unknown_backend(const Registry& registry, const std::string& op, const std::string& backend) {
  const auto [kind, contract] = split_backend_name(backend);
  if (!registry.backend(kind))
    return "backend kind '" + kind + "' of " + backend + " is unknown to this binary (see `bitparity list`)";
  const OpInfo* info = registry.op(op);
  if (!info || !info->has_contract(contract))
    return "contract '" + contract + "' of " + backend + " is not a contract of " + op + " (see `bitparity list`)";
  return std::nullopt;
}

std::optional<std::string> unavailable_here(const Registry& registry, const std::string& backend) {
  const std::string kind = split_backend_name(backend).first;
  const BackendKind* info = registry.backend(kind);
  if (info && info->unavailable_reason)
    if (std::optional<std::string> why = info->unavailable_reason()) return kind + " is unavailable here: " + *why;
  return std::nullopt;
}

std::optional<ReplayResult> cannot_replay(const Registry& registry, const std::string& op, const BackendPair& pair) {
  for (const std::string& backend : {pair.a, pair.b})
    if (std::optional<std::string> why = unknown_backend(registry, op, backend))
      return ReplayResult{ReplayStatus::kError, *why, ""};
  // Before the implementation check: a backend that cannot run here may not have registered any.
  for (const std::string& backend : {pair.a, pair.b})
    if (std::optional<std::string> why = unavailable_here(registry, backend))
      return ReplayResult{ReplayStatus::kSkip, *why, ""};
  for (const std::string& backend : {pair.a, pair.b})
    if (!registry.impl(op, backend))
      return ReplayResult{ReplayStatus::kError, backend + " does not implement " + op + " (see `bitparity list`)", ""};
  return std::nullopt;
}

ReplayResult replay_entry(const Registry& registry, const Entry& entry) {
  if (std::optional<ReplayResult> why = cannot_replay(registry, entry.c.op, entry.pair)) return *why;
  const DiffResult r = entry.rows ? diff_rows(registry, entry.c, entry.pair.a, *entry.rows, CompareOptions{entry.strict_nan})
                                  : diff_case(registry, entry.c, entry.pair, CompareOptions{entry.strict_nan});
  // A reference that now calls the input unmodelled no longer tests anything the entry pins.
  if (r.verdict == DiffVerdict::kSkip && entry.pins != kPinOpen)
    return {ReplayStatus::kFail, "the input is now " + describe(r) + "; the entry pins nothing", r.message};
  if (entry.pins == kPinDivergence) return judge_divergence(entry, r);
  if (entry.pins == kPinFixed) return judge_fixed(r);
  return judge_open(entry, r);
}

bool is_case_document(const fs::path& path) {
  try {
    const json doc = parse_json_text(read_document(path), path.string());
    const auto format = doc.is_object() ? doc.find("format") : doc.end();
    return !doc.is_object() || format == doc.end() || !format->is_string() || format->get<std::string>() == kCaseFormat;
  } catch (const std::exception&) {
    return true;  // loading it reports the problem
  }
}

ReplayDocument load_replay_document(const fs::path& path, const Registry& registry) {
  const json doc = read_case_document(path, registry);  // JSON, or .safetensors; errors name the path
  const auto finding = doc.is_object() ? doc.find("finding") : doc.end();
  const bool has_finding = finding != doc.end() && finding->is_object();
  const std::string kind = has_finding && finding->contains("kind") && (*finding)["kind"].is_string()
                               ? (*finding)["kind"].get<std::string>()
                               : "";
  // A corpus entry (or a reproducer of a differential finding) has pins and a signature: every
  // field is checked, and one that lacks either is an error, not a bare case.
  if (doc.contains("pins") || (has_finding && finding->contains("signature"))) {
    Entry entry = entry_from_json(doc, path, registry);
    return {path, entry.c, std::move(entry), std::nullopt, kind};
  }
  try {
    ReplayDocument replay{path, case_from_json(doc, registry), std::nullopt, std::nullopt, kind};
    if (has_finding && finding->contains("pair")) {
      const json& pair = (*finding)["pair"];
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
        throw ParseError("finding.pair", "expected two backend names [\"kind:contract\", \"kind:contract\"]");
      replay.pair = parse_pair(pair[0].get<std::string>() + "," + pair[1].get<std::string>(), "finding.pair");
    }
    return replay;
  } catch (const ParseError& e) {
    throw ParseError("", path.string() + ": " + e.what());
  }
}

std::vector<BackendPair> case_pairs(const Registry& registry, const std::string& op) {
  std::vector<BackendPair> pairs = twin_pairs(registry, op, /*available_only=*/false);
  for (const BackendPair& p : reference_pairs(registry, op)) pairs.push_back(p);
  return pairs;
}

std::vector<PairReplay> replay_case(const Registry& registry, const Case& c, const CompareOptions& options,
                                    std::vector<BackendPair> pairs) {
  if (pairs.empty()) pairs = case_pairs(registry, c.op);
  for (const BackendPair& pair : pairs)
    if (std::optional<ReplayResult> why = cannot_replay(registry, c.op, pair); why && why->status == ReplayStatus::kError)
      throw std::runtime_error(why->summary);
  std::vector<PairReplay> replays;
  for (const BackendPair& pair : pairs) {
    PairReplay replay{pair, std::nullopt, ""};
    if (std::optional<ReplayResult> why = cannot_replay(registry, c.op, pair)) {
      replay.summary = "skipped: " + why->summary;
    } else {
      replay.result = diff_case(registry, c, pair, options);
      replay.summary = replay.result->verdict == DiffVerdict::kAgree ? "agree" : describe(*replay.result);
    }
    replays.push_back(std::move(replay));
  }
  return replays;
}

std::string reproduce_line(const std::filesystem::path& path) {
  return "To reproduce: bitparity replay " + path.string();
}

}  // namespace bitparity::corpus
