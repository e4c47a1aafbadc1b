#!/usr/bin/env python3
"""Reference mutants: how many deliberate mistakes in the reference do the CPU tests catch, and how.

A planted bug (testing/planted_bugs.cpp) is a wrong *backend* that a campaign against the reference
must find. A reference mutant is the opposite: one deliberate mistake in the reference itself, aimed
at the rule its op exists for (an order, a rounding, an edge value, a dispatch boundary). The
reference is every backend's oracle, so a reference mistake that no test notices makes every GPU
kernel that agrees with it look right. Each mutant is applied to a clean checkout of HEAD (a git
worktree), built for the CPU, and judged by `ctest -L cpu`:

  caught      a property, hand-derived case or corpus entry of bitparity's own failed;
  peer only   only the replay of recorded eager PyTorch outputs failed (PeerReplayTest): the
              contract's behaviour is pinned by a recording, not by a property that states it;
  missed      every test passed.

Usage (from the repository root; a CPU build takes a while the first time, then about 4 minutes a
mutant on 2 cores):

  testing/reference_mutants.py --list
  testing/reference_mutants.py                       # every mutant
  testing/reference_mutants.py --only router_tie_highest unpermute_dprobs_sequential
  testing/reference_mutants.py --resume              # skip the mutants already in --out

Each mutant's record is appended to --out (JSON lines) as soon as it is judged, and the worktree is
restored after every mutant (also when interrupted), so an interrupted run loses at most the mutant
in progress. Exit status: 0 when no mutant is missed (with --strict: none is peer only either), 1
otherwise, 2 for a usage error or a mutant whose text no longer appears in its file (the mutant
list must follow the code).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

# (id, file, text, replacement, the rule it breaks). `text` must occur exactly once in `file`.
MUTANTS = [
    ("router_tie_highest", "reference/router_topk.cpp", "    return a < b;\n", "    return a > b;\n",
     "router_topk: ties at the top-k boundary to the highest expert index instead of the lowest (rule 9)"),
    ("router_fp32_denominator", "reference/router_topk.cpp",
     "  std::vector<double> g64(G.begin(), G.end());\n  return static_cast<float>(rule7_row_sum_f64(g64, rows)) + kRouterEpsilon;",
     "  return torch_row_sum(G, rows) + kRouterEpsilon;",
     "router_topk: the aligned denominator summed in fp32 instead of fp64 (OP-1)"),
    ("router_bwd_one_rounding", "reference/router_topk.cpp", "bf(bf(a[j]) + bf(dD))", "bf(a[j] + dD)",
     "router_topk backward: bf16 a + dD rounded once instead of three eager roundings (B4d)"),
    ("router_bwd_no_scatter_zero", "reference/router_topk.cpp",
     "r.bias ? scatter_add_onto_zero(r.dl, dG[j]) : dG[j]", "dG[j]",
     "router_topk backward: the gather path's scatter_add_ onto +0 dropped (B5)"),
    ("permute_bwd_sequential_fp32", "reference/permute.cpp",
     "order == Order::kRule7 ? torch_slot_sum(x, H, r.tokens)", "order == Order::kRule7 ? sequential_sum(x, DType::kFP32)",
     "permute backward: slots summed left to right in fp32 instead of rule 7's four accumulators"),
    ("unpermute_prob_product_rounded", "reference/unpermute.cpp",
     "if (probs) x[j] = x[j] * probs->f32(t * r.experts + experts[j]);",
     "if (probs) x[j] = round_to(dt, x[j] * probs->f32(t * r.experts + experts[j]));",
     "unpermute forward: each bf16 x fp32 product rounded to the dtype before the sum (OP-3)"),
    ("unpermute_dprobs_sequential", "reference/unpermute.cpp",
     "H == 1 ? products[0] : torch_row_sum(products, N)", "H == 1 ? products[0] : sequential_sum(products, DType::kFP32)",
     "unpermute backward: d_probs summed left to right instead of rule 7's row sum over H"),
    ("unpermute_bwd_keeps_minus_zero", "reference/unpermute.cpp",
     "const float g = 0.0f + d_out.f32(t * H + h);", "const float g = d_out.f32(t * H + h);",
     "unpermute backward: F.embedding's accumulation from +0 dropped (a -0 gradient kept)"),
    ("embedding_width_boundary", "reference/embedding.cpp",
     "if (H > ops::kEmbeddingSmallStrideMax) return", "if (H >= ops::kEmbeddingSmallStrideMax) return",
     "embedding backward (megatron_eager): a rounding after every addition from width 32 instead of above it"),
    ("embedding_warp_boundary", "reference/embedding.cpp",
     "if (H > 1 || n < ops::kEmbeddingWarp) return", "if (H > 1 || n <= ops::kEmbeddingWarp) return",
     "embedding backward (megatron_eager), width 1: 32 duplicates summed in order instead of by the warp tree"),
    ("embedding_feature_single_rounding", "reference/embedding.cpp",
     "acc = round_to(dt, acc + round_to(dt, s));", "acc = round_to(dt, acc + s);",
     "embedding backward (baseline): a block's sum added to the row without its own rounding"),
    ("ce_ilp_no_shift", "reference/cross_entropy.cpp", "(row_index % 4) * (V % 4) % 4", "0",
     "cross_entropy (megatron_eager): the ilp kernel's per-row misalignment ignored"),
    ("ce_reg_boundary", "reference/cross_entropy.cpp", "if (p.per_thread < 10) p.kernel", "if (p.per_thread <= 10) p.kernel",
     "cross_entropy (megatron_eager): the register kernel up to 10 elements a thread instead of below 10"),
    ("ce_bwd_G_minus_zero", "reference/cross_entropy.cpp", "const float G = ignored ? 0.0f : 0.0f + gO_t;",
     "const float G = ignored ? 0.0f : gO_t;",
     "cross_entropy backward: the row sum's +0 start dropped (a -0 G kept)"),
    ("ce_fused_segments_sequential", "reference/cross_entropy.cpp", "  halve(segments, used_segments);\n",
     "  for (size_t q = 1; q < used_segments; ++q) segments[0] = combine(segments[0], segments[q]);\n",
     "cross_entropy (fused): the 8 segments combined left to right instead of by the halving tree"),
    ("adamw_denominator_sqrt_of_ratio", "reference/adamw_step.cpp",
     "std::sqrt(v) / bc2_sqrt + eps", "std::sqrt(v / bc2) + eps",
     "adamw_step: sqrt(v / bc2) instead of sqrt(v) / sqrt(bc2)"),
    ("grad_finalize_sign_of_zero", "reference/grad_finalize.cpp",
     "(0.0f < offset) - (offset < 0.0f)", "(0.0f <= offset) - (offset < 0.0f)",
     "grad_finalize (megatron_r013): sign(0) = 1 instead of torch.sign's 0"),
    ("gemm_zero_chunk_against_inf", "reference/gemm.cpp",
     "if (((fa & kZero) && !(fb & kSpecial)) || ((fb & kZero) && !(fa & kSpecial))) continue;",
     "if ((fa & kZero) || (fb & kZero)) continue;",
     "gemm (fixed_order): a zero chunk skipped even against an Inf or NaN (0 x Inf lost)"),
    ("gemm_kept_bits", "reference/gemm.cpp", "constexpr int kKeptBits = 25;", "constexpr int kKeptBits = 24;",
     "gemm (fixed_order): the MMA step keeps 24 bits below the largest term instead of 25 (rule 13)"),
    ("expert_mlp_pad_17", "ops/expert_mlp.h", "M > 0 && M < kExpertPadBelow ?", "M > 0 && M <= kExpertPadBelow ?",
     "expert_mlp: 17 rows padded to 32 as well (Megatron pads 0 < M < 17)"),
    ("fanout_order", "reference/fanout_grad.cpp",
     'TensorMap glm45(const Case& c, const ContractInfo&) { return fanout_grad(c, "g_shared", "g_router"); }',
     'TensorMap glm45(const Case& c, const ContractInfo&) { return fanout_grad(c, "g_router", "g_shared"); }',
     "fanout_grad (glm45): dispatcher + router first, DSv4's order"),
]

# Test families that read no reference arithmetic (the command line, the dashboard, plug-in and
# worker plumbing, file formats, the libdevice tables): left out by default to halve the time.
DEFAULT_EXCLUDE = ("ExecCampaign|premerge_recipe|Plugin|SafetensorsCaseTest|ExecBackend|HostileTest|CliTest|Dashboard|"
                   "Bench|torch_worker|torch_peer|Ex2Table|DeviceSample|DevicePowf|DeviceMath|Abi|toy|ToyOp")
PEER_TESTS = re.compile(r"^PeerReplayTest\.")


def run(cmd, cwd, **kw):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, **kw)


def failed_tests(ctest_stdout):
    tail = ctest_stdout[ctest_stdout.find("tests failed out of"):]
    found = re.findall(r"^\s*\d+ - (\S+).*\((\w[^()]*)\)\s*$", tail, re.M)
    return [name + ("" if why == "Failed" else f" [{why}]") for name, why in found if why != "Skipped"]


def verdict(failed):
    if not failed:
        return "missed"
    return "peer only" if all(PEER_TESTS.match(f) for f in failed) else "caught"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("--only", nargs="+", metavar="ID", help="run these mutants only")
    ap.add_argument("--worktree", default="build/mutants/src", help="the clean checkout of HEAD to mutate (created)")
    ap.add_argument("--out", default="build/mutants/results.jsonl", help="JSON lines, one record a mutant (appended)")
    ap.add_argument("--resume", action="store_true", help="skip the mutants already recorded in --out")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="build and ctest jobs")
    ap.add_argument("--exclude", default=DEFAULT_EXCLUDE, help="ctest -E regex of tests left out ('' for none)")
    ap.add_argument("--strict", action="store_true", help="exit 1 also when a mutant is caught by the peer replay only")
    args = ap.parse_args()

    if args.list:
        for mid, path, _, _, what in MUTANTS:
            print(f"{mid:34} {path:30} {what}")
        return 0
    known = {m[0] for m in MUTANTS}
    unknown = set(args.only or []) - known
    if unknown:
        print(f"reference_mutants: unknown mutant(s): {', '.join(sorted(unknown))} (--list names them)", file=sys.stderr)
        return 2

    root = run(["git", "rev-parse", "--show-toplevel"], ".").stdout.strip()
    if not root:
        print("reference_mutants: run it inside the bitparity repository", file=sys.stderr)
        return 2
    worktree = os.path.abspath(os.path.join(root, args.worktree))
    out_path = os.path.abspath(os.path.join(root, args.out))
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    head = run(["git", "rev-parse", "HEAD"], root).stdout.strip()
    if not os.path.isdir(worktree):
        r = run(["git", "worktree", "add", "--detach", worktree, head], root)
        if r.returncode != 0:
            print(f"reference_mutants: git worktree add failed:\n{r.stderr}", file=sys.stderr)
            return 2
    else:
        if run(["git", "status", "--porcelain", "--untracked-files=no"], worktree).stdout.strip():
            print(f"reference_mutants: {worktree} has changes; remove it or restore it (git checkout -- .)", file=sys.stderr)
            return 2
        run(["git", "checkout", "--detach", "-q", head], worktree)

    # Every mutant must still apply: a mutant whose text moved is a stale list, not a result.
    chosen = [m for m in MUTANTS if not args.only or m[0] in args.only]
    stale = [m[0] for m in chosen if open(os.path.join(worktree, m[1])).read().count(m[2]) != 1]
    if stale:
        print(f"reference_mutants: these mutants no longer apply to {head[:12]} (their text is not in the file "
              f"exactly once): {', '.join(stale)}", file=sys.stderr)
        return 2
    done = set()
    if args.resume and os.path.exists(out_path):
        for line in open(out_path):
            rec = json.loads(line)
            if rec.get("commit") == head and "verdict" in rec:
                done.add(rec["id"])

    build = os.path.join(worktree, "build")
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        r = run(["cmake", "-S", ".", "-B", "build", "-G", "Ninja", "-DBITPARITY_CUDA=OFF", "-DBITPARITY_BENCH=OFF",
                 "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], worktree)
        if r.returncode != 0:
            print(r.stdout[-3000:] + r.stderr[-3000:], file=sys.stderr)
            return 2
    print(f"reference_mutants: building the unmutated tree at {head[:12]} in {build}", flush=True)
    if run(["cmake", "--build", "build", "-j", str(args.jobs)], worktree).returncode != 0:
        print("reference_mutants: the unmutated tree does not build", file=sys.stderr)
        return 2

    verdicts = {}
    todo = [m for m in chosen if m[0] not in done]
    for n, (mid, path, text, replacement, what) in enumerate(todo, 1):
        file = os.path.join(worktree, path)
        original = open(file).read()
        rec = {"id": mid, "commit": head, "what": what}
        start = time.time()
        try:
            with open(file, "w") as f:
                f.write(original.replace(text, replacement))
            b = run(["cmake", "--build", "build", "-j", str(args.jobs)], worktree)
            if b.returncode != 0:
                rec["verdict"] = "does not build"
                rec["build_log"] = b.stdout[-2000:]
            else:
                cmd = ["ctest", "--test-dir", "build", "-L", "cpu", "-j", str(args.jobs), "--timeout", "600"]
                if args.exclude:
                    cmd += ["-E", args.exclude]
                t = run(cmd, worktree)
                rec["failed"] = failed_tests(t.stdout)
                rec["verdict"] = verdict(rec["failed"])
        finally:
            with open(file, "w") as f:
                f.write(original)
        rec["seconds"] = round(time.time() - start)
        with open(out_path, "a") as o:
            o.write(json.dumps(rec) + "\n")
        verdicts[mid] = rec["verdict"]
        caught_by = ", ".join(rec.get("failed", [])[:4]) + (" ..." if len(rec.get("failed", [])) > 4 else "")
        print(f"[{n}/{len(todo)}] {mid}: {rec['verdict']} ({rec['seconds']} s) {caught_by}", flush=True)
    # Rebuild the unmutated tree, so that the worktree's binaries match its sources.
    run(["cmake", "--build", "build", "-j", str(args.jobs)], worktree)

    counts = {v: list(verdicts.values()).count(v) for v in ("caught", "peer only", "missed", "does not build")}
    print("reference_mutants: " + ", ".join(f"{c} {v}" for v, c in counts.items()) + f" (records in {out_path})")
    if counts["missed"] or counts["does not build"] or (args.strict and counts["peer only"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
