#include "cli/app.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "peers/exec/exec_backend.h"
#include "peers/plugin/plugin_backend.h"

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
  int devices = 0;  // --devices N: the kind "gpu", one `bitparity worker --kind cuda` per GPU
  std::vector<std::string> sanitizers;  // --sanitizer TOOL: the kind TOOL, cuda under compute-sanitizer
  int sanitizer_workers = 1;            // --sanitizer-workers N: processes a tool
};

void add_exec_flags(CLI::App& app, ExecFlags& flags) {
  app.add_option("--exec", flags.specs,
                 "NAME=COMMAND: a backend kind NAME served by a worker process that COMMAND starts (run by "
                 "/bin/sh -c) and that speaks the exec protocol (README, \"Backends in other processes\"); "
                 "its contracts become NAME:CONTRACT in list, run, diff, replay and campaigns. Repeatable.");
  app.add_option("--exec-timeout", flags.timeout_seconds,
                 "seconds a worker may take to start or to answer one request (one case, or a campaign's "
                 "--batch of cases, which then run again one a request) before it counts as hung: a "
                 "device_fault, and a fresh worker for the next case (default 120)")
      ->check(CLI::PositiveNumber);
  app.add_option("--devices", flags.devices,
                 "N: the backend kind \"gpu\", bitparity's CUDA kernels served by N worker processes of this "
                 "binary, one per GPU (CUDA_VISIBLE_DEVICES set to one device each, taken from the inherited "
                 "CUDA_VISIBLE_DEVICES where that is set): name pairs gpu:CONTRACT; a campaign then runs N cases "
                 "at once, and a device fault costs one worker, which is restarted")
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  app.add_option("--sanitizer", flags.sanitizers,
                 "TOOL (memcheck, racecheck, synccheck or initcheck): the backend kind TOOL, bitparity's CUDA "
                 "kernels under `compute-sanitizer --tool TOOL`, one request a worker process, a case or a campaign's "
                 "--batch of cases (slow: a fresh process and CUDA context a request, so campaigns run a sample; a "
                 "batch the tool reports on runs its cases again, one a process). A case on which the tool reports an error or "
                 "a hazard is a sanitizer_hazard finding, shrunk in fresh workers, with the tool's report (racecheck "
                 "reports that all lie inside a closed library's kernels, cuBLAS's, are named on stderr and not "
                 "judged); name pairs TOOL:CONTRACT. compute-sanitizer is taken from BITPARITY_COMPUTE_SANITIZER, else PATH, "
                 "else /usr/local/cuda/bin. Repeatable or comma-separated.")
      ->delimiter(',')
      ->check(CLI::IsMember({"memcheck", "racecheck", "synccheck", "initcheck"}))
      ->type_name("TOOL");
  app.add_option("--sanitizer-workers", flags.sanitizer_workers,
                 "N: worker processes of each --sanitizer kind, so that a campaign runs N of its cases at once "
                 "(each process holds a CUDA context on the visible devices; default 1)")
      ->check(CLI::Range(1, 64))
      ->type_name("N");
}

// The devices a worker may be given: the inherited CUDA_VISIBLE_DEVICES list, else 0, 1, 2, ...
std::vector<std::string> visible_devices(int wanted) {
  std::vector<std::string> devices;
  const char* inherited = std::getenv("CUDA_VISIBLE_DEVICES");
  if (inherited && *inherited) {
    std::string list = inherited;
    for (size_t start = 0; start <= list.size();) {
      const size_t end = std::min(list.find(',', start), list.size());
      if (end > start) devices.push_back(list.substr(start, end - start));
      start = end + 1;
    }
    if (static_cast<int>(devices.size()) < wanted)
      throw std::runtime_error("--devices " + std::to_string(wanted) + ": CUDA_VISIBLE_DEVICES=" + list + " names only " +
                               std::to_string(devices.size()));
    devices.resize(static_cast<size_t>(wanted));
  } else {
    for (int i = 0; i < wanted; ++i) devices.push_back(std::to_string(i));
  }
  return devices;
}

