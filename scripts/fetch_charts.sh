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
assets=(vega/build/vega.min.js vega-lite/build/vega-lite.min.js vega-embed/build/vega-embed.min.js)
present() { for f in "${assets[@]}"; do [ -s "node_modules/$f" ] || return 1; done; }
# npm records what it installed in node_modules/.package-lock.json: newer than the lock, it is that.
if present && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  echo "fetch_charts: chart libraries already installed"
  exit 0
fi
# npm ci installs exactly the lock file, and fails when package.json and the lock disagree.
# --ignore-scripts: the packages are only read as files; nothing of theirs runs here.
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
present || { echo "fetch_charts: a chart library is missing after npm ci: ${assets[*]}" >&2; exit 1; }
echo "fetch_charts: chart libraries in reports/dashboard/node_modules"
