// How a child process ended, in words for a warning or an error ("was killed by signal 9 (Killed)",
// "exited with status 3"): the generator processes of a campaign and the workers of its backends
// in other processes say it the same way.
#pragma once

#include <string>

namespace bitparity {

// `status` as waitpid returned it.
std::string describe_status(int status);

}  // namespace bitparity