// --devices N: the kind "gpu", a pool of N `bitparity worker --kind cuda` processes of this binary.
void start_device_pool(Registry& registry, int devices, const ExecFlags& flags) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<peers::WorkerOptions> pool;
  for (const std::string& device : visible_devices(devices)) {
    peers::WorkerOptions options;
    options.name = "gpu (CUDA device " + device + ")";
    options.argv = {self, "worker", "--kind", "cuda"};
    options.environment = {{"CUDA_VISIBLE_DEVICES", device}};
    options.start_seconds = flags.timeout_seconds;
    options.request_seconds = flags.timeout_seconds;
    pool.push_back(std::move(options));
  }
  peers::add_exec_backend(registry, "gpu", std::move(pool));
}

// compute-sanitizer: BITPARITY_COMPUTE_SANITIZER, else the first on PATH, else the toolkit's.
std::string compute_sanitizer_path() {
  const char* env = std::getenv("BITPARITY_COMPUTE_SANITIZER");
  if (env && *env) return env;
  const char* path = std::getenv("PATH");
  for (std::string dirs = path ? path : ""; !dirs.empty();) {
    const size_t colon = std::min(dirs.find(':'), dirs.size());
    const std::filesystem::path candidate = std::filesystem::path(dirs.substr(0, colon)) / "compute-sanitizer";
    if (colon > 0 && access(candidate.c_str(), X_OK) == 0) return candidate.string();
    dirs.erase(0, std::min(colon + 1, dirs.size()));
  }
  const std::filesystem::path toolkit = "/usr/local/cuda/bin/compute-sanitizer";
  if (access(toolkit.c_str(), X_OK) == 0) return toolkit.string();
  throw std::runtime_error(
      "--sanitizer needs compute-sanitizer (CUDA Toolkit): not on PATH nor in /usr/local/cuda/bin; set "
      "BITPARITY_COMPUTE_SANITIZER to its path");
}

// --sanitizer TOOL: the kind TOOL, `bitparity worker --kind cuda` of this binary under
// compute-sanitizer, one request (a case or a batch) a worker; the tool's error exit status marks a hazard.
void start_sanitized_backend(Registry& registry, const std::string& tool, const ExecFlags& flags) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<peers::WorkerOptions> pool;
  for (int i = 0; i < flags.sanitizer_workers; ++i) {
    peers::WorkerOptions options = peers::sanitized_worker(compute_sanitizer_path(), tool,
                                                           {self, "worker", "--kind", "cuda"}, flags.timeout_seconds);
    options.name = tool + " (compute-sanitizer, worker " + std::to_string(i + 1) + ")";
    pool.push_back(std::move(options));
  }
  peers::add_exec_backend(registry, tool, std::move(pool));
}

void start_exec_backend(Registry& registry, const std::string& kind, const std::string& command,
                        const ExecFlags& flags) {
  peers::WorkerOptions options;
  options.name = kind;
  options.argv = {"/bin/sh", "-c", command};
  options.start_seconds = flags.timeout_seconds;
  options.request_seconds = flags.timeout_seconds;
  peers::add_exec_backend(registry, kind, std::move(options));
}

// --plugin PATH.so: a backend kind of compiled kernels (peers/plugin/plugin_backend.h).
void add_plugin_flags(CLI::App& app, std::vector<std::string>& paths) {
  app.add_option("--plugin", paths,
                 "PATH.so: a shared library that speaks the C ABI of bitparity/plugin.h (README, \"Plug-ins\"); "
                 "the backend kind it names and its contracts become KIND:CONTRACT in list, run, diff, replay and "
                 "campaigns. Repeatable.")
      ->type_name("PATH");
}

// The kinds that the arguments name as backends: "torch" for "torch:megatron_eager", also inside
// "--pair=cuda:C,torch:C".
std::set<std::string> named_kinds(int argc, const char* const* argv) {
  std::set<std::string> kinds;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    size_t start = 0;
    while (start <= arg.size()) {
      const size_t end = std::min(arg.find_first_of(",=", start), arg.size());
      const std::string token = arg.substr(start, end - start);
      const size_t colon = token.find(':');
      if (colon != std::string::npos && colon > 0) kinds.insert(token.substr(0, colon));
      start = end + 1;
    }
  }
  return kinds;
}

