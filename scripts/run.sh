#!/usr/bin/env bash
# Sets up, builds and runs a short default campaign (60 seconds unless BUDGET says otherwise)
# with its report: contract-vs-contract on the CPU, and cuda:C vs ref:C where a GPU exists.
# Findings go to out/corpus/, the JSON report to out/report.json, JUnit XML to out/junit.xml, and
# the HTML dashboard of both to out/dashboard.html. Exits with the campaign's status.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset default
cmake --build --preset default -j "$jobs" --target bitparity
mkdir -p out
status=0
./build/default/cli/bitparity campaign --budget-seconds "${BUDGET:-60}" --seed "${SEED:-1}" \
  --corpus out/corpus --report out/report.json --junit out/junit.xml "$@" || status=$?
./build/default/cli/bitparity report --html out/dashboard.html --report out/report.json --corpus out/corpus
echo "dashboard: out/dashboard.html"
exit "$status"
