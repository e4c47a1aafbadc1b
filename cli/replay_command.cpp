// `bitparity replay`: corpus entries as regression tests, with the verdict the corpus tests use.
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
  bool verbose = false;
};

struct Tally {
  int passed = 0, failed = 0, skipped = 0, broken = 0;
};

// Files as given; folders expand to every *.json below them. A folder without entries is an error:
// replaying nothing must not look like success.
std::vector<fs::path> expand(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const std::string& p : paths) {
    if (!fs::is_directory(p)) {
      files.emplace_back(p);
      continue;
    }
    const std::vector<fs::path> found = corpus::find_json_files(p);
    if (found.empty()) throw std::runtime_error("no corpus entries (*.json) under " + p);
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

void replay_one(const Registry& registry, const fs::path& path, bool verbose, Tally& tally) {
  corpus::Entry entry;
  try {
    entry = corpus::load_entry(path, registry);
  } catch (const std::exception& e) {
    ++tally.broken;
    std::cout << "ERROR " << e.what() << "\n";
    return;
  }
  const corpus::ReplayResult r = corpus::replay_entry(registry, entry);
  std::cout << corpus::replay_status_name(r.status) << " " << path.string() << ": " << r.summary << "\n";
  if (r.status == corpus::ReplayStatus::kFail || (verbose && !r.details.empty())) std::cout << r.details << "\n";
  if (r.status == corpus::ReplayStatus::kFail) std::cout << corpus::reproduce_line(path) << "\n";
  ++(r.status == corpus::ReplayStatus::kPass   ? tally.passed
     : r.status == corpus::ReplayStatus::kFail ? tally.failed
                                               : tally.skipped);
}

int replay(const Registry& registry, const ReplayFlags& flags) {
  Tally tally;
  for (const fs::path& path : expand(flags.paths)) replay_one(registry, path, flags.verbose, tally);
  std::cout << "replayed " << tally.passed + tally.failed + tally.skipped + tally.broken << " entries: " << tally.passed
            << " passed, " << tally.failed << " failed, " << tally.skipped << " skipped, " << tally.broken
            << " unreadable\n";
  if (tally.broken) return kExitError;
  return tally.failed ? kExitDifferent : kExitOk;
}

}  // namespace

Command add_replay(CLI::App& root, const Registry& registry) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* app = root.add_subcommand(
      "replay",
      "Replay corpus entries (files, or folders searched for *.json). pins \"divergence\": the pair must "
      "still differ with the same kind and output; \"fixed\": the pair must now agree; \"open\": reported, "
      "never fails. Exit 0 all passed, 1 an entry failed, 2 an entry could not be read.");
  app->add_option("paths", flags->paths, "corpus entries or folders")->required();
  app->add_flag("-v,--verbose", flags->verbose, "print the comparison of every entry, not only of failures");
  app->footer("Example:\n  bitparity replay corpus/\n  bitparity replay corpus/swiglu/3f9a0c1d2e3f4a5b.json");
  return {app, [&registry, flags] { return replay(registry, *flags); }};
}

}  // namespace bitparity::cli
