#!/usr/bin/env python3
"""Records eager PyTorch's own outputs of cross_entropy (spec OP-8) as bitparity-case/1 documents.

Runs F.cross_entropy(logits, labels, reduction='none', ignore_index=...) on fp32 [N, V] logits on a
CUDA device, and its autograd backward for a given upstream g ([N] fp32), and writes one JSON
document per line: the case, the contract it exercises (megatron_eager) and the outputs PyTorch
produced. bitparity's `peer_replay_test` replays every line against ref:megatron_eager and requires
identical bits.

The vocabulary sizes cover every kernel PyTorch 2.11's softmax dispatch picks (warp up to 2048,
Reg up to 9216, Smem for V % 4 == 0 below 12256, ILP otherwise; backward warp up to 1024, Smem
below 12272) with each boundary's neighbours, 32000/32001 (every ILP row shift) and GLM-4.5's
151552, whose few rows keep the file under ~15 MB. Rows mix GLM-like bf16-valued logits, -Inf
(masked) logits, rows where one logit dominates (S == 1: loss -0.0), ties, huge magnitudes, rows
of -Inf only, NaN and +Inf (not verified by the spec's probes: recorded to settle them), with
labels at 0, V - 1, the argmax and ignore_index, and g with +-0, NaN, Inf and subnormals.

    python3 peers/torch/record_cross_entropy.py OUT.jsonl [--seed 1]
    python3 peers/torch/record_cross_entropy.py --bench      # eager fwd and fwd+bwd at 8192 x 151552
    python3 peers/torch/record_cross_entropy.py --selftest   # the stdlib parts, no torch needed
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_routing as rr  # noqa: E402  (the case format, hex encoding and torch helpers)

CE_SOURCE = ("PyTorch 2.11 F.cross_entropy(reduction='none'): SoftMax.cu log_softmax (per-V kernel) + "
             "nll_loss; Megatron-LM f5b5555ec6 (#5335) language_module.py; spec OP-8, cross-entropy-order.md")
DEFAULT_IGNORE = -100
FAMILIES = ("glm", "neg_inf", "dominant", "ties", "moderate", "large", "all_neg_inf", "special", "small_int")
# V: the warp kernel's widths (lanes < 32, one lane, IT > 1), every dispatch boundary with its
# neighbours, and the vocabularies of real models.
SMALL_VS = [1, 2, 3, 5, 8, 31, 32, 33, 100, 1000, 1023, 1024, 1025, 2047, 2048, 2049]
MID_VS = [4096, 9215, 9216, 9217, 9219, 9220, 12252, 12255, 12256, 12257, 12271, 12272, 12273, 32000, 32001]
BIG_V = 151552
SMALL_ROWS = (1, 5, 17, 64)
SMALL_ELEMENTS = 4096  # elements of a small-V case at most
G_SPECIALS = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e-40, -3e-39, 1.0 / 4096, 3e38]


def plan():
    """(V, rows of the forward, rows of the backward, ignore_index) per configuration."""
    out = []

    def add(V, n_fwd, n_bwd, ignore=None):
        out.append({"index": len(out), "V": V, "N": n_fwd, "N_bwd": n_bwd, "ignore_index": ignore})

    for V in SMALL_VS:
        for k, n in enumerate(SMALL_ROWS):
            n = min(n, max(1, SMALL_ELEMENTS // V))
            ignore = (None, DEFAULT_IGNORE, None, min(1, V - 1))[k]  # a class itself ignored once
            add(V, n, n, ignore)
    add(1, 0, 0)  # no rows
    add(8, 0, 0)
    for V in MID_VS:
        shifts = V % 4 != 0 and V > 9216  # the ILP kernel: every row shift needs 4 rows
        add(V, 4 if shifts else 2, 1)
    add(BIG_V, 1, 1)
    return out


def estimated_bytes(p):
    """JSON text of the case's two documents: 8 hex digits per fp32, 16 per label."""
    V = p["V"]
    fwd = p["N"] * (8 * V + 16 + 8)
    bwd = p["N_bwd"] * (16 * V + 16 + 8)
    return fwd + bwd + 2000


def family_of(p, row):
    return FAMILIES[(row + p["index"]) % len(FAMILIES)]


