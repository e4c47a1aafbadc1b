#!/usr/bin/env bash
# Installs the chart libraries that `bitparity report --html` embeds (Vega, Vega-Lite, vega-embed)
# at the exact versions of reports/dashboard/package-lock.json, into reports/dashboard/node_modules.
# The build embeds them when they are there; a build without them still configures and builds, and
# its `bitparity report --html` exits 2 saying to run this script (then rebuild).
set -euo pipefail
cd "$(dirname "$0")/../reports/dashboard"
if ! command -v npm >/dev/null; then
  echo "fetch_charts: npm is missing (scripts/setup.sh installs nodejs and npm)" >&2
  exit 1
fi
# npm ci installs exactly the lock file, and fails when package.json and the lock disagree.
# --ignore-scripts: the packages are only read as files; nothing of theirs runs here.
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
for f in vega/build/vega.min.js vega-lite/build/vega-lite.min.js vega-embed/build/vega-embed.min.js; do
  [ -s "node_modules/$f" ] || { echo "fetch_charts: node_modules/$f is missing after npm ci" >&2; exit 1; }
done
echo "fetch_charts: chart libraries in reports/dashboard/node_modules"
