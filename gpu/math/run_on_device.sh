#!/usr/bin/env bash
# Builds the math capture and verification programs with nvcc and g++ alone (the GPU machine lacks
# some of the project's packages), captures the ex2 tables and the CI sample off the present GPU,
# then checks the emulation against the GPU over all 2^32 fp32 inputs. One call does it all:
#
#   bash gpu/math/run_on_device.sh            # results under $OUT (default /tmp/bitparity-math-out)
#
# Outputs: ex2_<arch>.bin/.json (tables), device_sample_<arch>.bin (CI sample), sweep_<arch>.txt
# (mismatch counts), math_kernels.sass (the device code that was compared), run.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/bitparity-math-out}
B=${BUILD_DIR:-/tmp/bitparity-math-build}
NVCC=${NVCC:-nvcc}
CXX=${CXX:-g++}
mkdir -p "$OUT" "$B"
exec > >(tee "$OUT/run.log") 2>&1

nvcc_version=$("$NVCC" --version | sed -n 's/.*release [0-9.]*, V\([0-9.]*\).*/\1/p')
echo "== build (nvcc $nvcc_version, $($CXX --version | head -1), $(nproc) cores)"
cuda_inc=$(dirname "$(dirname "$(command -v "$NVCC")")")/include
cxxflags=(-std=c++20 -O2 -ffp-contract=off -fno-fast-math -Wall -Wextra -pthread -I. -I"$cuda_inc"
          "-DBITPARITY_NVCC_VERSION=\"$nvcc_version\"")
arch_tag=${ARCH_TAG:-sm90}
committed=reference/math/data/ex2_$arch_tag.bin
if [ -f "$committed" ]; then
  cxxflags+=("-DBITPARITY_EX2_BLOB_PATH=\"$PWD/$committed\"")
fi
srcs=(reference/math/device_math.cpp reference/math/ex2_tables.cpp reference/math/flat_json.cpp
      reference/math/embedded_blob.cpp reference/math/device_sample.cpp
      gpu/math/device_info.cpp gpu/math/capture_math.cpp gpu/math/verify_math.cpp
      gpu/math/capture_math_main.cpp gpu/math/verify_math_main.cpp)
pids=()
for s in "${srcs[@]}"; do
  "$CXX" "${cxxflags[@]}" -c "$s" -o "$B/$(basename "${s%.cpp}").o" & pids+=($!)
done
"$NVCC" -std=c++17 -O2 -gencode=arch=compute_90,code=sm_90 -I. -c gpu/math/math_kernels.cu -o "$B/math_kernels.o"
for p in "${pids[@]}"; do wait "$p"; done
lib=("$B"/device_math.o "$B"/ex2_tables.o "$B"/flat_json.o "$B"/embedded_blob.o "$B"/device_sample.o
     "$B"/device_info.o "$B"/capture_math.o "$B"/verify_math.o "$B"/math_kernels.o)
"$NVCC" -o "$B/bitparity_capture_math" "$B/capture_math_main.o" "${lib[@]}" -ldl -lpthread
"$NVCC" -o "$B/bitparity_verify_math" "$B/verify_math_main.o" "${lib[@]}" -ldl -lpthread
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$B/math_kernels.o" > "$OUT/math_kernels.sass" || true
fi
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader || true

echo "== capture"
"$B/bitparity_capture_math" --tables "$OUT/ex2_$arch_tag.bin" --sample "$OUT/device_sample_$arch_tag.bin"
ls -l "$OUT"

echo "== verify: emulation vs GPU over all 2^32 inputs"
set +e
"$B/bitparity_verify_math" --tables "$OUT/ex2_$arch_tag.bin" --out "$OUT/sweep_$arch_tag.txt" ${SWEEP_ARGS:-}
rc=$?
set -e
echo "verify exit status: $rc"
exit $rc