def logits_row(rng, V, family):
    np = rr.np
    scale = rng.choice([0.5, 2.0, 6.0, 15.0])
    offset = rng.normal() * 4.0
    glm = rr.np.asarray(rr.torch.from_numpy(scale * rng.normal(size=V) + offset).to(rr.torch.bfloat16)
                        .to(rr.torch.float64).numpy())
    if family == "glm":
        return glm
    if family == "neg_inf":
        v = glm.copy()
        v[rng.random(V) < 0.125] = -np.inf
        v[rng.integers(0, V)] = offset
        return v
    if family == "dominant":
        v = offset - 120.0 - 64.0 * rng.random(V)
        v[rng.random(V) < 0.2] = -np.inf
        v[rng.integers(0, V)] = offset
        return v
    if family == "ties":
        return np.full(V, offset) if rng.random() < 0.5 else rng.integers(0, 3, V).astype(np.float64)
    if family == "large":
        v = rng.uniform(1, 2, V) * np.exp2(rng.integers(100, 127, V)) * rng.choice([-1.0, 1.0], V)
        moderate, pick = rr.draw(rng, (V,), "moderate"), rng.random(V) < 0.25
        v[pick] = moderate[pick]
        v[rng.random(V) < 0.06] = 3.4028234663852886e38 * rng.choice([-1.0, 1.0])
        return v
    if family == "all_neg_inf":
        return np.full(V, -np.inf)
    if family == "special":
        v = rr.draw(rng, (V,), "moderate")
        pick = rng.random(V) < 0.06
        v[pick] = rng.choice([np.nan, np.inf], int(pick.sum()))
        return v
    if family == "small_int":
        return rng.integers(-8, 9, V).astype(np.float64)
    return rr.draw(rng, (V,), "moderate")


