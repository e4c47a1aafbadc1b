// `bitparity worker --kind KIND`: this binary's implementations of one backend kind, served over
// standard input and output in the exec protocol (peers/exec/exec_backend.h). Another bitparity
// process uses it as an `--exec` backend: GPU cases in a process that can die without taking the
// campaign with it, and the protocol's reference worker for people writing their own.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "peers/exec/serve.h"
#ifdef BITPARITY_HAVE_CUDA
#include "gpu/runtime.h"
#endif

namespace bitparity::cli {
namespace {

// A CUDA error that leaves the context unusable (gpu::sticky_error).
bool fatal_error(const std::exception& e) {
#ifdef BITPARITY_HAVE_CUDA
  if (const auto* cuda = dynamic_cast<const gpu::CudaError*>(&e)) return gpu::sticky_error(cuda->code());
#endif
  (void)e;
  return false;
}

}  // namespace

Command add_worker(CLI::App& root, const Registry& registry) {
  auto kind = std::make_shared<std::string>();
  CLI::App* app = root.add_subcommand(
      "worker",
      "Serve one backend kind's implementations over stdin/stdout in the exec protocol "
      "(bitparity-worker/1 hello, then one bitparity-case/1 request and one answer a line), "
      "until stdin ends. See README, \"Backends in other processes\".");
  app->add_option("--kind", *kind, "backend kind to serve: ref, cuda, ... (see `bitparity list`)")->required();
  app->footer(
      "Example (the CUDA kernels in a worker process a campaign restarts after a device fault):\n"
      "  bitparity --exec gpu=\"bitparity worker --kind cuda\" campaign --pair gpu:megatron_eager,ref:megatron_eager");
  return {app, [&registry, kind] {
            std::ios::sync_with_stdio(false);
            return peers::serve_worker(registry, *kind, std::cin, std::cout, {}, fatal_error);
          }};
}

}  // namespace bitparity::cli
