#!/usr/bin/env python3
"""Records eager PyTorch's own outputs of the embedding lookup (spec OP-9) as bitparity-case/1
documents.

Runs Megatron's VocabParallelEmbedding arithmetic on a CUDA device and writes one JSON document per
line: the case, the contract it exercises (provenance.contract), and the outputs PyTorch produced.
bitparity's `peer_replay_test` replays every line against ref:<contract> and requires identical bits.

- megatron_eager: `weight[masked_input]` (the bit-exact path of #5335); its backward is autograd of
  index, i.e. index_put_(accumulate=True): per-step rounding above width 32, fp32 once up to it,
  the stride-1 kernel's warp tree at width 1.
- baseline: `F.embedding(masked_input, weight)`; its backward embedding_dense_backward: 32-position
  chunks each rounded to the dtype up to 3072 positions, partial sums of 10 in fp32 above.
With vocab_start (TP > 1): ids outside [vocab_start, vocab_start + V) are masked (masked_input = 0,
the output row zeroed in place), as Megatron does.

    python3 peers/torch/record_embedding.py OUT.jsonl [--seed 1]
    python3 peers/torch/record_embedding.py --bench       # eager timings at P 16384, H 4096, V 151552
    python3 peers/torch/record_embedding.py --selftest    # the stdlib parts, no torch needed
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_routing as rr  # noqa: E402  (the case format, hex encoding and torch helpers)

SOURCE = {
    "megatron_eager": "Megatron-LM #5335 tensor_parallel/layers.py VocabParallelEmbedding, weight[masked_input] "
                      "(autograd of index: index_put_ accumulate)",
    "baseline": "Megatron-LM VocabParallelEmbedding, F.embedding(masked_input, weight) (embedding_dense_backward)",
}
MODEL_V = 151552
# (P, H, V): the width-32 boundary (32, 33) and width 1 meet heavy duplicates at several V; P
# around F.embedding's 3072-position switch and its 32-position chunks.
SHAPES = [(0, 8, 5), (1, 1, 1), (5, 1, 3), (40, 1, 2), (100, 1, 7), (300, 1, 1), (1000, 1, 50),
          (4096, 1, 9), (1, 4096, 3), (7, 2, 3), (31, 3, 4), (33, 8, 2), (64, 16, 5), (100, 31, 9),
          (100, 32, 1), (100, 32, 7), (100, 33, 1), (100, 33, 7), (300, 32, 40), (300, 33, 40),
          (65, 64, 3), (200, 128, 11), (40, 4096, 2), (3072, 8, 30), (3073, 8, 30), (3100, 33, 64),
          (5000, 1, MODEL_V), (500, 64, 1000)]
# Shapes of this many elements (ids by width, or the table) meet one duplicate style, and their
# forward (a row copy, the same for both contracts) is recorded once: the file stays near 10 MB.
LARGE = 1 << 12
DUPS = ("all_same", "few", "zipf", "uniform")
FAMILIES = ("moderate", "mixed", "drift")
DTYPES = ("bf16", "bf16", "fp16", "fp32")


def plan():
    """Every shape meets each duplicate style; families, dtypes and partitions rotate."""
    out = []
    for i, (shape, dups) in enumerate((s, d) for s in SHAPES for d in DUPS):
        P, H, V = shape
        if (P * H >= LARGE or V * H >= LARGE) and dups != "zipf":
            continue  # the large shapes once
        p = {"index": i, "P": P, "H": H, "V": V, "dups": dups, "family": FAMILIES[i % len(FAMILIES)],
             "dt": DTYPES[(i // len(FAMILIES)) % len(DTYPES)], "attrs": {}}
        if i % 5 == 4 and V > 1:  # a partition of a larger vocabulary, some ids outside it
            p["vocab_start"] = 3 * V
        out.append(p)
    return out


def local_ids(p, seed):
    """P ids in [0, V) in the plan's duplicate style (pure Python: the self-test checks them)."""
    rnd = random.Random("%d/%d" % (seed, p["index"]))
    P, V = p["P"], p["V"]
    if p["dups"] == "all_same":
        v = rnd.randrange(V)
        return [v] * P
    if p["dups"] == "few":
        pool = [rnd.randrange(V) for _ in range(rnd.randint(1, 4))]
        return [rnd.choice(pool) for _ in range(P)]
    if p["dups"] == "zipf":  # rank r with probability about 1/(r+1), scattered by an odd stride
        return [(min(V - 1, int(V ** rnd.random()) - 1) * 40503 + 7) % V for _ in range(P)]
    return [rnd.randrange(V) for _ in range(P)]


