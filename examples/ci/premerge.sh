#!/usr/bin/env bash
# premerge.sh: the pre-merge check of a repository that owns kernels of its own, run by its CI job.
#
#   1. replays the repository's corpus (every DIR/<op>/*.json): an entry that fails is a regression;
#   2. runs a bounded campaign of the pairs the repository claims (its kernel against the reference of
#      the contract it claims), writing only NEW findings into OUT/corpus (a copy of the corpus: a
#      signature already there is not written again);
#   3. writes OUT/report.json, OUT/junit.xml, OUT/dashboard.html and OUT/new-findings.txt.
#
# Exit 0: the replay passed and no new same-contract finding; 1: an entry regressed or a new
# same-contract finding (a bug) appeared; 2: a usage error or a step that could not do its job;
# 130: interrupted (what was written is kept). examples/ci/README.md is the recipe.
set -euo pipefail

prog=$(basename "$0")

usage() {
  cat <<EOF
usage: $prog --pair A,B [--pair A,B ...] [options] [-- CAMPAIGN_FLAGS...]

Replays a bitparity corpus, runs a bounded bitparity campaign of the given pairs and fails on a
regression or a new same-contract finding.

  --pair A,B              a backend pair KIND:CONTRACT,KIND:CONTRACT, e.g.
                          mine:paddle_fused,ref:paddle_fused (repeatable; at least one)
  --corpus DIR            the repository's corpus (entries DIR/<op>/*.json): replayed first, and
                          the campaign writes only findings whose signature it lacks (default: none)
  --budget-seconds N      the campaign's wall-clock budget (default 300; shrinking a finding is
                          not cut by it: up to --max-shrink-calls runs per finding)
  --seed N                the campaign's seed (default: the first 8 hex digits of the commit,
                          \$GITHUB_SHA, \$CI_COMMIT_SHA or \`git rev-parse HEAD\`, as a number)
  --ops OPS               comma-separated ops (repeatable; default: every op the pairs implement)
  --out DIR               where everything goes (default premerge-out); absent, empty, or made by
                          an earlier run of this script
  --bitparity PATH        the bitparity binary (default \$BITPARITY, else \`bitparity\` on PATH)
  --plugin PATH.so        load a compiled plug-in (repeatable; passed as bitparity --plugin)
  --exec NAME=COMMAND     a backend kind served by a worker process (repeatable; bitparity --exec)
  --same-contract-pin P   pins of new same-contract findings: fixed (default: once the kernel is
                          fixed, the committed entry guards it) or open (never fails a replay)
  -h, --help              this text
  -- FLAGS...             passed to \`bitparity campaign\` as they are (e.g. --max-cases 20000)

Writes OUT/report.json, OUT/junit.xml, OUT/dashboard.html, OUT/corpus/ (the corpus plus the new
findings), OUT/new-findings.txt (the new entries, relative to OUT), OUT/replay.log, OUT/campaign.log.

Exit status: 0 replay passed and no new same-contract finding; 1 an entry regressed or a new
same-contract finding appeared; 2 a usage error or a step that failed; 130 interrupted.
EOF
}

die_usage() {
  echo "$prog: error: $*" >&2
  echo "$prog: run '$prog --help' for the flags" >&2
  exit 2
}
die() {
  echo "$prog: error: $*" >&2
  exit 2
}
note() { echo "$prog: $*"; }
warn() { echo "$prog: warning: $*" >&2; }

# ---------------------------------------------------------------------------------------------
# (a) arguments

pairs=()
ops=()
plugins=()
execs=()
campaign_extra=()
corpus=""
budget=300
seed=""
out="premerge-out"
bitparity="${BITPARITY:-}"
same_contract_pin="fixed"

need_value() {  # flag, number of arguments left
  [ "$2" -ge 2 ] || die_usage "$1 needs a value"
}

while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --pair | --corpus | --budget-seconds | --seed | --ops | --out | --bitparity | --plugin | --exec | --same-contract-pin)
      need_value "$1" $#
      flag=$1 value=$2
      shift 2
      ;;
    --*=*)
      flag=${1%%=*} value=${1#*=}
      shift
      case "$flag" in
        --pair | --corpus | --budget-seconds | --seed | --ops | --out | --bitparity | --plugin | --exec | --same-contract-pin) ;;
        *) die_usage "unknown flag $flag" ;;
      esac
      ;;
    --)
      shift
      campaign_extra=("$@")
      break
      ;;
    *) die_usage "unknown argument '$1'" ;;
  esac
  case "$flag" in
    --pair) pairs+=("$value") ;;
    --corpus) corpus=$value ;;
    --budget-seconds) budget=$value ;;
    --seed) seed=$value ;;
    --ops) ops+=("$value") ;;
    --out) out=$value ;;
    --bitparity) bitparity=$value ;;
    --plugin) plugins+=("$value") ;;
    --exec) execs+=("$value") ;;
    --same-contract-pin) same_contract_pin=$value ;;
  esac
done

[ ${#pairs[@]} -gt 0 ] || die_usage "--pair A,B is required: the kernel's backend and the reference of the contract it claims, e.g. --pair mine:paddle_fused,ref:paddle_fused"

backend_re='[a-z][a-z0-9_]*:[A-Za-z0-9_]+'
same_contract_pairs=0
pair_notes=()  # printed once every argument is checked
for p in "${pairs[@]}"; do
  [[ $p =~ ^($backend_re),($backend_re)$ ]] ||
    die_usage "--pair '$p': expected KIND:CONTRACT,KIND:CONTRACT (e.g. mine:paddle_fused,ref:paddle_fused)"
  a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]}
  if [ "${a#*:}" = "${b#*:}" ]; then
    same_contract_pairs=$((same_contract_pairs + 1))
  else
    pair_notes+=("--pair $p is contract-vs-contract: its findings are divergences and do not fail the merge")
  fi
done

[[ $budget =~ ^[0-9]+([.][0-9]+)?$ ]] || die_usage "--budget-seconds '$budget': expected a number of seconds >= 0"
[ -z "$seed" ] || [[ $seed =~ ^[0-9]+$ ]] || die_usage "--seed '$seed': expected an unsigned decimal integer"
case "$same_contract_pin" in fixed | open) ;; *) die_usage "--same-contract-pin '$same_contract_pin': expected fixed or open" ;; esac

ops_csv=""
for o in ${ops[@]+"${ops[@]}"}; do
  [[ $o =~ ^[a-z0-9_]+(,[a-z0-9_]+)*$ ]] || die_usage "--ops '$o': expected comma-separated op names (bitparity list)"
  ops_csv=${ops_csv:+$ops_csv,}$o
done

for e in ${execs[@]+"${execs[@]}"}; do
  [[ $e =~ ^[a-z][a-z0-9_]*=.+ ]] || die_usage "--exec '$e': expected NAME=COMMAND, NAME matching [a-z][a-z0-9_]*"
done

# Plug-ins by absolute path: a bare name would make dlopen search the library path instead.
abs_plugins=()
for p in ${plugins[@]+"${plugins[@]}"}; do
  [ -f "$p" ] || die_usage "--plugin '$p': no such file (build the plug-in first)"
  abs_plugins+=("$(cd "$(dirname "$p")" && pwd -P)/$(basename "$p")")
done

if [ -n "$corpus" ]; then
  [ -d "$corpus" ] || die_usage "--corpus '$corpus': not a folder (create it, empty, to start a corpus)"
  corpus_abs=$(cd "$corpus" && pwd -P)
fi

# The bitparity binary, and that it runs.
if [ -z "$bitparity" ]; then
  bitparity=$(command -v bitparity || true)
  [ -n "$bitparity" ] || die_usage "no bitparity: pass --bitparity PATH, set \$BITPARITY, or put bitparity on PATH"
elif [[ $bitparity != */* ]]; then
  resolved=$(command -v "$bitparity" || true)
  [ -n "$resolved" ] || die_usage "--bitparity '$bitparity': not found on PATH"
  bitparity=$resolved
fi
if [ ! -f "$bitparity" ] || [ ! -x "$bitparity" ]; then die_usage "--bitparity '$bitparity': not an executable file"; fi
if ! bitparity_help=$("$bitparity" --help 2>&1); then
  echo "$bitparity_help" | tail -n 5 >&2
  die "'$bitparity --help' failed: the binary does not run here"
fi
if [ ${#abs_plugins[@]} -gt 0 ] && ! grep -q -- '--plugin' <<<"$bitparity_help"; then
  die "$bitparity has no --plugin flag: use a newer bitparity, or serve the plug-in through --exec"
fi

backend_flags=()
for p in ${abs_plugins[@]+"${abs_plugins[@]}"}; do backend_flags+=(--plugin "$p"); done
for e in ${execs[@]+"${execs[@]}"}; do backend_flags+=(--exec "$e"); done

for n in ${pair_notes[@]+"${pair_notes[@]}"}; do note "$n"; done
[ "$same_contract_pairs" -gt 0 ] ||
  warn "no --pair compares one contract with itself: only a regression of the corpus can fail this check"

# The seed: given, else from the commit (printed, so a run can be repeated with --seed).
if [ -z "$seed" ]; then
  sha=${GITHUB_SHA:-${CI_COMMIT_SHA:-}}
  sha_from=${GITHUB_SHA:+\$GITHUB_SHA}
  sha_from=${sha_from:-${CI_COMMIT_SHA:+\$CI_COMMIT_SHA}}
  if [ -z "$sha" ]; then
    sha=$(git rev-parse HEAD 2>/dev/null || true)
    sha_from="git rev-parse HEAD"
  fi
  [[ $sha =~ ^[0-9a-fA-F]{8} ]] ||
    die_usage "no --seed and no commit to derive one from (\$GITHUB_SHA, \$CI_COMMIT_SHA, git rev-parse HEAD): pass --seed N"
  seed=$((16#${sha:0:8}))
  note "seed $seed (the first 8 hex digits of ${sha:0:12}..., from $sha_from; repeat with --seed $seed)"
else
  note "seed $seed"
fi

# The output folder: absent, empty, or one this script made (its marker), whose outputs are replaced.
marker=".bitparity-premerge"
if [ -e "$out" ] && [ ! -d "$out" ]; then die_usage "--out '$out': exists and is not a folder"; fi
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -f "$out/$marker" ]; then
  die_usage "--out '$out': a non-empty folder that premerge.sh did not make; choose a new one"
fi
mkdir -p "$out"
out_abs=$(cd "$out" && pwd -P)
if [ -n "$corpus" ]; then
  case "$corpus_abs/" in "$out_abs/"*) die_usage "--corpus '$corpus' lies inside --out '$out'" ;; esac
  case "$out_abs/" in "$corpus_abs/"*) die_usage "--out '$out' lies inside --corpus '$corpus'" ;; esac
fi
rm -rf "${out:?}/corpus"
rm -f "$out/report.json" "$out/junit.xml" "$out/dashboard.html" "$out/new-findings.txt" \
  "$out/replay.log" "$out/campaign.log" "$out/report.log" "$out/list.txt"
echo "made by examples/ci/premerge.sh; its outputs here are replaced by its next run" >"$out/$marker"

# Runs a command with its stdout and stderr shown and kept in LOG; returns the command's status.
# The tee ignores SIGINT/SIGTERM, so an interrupted bitparity can still print and write its summary.
interrupted=0
trap 'interrupted=1' INT TERM
run_logged() {
  local log=$1 status
  shift
  set +e
  "$@" 2>&1 | (trap '' INT TERM; exec tee "$log")
  status=${PIPESTATUS[0]}
  set -e
  return "$status"
}

# The command line a developer runs to reproduce (bitparity as found on their PATH).
shell_quote() {
  if [[ $1 =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then printf '%s' "$1"; else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
quoted_flags=""
for f in ${backend_flags[@]+"${backend_flags[@]}"}; do quoted_flags+=" $(shell_quote "$f")"; done

# Every backend of every pair must be an implementation this bitparity knows (with the plug-ins
# and workers loaded): a clear message now, rather than in the middle of the replay.
if ! "$bitparity" ${backend_flags[@]+"${backend_flags[@]}"} list >"$out/list.txt" 2>&1; then
  tail -n 20 "$out/list.txt" >&2
  die "'bitparity$quoted_flags list' failed: the plug-ins or workers above could not be loaded"
fi
# A peer that bitparity starts only when a command names it (torch:) is left to the campaign.
for p in "${pairs[@]}"; do
  for backend in "${p%%,*}" "${p#*,}"; do
    grep -Eq "^ +implementations: (.*, )?${backend}(,|\$)" "$out/list.txt" ||
      grep -Eq "^  ${backend%%:*} - .*not started" "$out/list.txt" ||
      die "--pair $p: '$backend' is not an implementation of any op here (see $out/list.txt; a plug-in's or worker's kind needs --plugin or --exec)"
  done
done

status=0            # the script's exit status so far
errors=()           # steps that could not do their job
regressions=0

# ---------------------------------------------------------------------------------------------
# (b) replay the corpus

entries=()
if [ -n "$corpus" ]; then
  while IFS= read -r -d '' f; do entries+=("$f"); done < <(find "$corpus" -mindepth 2 -maxdepth 2 -type f -name '*.json' -print0 | sort -z)
  all_json=$(find "$corpus" -type f -name '*.json' | wc -l)
  [ "$all_json" -eq ${#entries[@]} ] ||
    warn "$((all_json - ${#entries[@]})) JSON files of $corpus lie outside DIR/<op>/*.json: they are not replayed (the campaign still reads their signatures)"
fi
replay_line="replay: no corpus"
if [ ${#entries[@]} -gt 0 ]; then
  note "replaying ${#entries[@]} corpus entries of $corpus"
  replay_status=0
  run_logged "$out/replay.log" "$bitparity" ${backend_flags[@]+"${backend_flags[@]}"} replay "${entries[@]}" || replay_status=$?
  replay_line="replay: $(grep -E '^replayed [0-9]+ files:' "$out/replay.log" | tail -n 1 || true)"
  regressions=$(grep -c '^FAIL ' "$out/replay.log" || true)
  # replay said an entry failed: never pass on a count of its lines
  if [ "$replay_status" -eq 1 ] && [ "$regressions" -eq 0 ]; then regressions=1; fi
  if [ "$regressions" -gt 0 ]; then
    echo
    note "REGRESSION: corpus entries that no longer hold: ${regressions}"
    grep '^FAIL ' "$out/replay.log" | sed 's/^/  /' || true
    note "reproduce one with: bitparity$quoted_flags replay FILE"
  fi
  case "$replay_status" in
    0 | 1) ;;
    130) interrupted=1 ;;
    *) errors+=("replay exited $replay_status (a file could not be read or replayed: see $out/replay.log)") ;;
  esac
  if grep -q '^SKIP ' "$out/replay.log"; then
    warn "$(grep -c '^SKIP ' "$out/replay.log") corpus entries were skipped: their backend cannot run on this machine (see $out/replay.log)"
  fi
elif [ -n "$corpus" ]; then
  replay_line="replay: $corpus has no entries yet"
  note "$corpus has no entries (DIR/<op>/*.json): nothing to replay"
fi

# ---------------------------------------------------------------------------------------------
# (c) the bounded campaign, into a copy of the corpus

mkdir -p "$out/corpus"
if [ -n "$corpus" ]; then cp -R "$corpus/." "$out/corpus/"; fi
before=$(cd "$out/corpus" && find . -type f -name '*.json' | sort)

campaign_status=0
if [ "$interrupted" -eq 0 ]; then
  campaign_args=(campaign)
  for p in "${pairs[@]}"; do campaign_args+=(--pair "$p"); done
  campaign_args+=(--budget-seconds "$budget" --seed "$seed")
  [ -z "$ops_csv" ] || campaign_args+=(--ops "$ops_csv")
  campaign_args+=(--corpus "$out/corpus" --report "$out/report.json" --junit "$out/junit.xml"
    --same-contract-pin "$same_contract_pin")
  campaign_args+=(${campaign_extra[@]+"${campaign_extra[@]}"})
  echo
  note "campaign: ${pairs[*]}, ${budget} s, seed $seed${ops_csv:+, ops $ops_csv}"
  run_logged "$out/campaign.log" "$bitparity" ${backend_flags[@]+"${backend_flags[@]}"} "${campaign_args[@]}" ||
    campaign_status=$?
  case "$campaign_status" in
    0 | 1) ;;
    130) interrupted=1 ;;
    *) errors+=("campaign exited $campaign_status (see $out/campaign.log)") ;;
  esac
fi

# ---------------------------------------------------------------------------------------------
# (d) the dashboard

dashboard_line="dashboard: not written (no report)"
if [ -f "$out/report.json" ]; then
  report_status=0
  "$bitparity" report --html "$out/dashboard.html" --report "$out/report.json" --corpus "$out/corpus" \
    >"$out/report.log" 2>&1 || report_status=$?
  if [ "$report_status" -eq 0 ]; then
    dashboard_line="dashboard: $out/dashboard.html"
  elif [ "$report_status" -eq 2 ] && grep -q "built without the dashboard's chart libraries" "$out/report.log"; then
    dashboard_line="dashboard: not written (this bitparity lacks the chart libraries)"
    warn "no dashboard: this bitparity was built without the chart libraries (scripts/fetch_charts.sh, then rebuild); the check goes on"
  else
    cat "$out/report.log" >&2
    errors+=("report --html exited $report_status (see $out/report.log)")
    dashboard_line="dashboard: failed"
  fi
fi

# ---------------------------------------------------------------------------------------------
# (e) the new findings

after=$(cd "$out/corpus" && find . -type f -name '*.json' | sort)
new_files=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | sed -n 's|^\./|corpus/|p')
printf '%s' "$new_files${new_files:+$'\n'}" >"$out/new-findings.txt"
new_bugs=0
new_divergences=0
if [ -n "$new_files" ]; then
  echo
  note "new findings (listed in $out/new-findings.txt):"
  while IFS= read -r f; do
    pins=$(grep -o '"pins": *"[a-z]*"' "$out/$f" | head -n 1 | sed 's/.*"\([a-z]*\)"$/\1/' || true)
    if [ "$pins" = "divergence" ]; then
      new_divergences=$((new_divergences + 1))
      echo "  divergence  $out/$f"
    else
      new_bugs=$((new_bugs + 1))
      echo "  BUG ($pins)  $out/$f"
    fi
    echo "      To reproduce: bitparity$quoted_flags replay $out/$f"
  done <<<"$new_files"
  target=${corpus:-YOUR_CORPUS}
  echo
  if [ "$new_bugs" -gt 0 ]; then
    note "each BUG fails this check. Once the kernel is fixed (its replay passes), or the difference is"
    note "accepted (set the entry's \"pins\" to \"divergence\"), add it to your corpus and commit it:"
    note "every later check replays it. Divergences between contracts may be committed as they are."
  else
    note "these are divergences between two contracts and do not fail the check; commit them if the"
    note "check should watch them (their replay fails when one changes):"
  fi
  while IFS= read -r op_dir; do
    echo "  mkdir -p $target/$op_dir && cp $(grep "^corpus/$op_dir/" <<<"$new_files" | sed "s|^|$out/|" | tr '\n' ' ')$target/$op_dir/"
  done < <(sed 's|^corpus/||; s|/[^/]*$||' <<<"$new_files" | sort -u)
  echo "  git add $target"
fi

# ---------------------------------------------------------------------------------------------
# (f) the verdict

if [ "$campaign_status" -eq 1 ] && [ "$new_bugs" -eq 0 ]; then
  new_bugs_line="the campaign reported a new same-contract finding (see $out/campaign.log)"
else
  new_bugs_line="$new_bugs new same-contract findings (bugs), $new_divergences new divergences"
fi
verdict="PASS"
if [ ${#errors[@]} -gt 0 ]; then
  status=2 verdict="ERROR"
elif [ "$regressions" -gt 0 ] || [ "$campaign_status" -eq 1 ]; then
  status=1 verdict="FAIL"
fi
if [ "$interrupted" -eq 1 ]; then status=130 verdict="INTERRUPTED"; fi

echo
echo "== bitparity pre-merge: $verdict (exit $status)"
echo "   pairs: ${pairs[*]}"
echo "   seed $seed, budget ${budget} s${ops_csv:+, ops $ops_csv}"
echo "   $replay_line"
[ "$regressions" -eq 0 ] || echo "   regressed corpus entries: $regressions"
if [ "$interrupted" -eq 1 ] && [ "$campaign_status" -ne 130 ] && [ ! -f "$out/report.json" ]; then
  echo "   campaign: not run (interrupted)"
else
  echo "   campaign: exit $campaign_status; $new_bugs_line"
fi
echo "   $dashboard_line"
for e in ${errors[@]+"${errors[@]}"}; do echo "   error: $e"; done
written=""
for f in report.json junit.xml dashboard.html corpus/ new-findings.txt replay.log campaign.log; do
  if [ -e "$out/$f" ]; then written+="${written:+, }$f"; fi
done
echo "   outputs: $out/ ($written)"
exit "$status"
