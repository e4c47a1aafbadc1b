#!/usr/bin/env bash
# Sets up, builds and runs the tests: every fast CPU test, the corpus replay, and the GPU tests
# (which skip, and are reported as skipped, where no CUDA device exists), then short runs of the
# fuzz targets. Exhaustive sweeps carry the label "slow": run them with
# `ctest --test-dir build/default -L slow`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# A full build (CPU, CUDA and fuzz presets) takes about 6.5 GiB here, and nvcc's temporary files go
# to TMPDIR: a disk that fills half-way shows up only as a compiler failure minutes later, so say it
# first.
for d in . "${TMPDIR:-/tmp}"; do
  free_kib=$(df -Pk "$d" 2>/dev/null | awk 'NR == 2 { print $4 }') || free_kib=""  # a folder df cannot read: no warning
  if [ -n "$free_kib" ] && [ "$free_kib" -lt $((7 * 1024 * 1024)) ]; then
    echo "test.sh: warning: $(df -Ph "$d" | awk 'NR == 2 { print $4 }') free on the disk of $d;" \
         "a full build needs about 6.5 GiB, and a compiler failure below may be a full disk" >&2
  fi
done
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset default
cmake --build --preset default -j "$jobs"
ctest --preset default -j "$jobs" "$@"
# Bounded runs of every libFuzzer target (preset fuzz: clang with libFuzzer, ASan and UBSan), each
# a few seconds from its checked-in seeds: a crash or a sanitizer report fails the run.
# BITPARITY_SKIP_FUZZ=1 leaves them out.
if [ "${BITPARITY_SKIP_FUZZ:-0}" != 1 ]; then
  cmake --preset fuzz
  cmake --build --preset fuzz -j "$jobs" --target fuzz_targets
  ctest --test-dir build/fuzz -L fuzz -j "$jobs" --output-on-failure
fi