def global_ids(p, seed):
    ids = local_ids(p, seed)
    start = p.get("vocab_start")
    if start is None:
        return ids
    rnd = random.Random("mask/%d/%d" % (seed, p["index"]))
    out = []
    for i, v in enumerate(ids):
        out.append(v + start if i % 3 else rnd.choice([start - 1, start + p["V"], 0, start + v]))
    return out


def values(p, seed, shape):
    rng = rr.rng_for(seed, 901, p["index"])
    if p["family"] == "drift":  # one large value per row among small ones: per-step rounding drifts
        v = rr.draw(rng, shape, "moderate") * 2.0 ** -9
        if len(shape) == 2 and shape[0] > 0:
            v[0] = rr.draw(rng, (shape[1],), "moderate")
        return v
    return rr.draw(rng, shape, p["family"])


def megatron_lookup(weight, ids, vocab_start, use_index):
    """VocabParallelEmbedding.forward: the mask, masked_input, the lookup, the zeroed rows."""
    torch = rr.torch
    if vocab_start is None:
        masked, mask = ids, None
    else:
        mask = (ids < vocab_start) | (ids >= vocab_start + weight.shape[0])
        masked = ids.clone() - vocab_start
        masked[mask] = 0
    out = weight[masked] if use_index else torch.nn.functional.embedding(masked, weight)
    if mask is not None:
        out[mask, :] = 0.0
    return out


def documents(p, seed, notes):
    torch = rr.torch
    ids = torch.tensor(global_ids(p, seed), dtype=torch.int64, device=rr.DEVICE)
    weight = rr.on_device(values(p, seed + 7, (p["V"], p["H"])), p["dt"])
    g = rr.on_device(values(p, seed, (p["P"], p["H"])), p["dt"])
    start = p.get("vocab_start")
    attrs = {} if start is None else {"vocab_start": start}
    docs = []
    d_weights = {}
    for contract, use_index in (("megatron_eager", True), ("baseline", False)):
        out = megatron_lookup(weight, ids, start, use_index)
        if use_index or (p["P"] * p["H"] < LARGE and p["V"] * p["H"] < LARGE):
            docs.append((contract, "fwd", attrs, {"weight": rr.tensor_json(weight), "ids": rr.tensor_json(ids)},
                         {"out": rr.tensor_json(out)}))
        w = weight.detach().clone().requires_grad_(True)
        megatron_lookup(w, ids, start, use_index).backward(g)
        d_weights[contract] = w.grad
        docs.append((contract, "bwd", dict(attrs, num_embeddings=p["V"]),
                     {"ids": rr.tensor_json(ids), "g": rr.tensor_json(g)}, {"d_weight": rr.tensor_json(w.grad)}))
    if not rr.same_bits(d_weights["megatron_eager"], d_weights["baseline"]):
        rr.note(notes, "index and F.embedding backwards differ (cases, H %s)" % ("> 32" if p["H"] > 32 else "<= 32"))
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
                for contract, direction, attrs, inputs, outputs in documents(p, args.seed, notes):
                    prov = rr.provenance(contract, args.seed, p["index"])
                    prov["source"] = SOURCE[contract]
                    f.write(json.dumps(rr.case_doc("embedding", direction, attrs, inputs, outputs, prov)) + "\n")
                    key = "embedding %s %s" % (direction, contract)
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


