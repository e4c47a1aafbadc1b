// `bitparity replay`: corpus entries as regression tests, with the verdict the corpus tests use;
// a bare case (a user's file, a reproducer without a pair) through every pair of implementations.
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "corpus/replay.h"

namespace bitparity::cli {
namespace {

namespace fs = std::filesystem;

struct ReplayFlags {
  std::vector<std::string> paths;
  bool verbose = false, strict_nan = false;
};

struct Tally {
  int passed = 0, failed = 0, skipped = 0, broken = 0, cases = 0;
};

// Files as given; folders expand to every case document (*.json) below them, so a report written
// beside a shard's corpus is left out. A folder without entries is an error: replaying nothing
// must not look like success.
std::vector<fs::path> expand(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const std::string& p : paths) {
    if (!fs::is_directory(p)) {
      files.emplace_back(p);
      continue;
    }
    int ignored = 0;
    const size_t before = files.size();
    for (const fs::path& found : corpus::find_json_files(p)) {
      if (corpus::is_case_document(found))
        files.push_back(found);
      else
        ++ignored;
    }
    if (files.size() == before)
      throw std::runtime_error("no corpus entries (bitparity-case/1 *.json) under " + p +
                               (ignored ? " (" + std::to_string(ignored) + " JSON files of another format)" : ""));
  }
  return files;
}

void replay_entry(const Registry& registry, const corpus::Entry& entry, bool verbose, Tally& tally) {
  const corpus::ReplayResult r = corpus::replay_entry(registry, entry);
  std::cout << corpus::replay_status_name(r.status) << " " << entry.path.string() << ": " << r.summary << "\n";
  if (r.status == corpus::ReplayStatus::kFail || (verbose && !r.details.empty())) std::cout << r.details << "\n";
  if (r.status == corpus::ReplayStatus::kFail) std::cout << corpus::reproduce_line(entry.path) << "\n";
  switch (r.status) {
    case corpus::ReplayStatus::kPass:
      ++tally.passed;
      break;
    case corpus::ReplayStatus::kFail:
      ++tally.failed;
      break;
    case corpus::ReplayStatus::kSkip:
      ++tally.skipped;
      break;
    case corpus::ReplayStatus::kError:
      ++tally.broken;
      break;
  }
}

// A bare case pins nothing: one line per pair says whether it agrees; only errors count. A
// reproducer of another kind than a differential finding runs on its own pair alone.
void replay_case(const Registry& registry, const corpus::ReplayDocument& doc, const ReplayFlags& flags,
                 Tally& tally) {
  ++tally.cases;
  std::vector<corpus::BackendPair> pairs;
  if (doc.pair) pairs.push_back(*doc.pair);
  const std::vector<corpus::PairReplay> replays =
      corpus::replay_case(registry, doc.c, CompareOptions{flags.strict_nan}, pairs);
  std::cout << "CASE " << doc.path.string() << ": " << corpus::case_title(doc.c)
            << (doc.kind.empty() ? "" : ", reported as " + doc.kind) << ", " << replays.size()
            << (replays.size() == 1 ? " pair\n" : " pairs\n");
  if (replays.empty()) std::cout << "  no two implementations of " << doc.c.op << " to compare\n";
  for (const corpus::PairReplay& r : replays) {
    std::cout << "  " << r.pair.name() << ": " << r.summary << "\n";
    if (flags.verbose && r.result && !r.result->message.empty()) std::cout << r.result->message << "\n";
  }
}

void replay_one(const Registry& registry, const fs::path& path, const ReplayFlags& flags, Tally& tally) {
  try {
    const corpus::ReplayDocument doc = corpus::load_replay_document(path, registry);
    if (doc.entry)
      replay_entry(registry, *doc.entry, flags.verbose, tally);
    else
      replay_case(registry, doc, flags, tally);
  } catch (const RejectError& e) {  // a backend that is not a reference refused to run (not a diff)
    ++tally.broken;
    std::cout << "ERROR " << path.string() << ": (" << e.error_class() << ") " << e.what() << "\n";
  } catch (const std::exception& e) {
    ++tally.broken;
    std::cout << "ERROR " << e.what() << "\n";
  }
}

int replay(const Registry& registry, const ReplayFlags& flags) {
  Tally tally;
  for (const fs::path& path : expand(flags.paths)) replay_one(registry, path, flags, tally);
  std::cout << "replayed " << tally.passed + tally.failed + tally.skipped + tally.broken + tally.cases
            << " files: " << tally.passed << " passed, " << tally.failed << " failed, " << tally.skipped
            << " skipped, " << tally.broken << " errors, " << tally.cases << " bare cases\n";
  if (tally.broken) return kExitError;
  return tally.failed ? kExitDifferent : kExitOk;
}

}  // namespace

Command add_replay(CLI::App& root, const Registry& registry) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* app = root.add_subcommand(
      "replay",
      "Replay corpus entries and reproducers (files, .json or .safetensors, or folders searched for "
      "bitparity-case/1 *.json). pins "
      "\"divergence\": the pair must still differ with the same kind and output; \"fixed\": the pair must now "
      "agree; \"open\": reported, never fails. A case without a finding is run through every pair of "
      "implementations (each other backend against ref, and the ref contracts against each other), one line "
      "per pair. A pair naming a backend kind or contract this binary does not know is an error; a known "
      "backend that cannot run here is skipped, with the reason. Exit 0 all passed, 1 an entry failed, 2 a "
      "file could not be read or replayed.");
  app->add_option("paths", flags->paths, "corpus entries, reproducers, cases (JSON or .safetensors) or folders")
      ->required();
  app->add_flag("-v,--verbose", flags->verbose, "print the comparison of every entry, not only of failures");
  app->add_flag("--strict-nan", flags->strict_nan, "bare cases: compare NaN payloads and signs bit for bit");
  app->footer(
      "Examples:\n  bitparity replay corpus/\n  bitparity replay corpus/OP/3f9a0c1d2e3f4a5b.json\n"
      "  bitparity replay bitparity-failures/3f9a0c1d2e3f4a5b.json");
  return {app, [&registry, flags] { return replay(registry, *flags); }};
}

}  // namespace bitparity::cli
