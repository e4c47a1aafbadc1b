#!/usr/bin/env bash
# The whole GPU check in one call: the GPU tests (cuda_vs_ref_test, label gpu, and the cuda targets of
# the property programs, gpu_property_tests), compute-sanitizer memcheck and racecheck on
# cuda_vs_ref_test, a campaign of every CUDA contract under memcheck and
# racecheck (`bitparity --sanitizer`, its findings fail the check), campaigns through a worker that
# faults on the device on purpose (cuda_fault_test), the kernel and launch benchmarks (kernel_bench: every CUDA kernel
# record on its op's reference inputs), and a short table last. Nothing here names an op:
# the sanitizers pick the cuda targets of the generic tests by their names' backend kind. Exits
# non-zero on a failed test, a finding, or a sanitizer error or hazard; racecheck's reports inside
# a kernel that a closed library launched (on the H200, a cuBLAS nvjet kernel of the gemm's cublas
# contract: code no change here can fix, and excluding it from racecheck made the tool fail) are
# listed apart in the summary and not judged (gpu/tests/gpu_check_summary_test.sh).
#
#   scripts/gpu_check.sh stage   Here, where the build dependencies are (RapidCheck, MPFR, CLI11,
#                                nlohmann-json): build the two programs and stage them, with the
#                                shared libraries a bare GPU machine may lack, in build/gpu-carry,
#                                with the `bitparity` command for GPU campaigns; also packed as
#                                build/gpu-carry.tar.xz. Carry the folder or the packed file.
#                                The property programs' binary is packed apart, as
#                                build/gpu-carry-properties.tar.xz. The device tool takes at most
#                                64 MiB a call, source tree included; packed with xz -9e (a
#                                dictionary that spans the programs' shared code: about 11 and
#                                9 MB) both fit one call, and the whole check is one call. Carry
#                                one of them to run a part (the properties alone: every other
#                                part skipped, SKIP_TESTS=1 SKIP_SANITIZER=1 SKIP_HAZARDS=1
#                                SKIP_BENCH=1 SKIP_PLUGINS=1).
#   scripts/gpu_check.sh unpack  On the GPU machine: unpack build/gpu-carry.tar.xz and/or
#                                build/gpu-carry-properties.tar.xz, whichever came. A campaign run
#                                there by hand: LD_LIBRARY_PATH=build/gpu-carry/lib
#                                BITPARITY_COMMIT=$(cat build/gpu-carry/COMMIT) build/gpu-carry/bitparity ...
#   scripts/gpu_check.sh run     On the GPU machine: run everything from build/gpu-carry (staging
#                                first where it is missing and this machine can build).
#   scripts/gpu_check.sh         stage if needed, then run.
#
# Environment: RESULTS (default build/gpu-check) receives logs, gtest XML, Google Benchmark JSON
# and summary.txt; ARCHIVE_TO, if set, receives summary.txt, bench.json and logs.tar.gz only (the
# device tool brings back few files). JOBS: test shards run in parallel (default: cores, at most
# 8). RC_CASES: RapidCheck cases per property (default 100); MEMCHECK_RC_CASES (15) and
# RACECHECK_RC_CASES (60) under the sanitizers.
# BENCH_FILTER: a --benchmark_filter regex. SKIP_TESTS=1, SKIP_SANITIZER=1, SKIP_BENCH=1, SKIP_PLUGINS=1,
# SKIP_PROPERTIES=1 (the property programs), SKIP_FAULTS=1 (the device-fault campaigns), SKIP_HAZARDS=1 (the sanitizer campaign; HAZARD_SECONDS,
# default 120, HAZARD_SEED, default 1, HAZARD_WORKERS a tool, default 2) leave parts out, so that a check too long for one call
# can be split over several. TEST_FILTER: a --gtest_filter for the test shards (default: all);
# PROPERTY_FILTER: for the property programs' binary, gpu_property_tests (default: *cuda*);
# SANITIZER_FILTER: the sanitizers' (default: the cuda targets and the PyTorch recordings).
# PART_TIMEOUT: seconds each part (tests, each sanitizer, benchmarks) may run; a part stopped by it
# is a problem in the summary, and the summary is still written.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build/gpu}
CARRY=$ROOT/build/gpu-carry
RESULTS=${RESULTS:-$ROOT/build/gpu-check}
RC_CASES=${RC_CASES:-100}
MEMCHECK_RC_CASES=${MEMCHECK_RC_CASES:-15}
RACECHECK_RC_CASES=${RACECHECK_RC_CASES:-60}
JOBS=${JOBS:-$(nproc)}
((JOBS > 8)) && JOBS=8

