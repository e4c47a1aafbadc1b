#!/usr/bin/env python3
"""Records eager PyTorch's expert MLP (Megatron's small-M padding, fc1, weighted SwiGLU, fc2 and the
backward's five GEMMs) as bitparity-case/1 documents for expert_mlp's megatron_eager contract.

Megatron's expert runs its GEMMs through cuBLAS, whose order is unknown: expert_mlp's megatron_eager
contract is judged within a bound, and its reference (each GEMM's exact sum rounded once) is one
admissible result. The reference and PyTorch agree bit for bit wherever no order can matter: every
GEMM's products are multiples of a common quantum Q (the smallest product's last bit) and their
absolute sum stays below 2^24 Q, so every partial sum in any order (split-K, the tensor core's
fused steps) is exact in fp32 and the output is the exact sum rounded once. The inputs are drawn
so that this holds (small integers, gates past 16 where bf16's sigmoid is 1, and narrow ranges);
each GEMM is checked for it here, and for cuBLAS's result being the exact sum rounded to bf16, and
a case where either fails is left out and counted. What the recording pins is the rest: the padding
of 0 < M < 17 tokens to 32, Megatron's eager activation arithmetic between the GEMMs, which tensor
meets which transpose, where the probs enter, and d_probs.

    python3 peers/torch/record_expert_mlp.py OUT.jsonl [--seed 1] [--count 120]
"""
import argparse
import json
import math

import record_swiglu as sw

PAD_BELOW, PAD_ROWS = 17, 32  # ops/expert_mlp.h: kExpertPadBelow, kExpertPadRows


class Inexact(Exception):
    pass


def gemm_checked(a, b, checked=True):
    """a @ b in bf16 through PyTorch (cuBLAS), checked to be the exact sum rounded once (unless not
    `checked`: PyTorch's result as it is)."""
    torch = sw.torch
    out = a @ b
    if not checked:
        return out
    a64, b64 = a.double(), b.double()
    exact = a64 @ b64
    if a.shape[0] and b.shape[1] and a.shape[1]:
        # The quantum of a bf16 x: 2^(floor(log2|x|) - 7); of a product, the two added.
        big = 10_000
        qa = torch.where(a64 != 0, torch.frexp(a64)[1] - 8, big).double()
        qb = torch.where(b64 != 0, torch.frexp(b64)[1] - 8, big).double()
        q = (qa[:, :, None] + qb[None, :, :]).amin(dim=1)
        s = a64.abs() @ b64.abs()
        if not bool(((s == 0) | (s < torch.exp2(q + 24))).all()):
            raise Inexact("a partial sum may round")
    if not torch.equal(out, exact.float().to(torch.bfloat16)):
        raise Inexact("cuBLAS's result is not the exact sum rounded once")
    return out


def padded(t, rows):
    if t.shape[0] == rows:
        return t
    pad = sw.torch.zeros((rows - t.shape[0],) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)
    return sw.torch.cat((t, pad))


def expert_mlp(x, w1, w2, probs, d_out, clamp, contract="megatron_eager", checked=True):
    """Megatron's expert in eager PyTorch: forward, and the backward autograd would run. With
    `checked`, every GEMM must be the exact sum rounded once (else Inexact)."""
    def gemm(a, b):
        return gemm_checked(a, b, checked)

    M = x.shape[0]
    Mp = PAD_ROWS if 0 < M < PAD_BELOW else M
    xp = padded(x, Mp)
    pp = padded(probs, Mp).reshape(Mp, 1) if probs is not None else None
    h = gemm(xp, w1)
    act = sw.weighted_fwd(h, pp, clamp, contract) if pp is not None else sw.swiglu_fwd(h, clamp, contract)
    out = gemm(act, w2)[:M]
    if d_out is None:
        return {"out": out}
    dp = padded(d_out, Mp)
    d_act = gemm(dp, w2.t().contiguous())
    grads = {"d_w2": gemm(act.t().contiguous(), dp)}
    if pp is not None:
        d_h, d_w = sw.weighted_bwd(d_act, h, pp, clamp, contract)
        grads["d_probs"] = d_w.reshape(Mp)[:M]
    else:
        d_h = sw.swiglu_bwd(d_act, h, clamp, contract)
    grads["d_x"] = gemm(d_h, w1.t().contiguous())[:M]
    grads["d_w1"] = gemm(xp.t().contiguous(), d_h)
    return grads


