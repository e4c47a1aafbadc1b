#!/usr/bin/env python3
"""Records eager PyTorch's own outputs of the SwiGLU family as bitparity-case/1 documents.

Runs Megatron-LM's eager functions (the bit-exact mode's swiglu_eager, swiglu_back_eager and
weighted_swiglu_back_eager; the clamped functions of Megatron main, executed eagerly) on a CUDA
device and writes one JSON document per line: the case, the contract it exercises, and the
outputs PyTorch produced. bitparity's `peer_replay_test` replays every line against
ref:<contract> and requires identical bits, so the reference is pinned to real PyTorch, not to
a re-reading of its source.

    python3 peers/torch/record_swiglu.py OUT.jsonl [--seed 1]
"""
import argparse
import itertools
import json
import math

# numpy and torch are imported by load_torch(), so that importing this module (peers/torch/worker.py
# does, for the functions below) needs neither.
np = None
torch = None
F = None
DT = None
UINT = None
WIDTH = {"bf16": 4, "fp16": 4, "fp32": 8}


def load_torch():
    global np, torch, F, DT, UINT
    import numpy
    import torch as torch_module
    import torch.nn.functional as functional
    np, torch, F = numpy, torch_module, functional
    DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    UINT = {"bf16": torch.int16, "fp16": torch.int16, "fp32": torch.int32}


# ---- Megatron-LM functions, verbatim in their arithmetic ----------------------------------
def swiglu_eager(y):
    y_1, y_2 = torch.chunk(y, 2, -1)
    return F.silu(y_1) * y_2


def swiglu_back_eager(g, y):
    y_1, y_2 = torch.chunk(y, 2, -1)
    return torch.cat(
        (g * torch.sigmoid(y_1) * (1 + y_1 * (1 - torch.sigmoid(y_1))) * y_2, g * F.silu(y_1)), -1)


def clamped_swiglu(y, clamp_value):
    dtype = y.dtype
    y_1, y_2 = torch.chunk(y.to(torch.float32), 2, -1)
    y_1 = y_1.clamp(min=None, max=clamp_value)
    y_2 = y_2.clamp(min=-clamp_value, max=clamp_value)
    return (F.silu(y_1) * y_2).to(dtype)


def clamped_swiglu_back(g, y, clamp_value):
    dtype = y.dtype
    y_1, y_2 = torch.chunk(y.to(torch.float32), 2, -1)
    y_1c = y_1.clamp(min=None, max=clamp_value)
    y_2c = y_2.clamp(min=-clamp_value, max=clamp_value)
    res = torch.cat(
        (g * torch.sigmoid(y_1c) * (1 + y_1c * (1 - torch.sigmoid(y_1c))) * y_2c
         * (y_1 <= clamp_value).to(g.dtype),
         g * F.silu(y_1c) * ((y_2 >= -clamp_value) & (y_2 <= clamp_value)).to(g.dtype)), -1)
    return res.to(dtype)


def gate(clamp, contract):
    if clamp is None:
        return False
    return True if contract == "megatron_unfused" else clamp > 0


def swiglu_fwd(y, clamp, contract):
    return clamped_swiglu(y, clamp) if gate(clamp, contract) else swiglu_eager(y)


def swiglu_bwd(g, y, clamp, contract):
    return clamped_swiglu_back(g, y, clamp) if gate(clamp, contract) else swiglu_back_eager(g, y)


def weighted_fwd(y, w, clamp, contract):
    return (swiglu_fwd(y, clamp, contract) * w).to(y.dtype)


def weighted_bwd(g, y, w, clamp, contract):
    input_grad = swiglu_bwd(g * w, y, clamp, contract)
    weights_grad = swiglu_fwd(y, clamp, contract) * g.to(w.dtype)
    weights_grad = torch.sum(weights_grad, dim=-1, keepdim=True)
    return input_grad.to(y.dtype), weights_grad.to(w.dtype)


# ---- tensors <-> the case format -----------------------------------------------------------
def to_hex(t, dtype):
    bits = t.contiguous().view(UINT[dtype]).cpu().numpy().astype(np.int64) & ((1 << (WIDTH[dtype] * 4)) - 1)
    return "".join(format(int(b), "0%dx" % WIDTH[dtype]) for b in bits.reshape(-1))


def tensor_json(t, dtype):
    return {"dtype": dtype, "shape": list(t.shape), "hex": to_hex(t, dtype)}


