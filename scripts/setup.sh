#!/usr/bin/env bash
# Installs every Debian package the build needs. Idempotent: packages already present are kept.
# The CUDA toolkit (nvcc) is not a Debian package here; where /usr/local/cuda/bin/nvcc exists the
# CUDA backend is built as well, elsewhere the build leaves it out.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config git
  clang libclang-rt-14-dev             # the libFuzzer preset
  libeigen3-dev nlohmann-json3-dev libcli11-dev librapidcheck-dev
  libgtest-dev libgmock-dev libbenchmark-dev libmpfr-dev libgmp-dev libmpfrc++-dev
  zlib1g-dev                           # the gzip-compressed peer recordings
  chromium                             # the dashboard's render test (headless)
)
# The dashboard's chart libraries come from the npm registry (scripts/fetch_charts.sh). A nodejs
# that is already installed (NodeSource's ships npm inside it) is kept; elsewhere Debian's.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
"$(dirname "$0")/fetch_charts.sh"
