#!/usr/bin/env bash
# scripts/gpu_check.sh's summary judges compute-sanitizer's racecheck log: a hazard inside a kernel
# that a closed library launched (cuBLAS here) is named apart and does not fail the check; a hazard
# in any other kernel fails it, with or without the library's reports beside it, and so does the
# tool's report of its own internal error (records it may have lost). Logs made up in the
# tools' formats (CUDA 13's racecheck), no device needed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

report() {  # report KERNEL LAUNCHER_FRAME
  cat <<LOG
========= Error: Potential WAR hazard detected at __shared__ 0x1034488 in block (1,63,0) :
=========     Read Thread (63,0,0) at $1+0xaf0
=========     Write Thread (256,0,0) at $1+0x29b0
=========     Current Value : 127, Incoming Value : 127
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: cuLaunchKernelEx [0x39fc2f] in libcuda.so.1
=========         Host Frame: $2
=========         Host Frame: main [0x88a4f] in cuda_vs_ref_test
=========
LOG
}
library() { report nvjet_sm90_tst_64x32_64x16_1x2_h_bz_NNT " [0x32c9090] in libcublasLt.so.13"; }
ours() {
  report "void bitparity::gpu::fused_backward_bulk_kernel<512, 4>(bitparity::gpu::CrossEntropy)" \
    "bitparity::gpu::launch_cross_entropy(bitparity::gpu::CrossEntropy const&) [0xd8d1a] in cuda_vs_ref_test"
}

# The tool's own failure, which racecheck printed once during 8 threads' launches on an H100.
internal() {
  echo "========= Internal Sanitizer Error: Detected a failure to track a kernel launch. Future records might be incomplete"
  echo "========="
}

# summarize CASE REPORTS...: a results folder whose only part is racecheck's log; prints the verdict.
summarize() {
  local dir=$work/$1
  shift
  mkdir -p "$dir/logs"
  local hazards=0
  for r in "$@"; do [[ $r == internal ]] || hazards=$((hazards + 1)); done
  {
    echo "[ RUN      ] Registry/BackendVsRefLarge.BitIdenticalAndDeterministic/gemm_fwd_cuda_cublas_M64_K1408_N4096"
    for r in "$@"; do "$r"; done
    echo "[       OK ] Registry/BackendVsRefLarge.BitIdenticalAndDeterministic/gemm_fwd_cuda_cublas_M64_K1408_N4096 (19596 ms)"
    echo "[  PASSED  ] 1 test."
    echo "========= RACECHECK SUMMARY: $hazards hazards displayed ($((3 * hazards)) errors, 0 warnings)"
  } >"$dir/logs/racecheck.log"
  RESULTS=$dir SKIP_TESTS=1 SKIP_PROPERTIES=1 SKIP_HAZARDS=1 "$ROOT/scripts/gpu_check.sh" summarize 2>&1
}

failures=0
expect() {  # expect NAME PATTERN OUTPUT
  if grep -qE "$2" <<<"$3"; then
    echo "ok: $1"
  else
    echo "FAIL: $1: expected /$2/ in:"
    echo "$3"
    failures=$((failures + 1))
  fi
}

out=$(summarize library_only library library)
expect "library-only hazards pass" '^verdict: PASS' "$out"
expect "library-only hazards are named" 'inside library kernels, not judged: nvjet_sm90_tst_64x32_64x16_1x2_h_bz_NNT \(libcublasLt\.so\.13\)' "$out"
out=$(summarize ours_and_library library ours)
expect "our hazard beside the library's fails" '^verdict: FAIL \(racecheck: errors or hazards\)' "$out"
out=$(summarize ours_only ours)
expect "our hazard fails" '^verdict: FAIL \(racecheck: errors or hazards\)' "$out"
out=$(summarize clean)
expect "no hazard passes" '^verdict: PASS' "$out"
out=$(summarize internal_only internal)
expect "the tool's internal error fails" '^verdict: FAIL \(racecheck: internal sanitizer error' "$out"
exit $((failures > 0))
