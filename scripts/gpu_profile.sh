#!/usr/bin/env bash
# Diagnosis on the GPU machine, beside scripts/gpu_check.sh (which it expects to have staged
# build/gpu-carry): the SASS of the benchmark program and an Nsight Compute report of each bf16
# kernel at one large shape (ncu reads the hardware counters; clocks are left alone).
#
#   OUT=dir [KERNELS="swiglu_scale_bwd/paddle ..."] scripts/gpu_profile.sh [rows] [F] [ilp]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=$ROOT/build/gpu-carry
OUT=${OUT:-$ROOT/build/gpu-profile}
ROWS=${1:-65536} F=${2:-4096} ILP=${3:-1}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cuobjdump -sass "$CARRY/swiglu_bench" > "$OUT/sass.txt" 2>&1
gzip -f "$OUT/sass.txt"
KERNELS=${KERNELS:-swiglu_fwd/megatron swiglu_bwd/megatron swiglu_scale_fwd/megatron swiglu_scale_bwd/megatron
  swiglu_scale_fwd/paddle swiglu_scale_bwd/paddle}
for k in $KERNELS; do
  name=${k//\//_}
  ncu --clock-control none --launch-skip 3 --launch-count 1 -k 'regex:megatron|paddle' \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats \
    "$CARRY/swiglu_bench" --benchmark_filter="^$k/bf16/rows:$ROWS/F:$F/ilp:$ILP/" \
    > "$OUT/ncu_$name.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Executed Ipc A|Achieved Occupancy|Registers Per|Theoretical Occ|Block Limit Reg|No Eligible|Warp Cycles Per Issued|Executed Instructions  " "$OUT/ncu_$name.txt" | sed "s|^|$name: |"
done