def values(rng, shape, dtype, family):
    n = int(np.prod(shape)) if shape else 1
    if family == "moderate":
        v = rng.uniform(1, 2, n) * np.exp2(rng.integers(-6, 7, n)) * rng.choice([-1, 1], n)
    elif family == "probs":
        v = rng.uniform(0, 1, n)
    else:  # mixed: moderate with specials, subnormals and signed zeros sprinkled in
        v = rng.uniform(1, 2, n) * np.exp2(rng.integers(-8, 9, n)) * rng.choice([-1, 1], n)
        special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3e38, 1.0, -1.0, 20.0, -20.0, 90.0, -90.0])
        pick = rng.random(n) < 0.15
        v[pick] = rng.choice(special, int(pick.sum()))
    t = torch.tensor(v, dtype=torch.float64).reshape(shape)
    return t.to(DT[dtype]).cuda()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=160)
    args = ap.parse_args()
    load_torch()
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    clamps = [None, None, 7.0, 0.5, 1e-300, 0.0, -0.0, -2.0, math.inf, math.nan, 3.3]
    shapes = [(1, 8), (3, 13), (16, 64), (17, 100), (8, 128), (2, 1408), (1, 4096), (64, 8), (40, 16), (0, 8), (1, 2368), (33, 4)]
    lines = 0
    with open(args.out, "w") as f:
        for i in range(args.count):
            rows, Fh = shapes[i % len(shapes)]
            act = ["bf16", "bf16", "bf16", "fp16", "fp32"][rng.integers(0, 5)]
            clamp = clamps[rng.integers(0, len(clamps))]
            contract = ["megatron_eager", "megatron_unfused"][rng.integers(0, 2)]
            family = ["mixed", "moderate"][rng.integers(0, 2)]
            scaled = rng.random() < 0.6
            y = values(rng, (rows, 2 * Fh), act, family)
            g = values(rng, (rows, Fh), act, family)
            attrs = {} if clamp is None else {"clamp": clamp if math.isfinite(clamp) else ("nan" if math.isnan(clamp) else "inf")}
            if scaled:
                # A scale of the activations' dtype makes the d_scale products a 16-bit tensor,
                # which torch.sum reduces in 8-element vectors (fp32 products: 4).
                sdt = ["fp32", "bf16", act][rng.integers(0, 3)]
                two_d = rng.random() < 0.5
                w = values(rng, (rows, 1), sdt, "probs" if family == "moderate" else "mixed")
                scale = w if two_d else w.reshape(rows)
                out = weighted_fwd(y, w, clamp, contract)
                d_y, d_w = weighted_bwd(g, y, w, clamp, contract)
                d_scale = d_w if two_d else d_w.reshape(rows)
                base = {"format": "bitparity-case/1", "op": "swiglu_scale", "attrs": attrs}
                fwd_in = {"y": tensor_json(y, act), "scale": tensor_json(scale, sdt)}
                cases = [("fwd", fwd_in, {"out": tensor_json(out, act)}),
                         ("bwd", dict(fwd_in, g=tensor_json(g, act)),
                          {"d_y": tensor_json(d_y, act), "d_scale": tensor_json(d_scale, sdt)})]
            else:
                bias = values(rng, (2 * Fh,), act, family) if rng.random() < 0.3 else None
                y_in = y + bias if bias is not None else y
                out = swiglu_fwd(y_in, clamp, contract)
                d_y = swiglu_bwd(g, y_in, clamp, contract)
                base = {"format": "bitparity-case/1", "op": "swiglu", "attrs": attrs}
                fwd_in = {"y": tensor_json(y, act)}
                if bias is not None:
                    fwd_in["bias"] = tensor_json(bias, act)
                cases = [("fwd", fwd_in, {"out": tensor_json(out, act)}),
                         ("bwd", dict(fwd_in, g=tensor_json(g, act)), {"d_y": tensor_json(d_y, act)})]
            for direction, inputs, outputs in cases:
                doc = dict(base, direction=direction, inputs=inputs, outputs=outputs,
                           provenance={"peer": "torch " + torch.__version__, "device": torch.cuda.get_device_name(),
                                       "contract": contract, "seed": args.seed, "index": i})
                f.write(json.dumps(doc) + "\n")
                lines += 1
        lines += record_cancelling(f, rng, args.seed, args.count)
    print("recorded", lines, "cases with torch", torch.__version__, "on", torch.cuda.get_device_name())


# Rows whose d_scale sum cancels: the last gradient of each row is chosen so that the products
# almost cancel, so the result is far smaller than the partial sums and its last bits show the
# order torch.sum adds them in (for 16-bit products: 8-element vectors), which random rows hide
# behind the final rounding. A scale of the activations' dtype makes the products a 16-bit tensor.
CANCEL_SHAPES = [(16, 1408), (4, 4096), (64, 128), (3, 2368), (1, 256), (17, 1408)]


def cancelling_g(sw, g):
    sw64, g64 = sw.double(), g.double()
    last = sw64.abs().argmax(dim=1)
    rows = torch.arange(sw.shape[0], device=sw.device)
    g64[rows, last] = 0.0
    partial = (sw64 * g64).sum(dim=1)
    pivot = sw64[rows, last]
    g64[rows, last] = torch.where(pivot != 0, -partial / pivot, torch.zeros_like(partial))
    return g64.to(g.dtype)


def record_cancelling(f, rng, seed, first_index):
    lines = 0
    for n, ((rows, Fh), act, clamp) in enumerate(itertools.product(CANCEL_SHAPES, ["bf16", "fp16"], [None, 0.75])):
        contract = "megatron_eager"
        y = values(rng, (rows, 2 * Fh), act, "moderate")
        g = values(rng, (rows, Fh), act, "moderate")
        w = values(rng, (rows, 1), act, "probs")
        g = cancelling_g(swiglu_fwd(y, clamp, contract), g)
        d_y, d_w = weighted_bwd(g, y, w, clamp, contract)
        two_d = n % 2 == 0
        scale = w if two_d else w.reshape(rows)
        d_scale = d_w if two_d else d_w.reshape(rows)
        attrs = {} if clamp is None else {"clamp": clamp}
        doc = {"format": "bitparity-case/1", "op": "swiglu_scale", "attrs": attrs, "direction": "bwd",
               "inputs": {"y": tensor_json(y, act), "scale": tensor_json(scale, act), "g": tensor_json(g, act)},
               "outputs": {"d_y": tensor_json(d_y, act), "d_scale": tensor_json(d_scale, act)},
               "provenance": {"peer": "torch " + torch.__version__, "device": torch.cuda.get_device_name(),
                              "contract": contract, "seed": seed, "index": first_index + n}}
        f.write(json.dumps(doc) + "\n")
        lines += 1
    return lines


if __name__ == "__main__":
    main()
