// The `bitparity` command over the harness registry (cli/app.h): every op the build ships, and the
// eager-PyTorch worker as the peer kind "torch", started when a torch: backend is named.
#include <filesystem>
#include <system_error>

#include "cli/app.h"

int main(int argc, char** argv) {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) self = argv[0];
  return bitparity::cli::run_command_line(bitparity::harness_registry(), argc, argv,
                                          {bitparity::cli::torch_peer(self.string())});
}
