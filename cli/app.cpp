#include "cli/app.h"

#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"

namespace bitparity::cli {
namespace {

constexpr const char* kDescription =
    "bitparity: bit-exact differential testing of Mixture-of-Experts kernels.\n"
    "Cases are bitparity-case/1 JSON files; backends are named KIND:CONTRACT (see `bitparity list`).\n"
    "Run `bitparity COMMAND --help` for a command's flags and an example.";

std::vector<Command> add_commands(CLI::App& app, const Registry& registry) {
  return {
      add_list(app, registry),   add_run(app, registry),      add_diff(app, registry),
      add_replay(app, registry), add_campaign(app, registry), add_merge(app, registry),
      add_capture_math(app),
      add_report(app),
      add_bench(app),
  };
}

// Runs the chosen command; every error is a message and exit code 2, never an abort.
int run_chosen(const std::vector<Command>& commands) {
  try {
    for (const Command& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const RejectError& e) {
    std::cerr << "error (" << e.error_class() << "): " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return kExitError;
}

}  // namespace

int run_command_line(const Registry& registry, int argc, const char* const* argv) {
  CLI::App app{kDescription, "bitparity"};
  app.require_subcommand(1);
  const std::vector<Command> commands = add_commands(app, registry);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; unknown flags, malformed numbers and missing options are usage errors.
    return app.exit(e) == 0 ? kExitOk : kExitError;
  }
  return run_chosen(commands);
}

}  // namespace bitparity::cli
