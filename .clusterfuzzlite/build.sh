#!/bin/bash -eu
# Builds bitparity's libFuzzer targets the way OSS-Fuzz and ClusterFuzzLite build C++ projects:
# $CC, $CXX, $CFLAGS and $CXXFLAGS (sanitizer and coverage flags included, -fsanitize=fuzzer-no-link
# for libFuzzer) for every object, the engine at the link of the targets, and into $OUT each
# target, its <target>_seed_corpus.zip (fuzz/seeds/<target>/, plus what fuzz/CMakeLists.txt's smoke
# tests add) and its <target>.options.
#
# The engine: fuzz/CMakeLists.txt links each target with a fixed -fsanitize=fuzzer, which is what
# $LIB_FUZZING_ENGINE is for libFuzzer (ClusterFuzzLite's only engine). Another engine (AFL++,
# honggfuzz, centipede) needs a hook there, e.g. a cache variable BITPARITY_FUZZ_ENGINE (default
# -fsanitize=fuzzer) passed to target_link_options of each target; until it exists this script
# refuses any other engine rather than build something it cannot run.
cd "$SRC/bitparity"

if [ "${LIB_FUZZING_ENGINE:--fsanitize=fuzzer}" != "-fsanitize=fuzzer" ]; then
  echo "build.sh: LIB_FUZZING_ENGINE=$LIB_FUZZING_ENGINE: fuzz/CMakeLists.txt links -fsanitize=fuzzer only" \
       "(libFuzzer); it needs a BITPARITY_FUZZ_ENGINE hook for other engines" >&2
  exit 1
fi
# The distribution's librapidcheck.a (which bitparity_core links) is built against libstdc++:
# compile against it too, not the libc++ that OSS-Fuzz asks for (needed by MemorySanitizer only).
CXXFLAGS="${CXXFLAGS//-stdlib=libc++/}"
# The references divide by zero on purpose (IEEE: an inf or a NaN); OSS-Fuzz's undefined sanitizer
# traps float-divide-by-zero, which the preset's -fsanitize=undefined does not check.
if [ "${SANITIZER:-}" = undefined ]; then
  CFLAGS="$CFLAGS -fno-sanitize=float-divide-by-zero"
  CXXFLAGS="$CXXFLAGS -fno-sanitize=float-divide-by-zero"
fi

build="$WORK/bitparity-build"
# Build type None: OSS-Fuzz's flags alone (its -O1 -gline-tables-only, assertions on), none of
# CMake's per-type ones. MPFR and GMP linked statically (BITPARITY_STATIC_MATH): the runner image
# lacks the builder's packages. No CUDA, no benchmarks; the dashboard's chart libraries are not needed.
cmake -S . -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DBITPARITY_CUDA=OFF -DBITPARITY_BENCH=OFF -DBITPARITY_FUZZ=ON -DBITPARITY_STATIC_MATH=ON

# Every target over the builtin registry and over the toy op's (toy_*); BITPARITY_FUZZ_TARGETS
# (space-separated) builds fewer, for a try of this script outside the builder image.
targets=()
for t in case_fuzzer json_fuzzer merge_fuzzer safetensors_fuzzer; do targets+=("$t" "toy_$t"); done
if [ -n "${BITPARITY_FUZZ_TARGETS:-}" ]; then read -r -a targets <<<"$BITPARITY_FUZZ_TARGETS"; fi
cmake --build "$build" -j "${BITPARITY_BUILD_JOBS:-$(nproc)}" --target "${targets[@]}"

seed_dirs() {  # the seeds of fuzz/CMakeLists.txt's <target>_smoke test
  echo "fuzz/seeds/$1"
  case "$1" in
    json_fuzzer) echo fuzz/hostile corpus/swiglu corpus/swiglu_scale ;;
    safetensors_fuzzer) echo fuzz/hostile ;;
  esac
}
for name in "${targets[@]}"; do
  base=${name#toy_}
  cp "$build/fuzz/$name" "$OUT/$name"
  # The runner has only the base system: nothing else may be needed.
  if ldd "$OUT/$name" | awk '{print $1}' |
       grep -Ev '^(linux-vdso|libc\.so|libm\.so|libstdc\+\+|libgcc_s|/lib64/ld-linux|ld-linux|libpthread|libdl\.so|librt\.so|libz\.so)'; then
    echo "build.sh: $name needs the libraries above, which the runner lacks" >&2
    exit 1
  fi
  # Flat names, each prefixed by its folder (seed folders may share a file name).
  seeds="$WORK/seeds-$name"
  rm -rf "$seeds" "$OUT/${name}_seed_corpus.zip"
  mkdir -p "$seeds"
  for dir in $(seed_dirs "$base"); do
    for f in "$dir"/*; do
      if [ -f "$f" ]; then cp "$f" "$seeds/${dir//\//_}_$(basename "$f")"; fi
    done
  done
  (cd "$seeds" && zip -q -D "$OUT/${name}_seed_corpus.zip" ./*)
  printf '[libfuzzer]\nclose_fd_mask = 1\n' >"$OUT/$name.options"
done
ls -l "$OUT"
