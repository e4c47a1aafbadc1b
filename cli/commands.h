// The subcommands of `bitparity`. Each add_* declares its flags on the root app (one strict table:
// CLI11 generates parsing and --help from it) and returns the action to run when it was chosen.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "core/registry.h"

namespace bitparity::cli {

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitDifferent = 1;      // diff: not identical; replay: an entry failed; campaign: new bug
inline constexpr int kExitError = 2;          // usage, parse or reject errors: the command could not do its job
inline constexpr int kExitInterrupted = 130;  // SIGINT's shell convention (128 + 2); results were still written

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_list(CLI::App& root, const Registry& registry);
Command add_run(CLI::App& root, const Registry& registry);
Command add_diff(CLI::App& root, const Registry& registry);
Command add_replay(CLI::App& root, const Registry& registry);
Command add_campaign(CLI::App& root, const Registry& registry);
Command add_merge(CLI::App& root, const Registry& registry);
Command add_capture_math(CLI::App& root);
Command add_worker(CLI::App& root, const Registry& registry);
Command add_report(CLI::App& root);
Command add_bench(CLI::App& root);
Command add_case(CLI::App& root, const Registry& registry);

}  // namespace bitparity::cli