def draw(rng, family, M, H, F, with_probs):
    """Inputs on which no GEMM order can matter (see the module's text)."""
    torch, np = sw.torch, sw.np
    bf = torch.bfloat16
    if family == "saturated":
        # Gates in [16, 64]: bf16's sigmoid is 1, silu(a) = a, and every value an integer.
        c = 16.0 / H
        x = rng.choice([1.0, 2.0], (M, H))
        gate = rng.choice([c, 2 * c], (H, F))
        value = rng.choice([-1.0, 0.0, 1.0], (H, F))
        w2 = rng.choice([-1.0, 0.0, 1.0], (F, H))
    else:
        # "narrow": gates in [0.5, 4] (silu and sigmoid away from their limits), few columns.
        x = rng.choice([0.5, 1.0], (M, H))
        gate = rng.choice([0.0, 1.0 / H, 2.0 / H, 4.0 / H], (H, F)) + 1.0 / H
        value = rng.choice([-1.0, 0.0, 1.0, 2.0], (H, F)) / H
        w2 = rng.choice([-1.0, 0.0, 1.0], (F, H))
    w1 = np.concatenate((gate, value), axis=1)
    t = lambda v: torch.tensor(v, dtype=torch.float64).to(bf).cuda()
    probs = None
    if with_probs:
        probs = torch.tensor(rng.choice([0.0, 0.5, 1.0, 0.75], M), dtype=torch.float32).cuda()
    d_out = t(rng.choice([-1.0, 0.0, 1.0], (M, H)))
    return t(x), t(w1), t(w2), probs, d_out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=120)
    args = ap.parse_args()
    sw.load_torch()
    torch, np = sw.torch, sw.np
    rng = np.random.default_rng(args.seed)
    rows = [1, 2, 5, 15, 16, 17, 31, 32, 33, 40, 0, 3]
    clamps = [None, None, None, 32.0, 7.0, -1.0, math.nan]
    lines = inexact = 0
    with open(args.out, "w") as f:
        for i in range(args.count):
            M = rows[i % len(rows)]
            family = ["saturated", "narrow"][i % 2]
            H = int(rng.choice([4, 8, 16])) if family == "saturated" else int(rng.choice([2, 4, 8]))
            F = int(rng.choice([1, 2, 3, 8, 16])) if family == "saturated" else int(rng.choice([1, 2, 4]))
            clamp = clamps[rng.integers(0, len(clamps))]
            with_probs = rng.random() < 0.75
            x, w1, w2, probs, d_out = draw(rng, family, M, H, F, with_probs)
            try:
                fwd = expert_mlp(x, w1, w2, probs, None, clamp)
                bwd = expert_mlp(x, w1, w2, probs, d_out, clamp)
            except Inexact:
                inexact += 1
                continue
            attrs = {} if clamp is None else {"clamp": clamp if math.isfinite(clamp) else "nan"}
            inputs = {"x": sw.tensor_json(x, "bf16"), "w1": sw.tensor_json(w1, "bf16"), "w2": sw.tensor_json(w2, "bf16")}
            if probs is not None:
                inputs["probs"] = sw.tensor_json(probs, "fp32")
            out_dtype = {"d_probs": "fp32"}
            for direction, ins, outs in (("fwd", inputs, fwd), ("bwd", dict(inputs, d_out=sw.tensor_json(d_out, "bf16")), bwd)):
                doc = {"format": "bitparity-case/1", "op": "expert_mlp", "direction": direction, "attrs": attrs,
                       "inputs": ins,
                       "outputs": {k: sw.tensor_json(v, out_dtype.get(k, "bf16")) for k, v in outs.items()},
                       "provenance": {"peer": "torch " + torch.__version__, "device": torch.cuda.get_device_name(),
                                      "contract": "megatron_eager", "family": family, "seed": args.seed, "index": i}}
                f.write(json.dumps(doc) + "\n")
                lines += 1
    print("recorded", lines, "cases with torch", torch.__version__, "on", torch.cuda.get_device_name(),
          "; left out", inexact, "where a GEMM's order could matter")
    if lines < 100:
        raise SystemExit("too few cases recorded: %d" % lines)


if __name__ == "__main__":
    main()