// Plug-ins, then --exec workers, then the peers the arguments name (or a placeholder that `list`
// shows, for those they do not name).
void add_backends(Registry& registry, const std::vector<std::string>& plugins, const ExecFlags& flags,
                  const std::vector<PeerBackend>& peers, const std::set<std::string>& named) {
  for (const std::string& path : plugins) peers::add_plugin_backend(registry, path);
  if (flags.devices > 0) start_device_pool(registry, flags.devices, flags);
  for (const std::string& tool : std::set<std::string>(flags.sanitizers.begin(), flags.sanitizers.end()))
    start_sanitized_backend(registry, tool, flags);
  std::set<std::string> exec_kinds;
  for (const std::string& spec : flags.specs) {
    const auto [kind, command] = peers::parse_exec_spec(spec);
    start_exec_backend(registry, kind, command, flags);
    exec_kinds.insert(kind);
  }
  for (const PeerBackend& peer : peers) {
    if (exec_kinds.count(peer.kind) || registry.backend(peer.kind)) continue;
    if (named.count(peer.kind)) {
      start_exec_backend(registry, peer.kind, peer.command(), flags);
      continue;
    }
    const std::string why = "not started: it starts when a " + peer.kind + ":CONTRACT backend is named";
    registry.add_backend({peer.kind, peer.doc, [why] { return std::optional<std::string>(why); }});
  }
}

std::filesystem::path existing(const std::vector<std::filesystem::path>& candidates) {
  for (const std::filesystem::path& p : candidates)
    if (!p.empty() && std::filesystem::is_regular_file(p)) return p;
  return {};
}

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

}  // namespace

// How far above the binary's folder the source tree's root may be.
constexpr int kTreeLevels = 4;

PeerBackend torch_peer(const std::string& executable) {
  PeerBackend peer;
  peer.kind = "torch";
  peer.doc = "eager PyTorch on CUDA (peers/torch/worker.py, a worker process; needs torch with a GPU)";
  peer.command = [executable] {
    namespace fs = std::filesystem;
    const char* env = std::getenv("BITPARITY_TORCH_WORKER");
    std::error_code ignored;
    if (env && *env && !fs::is_regular_file(env))
      throw std::runtime_error(std::string("BITPARITY_TORCH_WORKER=") + env + " is not a file (the path of peers/torch/worker.py)");
    // The tree the binary runs from, wherever it was copied (build/<preset>/cli/bitparity, a staged
    // build/gpu-carry/bitparity), then the tree it was built in.
    std::vector<fs::path> candidates = {env ? fs::path(env) : fs::path()};
    fs::path dir = fs::weakly_canonical(fs::path(executable), ignored).parent_path();
    for (int up = 0; up < kTreeLevels && !dir.empty(); ++up, dir = dir.parent_path())
      candidates.push_back(dir / "peers/torch/worker.py");
    candidates.push_back(fs::path(BITPARITY_SOURCE_DIR) / "peers/torch/worker.py");
    const fs::path worker = existing(candidates);
    if (worker.empty())
      throw std::runtime_error(
          "the torch backend needs peers/torch/worker.py: set BITPARITY_TORCH_WORKER to its path, or pass "
          "--exec torch=\"python3 PATH/worker.py\"");
    const char* python = std::getenv("BITPARITY_PYTHON");
    return std::string(python && *python ? python : "python3") + " " +
           shell_quoted(fs::weakly_canonical(worker, ignored).string());
  };
  return peer;
}

int run_command_line(const Registry& builtin, int argc, const char* const* argv,
                     const std::vector<PeerBackend>& peers) {
  // The commands see the builtin registry plus the backends that --exec adds after parsing.
  Registry registry = builtin;
  CLI::App app{kDescription, "bitparity"};
  app.require_subcommand(1);
  app.fallthrough();  // --exec is accepted after the command's name too
  ExecFlags exec_flags;
  add_exec_flags(app, exec_flags);
  std::vector<std::string> plugin_paths;
  add_plugin_flags(app, plugin_paths);
  const std::vector<Command> commands = add_commands(app, registry);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; unknown flags, malformed numbers and missing options are usage errors.
    return app.exit(e) == 0 ? kExitOk : kExitError;
  }
  try {
    add_backends(registry, plugin_paths, exec_flags, peers, named_kinds(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitError;
  }
  return run_chosen(commands);
}

}  // namespace bitparity::cli
