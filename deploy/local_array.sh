#!/usr/bin/env bash
# The Slurm recipe on one machine: runs deploy/slurm/campaign.sbatch N times as background
# processes, each with the environment an array task gets (SLURM_ARRAY_TASK_ID, _COUNT, _MIN,
# _JOB_ID), waits for them, then runs deploy/slurm/merge.sbatch. Same outputs as on a cluster:
# OUT/shard-<i>/, OUT/merged/{corpus,report.json,junit.xml,dashboard.html}, OUT/logs/.
#
# Usage: deploy/local_array.sh [-n SHARDS] [-s SEED] [-b BUDGET_SECONDS] [-o OUT] [-x BITPARITY] [-g]
#                              [-- CAMPAIGN FLAGS]
#   -n 4, -s 7, -b 10 by default; -o defaults to build/local-array/<date>
#   -x  the command (default $BITPARITY, else build/default/cli/bitparity, else bitparity on PATH)
#   -g  keep the GPUs visible; without it CUDA_VISIBLE_DEVICES is empty, so the campaigns run
#       their CPU default (every pair of ref contracts) whatever the build
# Exit status: the merge's (0; 1 a new same-contract finding; 2 a failure).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shards=4 seed=7 budget=10 out="" bitparity="${BITPARITY:-}" gpu=0
while getopts "n:s:b:o:x:gh" opt; do
  case "$opt" in
    n) shards=$OPTARG ;;
    s) seed=$OPTARG ;;
    b) budget=$OPTARG ;;
    o) out=$OPTARG ;;
    x) bitparity=$OPTARG ;;
    g) gpu=1 ;;
    h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" != "--" ] || shift
case "$shards" in '' | *[!0-9]* | 0) echo "local_array: -n wants a positive count" >&2; exit 2 ;; esac
if [ -z "$bitparity" ]; then
  if [ -x "$root/bin/bitparity" ]; then bitparity="$root/bin/bitparity"            # the package
  elif [ -x "$root/build/default/cli/bitparity" ]; then bitparity="$root/build/default/cli/bitparity"
  else bitparity=$(command -v bitparity) || { echo "local_array: no bitparity (-x PATH)" >&2; exit 2; }
  fi
fi
bitparity=$(cd "$(dirname "$bitparity")" && pwd)/$(basename "$bitparity")
out=${out:-$root/build/local-array/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
[ "$gpu" = 1 ] || export CUDA_VISIBLE_DEVICES=""
export BITPARITY="$bitparity" BITPARITY_OUT="$out" BITPARITY_SEED="$seed" BITPARITY_BUDGET="$budget" \
       BITPARITY_ARGS="$*" SLURM_ARRAY_JOB_ID="local$$" SLURM_ARRAY_TASK_COUNT="$shards" \
       SLURM_ARRAY_TASK_MIN=0 SLURM_SUBMIT_DIR="$PWD" SLURM_CPUS_PER_TASK="${SLURM_CPUS_PER_TASK:-1}"

echo "local_array: $shards shards of seed $seed, ${budget}s each, with $bitparity -> $out"
pids=()
for ((i = 0; i < shards; i++)); do
  SLURM_ARRAY_TASK_ID=$i bash "$root/deploy/slurm/campaign.sbatch" >"$out/logs/campaign-local_$i.out" 2>&1 &
  pids+=("$!")
done
failed=0
for ((i = 0; i < shards; i++)); do
  if wait "${pids[$i]}"; then status=0; else status=$?; fi
  echo "local_array: task $i (pid ${pids[$i]}) exited $status, campaign status $(cat "$out/shard-$i/exit_status" 2>/dev/null || echo none)"
  [ "$status" = 0 ] || failed=1
done
# afterok: the merge runs only when every task succeeded.
[ "$failed" = 0 ] || { echo "local_array: a task failed (see $out/logs); no merge" >&2; exit 2; }
if bash "$root/deploy/slurm/merge.sbatch" >"$out/logs/merge-local.out" 2>&1; then status=0; else status=$?; fi
tail -n 25 "$out/logs/merge-local.out"
echo "local_array: merge exited $status; dashboard: $out/merged/dashboard.html"
exit "$status"
