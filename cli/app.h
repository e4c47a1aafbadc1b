// The `bitparity` command line over any registry: main() passes the builtin one, tests a fake.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/registry.h"

namespace bitparity::cli {

// A backend kind whose worker process (the exec protocol) starts only when the command line names
// one of its backends ("torch:megatron_eager" in --pair, in diff's or run's backends) and no --exec
// takes the name: eager PyTorch costs seconds to import and exists only on some machines. Until
// then `list` shows the kind as not started, with `doc`.
struct PeerBackend {
  std::string kind, doc;
  // The shell command that starts the worker; throws std::runtime_error saying why there is none.
  std::function<std::string()> command;
};

// Parses argv, runs the chosen subcommand, returns the exit code (commands.h). Never throws:
// every error is printed as a message a user can act on.
int run_command_line(const Registry& registry, int argc, const char* const* argv,
                     const std::vector<PeerBackend>& peers = {});

// The eager-PyTorch worker (peers/torch/worker.py) as the peer kind "torch": $BITPARITY_TORCH_WORKER,
// else the worker.py of the source tree this binary was built in or of the tree it runs from,
// started with $BITPARITY_PYTHON (default python3).
PeerBackend torch_peer(const std::string& executable);

}  // namespace bitparity::cli
