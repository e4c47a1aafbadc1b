#!/usr/bin/env bash
# Diagnosis on the GPU machine, beside scripts/gpu_check.sh (which it expects to have staged
# build/gpu-carry): the SASS of the benchmark program and an Nsight Compute report of each kernel
# record's benchmark on one reference input (ncu reads the hardware counters; clocks are left
# alone). Kernels are the benchmarks' <op>_<direction>/<contract> prefixes; all of them by default.
#
#   OUT=dir [KERNELS="<op>_<direction>/<contract> ..."] scripts/gpu_profile.sh [reference input] [ilp]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=$ROOT/build/gpu-carry
OUT=${OUT:-$ROOT/build/gpu-profile}
INPUT=${1:-rows65536_F4096} ILP=${2:-1}
BENCH=$CARRY/kernel_bench
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cuobjdump -sass "$BENCH" > "$OUT/sass.txt" 2>&1
gzip -f "$OUT/sass.txt"
if [[ -z ${KERNELS:-} ]]; then
  KERNELS=$("$BENCH" --benchmark_list_tests | grep "/$INPUT/ilp:$ILP\$" | cut -d/ -f1,2 | sort -u)
fi
[[ -n $KERNELS ]] || { echo "gpu_profile: no benchmark on reference input $INPUT at ilp $ILP" >&2; exit 1; }
for k in $KERNELS; do
  name=${k//\//_}
  # The kernels of the CUDA backend (namespace bitparity::gpu), not the benchmark's fill kernels.
  ncu --clock-control none --launch-skip 3 --launch-count 1 --kernel-name-base mangled -k 'regex:^_ZN9bitparity3gpu' \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats \
    "$BENCH" --benchmark_filter="^$k/$INPUT/ilp:$ILP/" \
    > "$OUT/ncu_$name.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Executed Ipc A|Achieved Occupancy|Registers Per|Theoretical Occ|Block Limit Reg|No Eligible|Warp Cycles Per Issued|Executed Instructions  " "$OUT/ncu_$name.txt" | sed "s|^|$name: |"
done
