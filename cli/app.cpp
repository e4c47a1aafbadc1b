#include "cli/app.h"

#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "peers/exec/exec_backend.h"

namespace bitparity::cli {
namespace {

constexpr const char* kDescription =
    "bitparity: bit-exact differential testing of Mixture-of-Experts kernels.\n"
    "Cases are bitparity-case/1 JSON or .safetensors files; backends are named KIND:CONTRACT (see `bitparity list`).\n"
    "Run `bitparity COMMAND --help` for a command's flags and an example.";

std::vector<Command> add_commands(CLI::App& app, const Registry& registry) {
  return {
      add_list(app, registry),   add_run(app, registry),      add_diff(app, registry),
      add_replay(app, registry), add_campaign(app, registry), add_merge(app, registry),
      add_capture_math(app),     add_worker(app, registry), add_bench(app),
      add_case(app, registry),   add_report(app),
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

// --exec NAME=COMMAND: a backend kind whose worker the command starts (peers/exec/exec_backend.h).
struct ExecFlags {
  std::vector<std::string> specs;
  double timeout_seconds = 120;
};

void add_exec_flags(CLI::App& app, ExecFlags& flags) {
  app.add_option("--exec", flags.specs,
                 "NAME=COMMAND: a backend kind NAME served by a worker process that COMMAND starts (run by "
                 "/bin/sh -c) and that speaks the exec protocol (README, \"Backends in other processes\"); "
                 "its contracts become NAME:CONTRACT in list, run, diff, replay and campaigns. Repeatable.");
  app.add_option("--exec-timeout", flags.timeout_seconds,
                 "seconds a worker may take to start or to answer one case before it counts as hung: a "
                 "device_fault, and a fresh worker for the next case (default 120)")
      ->check(CLI::PositiveNumber);
}

void start_exec_backends(Registry& registry, const ExecFlags& flags) {
  for (const std::string& spec : flags.specs) {
    const auto [kind, command] = peers::parse_exec_spec(spec);
    peers::WorkerOptions options;
    options.name = kind;
    options.argv = {"/bin/sh", "-c", command};
    options.start_seconds = flags.timeout_seconds;
    options.request_seconds = flags.timeout_seconds;
    peers::add_exec_backend(registry, kind, std::move(options));
  }
}

}  // namespace

int run_command_line(const Registry& builtin, int argc, const char* const* argv) {
  // The commands see the builtin registry plus the backends that --exec adds after parsing.
  Registry registry = builtin;
  CLI::App app{kDescription, "bitparity"};
  app.require_subcommand(1);
  app.fallthrough();  // --exec is accepted after the command's name too
  ExecFlags exec_flags;
  add_exec_flags(app, exec_flags);
  const std::vector<Command> commands = add_commands(app, registry);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; unknown flags, malformed numbers and missing options are usage errors.
    return app.exit(e) == 0 ? kExitOk : kExitError;
  }
  try {
    start_exec_backends(registry, exec_flags);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitError;
  }
  return run_chosen(commands);
}

}  // namespace bitparity::cli
