#!/usr/bin/env python3
"""Records eager PyTorch's atomic baselines of the routing ops as bitparity-case/1 documents:
Megatron-LM core_r0.13.0's permute (index_select; its backward index_add_) and unpermute
(scatter_add_, with and without probs), the paths taken before the aligned ones (bitparity's
`baseline` contracts; record_routing.py's permute_r013 and unpermute_r013, which the exec worker
serves too).

Their order of addition is the order of arrival, so only sums that no order changes are recorded:
every token has k <= 2 experts, and a sum of at most two addends from +0 is the same in either
order (the fp32 flush of a subnormal addend or result included). What the recording pins is the
arithmetic of one atomic add: fp32 `atomicAdd` flushes a subnormal addend and a subnormal result to
a zero of its sign; bf16's CAS loop rounds each sum to bf16 and keeps subnormals. The values are
drawn around 2^-126, where sums of normal values land among the subnormals.

    python3 peers/torch/record_atomic_baselines.py OUT.jsonl [--seed 1]   # record (cuda)

`peer_replay_test` replays every line against ref:baseline and requires identical bits. The
helpers (case layout, hex encoding, positions) are record_routing.py's.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_routing as rr  # noqa: E402

TS = [1, 2, 5, 17, 40]
HS = [1, 8, 33]
ES = [2, 4, 8]
KS = [1, 2]
DTYPES = ["fp32", "bf16"]
STREAM = 7  # record_routing.py's streams are 1..3


def plan():
    index = 0
    for dt in DTYPES:
        for T in TS:
            for H in HS:
                for E in ES:
                    for k in KS:
                        yield {"index": index, "T": T, "H": H, "E": E, "k": k, "dt": dt}
                        index += 1


def tiny_values(rng, shape):
    """Magnitudes from 2^-136 to 2^-123 (subnormals and the normals next to them) with random
    signs; 15 % moderate values, 5 % signed zeros."""
    np = rr.np
    v = rng.uniform(1, 2, shape) * np.exp2(rng.integers(-136, -122, shape)) * rng.choice([-1.0, 1.0], shape)
    moderate = rng.random(shape) < 0.15
    v[moderate] = (rng.uniform(1, 2, shape) * np.exp2(rng.integers(-2, 3, shape)))[moderate]
    zero = rng.random(shape) < 0.05
    v[zero] = rng.choice([0.0, -0.0], shape)[zero]
    return v


def flush_facts(notes, values, slots, out, dt):
    """Where a token's exact sum of its slot values (as stored) is subnormal: whether torch's output
    is a zero (flushed) or not (kept)."""
    np, torch = rr.np, rr.torch
    vals = values.detach().cpu().to(torch.float64).numpy()
    got = out.detach().cpu().to(torch.float64).numpy()
    smallest_normal = 2.0 ** -126
    for t, s in enumerate(slots):
        if not s:
            continue
        exact = vals[s].sum(axis=0)
        sub = (exact != 0) & (np.abs(exact) < smallest_normal)
        if sub.any():
            rr.note(notes, "%s: a subnormal sum became a zero (elements)" % dt, int((sub & (got[t] == 0)).sum()))
            rr.note(notes, "%s: a subnormal sum stayed non-zero (elements)" % dt, int((sub & (got[t] != 0)).sum()))


def docs_of(p, seed, notes):
    torch = rr.torch
    rng = rr.rng_for(seed, STREAM, p["index"])
    T, H, E, k, dt = p["T"], p["H"], p["E"], p["k"], p["dt"]
    m = rr.routing_rows(rng, T, E, k, "random")
    sorted_tokens, slots = rr.expert_positions(m.tolist())
    N = len(sorted_tokens)
    routing_map = torch.from_numpy(m).to(rr.DEVICE)
    sorted_indices = torch.tensor(sorted_tokens, dtype=torch.long, device=rr.DEVICE)
    assert torch.equal(sorted_indices, rr.sorted_indices_of(routing_map))
    tokens = rr.on_device(tiny_values(rng, (T, H)), dt)
    d_permuted = rr.on_device(tiny_values(rng, (N, H)), dt)
    permuted = rr.on_device(tiny_values(rng, (N, H)), dt)
    # fp32 probs of both scales: products of tiny rows land among fp32's subnormals too
    probs = rr.on_device(rng.uniform(0, 1, (T, E)) * rr.np.exp2(rng.integers(-3, 4, (T, E))), "fp32")
    shape = torch.Size([T, H])

    def d_tokens_of():
        X = tokens.clone().requires_grad_(True)
        (d,) = torch.autograd.grad(rr.permute_r013(X, sorted_indices), X, d_permuted)
        return d

    def outs_of():
        return (rr.unpermute_r013(permuted, sorted_indices, shape),
                rr.unpermute_r013(permuted, sorted_indices, shape, probs=probs, routing_map=routing_map))

    with torch.no_grad():
        moved = rr.permute_r013(tokens, sorted_indices)
    d_tokens, (out, out_probs) = d_tokens_of(), outs_of()
    for _ in range(2):  # at most two addends a sum: every order gives the same bits
        again_d, (again_out, again_probs) = d_tokens_of(), outs_of()
        assert rr.same_bits(again_d, d_tokens) and rr.same_bits(again_out, out) and rr.same_bits(again_probs, out_probs), \
            "an order-dependent sum"
    rr.sync()
    flush_facts(notes, d_permuted, slots, d_tokens, dt)
    flush_facts(notes, permuted, slots, out, dt)
    fwd_in = {"permuted": rr.tensor_json(permuted), "routing_map": rr.tensor_json(routing_map)}
    return [
        ("permute", "fwd", {"tokens": rr.tensor_json(tokens), "routing_map": rr.tensor_json(routing_map)},
         {"permuted": rr.tensor_json(moved)}),
        ("permute", "bwd", {"d_permuted": rr.tensor_json(d_permuted), "routing_map": rr.tensor_json(routing_map)},
         {"d_tokens": rr.tensor_json(d_tokens)}),
        ("unpermute", "fwd", fwd_in, {"out": rr.tensor_json(out)}),
        ("unpermute", "fwd", dict(fwd_in, probs=rr.tensor_json(probs)), {"out": rr.tensor_json(out_probs)}),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the recording to write (JSON lines)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rr.load_torch()
    notes = {}
    documents = (rr.case_doc(op, direction, {}, inputs, outputs, rr.provenance("baseline", args.seed, p["index"]))
                 for p in plan() for op, direction, inputs, outputs in docs_of(p, args.seed, notes))
    total, nonzero = rr.write_documents(args.out, documents)
    print("recorded %d cases with torch %s on %s to %s" % (total, rr.torch.__version__, rr.device_name(), args.out))
    for what in sorted(notes):
        print("NOTE %s: %d" % (what, notes[what]))
    if nonzero * 2 <= total:
        print("FAIL: most recorded outputs are all zero (%d of %d have a non-zero bit)" % (nonzero, total))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