def inputs_of(p, seed):
    np = rr.np
    rng = rr.rng_for(seed, 808, p["index"])
    V, N = p["V"], p["N"]
    ignore = DEFAULT_IGNORE if p["ignore_index"] is None else p["ignore_index"]
    x = np.zeros((N, V))
    labels = np.zeros(N, dtype=np.int64)
    for i in range(N):
        x[i] = logits_row(rng, V, family_of(p, i))
        finite = np.where(np.isnan(x[i]), -np.inf, x[i])
        choice = (i + p["index"]) % 5
        labels[i] = (int(np.argmax(finite)), 0, V - 1, ignore, int(rng.integers(0, V)))[choice]
    g = rng.uniform(-1, 1, N) * np.exp2(rng.integers(-12, 1, N))
    for i in range(N):
        if (i + p["index"]) % 3 == 0:
            g[i] = G_SPECIALS[(i // 3 + p["index"]) % len(G_SPECIALS)]
    return (rr.on_device(x, "fp32").contiguous(), rr.torch.from_numpy(labels).to(rr.DEVICE),
            rr.on_device(g, "fp32"))


def eager_loss(x, labels, ignore):
    """Megatron's eager loss: F.cross_entropy(reduction='none') on the fp32 [N, V] logits."""
    return rr.F.cross_entropy(x, labels, reduction="none", ignore_index=ignore)


def eager_backward(x, labels, g, ignore):
    """The loss and d_logits of autograd through eager_loss for the upstream g. Returns (the
    backward's own loss, d_logits)."""
    xb = x.clone().contiguous().requires_grad_(True)  # a fresh, aligned allocation like the forward's
    lb = eager_loss(xb, labels, ignore)
    if x.shape[0]:  # an empty batch has no backward to run: its gradient is the empty [0, V]
        lb.backward(g)
    rr.sync()
    dl = xb.grad if xb.grad is not None else rr.torch.zeros_like(xb)
    return lb.detach(), dl


def docs_of(p, seed, notes):
    x, labels, g = inputs_of(p, seed)
    ignore = DEFAULT_IGNORE if p["ignore_index"] is None else p["ignore_index"]
    attrs = {} if p["ignore_index"] is None else {"ignore_index": p["ignore_index"]}
    loss = eager_loss(x, labels, ignore)
    docs = [("megatron_eager", "fwd", attrs, {"logits": rr.tensor_json(x), "labels": rr.tensor_json(labels)},
             {"loss": rr.tensor_json(loss)})]
    nb = p["N_bwd"]
    lb, dl = eager_backward(x[:nb], labels[:nb], g[:nb], ignore)
    if nb and not rr.same_bits(lb, loss[:nb]):
        rr.note(notes, "cross_entropy: the backward's own forward differs from the forward's first rows")
    docs.append(("megatron_eager", "bwd", attrs,
                 {"logits": rr.tensor_json(x[:nb]), "labels": rr.tensor_json(labels[:nb]),
                  "g": rr.tensor_json(g[:nb])},
                 {"d_logits": rr.tensor_json(dl)}))
    neg_zero = int((loss == 0).logical_and(rr.torch.signbit(loss)).sum())
    rr.note(notes, "cross_entropy: losses that are -0.0 (S == 1 at the label)", neg_zero)
    return docs


def record(args):
    rr.load_torch()
    rr.torch.manual_seed(args.seed)
    notes, counts = {}, {}
    total = nonzero = 0
    tmp = args.out + ".tmp"  # the file appears only when every case was recorded
    try:
        with open(tmp, "w") as f:
            for p in plan():
                for contract, direction, attrs, inputs, outputs in docs_of(p, args.seed, notes):
                    prov = rr.provenance(contract, args.seed, p["index"])
                    prov["source"] = CE_SOURCE
                    doc = rr.case_doc("cross_entropy", direction, attrs, inputs, outputs, prov)
                    f.write(json.dumps(doc) + "\n")
                    key = "cross_entropy %s %s" % (direction, contract)
                    counts[key] = counts.get(key, 0) + 1
                    total += 1
                    nonzero += any(set(t["hex"]) - {"0"} for t in outputs.values())
        os.replace(tmp, args.out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    print("recorded %d cases (%.1f MB) with torch %s on %s to %s"
          % (total, os.path.getsize(args.out) / 1e6, rr.torch.__version__, rr.device_name(), args.out))
    for key in sorted(counts):
        print("  %-36s %d" % (key, counts[key]))
    for what in sorted(notes):
        print("NOTE %s%s" % (what, "" if notes[what] is None else ": %d" % notes[what]))
    if nonzero * 2 <= total:
        print("FAIL: most recorded outputs are all zero (%d of %d have a non-zero bit)" % (nonzero, total))
        return 1
    return 0


BENCH_N, BENCH_V = 8192, BIG_V  # the benchmark shape


def bench(args):
    """Eager F.cross_entropy at 8192 x 151552 fp32: the forward (4 bytes read a logit) and forward +
    backward (the forward, then 8 bytes a logit: logits read, d_logits written; eager also reads
    and writes its saved log-probabilities) beside device-to-device copies of the same bytes, timed
    as record_routing.py times (CUDA events)."""
    rr.load_torch()
    torch, F = rr.torch, rr.F
    x = torch.randn(BENCH_N, BENCH_V, device=rr.DEVICE) * 2.5
    t = torch.randint(0, BENCH_V, (BENCH_N,), device=rr.DEVICE)
    g = torch.full((BENCH_N,), 1.0 / 4096, device=rr.DEVICE)
    xr = x.clone().requires_grad_(True)

    def fwd_bwd():
        xr.grad = None
        F.cross_entropy(xr, t, reduction="none").backward(g)

    fwd_bytes = 4 * BENCH_N * BENCH_V
    rows = []
    src = torch.empty(fwd_bytes // 2, dtype=torch.uint8, device=rr.DEVICE)
    dst = torch.empty_like(src)
    rows.append(("d2d copy of the forward's bytes (4/logit)", rr.timed_us(lambda: dst.copy_(src), 20, 3), fwd_bytes))
    rows.append(("F.cross_entropy forward, fp32", rr.timed_us(lambda: F.cross_entropy(x, t, reduction="none"), 20, 3),
                 fwd_bytes))
    del src, dst
    torch.cuda.empty_cache()
    both = 3 * fwd_bytes  # 4 bytes a logit forward, 8 backward
    src = torch.empty(both // 2, dtype=torch.uint8, device=rr.DEVICE)
    dst = torch.empty_like(src)
    rows.append(("d2d copy of fwd+bwd's bytes (12/logit)", rr.timed_us(lambda: dst.copy_(src), 20, 3), both))
    rows.append(("F.cross_entropy forward + backward, fp32", rr.timed_us(fwd_bwd, 20, 3), both))
    print("eager torch %s on %s, N = %d, V = %d" % (torch.__version__, rr.device_name(), BENCH_N, BENCH_V))
    print("%-44s %10s %9s %8s %8s" % ("op", "us", "MB", "GB/s", "% copy"))
    copy = None
    for name, us, b in rows:
        gbs = b / us / 1e3
        copy = gbs if name.startswith("d2d") else copy
        print("%-44s %10.1f %9.1f %8.1f %7.1f%%" % (name, us, b / 1e6, gbs, 100 * gbs / copy))
    return 0


def selftest():
    p = plan()
    assert 2 * len(p) >= 100, len(p)  # peer_replay's floor: two documents a configuration
    Vs = {q["V"] for q in p}
    for b in (1024, 2048, 9216, 12256, 12272):  # every dispatch boundary and its neighbours
        assert {b - 1, b, b + 1} <= Vs, b
    assert BIG_V in Vs and 32001 in Vs and 0 in {q["N"] for q in p}
    assert any(q["V"] == 32001 and q["N"] >= 4 for q in p)  # the four ILP row shifts
    assert any(q["ignore_index"] not in (None, DEFAULT_IGNORE) for q in p)
    for q in p:
        assert 0 <= q["N_bwd"] <= q["N"]
    total = sum(estimated_bytes(q) for q in p)
    assert total < 15e6, total
    covered = {FAMILIES[(r + q["index"]) % len(FAMILIES)] for q in p for r in range(q["N"])}
    assert covered == set(FAMILIES), covered
    print("selftest passed (%d configurations, about %.1f MB)" % (len(p), total / 1e6))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", help="the .jsonl file to write (record mode)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--selftest", action="store_true", help="test the stdlib parts (no torch)")
    ap.add_argument("--bench", action="store_true", help="print eager timings; writes no file")
    args = ap.parse_args()
    if args.selftest:
        return selftest()
    if args.bench:
        return bench(args)
    if not args.out:
        ap.error("give OUT.jsonl, or --selftest")
    return record(args)


if __name__ == "__main__":
    sys.exit(main())
