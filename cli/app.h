// The `bitparity` command line over any registry: main() passes the builtin one, tests a fake.
#pragma once

#include "core/registry.h"

namespace bitparity::cli {

// Parses argv, runs the chosen subcommand, returns the exit code (commands.h). Never throws:
// every error is printed as a message a user can act on.
int run_command_line(const Registry& registry, int argc, const char* const* argv);

}  // namespace bitparity::cli
