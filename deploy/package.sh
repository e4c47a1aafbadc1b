#!/usr/bin/env bash
# Packs the bitparity command into one relocatable tarball for cluster nodes:
#
#   bitparity-<version>-<git short sha>-linux-x86_64.tar.gz
#     bitparity-<version>-<sha>-linux-x86_64/
#       bin/bitparity            the command (MPFR and GMP linked in, the CUDA runtime static)
#       peers/torch/*.py         the eager-PyTorch worker (found from bin/ by the command) and its
#       peers/torch/*.jsonl.gz   recorders and recordings
#       deploy/                  the Slurm, Kubernetes and local array recipes
#       README.md
#       BUILDINFO                version, commit, CUDA or not, the ldd output of bin/bitparity
#       MANIFEST                 sha256 of every other file (`sha256sum -c MANIFEST` in that folder)
#
# Usage: deploy/package.sh [--build-dir DIR] [--out DIR] [--sha SHA] [--strip]
#   --build-dir DIR  package DIR/cli/bitparity of an existing build; without it, configure and build
#                    build/package (RelWithDebInfo, CUDA where nvcc exists, BITPARITY_STATIC_MATH=ON)
#   --out DIR        where the tarball goes (default build/dist)
#   --sha SHA        the commit to name (default `git rev-parse --short HEAD`; BITPARITY_GIT_SHA too)
#   --strip          drop the debug sections of bin/bitparity
# Fails when `ldd bin/bitparity` lists a library outside the base system (glibc's libc, libm,
# libpthread, libdl, librt and loader, libstdc++, libgcc_s, libz) or one that is not found.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="" out_dir="$root/build/dist" sha="${BITPARITY_GIT_SHA:-}" strip=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --out) out_dir=$2; shift 2 ;;
    --sha) sha=$2; shift 2 ;;
    --strip) strip=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "package: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "$build_dir" ]; then
  build_dir="$root/build/package"
  echo "package: building $build_dir"
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBITPARITY_BENCH=OFF \
        -DBITPARITY_STATIC_MATH=ON >/dev/null
  cmake --build "$build_dir" --target bitparity -j "${JOBS:-$(nproc)}"
fi
build_dir=$(cd "$build_dir" && pwd)
binary="$build_dir/cli/bitparity"
[ -x "$binary" ] || { echo "package: $binary is missing (build the target bitparity first)" >&2; exit 1; }

# The version is the project's (CMakeLists.txt, as the build saw it); the commit names the tree.
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
if [ -z "$version" ]; then
  version=$(sed -n 's/^project(bitparity VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
fi
[ -n "$version" ] || { echo "package: cannot tell the version (CMakeCache.txt or CMakeLists.txt)" >&2; exit 1; }
dirty=unknown
if [ -z "$sha" ] && git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  sha=$(git -C "$root" rev-parse --short HEAD)
fi
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  if git -C "$root" diff --quiet HEAD -- 2>/dev/null; then dirty=no; else dirty=yes; fi
fi
[ -n "$sha" ] || { echo "package: no git commit here; pass --sha SHA" >&2; exit 1; }
case "$sha" in *[!0-9a-zA-Z]*) echo "package: --sha $sha is not a plain commit name" >&2; exit 2 ;; esac

name="bitparity-$version-$sha-linux-x86_64"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage="$work/$name"
mkdir -p "$stage/bin" "$stage/peers/torch" "$stage/deploy"
install -m 0755 "$binary" "$stage/bin/bitparity"
[ "$strip" = 1 ] && objcopy --strip-debug "$stage/bin/bitparity"
# The command looks for peers/torch/worker.py up to 4 folders above its own: bin/../peers/torch.
shopt -s nullglob
torch_files=("$root"/peers/torch/*.py "$root"/peers/torch/*.jsonl.gz)
shopt -u nullglob
[ -f "$root/peers/torch/worker.py" ] || { echo "package: peers/torch/worker.py is missing" >&2; exit 1; }
install -m 0644 "${torch_files[@]}" "$stage/peers/torch/"
chmod 0755 "$stage/peers/torch/worker.py"
install -m 0644 "$root/README.md" "$stage/README.md"
cp -R "$root/deploy/slurm" "$root/deploy/k8s" "$stage/deploy/"
install -m 0755 "$root/deploy/local_array.sh" "$stage/deploy/local_array.sh"
cp "$root/deploy/Containerfile" "$stage/deploy/Containerfile"

# The dependency check: every library the loader would map, by its soname.
ldd_out=$(ldd "$stage/bin/bitparity" 2>&1) || true
allowed='^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2|/lib64/ld-linux-x86-64\.so\.2|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libz\.so\.1)$'
bad=()
while read -r lib _; do
  [ -n "$lib" ] || continue
  case "$lib" in statically|not) continue ;; esac
  [[ $lib =~ $allowed ]] || bad+=("$lib")
done <<<"$ldd_out"
if grep -q "not found" <<<"$ldd_out"; then bad+=("(a library not found)"); fi
echo "package: ldd bin/bitparity:"
while IFS= read -r line; do echo "  $line"; done <<<"$ldd_out"
if [ ${#bad[@]} -gt 0 ]; then
  echo "package: FAIL: bin/bitparity needs ${bad[*]}, outside the base system (libc, libm, libstdc++," \
       "libgcc_s, ld-linux, libpthread, libdl, librt, libz); configure with BITPARITY_STATIC_MATH=ON" \
       "where libmpfr.a and libgmp.a exist" >&2
  exit 1
fi

# The staged command must run from the staged tree.
"$stage/bin/bitparity" list >"$work/list.txt" || { echo "package: FAIL: bin/bitparity list" >&2; exit 1; }
charts=yes
"$stage/bin/bitparity" report --html "$work/smoke.html" >/dev/null 2>&1 || charts=no
[ "$charts" = yes ] || echo "package: warning: this build lacks the dashboard's chart libraries" \
                            "(scripts/fetch_charts.sh, then rebuild): report --html will exit 2" >&2
cuda=no
grep -q '^CMAKE_CUDA_COMPILER:' "$build_dir/CMakeCache.txt" 2>/dev/null &&
  ! grep -q '^CMAKE_CUDA_COMPILER:.*NOTFOUND' "$build_dir/CMakeCache.txt" && cuda=yes
{
  echo "name: $name"
  echo "version: $version"
  echo "commit: $sha (uncommitted changes: $dirty)"
  echo "cuda backend: $cuda"
  echo "dashboard charts: $charts"
  echo "ldd bin/bitparity:"
  sed 's/ (0x[0-9a-f]*)//; s/^[[:space:]]*/  /' <<<"$ldd_out"
} >"$stage/BUILDINFO"
(cd "$stage" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >"$work/MANIFEST")
mv "$work/MANIFEST" "$stage/MANIFEST"

mkdir -p "$out_dir"
tarball="$(cd "$out_dir" && pwd)/$name.tar.gz"
# Reproducible: sorted names, no owners, one fixed time (the commit's where git has it).
mtime=$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)
tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" -cf - "$name" |
  gzip -9n >"$tarball.tmp"
mv "$tarball.tmp" "$tarball"
echo "package: wrote $tarball ($(du -h "$tarball" | cut -f1))"
