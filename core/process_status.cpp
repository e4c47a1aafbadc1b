#include "core/process_status.h"

#include <cstring>

#include <sys/wait.h>

namespace bitparity {

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  return "stopped (status " + std::to_string(status) + ")";
}

}  // namespace bitparity