def bench(args):
    """Eager lookups and backwards at P 16384, H 4096, V 151552 (bf16, Zipf ids), beside a
    device-to-device copy of the same bytes: the forward moves the ids and P rows twice, a backward
    the ids, g and all of d_weight. The fp32 atomic scatter is index_add_ into an fp32 table, then
    .to(bf16)."""
    rr.load_torch()
    torch = rr.torch
    P, H, V = 16384, 4096, MODEL_V
    p = {"index": 0, "P": P, "V": V, "dups": "zipf"}
    ids = torch.tensor(local_ids(p, args.seed), dtype=torch.int64, device=rr.DEVICE)
    weight = torch.randn(V, H, device=rr.DEVICE).to(torch.bfloat16)
    g = torch.randn(P, H, device=rr.DEVICE).to(torch.bfloat16)
    fwd_bytes = P * 8 + 2 * P * H * 2
    bwd_bytes = P * 8 + P * H * 2 + V * H * 2
    rows = []
    for name, b in (("fwd", fwd_bytes), ("bwd", bwd_bytes)):
        src = torch.empty(b // 2, dtype=torch.uint8, device=rr.DEVICE)
        dst = torch.empty_like(src)
        rows.append(("d2d copy of the %s's bytes" % name, rr.timed_us(lambda: dst.copy_(src)), b))
        del src, dst
        if name == "fwd":
            rows.append(("weight[ids]", rr.timed_us(lambda: weight[ids]), b))
            rows.append(("F.embedding(ids, weight)", rr.timed_us(lambda: torch.nn.functional.embedding(ids, weight)), b))
        else:
            rows.append(("index backward (index_put_ accumulate)",
                         rr.timed_us(lambda: torch.zeros(V, H, dtype=torch.bfloat16, device=rr.DEVICE)
                                     .index_put_((ids,), g, accumulate=True)), b))
            rows.append(("embedding_dense_backward",
                         rr.timed_us(lambda: torch.ops.aten.embedding_dense_backward(g, ids, V, -1, False)), b))
            rows.append(("fp32 atomic scatter (index_add_) + .to(bf16)",
                         rr.timed_us(lambda: torch.zeros(V, H, device=rr.DEVICE).index_add_(0, ids, g.float())
                                     .to(torch.bfloat16)), b))
        torch.cuda.empty_cache()
    counts = torch.bincount(ids, minlength=V)
    print("eager torch %s on %s; ids: %d distinct of %d, the most frequent %d times"
          % (torch.__version__, rr.device_name(), int((counts > 0).sum()), P, int(counts.max())))
    print("%-46s %10s %9s %8s %8s" % ("op", "us", "MB", "GB/s", "% copy"))
    copy = None
    for name, us, b in rows:
        gbs = b / us / 1e3
        copy = gbs if name.startswith("d2d") else copy
        print("%-46s %10.1f %9.1f %8.1f %7.1f%%" % (name, us, b / 1e6, gbs, 100 * gbs / copy))
    return 0


def selftest():
    pl = plan()
    assert 4 * len(pl) >= 100, len(pl)  # peer_replay's floor: fwd and bwd of both contracts per entry
    assert {p["dt"] for p in pl} == {"bf16", "fp16", "fp32"}
    assert {p["H"] for p in pl} >= {1, 31, 32, 33, 4096} and any(p["V"] == MODEL_V for p in pl)
    for H in (1, 32, 33):  # the width boundary meets heavy duplicates at more than one V
        assert len({p["V"] for p in pl if p["H"] == H and p["dups"] == "all_same" and p["P"] >= 32}) >= 2, H
    assert any(p["P"] == 0 for p in pl) and any(p["P"] > 3072 for p in pl) and any(p["P"] == 3072 for p in pl)
    assert any("vocab_start" in p for p in pl) and any(p["family"] == "drift" and p["H"] > 32 for p in pl)
    assert sum(p["P"] * p["H"] + p["V"] * p["H"] for p in pl) * 2 * 2 < 30e6  # the recording stays tens of MB
    for p in pl:
        ids = local_ids(p, 1)
        assert len(ids) == p["P"] and all(0 <= v < p["V"] for v in ids), p
        if p["dups"] == "all_same" and ids:
            assert len(set(ids)) == 1
        start = p.get("vocab_start")
        if start is not None and p["P"] > 3:
            gi = global_ids(p, 1)
            assert any(not start <= v < start + p["V"] for v in gi), p  # some masked
    z = local_ids({"index": 0, "P": 16384, "V": MODEL_V, "dups": "zipf"}, 1)
    top = max(z.count(v) for v in set(z[:50]))
    assert top > 300 and len(set(z)) > 2000, (top, len(set(z)))  # heavy head, long tail
    print("selftest passed")
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
