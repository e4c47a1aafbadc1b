#!/bin/sh
# Stands in for kernel_bench in the CLI tests: writes compare_new.json (beside this script) where
# --benchmark_out= says, and the arguments it was given, one a line, to $BITPARITY_FAKE_BENCH_ARGS.
# FAKE_BENCH_FAIL=1 makes it fail as a crashed benchmark would.
out=
for arg in "$@"; do
  [ -n "$BITPARITY_FAKE_BENCH_ARGS" ] && printf '%s\n' "$arg" >> "$BITPARITY_FAKE_BENCH_ARGS"
  case $arg in --benchmark_out=*) out=${arg#--benchmark_out=} ;; esac
done
[ "$FAKE_BENCH_FAIL" = 1 ] && exit 3
cp "$(dirname "$0")/compare_new.json" "$out"
