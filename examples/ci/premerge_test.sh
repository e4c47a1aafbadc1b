#!/usr/bin/env bash
# The pre-merge recipe end to end on host memory (ctest: premerge_recipe): premerge.sh against the
# correct C test plug-in passes and writes its JUnit XML and report; against the planted one (the
# shared branch added last) it fails the merge with the new entries listed; with those entries as
# the corpus and the planted kernel fixed (the correct one served under the planted kind), the
# replay passes them again.
#   premerge_test.sh BITPARITY HOSTFAN.so HOSTFAN_PLANTED.so
set -uo pipefail
bp=$1 good=$2 planted=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "premerge_test: FAIL: $*"; exit 1; }
common=(--bitparity "$bp" --ops fanout_grad --budget-seconds 5 --seed 7)

"$here/premerge.sh" "${common[@]}" --plugin "$good" --pair hostfan:glm45,ref:glm45 --out "$work/good" >"$work/good.log" 2>&1
rc=$?
((rc == 0)) || { cat "$work/good.log"; fail "the correct plug-in: exit $rc, expected 0"; }
for f in junit.xml report.json; do [[ -s $work/good/$f ]] || fail "the correct plug-in wrote no $f"; done
[[ ! -s $work/good/new-findings.txt ]] || fail "the correct plug-in has new findings"

"$here/premerge.sh" "${common[@]}" --plugin "$planted" --pair hostfan_planted:glm45,ref:glm45 --out "$work/bad" >"$work/bad.log" 2>&1
rc=$?
((rc == 1)) || { cat "$work/bad.log"; fail "the planted plug-in: exit $rc, expected 1"; }
[[ -s $work/bad/new-findings.txt ]] || fail "the planted plug-in's findings are not listed"
grep -q 'failures="[1-9]' "$work/bad/junit.xml" || fail "the JUnit XML shows no failure"

# The developer commits the new entries, fixes the kernel: the replay passes them, nothing is new.
mkdir -p "$work/corpus"
cp -r "$work/bad/corpus/." "$work/corpus/"
"$here/premerge.sh" "${common[@]}" --exec "hostfan_planted=$bp --plugin $good worker --kind hostfan" \
  --pair hostfan_planted:glm45,ref:glm45 --corpus "$work/corpus" --out "$work/fixed" >"$work/fixed.log" 2>&1
rc=$?
((rc == 0)) || { cat "$work/fixed.log"; fail "the fixed kernel with the committed entries: exit $rc, expected 0"; }
echo "premerge_test: PASS (correct: exit 0; planted: exit 1 with $(wc -l <"$work/bad/new-findings.txt") new entries; fixed: exit 0)"
