#!/usr/bin/env bash
# Sets up, builds and runs the tests: every fast CPU test, the corpus replay, and the GPU tests
# (which skip, and are reported as skipped, where no CUDA device exists). Exhaustive sweeps carry
# the label "slow": run them with `ctest --test-dir build/default -L slow`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset default
cmake --build --preset default -j "$jobs"
ctest --preset default -j "$jobs" "$@"