stage() {
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || return 1
  cmake --build "$BUILD" -j "${BUILD_JOBS:-2}" --target cuda_vs_ref_test cuda_fault_test cuda_fault_worker kernel_bench \
    campaign_bench bitparity bitparity_example_fleet gpu_property_tests || return 1
  rm -rf "$CARRY"
  mkdir -p "$CARRY/lib" "$CARRY/plugins"
  cp "$BUILD/gpu/tests/cuda_vs_ref_test" "$BUILD/gpu/tests/cuda_fault_test" "$BUILD/gpu/tests/cuda_fault_worker" \
    "$BUILD/bench/kernel_bench" "$BUILD/bench/campaign_bench" "$BUILD/cli/bitparity" \
    "$BUILD/properties/gpu_property_tests" "$CARRY/"
  # The example plug-ins, for campaigns of `--plugin` backends on the GPU.
  cp "$BUILD"/peers/plugin/examples/*.so "$CARRY/plugins/"
  strip --strip-debug "$CARRY/cuda_vs_ref_test" "$CARRY/cuda_fault_test" "$CARRY/cuda_fault_worker" "$CARRY/kernel_bench" \
    "$CARRY/campaign_bench" "$CARRY/bitparity" "$CARRY/gpu_property_tests"
  # Every shared library but the C and C++ runtimes (glibc's pieces included), which the GPU machine has
  # in newer versions.
  ldd "$CARRY/cuda_vs_ref_test" "$CARRY/kernel_bench" "$CARRY/bitparity" | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' | while read -r lib; do cp -L "$lib" "$CARRY/lib/"; done
  # The commit the programs were built from: the GPU machine's copy of the tree may carry another
  # git state, and campaign reports and corpus entries record this one (BITPARITY_COMMIT).
  git -C "$ROOT" rev-parse HEAD >"$CARRY/COMMIT" 2>/dev/null || rm -f "$CARRY/COMMIT"
  # Compressed files travel to the GPU machine; `gpu_check.sh unpack` there restores the folder. The
  # property programs' binary is packed apart ($CARRY-properties.tar.xz), so that a call may carry
  # one part's programs alone.
  local base
  base=$(basename "$CARRY")
  # xz -9e: its 64 MiB dictionary spans the programs, which share most of their code (35 MB at xz's
  # default level, 11 MB here); the device tool carries at most 64 MiB a call, source tree included.
  export XZ_OPT=${XZ_OPT:--9e -T0}
  tar cJf "$CARRY.tar.xz" -C "$(dirname "$CARRY")" --exclude="$base/gpu_property_tests" "$base"
  tar cJf "$CARRY-properties.tar.xz" -C "$(dirname "$CARRY")" "$base/gpu_property_tests" "$base/lib"
  echo "staged in $CARRY ($(du -h "$CARRY.tar.xz" | cut -f1) as $CARRY.tar.xz, the property programs" \
    "$(du -h "$CARRY-properties.tar.xz" | cut -f1) as $CARRY-properties.tar.xz): $(ls "$CARRY" "$CARRY/lib" | tr '\n' ' ')"
}

unpack() {
  local found=0 f
  for f in "$CARRY.tar.xz" "$CARRY-properties.tar.xz"; do
    [[ -f $f ]] && tar xJf "$f" -C "$(dirname "$CARRY")" && found=1
  done
  ((found)) || { echo "gpu_check: neither $CARRY.tar.xz nor $CARRY-properties.tar.xz to unpack" >&2; return 1; }
}

run() {
  if [[ ! -x $CARRY/cuda_vs_ref_test && ! -x $CARRY/gpu_property_tests ]]; then
    echo "gpu_check: $CARRY is missing; staging here" >&2
    stage || { echo "gpu_check: cannot build here (see above)" >&2; exit 1; }
  fi
  export LD_LIBRARY_PATH=$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  [[ -f $CARRY/COMMIT ]] && export BITPARITY_COMMIT=$(<"$CARRY/COMMIT")
  rm -rf "$RESULTS"
  mkdir -p "$RESULTS/logs" "$RESULTS/failures"
  local logs=$RESULTS/logs
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv \
    >"$logs/nvidia-smi.csv" 2>&1
  export BITPARITY_CUDA_CHECKED=1 BITPARITY_FAILURE_DIR=$RESULTS/failures BITPARITY_SOURCE_DIR=$ROOT
  local test=$CARRY/cuda_vs_ref_test t0=$SECONDS

  # Each part under PART_TIMEOUT where one is set; a part it stops leaves its name in timed-out.txt.
  part() {
    local name=$1
    shift
    if [[ -n ${PART_TIMEOUT:-} ]]; then
      timeout "$PART_TIMEOUT" "$@"
      (($? == 124)) && echo "$name" >>"$logs/timed-out.txt"
    else
      "$@"
    fi
    return 0
  }

  # Tests in parallel shards, the sanitizers beside them (timing does not matter here).
  if [[ ${SKIP_TESTS:-0} != 1 ]]; then
    for ((i = 0; i < JOBS; ++i)); do
      GTEST_TOTAL_SHARDS=$JOBS GTEST_SHARD_INDEX=$i RC_PARAMS="max_success=$RC_CASES" \
        part "tests" "$test" --gtest_filter="${TEST_FILTER:-*}" --gtest_output="xml:$logs/tests-$i.xml" \
        >"$logs/tests-$i.log" 2>&1 &
    done
    # Campaigns through a worker whose kernels fault on purpose (gpu/tests/cuda_fault_test.cpp).
    if [[ ${SKIP_FAULTS:-0} != 1 ]]; then
      BITPARITY_CUDA_FAULT_WORKER=$CARRY/cuda_fault_worker part "faults" "$CARRY/cuda_fault_test" \
        --gtest_output="xml:$logs/tests-faults.xml" >"$logs/tests-faults.log" 2>&1 &
    fi
  fi
  # The property programs' cuda targets (ops/tests/ and properties/ in one binary, carried as
  # $CARRY-properties.tar.xz), with their own seeds and case counts, in as many shards.
  if [[ ${SKIP_PROPERTIES:-0} != 1 && -x $CARRY/gpu_property_tests ]]; then
    for ((i = 0; i < JOBS; ++i)); do
      GTEST_TOTAL_SHARDS=$JOBS GTEST_SHARD_INDEX=$i part "properties" "$CARRY/gpu_property_tests" \
        --gtest_filter="${PROPERTY_FILTER:-*cuda*}" --gtest_output="xml:$logs/tests-properties-$i.xml" \
        >"$logs/tests-properties-$i.log" 2>&1 &
    done
  fi
  if [[ ${SKIP_SANITIZER:-0} != 1 ]]; then
    # memcheck: the generated cases and the reference inputs of every cuda target, and the PyTorch
    # recordings. racecheck: the same cuda targets (the kernels with shared memory, cp.async rings
    # and shared-memory trees, are the ones it has work on). CudaRuntime.* is left out: it
    # provokes a failing cudaMalloc on purpose. BITPARITY_CUDA_BUFFERS=separate: a buffer a tensor,
    # so that memcheck knows each tensor's bounds (gpu/runtime.h).
    local cuda_targets='Registry/BackendVsRef.BitIdentical*_cuda_*:Registry/BackendVsRefLarge.*_cuda_*'
    BITPARITY_CUDA_BUFFERS=separate RC_PARAMS="max_success=$MEMCHECK_RC_CASES" part "memcheck" \
      compute-sanitizer --tool memcheck --leak-check full \
      "$test" --gtest_filter="${SANITIZER_FILTER:-$cuda_targets:BackendVsTorch.*}" >"$logs/memcheck.log" 2>&1 &
    RC_PARAMS="max_success=$RACECHECK_RC_CASES" part "racecheck" compute-sanitizer --tool racecheck \
      --racecheck-report all "$test" --gtest_filter="${SANITIZER_FILTER:-$cuda_targets}" >"$logs/racecheck.log" 2>&1 &
  fi
  # A campaign of every CUDA contract under compute-sanitizer (`bitparity --sanitizer`): a race or an
  # invalid access on a generated case is a sanitizer_hazard finding, shrunk, with the tool's report.
  # The wildcard pairs take the order-of-arrival contracts too: their cases of one addend an output
  # are compared, the others' held to the bound every order keeps and, within it, counted as
  # arrival_order skips (the atomics' order).
  if [[ ${SKIP_HAZARDS:-0} != 1 ]]; then
    part "hazards" "$CARRY/bitparity" --sanitizer racecheck,memcheck --sanitizer-workers "${HAZARD_WORKERS:-2}" \
      campaign --pair 'racecheck:*,ref:*' --pair 'memcheck:*,ref:*' --budget-seconds "${HAZARD_SECONDS:-120}" \
      --seed "${HAZARD_SEED:-1}" --jobs 4 --max-shrink-calls 12 --corpus "$RESULTS/hazard-corpus" \
      --report "$logs/hazards.json" >"$logs/hazards.log" 2>&1 &
  fi
  wait
  echo "tests and sanitizers: $((SECONDS - t0)) s" >"$logs/timing.txt"

  if [[ ${SKIP_BENCH:-0} != 1 ]]; then
    t0=$SECONDS
    part "benchmarks" "$CARRY/kernel_bench" ${BENCH_FILTER:+--benchmark_filter="$BENCH_FILTER"} \
      --benchmark_out="$RESULTS/bench.json" --benchmark_out_format=json >"$logs/bench.log" 2>&1
    echo "benchmarks: $((SECONDS - t0)) s" >>"$logs/timing.txt"
  fi

  if [[ ${SKIP_PLUGINS:-0} != 1 ]]; then
    t0=$SECONDS
    for so in "$CARRY"/plugins/*.so; do
      [[ -f $so ]] && check_plugin "$so" "$logs"
    done
    echo "plug-ins: $((SECONDS - t0)) s" >>"$logs/timing.txt"
  fi

  CARRY=$CARRY summarize | tee "$RESULTS/summary.txt"
  local status=${PIPESTATUS[0]}
  if [[ -n ${ARCHIVE_TO:-} ]]; then
    cp "$RESULTS/summary.txt" "$ARCHIVE_TO/"
    [[ -f $RESULTS/bench.json ]] && cp "$RESULTS/bench.json" "$ARCHIVE_TO/"
    tar czf "$ARCHIVE_TO/logs.tar.gz" -C "$RESULTS" logs failures
  fi
  return "$status"
}

# One plug-in of build/gpu-carry/plugins: a campaign of PLUGIN_SECONDS (30) against the reference of
# every contract it claims (a new same-contract finding is a bug: the check fails), then its corpus
# of documented divergences (peers/plugin/examples/corpus: each must still show). One line per
# plug-in in logs/plugins.txt.
check_plugin() {
  local so=$1 logs=$2 name kind pairs=() rc
  name=$(basename "$so" .so)
  local bp=("$CARRY/bitparity" --plugin "$so")
  kind=$("${bp[@]}" list 2>"$logs/plugin-$name.log" | awk -v so="$so" '$2 == "-" && $3 == "plug-in" && index($0, so) { print $1 }')
  if [[ -z $kind ]]; then
    echo "$name: FAIL (does not load; see logs/plugin-$name.log)" >>"$logs/plugins.txt"
    return 0
  fi
  for contract in $("${bp[@]}" list | grep -o "\b$kind:[a-z0-9_]*" | cut -d: -f2 | sort -u); do
    pairs+=(--pair "$kind:$contract,ref:$contract")
  done
  # A shell function cannot run under timeout(1): the part's limit applies to each command.
  local limit=()
  [[ -n ${PART_TIMEOUT:-} ]] && limit=(timeout "$PART_TIMEOUT")
  "${limit[@]}" "${bp[@]}" campaign -q "${pairs[@]}" --budget-seconds "${PLUGIN_SECONDS:-30}" --seed "${PLUGIN_SEED:-1}" \
    --corpus "$logs/plugin-$name-corpus" --report "$logs/plugin-$name-report.json" >>"$logs/plugin-$name.log" 2>&1
  rc=$?
  local entries replay_rc=0
  # The example corpus's entries of this plug-in's kind.
  mapfile -t entries < <(grep -l "\"$kind:" "$ROOT"/peers/plugin/examples/corpus/*/*.json 2>/dev/null)
  if ((${#entries[@]})); then
    "${limit[@]}" "${bp[@]}" replay "${entries[@]}" >>"$logs/plugin-$name.log" 2>&1
    replay_rc=$?
  fi
  local cases
  cases=$(python3 -c 'import json,sys; print(sum(c["cases"] for c in json.load(open(sys.argv[1]))["counts"]))' \
    "$logs/plugin-$name-report.json" 2>/dev/null || echo "?")
  if ((rc == 0 && replay_rc == 0)); then
    echo "$name ($kind, $((${#pairs[@]} / 2)) contracts): PASS, $cases cases, 0 findings$( ((${#entries[@]})) && echo ", ${#entries[@]} corpus entries replayed")" >>"$logs/plugins.txt"
  else
    echo "$name ($kind): FAIL (campaign exit $rc, replay exit $replay_rc; see logs/plugin-$name.log)" >>"$logs/plugins.txt"
  fi
}

summarize() {
  python3 - "$RESULTS" <<'EOF'
import glob, json, os, re, sys
import xml.etree.ElementTree as ET

results = sys.argv[1]
logs = os.path.join(results, "logs")
passed = failed = skipped = 0
failures, findings, arrivals, device = [], [], [], ""
for path in sorted(glob.glob(os.path.join(logs, "tests-*.xml"))):
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.get("result") == "suppressed":
            continue
        name = case.get("classname") + "." + case.get("name")
        if case.find("failure") is not None:
            failed += 1
            failure = case.find("failure")
            text = (failure.get("message") or failure.text or "")
            interesting = [l for l in text.splitlines() if l.strip() and not l.startswith("Value of:")
                           and not l.startswith("  Actual:") and not l.startswith("Expected:")]
            failures.append((name, "\n".join(interesting)))
        elif case.find("skipped") is not None or case.get("result") == "skipped":
            skipped += 1
        else:
            passed += 1
for path in sorted(glob.glob(os.path.join(logs, "tests-*.log"))):
    text = open(path, errors="replace").read()
    findings += [l.strip() for l in text.splitlines() if l.startswith(("[ FINDING  ]", "[ MISMATCH ]"))]
    # Order-of-arrival contracts (atomic baselines): differences between runs are expected, shown apart.
    arrivals += [l.strip() for l in text.splitlines() if l.startswith("[ ARRIVAL  ]")]
    m = re.search(r"^device: (.*)$", text, re.M)
    device = device or (m.group(1) if m else "")
xml_count = len(glob.glob(os.path.join(logs, "tests-*.xml")))
print()
print("== bitparity GPU check" + (": " + device if device else "") + " ==")
print(f"tests (cuda_vs_ref_test shards, property programs, fault campaigns: {xml_count} result files): "
      f"passed {passed}, failed {failed}, skipped {skipped}")
for f, message in failures:
    print(f"  FAILED {f}")
    for line in message.splitlines()[:6]:
        print("    " + line[:200])
print(f"findings: {len(findings)}")
for f in findings:
    print("  " + f[:220])
if arrivals:
    print(f"order-of-arrival contracts (expected, not findings): {len(arrivals)}")
    for a in arrivals:
        print("  " + a[:220])

problems = []
if failed:
    problems.append(f"{failed} failed tests")
if findings:
    problems.append(f"{len(findings)} findings")
tests_skipped = os.environ.get("SKIP_TESTS") == "1"
if xml_count == 0 and not tests_skipped:
    problems.append("no test results")
if not tests_skipped and os.environ.get("SKIP_FAULTS") != "1" and not os.path.exists(os.path.join(logs, "tests-faults.xml")):
    problems.append("the device-fault campaigns (cuda_fault_test) left no results: see logs/tests-faults.log")
if tests_skipped:
    print("tests: not run (SKIP_TESTS=1)")
if os.environ.get("SKIP_PROPERTIES") == "1":
    print("property programs: not run (SKIP_PROPERTIES=1)")
elif not glob.glob(os.path.join(logs, "tests-properties-*.xml")):
    problems.append("the property programs left no results: gpu_property_tests was not carried "
                    "(build/gpu-carry-properties.tar.xz) or did not run; SKIP_PROPERTIES=1 leaves them out")
if not (xml_count or any(os.path.exists(os.path.join(logs, t + ".log")) for t in ("memcheck", "racecheck", "hazards"))
        or os.path.exists(os.path.join(results, "bench.json")) or os.path.exists(os.path.join(logs, "plugins.txt"))):
    problems.append("nothing ran")
timed_out_path = os.path.join(logs, "timed-out.txt")
if os.path.exists(timed_out_path):
    for name in sorted(set(open(timed_out_path).read().split())):
        problems.append(f"{name}: stopped by PART_TIMEOUT={os.environ.get('PART_TIMEOUT')} s (results incomplete)")

# A racecheck report whose kernel a closed library launched (the first host frame past the driver is
# cuBLAS's, cuDNN's, ...): not bitparity's code, which no change here can fix. Such reports are
# counted and named apart; any other report fails the check. The same libraries as the sanitizer
# campaign's rule (peers/exec/worker_process.cpp, closed_library).
LIBRARY_FRAME = re.compile(r"\bin (lib(?:cublasLt|cublas|cudnn[a-z_]*|nccl|cufft|curand|cusparse|cusolver)\.so\S*)")

def hazard_reports(text):
    """Each racecheck report: (kernel, launching library or None)."""
    reports = []
    for block in re.split(r"^=+ Error: ", text, flags=re.M)[1:]:
        if "hazard" not in block.split("\n", 1)[0]:
            continue
        kernel = re.search(r"Thread \([^)]*\) at (\S+?)\+0x", block)
        library = None
        for frame in re.findall(r"Host Frame:.*$", block, re.M):
            if "libcuda.so" in frame:
                continue
            found = LIBRARY_FRAME.search(frame)
            library = found.group(1) if found else None
            break
        reports.append((kernel.group(1) if kernel else "?", library))
    return reports

def sanitizer(tool, pattern):
    path = os.path.join(logs, tool + ".log")
    if not os.path.exists(path):
        return "not run"
    text = open(path, errors="replace").read()
    lines = re.findall(pattern, text, re.M)
    tests = re.search(r"^\[  (PASSED|FAILED)  \].*$", text, re.M)
    # "ERROR SUMMARY: 0 errors", "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
    counts = [int(n) for line in lines for n in re.findall(r"(\d+) (?:errors?|hazards?|warnings?)", line)]
    library_note = ""
    if tool == "racecheck" and any(counts):
        reports = hazard_reports(text)
        ours = [k for k, lib in reports if lib is None]
        theirs = sorted({f"{k} ({lib})" for k, lib in reports if lib is not None})
        if reports and not ours:
            counts = []  # every report is inside a library's kernel
        if theirs:
            library_note = (f" | {len(reports) - len(ours)} reports inside library kernels, not judged: "
                            + ", ".join(theirs)[:300])
    if not lines:
        problems.append(f"{tool}: no summary")
    elif any(counts):
        problems.append(f"{tool}: errors or hazards")
    # "Internal Sanitizer Error: Detected a failure to track a kernel launch. Future records might be
    # incomplete": what the tool did not record, it cannot have judged.
    if re.search(r"^=+ Internal Sanitizer Error", text, re.M):
        problems.append(f"{tool}: internal sanitizer error (its records may be incomplete)")
    if not tests or tests.group(1) != "PASSED" or re.search(r"^\[  FAILED  \]", text, re.M):
        problems.append(f"{tool}: tests did not pass")
    return "; ".join(lines[-2:] or ["no summary line (see logs/" + tool + ".log)"]) + (
        " | tests: " + tests.group(0).strip() if tests else "") + library_note
hazards_path = os.path.join(logs, "hazards.json")
if os.path.exists(hazards_path):
    report = json.load(open(hazards_path))
    cases = sum(c.get("cases", 0) for c in report.get("counts", []))
    found = report.get("findings", [])
    covered = sorted({c["pair"][0] for c in report.get("counts", []) if c.get("cases", 0) > 0})
    print(f"sanitizer campaign (racecheck, memcheck): {cases} case runs over {len(covered)} contract pairs, "
          f"findings {len(found)}")
    for f in found:
        print(f"  {f.get('kind')}: {f.get('op')} {f.get('direction', '')} {' vs '.join(f.get('pair', []))} {f.get('file', '')}"[:220])
    if found:
        problems.append(f"{len(found)} sanitizer campaign findings")
    if cases == 0:
        problems.append("sanitizer campaign: no case ran (see logs/hazards.log)")
elif os.environ.get("SKIP_HAZARDS") != "1":
    hazards_log = os.path.join(logs, "hazards.log")
    errors = [l for l in open(hazards_log, errors="replace").read().splitlines()
              if l.startswith("error")] if os.path.exists(hazards_log) else []
    problems.append("sanitizer campaign: no report (see logs/hazards.log)" + (": " + errors[-1][:240] if errors else ""))
print("compute-sanitizer memcheck: " + sanitizer("memcheck", r"^=+ (?:LEAK|ERROR) SUMMARY.*$"))
print("compute-sanitizer racecheck: " + sanitizer("racecheck", r"^=+ (?:RACECHECK|ERROR) SUMMARY.*$"))

bench_path = os.path.join(results, "bench.json")
data = None
if os.path.exists(bench_path):
    try:
        data = json.load(open(bench_path))
    except ValueError as e:
        # A kernel_bench stopped by PART_TIMEOUT leaves its JSON unfinished.
        problems.append(f"benchmarks: bench.json is not complete JSON ({e}); see logs/bench.log")
if data is not None:
    rows, launch_lines, errors = {}, [], []
    for b in data["benchmarks"]:
        name = b["name"]
        if b.get("error_occurred"):
            errors.append(f"{name}: {b.get('error_message', 'error')}")
            continue
        # <op>_<direction>/<contract>/<reference input>/ilp:<n>[/manual_time]
        m = re.match(r"([^/]+/[^/]+)/(.+?)/ilp:(\d+)(?:/|$)", name)
        if m:
            key = (m.group(1), m.group(2))
            rows.setdefault(key, {})[int(m.group(3))] = b
        elif "us_per_launch" in b:
            launch_lines.append(f"{name:46s} {b['us_per_launch']:.2f} us per launch")
        elif name.startswith("launch/"):
            launch_lines.append(f"{name:46s} {b['real_time']:.2f} {b['time_unit']} per launch + sync")
    # Grouped by kernel, in the order the program ran them.
    order = {}
    for kernel, _ in rows:
        order.setdefault(kernel, len(order))
    keys = sorted(rows, key=lambda k: order[k[0]])
    print()
    if any("TFLOP/s" not in by_ilp.get(0, {}) for by_ilp in rows.values()):
        print(f"{'kernel (default ilp)':36s} {'reference input':24s} {'us':>8s} {'GB/s':>6s} {'copy':>6s} {'%copy':>6s}"
              f" | {'ilp1':>6s} {'ilp2':>6s} {'ilp4':>6s}  (% of copy)")
    below, best_below, compute_lines = [], [], []
    for kernel, shape in keys:
        by_ilp = rows[(kernel, shape)]
        base = by_ilp.get(0)
        if not base:
            continue
        if "TFLOP/s" in base:  # compute-bound: TFLOP/s against the peak, not bytes against the copy
            others = " ".join(f"{by_ilp[i]['TFLOP/s']:6.1f}" if i in by_ilp else "     -" for i in (1, 2, 4))
            compute_lines.append(f"{kernel:36s} {shape:24s} {base['real_time']:8.1f} {base['TFLOP/s']:7.1f} "
                                 f"{base['pct_of_peak']:5.1f}% | {others}")
            continue
        pct = base["pct_of_copy"]
        others = " ".join(f"{by_ilp[i]['pct_of_copy']:5.1f}%" if i in by_ilp else "     -" for i in (1, 2, 4))
        print(f"{kernel:36s} {shape:24s} {base['real_time']:8.1f} {base['GB/s']:6.0f} {base['copy_GB/s']:6.0f} "
              f"{pct:5.1f}% | {others}")
        if pct < 80:
            below.append(f"{kernel} {shape}: {pct:.1f}%")
        if max(b["pct_of_copy"] for b in by_ilp.values()) < 80:
            best_below.append(f"{kernel} {shape}")
    if compute_lines:
        print(f"{'kernel (default ilp)':36s} {'reference input':24s} {'us':>8s} {'TFLOP/s':>7s} {'%peak':>6s}"
              f" | {'ilp1':>6s} {'ilp2':>6s} {'ilp4':>6s}  (TFLOP/s; peak: dense bf16, 989)")
        for line in compute_lines:
            print(line)
    for line in launch_lines + errors:
        print(line)
    rows = {k: v for k, v in rows.items() if "TFLOP/s" not in v.get(0, {})}
    if not any(0 in by_ilp for by_ilp in rows.values()):
        print("floor (80 % of copy): no memory-bound kernel measured at the default ilp")
    else:
        print("floor (80 % of copy) with the shipped default ilp: " + ("met" if not below else
              f"NOT met at {len(below)} of {len(rows)}: " + "; ".join(below)))
        print("floor with the best ilp per shape: " + ("met" if not best_below else
              f"NOT met at {len(best_below)}: " + "; ".join(best_below)))
else:
    print("benchmarks: not run")
plugins = os.path.join(logs, "plugins.txt")
staged = sorted(glob.glob(os.path.join(os.environ.get("CARRY", ""), "plugins", "*.so")))
if staged and os.environ.get("SKIP_PLUGINS") != "1" and not os.path.exists(plugins):
    problems.append(f"{len(staged)} staged plug-ins and no plug-in results")
if os.path.exists(plugins):
    lines = [l.strip() for l in open(plugins) if l.strip()]
    print("plug-ins against the reference of their contracts:")
    for l in lines:
        print("  " + l)
    if any(": FAIL" in l for l in lines):
        problems.append("a plug-in failed its check")
timing = os.path.join(logs, "timing.txt")
if os.path.exists(timing):
    print("time: " + "; ".join(l.strip() for l in open(timing)))
print("verdict: " + ("PASS" if not problems else "FAIL (" + "; ".join(problems) + ")"))
sys.exit(1 if problems else 0)
EOF
}

case ${1:-all} in
  stage) stage ;;
  run) run ;;
  unpack) unpack ;;
  all) [[ -x $CARRY/cuda_vs_ref_test && -x $CARRY/kernel_bench ]] || stage || exit 1; run ;;
  summarize) summarize ;;
  *) echo "usage: $0 [stage|unpack|run|summarize]" >&2; exit 2 ;;
esac
