#include "corpus/replay.h"

#include <optional>

namespace bitparity::corpus {
namespace {

// Why `backend` cannot run `op` here, or nothing when it can.
std::optional<std::string> unavailable(const Registry& registry, const std::string& op, const std::string& backend) {
  const std::string kind = split_backend_name(backend).first;
  const BackendKind* info = registry.backend(kind);
  if (!info) return "backend kind '" + kind + "' is not built into this binary";
  if (info->unavailable_reason)
    if (std::optional<std::string> why = info->unavailable_reason()) return kind + " is unavailable: " + *why;
  if (!registry.impl(op, backend)) return backend + " does not implement " + op;
  return std::nullopt;
}

std::string describe(const DiffResult& r) {
  switch (r.outcome) {
    case Outcome::kAgree:
      return "the pair agrees";
    case Outcome::kSkip:
      return "skipped (" + r.kind + ")";
    case Outcome::kFinding:
      return r.kind + (r.output.empty() ? "" : " in " + r.output);
  }
  return "?";
}

// An entry that names no output (a reproducer written by a test) matches its kind in any output.
bool same_finding(const Entry& entry, const DiffResult& r) {
  return r.outcome == Outcome::kFinding && r.kind == entry.kind && (entry.output.empty() || r.output == entry.output);
}

ReplayResult judge_divergence(const Entry& entry, const DiffResult& r) {
  if (same_finding(entry, r)) return {ReplayStatus::kPass, "divergence still shows: " + describe(r), r.message};
  return {ReplayStatus::kFail,
          "pinned divergence " + entry.kind + (entry.output.empty() ? "" : " in " + entry.output) +
              " no longer shows; now: " + describe(r),
          r.message};
}

ReplayResult judge_fixed(const DiffResult& r) {
  if (r.outcome == Outcome::kAgree) return {ReplayStatus::kPass, "fixed: the pair agrees", r.message};
  return {ReplayStatus::kFail, "pinned as fixed but the pair differs: " + describe(r), r.message};
}

ReplayResult judge_open(const Entry& entry, const DiffResult& r) {
  if (same_finding(entry, r)) return {ReplayStatus::kPass, "open, still reproduces: " + describe(r), r.message};
  if (r.outcome == Outcome::kAgree)
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
  }
  return "?";
}

ReplayResult replay_entry(const Registry& registry, const Entry& entry) {
  for (const std::string& backend : {entry.pair.a, entry.pair.b})
    if (std::optional<std::string> why = unavailable(registry, entry.c.op, backend))
      return {ReplayStatus::kSkip, *why, ""};
  const DiffResult r = diff_case(registry, entry.c, entry.pair, CompareOptions{entry.strict_nan});
  // A reference that now calls the input unmodelled no longer tests anything the entry pins.
  if (r.outcome == Outcome::kSkip && entry.pins != kPinOpen)
    return {ReplayStatus::kFail, "the input is now " + describe(r) + "; the entry pins nothing", r.message};
  if (entry.pins == kPinDivergence) return judge_divergence(entry, r);
  if (entry.pins == kPinFixed) return judge_fixed(r);
  return judge_open(entry, r);
}

std::string reproduce_line(const std::filesystem::path& path) {
  return "To reproduce: bitparity replay " + path.string();
}

}  // namespace bitparity::corpus
