// The `bitparity` command over the harness registry (cli/app.h): every op the build ships.
#include "cli/app.h"

int main(int argc, char** argv) { return bitparity::cli::run_command_line(bitparity::harness_registry(), argc, argv); }
