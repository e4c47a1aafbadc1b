// The `bitparity` command over the builtin registry (cli/app.h).
#include "cli/app.h"
#include "ops/builtin.h"

int main(int argc, char** argv) { return bitparity::cli::run_command_line(bitparity::builtin_registry(), argc, argv); }
