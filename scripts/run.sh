#!/usr/bin/env bash
# Sets up, builds and runs a short default campaign (60 seconds unless BUDGET says otherwise)
# with its report: contract-vs-contract on the CPU, and cuda:C vs ref:C where a GPU exists.
# Findings go to out/corpus/, the JSON report to out/report.json, JUnit XML to out/junit.xml.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset default
cmake --build --preset default -j "$jobs" --target bitparity
mkdir -p out
./build/default/cli/bitparity campaign --budget-seconds "${BUDGET:-60}" --seed "${SEED:-1}" \
  --corpus out/corpus --report out/report.json --junit out/junit.xml "$@"
