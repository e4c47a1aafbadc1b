#!/usr/bin/env bash
# Submits a sharded bitparity campaign to Slurm: an array of N one-GPU tasks (campaign.sbatch) and
# the merge behind it (merge.sbatch, --dependency=afterok on the whole array).
#
# Usage: deploy/slurm/submit.sh [-n SHARDS] [-s SEED] [-b BUDGET_SECONDS] [-o OUT] [-- CAMPAIGN FLAGS]
#   -n  shards, one array task each (default 8)
#   -s  seed (default 7)
#   -b  seconds of case generation per shard (default 3000); the tasks' --time is that plus 15 min
#   -o  the output folder, on a file system every node mounts (default $PWD/bitparity-runs/<date>)
#   --  the rest goes to every `bitparity campaign` (e.g. -- --ops swiglu_scale --pair A,B)
# Environment: BITPARITY (the command; default the bin/bitparity of this package, else bitparity on
# PATH), SBATCH_ARGS (more sbatch flags for both jobs, e.g. "--partition=gpu --account=me"),
# BITPARITY_MERGE_AFTER (afterok, the default, or afterany: merge whatever shards finished).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
shards=8 seed=7 budget=3000 out=""
while getopts "n:s:b:o:h" opt; do
  case "$opt" in
    n) shards=$OPTARG ;;
    s) seed=$OPTARG ;;
    b) budget=$OPTARG ;;
    o) out=$OPTARG ;;
    h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" != "--" ] || shift
campaign_args="$*"
case "$shards" in '' | *[!0-9]* | 0) echo "submit: -n wants a positive count" >&2; exit 2 ;; esac
case "$budget" in '' | *[!0-9]*) echo "submit: -b wants whole seconds" >&2; exit 2 ;; esac

if [ -z "${BITPARITY:-}" ]; then
  if [ -x "$here/../../bin/bitparity" ]; then BITPARITY=$(cd "$here/../../bin" && pwd)/bitparity
  else BITPARITY=$(command -v bitparity) || { echo "submit: set BITPARITY to the bitparity command" >&2; exit 2; }
  fi
fi
out=${out:-$PWD/bitparity-runs/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
read -r -a sbatch_args <<<"${SBATCH_ARGS:-}"
minutes=$(((budget + 900 + 59) / 60))
export BITPARITY BITPARITY_OUT="$out" BITPARITY_SEED="$seed" BITPARITY_BUDGET="$budget" \
       BITPARITY_ARGS="$campaign_args"

array=$(sbatch --parsable "${sbatch_args[@]}" --array="0-$((shards - 1))" --time="$minutes" \
               --output="$out/logs/campaign-%A_%a.out" --export=ALL "$here/campaign.sbatch")
array=${array%%;*}
merge=$(sbatch --parsable "${sbatch_args[@]}" --dependency="${BITPARITY_MERGE_AFTER:-afterok}:$array" \
               --kill-on-invalid-dep=yes --output="$out/logs/merge-%j.out" --export=ALL "$here/merge.sbatch")
merge=${merge%%;*}
echo "submit: campaign array $array ($shards shards, seed $seed, ${budget}s each), merge $merge"
echo "submit: outputs in $out (merged/dashboard.html when job $merge ends)"
