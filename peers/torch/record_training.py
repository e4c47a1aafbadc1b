#!/usr/bin/env python3
"""Records eager PyTorch's own outputs of the training-step ops (fanout_grad, adamw_step) as
bitparity-case/1 documents.

Runs the ops on a CUDA device and writes one JSON document per line: the case, the contract it
exercises, and the outputs PyTorch produced. bitparity's `peer_replay_test` replays every line
against ref:<contract> and requires identical bits.

- fanout_grad, glm45 and dsv4: the gradient of the MoE layer's three clones of its input summed by
  eager adds in each contract's order (spec OP-11): (g_dispatcher + g_shared) + g_router and
  (g_dispatcher + g_router) + g_shared. Also observed, not recorded: which order autograd itself
  takes for three clones of one tensor whose gradients arrive together.
- adamw_step, megatron_eager: one step of torch.optim.AdamW(fused=True), the optimizer Megatron
  builds when the precision-aware optimizer is off (spec OP-12), on one parameter whose state
  (exp_avg, exp_avg_sq and the fp32 step counter at step - 1) is set before the step.
- grad_finalize, megatron_aligned and megatron_r013: finalize_model_grads after the gradient sync
  (#5335: `scale_gradients(1.0 / dp_size)`; core_r0.13: `scale_gradients(1.0 / num_tokens)` with
  num_tokens an int32 tensor, and get_updated_expert_bias without its all-reduce), on fp32 buffers.

    python3 peers/torch/record_training.py OUT.jsonl [--ops fanout_grad,adamw_step,grad_finalize] [--seed 1]
    python3 peers/torch/record_training.py --bench                # eager fused AdamW at 10^8 parameters
    python3 peers/torch/record_training.py --selftest             # the stdlib parts, no torch needed
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_routing as rr  # noqa: E402  (the case format, hex encoding and torch helpers)

FANOUT_SOURCE = ("PaddleFleet GLM-4.5 ThreePathCloneAlignMG (glm45); PaddleFleet DSv4/KimiK2 switch (dsv4); "
                 "spec OP-11")
FANOUT_INPUTS = ("g_router", "g_dispatcher", "g_shared")
FANOUT_SHAPES = [(0, 8), (1, 1), (1, 7), (2, 33), (3, 8), (5, 64), (16, 17), (17, 8), (32, 24), (4, 4096)]
FANOUT_FAMILIES = ("moderate", "mixed", "cancelling", "equal")
FANOUT_DTYPES = ("bf16", "bf16", "fp16", "fp32")


def fanout_plan():
    """Configurations: every shape meets every value family; dtypes rotate (bf16 half the time)."""
    plan = []
    grid = [(s, f) for _ in range(2) for s in FANOUT_SHAPES for f in FANOUT_FAMILIES]
    for i, (shape, family) in enumerate(grid):
        plan.append({"index": i, "T": shape[0], "H": shape[1], "family": family,
                     "dt": FANOUT_DTYPES[(i + i // len(FANOUT_FAMILIES)) % len(FANOUT_DTYPES)]})
    return plan


def fanout_inputs(p, seed):
    rng = rr.rng_for(seed, 101, p["index"])
    shape = (p["T"], p["H"])
    base = "mixed" if p["family"] == "mixed" else "moderate"
    g_d = rr.draw(rng, shape, base)
    if p["family"] == "cancelling":  # g_router = -g_dispatcher, g_shared small: the orders round apart
        g_r = -g_d
        g_s = rr.draw(rng, shape, "moderate") * 2.0 ** -10
    elif p["family"] == "equal":
        g_r, g_s = g_d.copy(), g_d.copy()
    else:
        g_r, g_s = rr.draw(rng, shape, base), rr.draw(rng, shape, base)
    return {name: rr.on_device(v, p["dt"]) for name, v in zip(FANOUT_INPUTS, (g_r, g_d, g_s))}


def fanout_orders(g):
    """d_hidden of each contract: eager adds of the three clones' gradients in its order."""
    return {"glm45": (g["g_dispatcher"] + g["g_shared"]) + g["g_router"],
            "dsv4": (g["g_dispatcher"] + g["g_router"]) + g["g_shared"]}


def fanout_docs(p, seed, notes):
    g = fanout_inputs(p, seed)
    orders = fanout_orders(g)
    observe_autograd(g, orders, notes)
    inputs = {name: rr.tensor_json(t) for name, t in g.items()}
    return [(contract, "fwd", inputs, {"d_hidden": rr.tensor_json(out)}) for contract, out in orders.items()]


def observe_autograd(g, orders, notes):
    """Three clones of one leaf, their gradients given together: the order autograd accumulates."""
    x = g["g_router"].detach().clone().requires_grad_(True)
    clones = [x.clone() for _ in FANOUT_INPUTS]  # router, dispatcher, shared: the layer's order
    rr.torch.autograd.backward(clones, [g[name] for name in FANOUT_INPUTS])
    agrees = [c for c, out in orders.items() if rr.same_bits(x.grad, out)]
    if rr.same_bits(orders["glm45"], orders["dsv4"]):
        return
    rr.note(notes, "fanout_grad: plain autograd of 3 clones, where the orders differ, equals " +
            (" and ".join(agrees) if agrees else "neither contract"))


ADAMW_SOURCE = ("torch.optim.AdamW(fused=True), PyTorch 2.11 aten/src/ATen/native/cuda/fused_adam_utils.cuh "
                "(ADAM_MODE::ADAMW); Megatron-LM #5335 optimizer/__init__.py")
ADAMW_STATES = ("param", "grad", "exp_avg", "exp_avg_sq")
# (lr, beta1, beta2, eps, weight_decay): the GLM-4.5 recipe's, the edges of the issue, and others.
ADAMW_HYPER = [(1e-3, 0.9, 0.999, 1e-8, 0.01), (0.1, 0.8, 0.95, 1e-6, 0.1), (3e-4, 0.9, 0.95, 1e-8, 0.1),
               (0.0, 0.9, 0.999, 1e-8, 0.1), (1e-2, 0.9, 0.999, 1e-30, 0.0), (1e-2, 0.5, 0.9999, 1e-45, 0.5)]
ADAMW_STEPS = [1, 2, 6, 57, 102, 1000, 54321, 2 ** 24, 2 ** 24 + 3]
ADAMW_FAMILIES = ("moderate", "mixed", "zeros", "huge_grad")
ADAMW_SIZES = [0, 1, 7, 64, 1000]


def adamw_plan():
    """Every step meets every hyper-parameter set; dtypes, sizes, families and maximize rotate."""
    plan = []
    dts = ("fp32", "fp32", "bf16", "fp16")
    grid = [(r, h, t) for r in range(2) for h in ADAMW_HYPER for t in ADAMW_STEPS]
    for i, (rep, hyper, step) in enumerate(grid):
        lr, b1, b2, eps, wd = hyper
        j = i % (len(ADAMW_HYPER) * len(ADAMW_STEPS))
        plan.append({"index": i, "dt": dts[(j % len(ADAMW_STEPS) + j // len(ADAMW_STEPS) + rep) % len(dts)],
                     "n": ADAMW_SIZES[i % len(ADAMW_SIZES)] if i % 9 else 4096,
                     "family": ADAMW_FAMILIES[(i // 2) % len(ADAMW_FAMILIES)],
                     "attrs": {"lr": lr, "beta1": b1, "beta2": b2, "eps": eps, "weight_decay": wd,
                               "step": step, "maximize": bool(i % 3 == 1)}})
    return plan


def adamw_inputs(p, seed):
    rng = rr.rng_for(seed, 202, p["index"])
    n = p["n"]
    fam = p["family"]
    param = rr.draw(rng, (n,), "mixed" if fam == "mixed" else "moderate")
    grad = rr.draw(rng, (n,), "mixed" if fam == "mixed" else "moderate")
    if fam == "zeros":
        grad[::2] = 0.0
        grad[1::4] = -0.0
    if fam == "huge_grad":
        grad = grad * 2.0 ** 60
    exp_avg = rr.draw(rng, (n,), "moderate") * 2.0 ** -8
    exp_avg_sq = abs(rr.draw(rng, (n,), "moderate")) * 2.0 ** -12  # a second moment is not negative
    if fam == "zeros":
        exp_avg[:] = 0.0
        exp_avg_sq[:] = 0.0
    return {name: rr.on_device(v, p["dt"]) for name, v in zip(ADAMW_STATES, (param, grad, exp_avg, exp_avg_sq))}


def adamw_docs(p, seed, notes):
    try:
        return adamw_step_docs(p, seed, notes)
    except RuntimeError as e:  # only an empty parameter may be refused; it is noted and skipped
        if p["n"] != 0:
            raise
        rr.note(notes, "adamw_step: an empty parameter is refused: %s" % str(e).splitlines()[0], None)
        return []


# torch.optim.AdamW's defaults, for attributes a case leaves out (ops/adamw_step.cpp documents them).
ADAMW_DEFAULTS = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 1e-2, "maximize": False}


def adamw_fused_step(x, attrs):
    """One AdamW(fused=True) step on a parameter whose state (exp_avg, exp_avg_sq, the fp32 step
    counter at step - 1) is set first. Returns (param, exp_avg, exp_avg_sq, the step counter after)."""
    a = dict(ADAMW_DEFAULTS, **attrs)
    weight = rr.torch.nn.Parameter(x["param"].clone())
    weight.grad = x["grad"].clone()
    opt = rr.torch.optim.AdamW([weight], lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"],
                               weight_decay=a["weight_decay"], maximize=a["maximize"], fused=True)
    state_step = rr.torch.tensor(float(a["step"] - 1), dtype=rr.torch.float32, device=rr.DEVICE)
    opt.state[weight] = {"step": state_step, "exp_avg": x["exp_avg"].clone(), "exp_avg_sq": x["exp_avg_sq"].clone()}
    opt.step()
    rr.sync()
    st = opt.state[weight]
    return weight.detach(), st["exp_avg"], st["exp_avg_sq"], st["step"]


def adamw_step_docs(p, seed, notes):
    x = adamw_inputs(p, seed)
    a = p["attrs"]
    param, exp_avg, exp_avg_sq, step = adamw_fused_step(x, a)
    rr.note(notes, "adamw_step: the fp32 step counter after the step of attribute step = 2^24 + 3: %r"
            % float(step) if a["step"] == 2 ** 24 + 3 else "adamw_step: steps recorded")
    inputs = {name: rr.tensor_json(t) for name, t in x.items()}
    outputs = {"param": rr.tensor_json(param), "exp_avg": rr.tensor_json(exp_avg),
               "exp_avg_sq": rr.tensor_json(exp_avg_sq)}
    return [("megatron_eager", "fwd", inputs, outputs)]


FINALIZE_SOURCE = {"megatron_aligned": "Megatron-LM f5b5555ec6 (#5335) finalize_model_grads.py 293-361",
                   "megatron_r013": "Megatron-LM 73a28a1078 (core_r0.13.0) finalize_model_grads.py 192-217, 334-361; "
                                    "moe_utils.py 781-799"}
FINALIZE_SIZES = [0, 1, 7, 64, 1000]
FINALIZE_DP = [1, 2, 3, 6, 8, 96]
FINALIZE_TOKENS = [None, 0, 1, 3, 98304, 16777217, 2 ** 31 - 1]


def finalize_plan():
    """Every dp_size meets every num_tokens; sizes, expert buffers and rates rotate."""
    plan = []
    grid = [(d, t) for _ in range(2) for d in FINALIZE_DP for t in FINALIZE_TOKENS]
    for i, (dp, nt) in enumerate(grid):
        attrs = {"dp_size": dp}
        if nt is not None:
            attrs["num_tokens"] = nt
        experts = (0, 8, 128, 160)[i % 4]
        if experts:
            attrs["bias_update_rate"] = (1e-3, 0.0, -1e-3, 0.01)[(i // 4) % 4]
        plan.append({"index": i, "n": FINALIZE_SIZES[i % len(FINALIZE_SIZES)], "E": experts,
                     "L": 1 + i % 3, "equal_counts": i % 5 == 0, "attrs": attrs})
    return plan


def finalize_inputs(p, seed):
    rng = rr.rng_for(seed, 303, p["index"])
    x = {"main_grad": rr.on_device(rr.draw(rng, (p["n"],), "mixed"), "fp32")}
    if p["E"]:
        shape = (p["L"], p["E"])
        counts = rr.np.full(shape, 37.0) if p["equal_counts"] else rng.integers(0, 2000, shape).astype(rr.np.float64)
        x["tokens_per_expert"] = rr.on_device(counts, "fp32")
        x["expert_bias"] = rr.on_device(rr.draw(rng, shape, "mixed"), "fp32")
    return x


FINALIZE_RATE_DEFAULT = 1e-3  # moe_router_bias_update_rate's default


def finalize_aligned(x, attrs):
    """#5335, loss normalized in the graph: num_tokens dropped, 1 / dp_size after the sync; the
    expert buffers (when given) pass unchanged. Returns the outputs by name."""
    g = x["main_grad"].clone()
    if attrs["dp_size"] > 1:
        g *= 1.0 / attrs["dp_size"]
    out = {"main_grad": g}
    for name in ("tokens_per_expert", "expert_bias"):
        if name in x:
            out[name] = x[name]
    return out


def finalize_r013(x, attrs, notes=None):
    """core_r0.13: the expert bias first (finalize_model_grads' order), then 1 / num_tokens."""
    torch = rr.torch
    out = {}
    if "tokens_per_expert" in x and "expert_bias" in x:
        tokens_per_expert = x["tokens_per_expert"].clone()
        expert_bias = x["expert_bias"].clone()
        average_tokens = tokens_per_expert.sum(dim=-1, keepdim=True) / tokens_per_expert.shape[-1]
        offset = average_tokens - tokens_per_expert
        rate = attrs.get("bias_update_rate", FINALIZE_RATE_DEFAULT)
        updated_expert_bias = expert_bias + torch.sign(offset) * rate
        tokens_per_expert.zero_()
        expert_bias.copy_(updated_expert_bias)
        out["tokens_per_expert"] = tokens_per_expert
        out["expert_bias"] = expert_bias
    g = x["main_grad"].clone()
    if "num_tokens" in attrs:
        num_tokens = torch.tensor(attrs["num_tokens"], dtype=torch.int, device=rr.DEVICE)
        if num_tokens > 0:
            scaling = 1.0 / num_tokens
            if notes is not None:
                rr.note(notes, "grad_finalize r0.13: 1.0 / num_tokens (int32) has dtype %s" % scaling.dtype, None)
            g *= scaling
    out["main_grad"] = g
    return out


def finalize_docs(p, seed, notes):
    x = finalize_inputs(p, seed)
    a = p["attrs"]
    inputs = {name: rr.tensor_json(t) for name, t in x.items()}
    aligned = finalize_aligned(x, a)
    r013 = finalize_r013(x, a, notes)
    return [(contract, "fwd", inputs, {name: rr.tensor_json(t) for name, t in out.items()})
            for contract, out in (("megatron_aligned", aligned), ("megatron_r013", r013))]


RECORDERS = {"fanout_grad": (fanout_plan, fanout_docs, FANOUT_SOURCE),
             "adamw_step": (adamw_plan, adamw_docs, ADAMW_SOURCE),
             "grad_finalize": (finalize_plan, finalize_docs, FINALIZE_SOURCE)}


def record(args):
    rr.load_torch()
    rr.torch.manual_seed(args.seed)
    notes, counts = {}, {}
    total = nonzero = 0
    tmp = args.out + ".tmp"  # the file appears only when every case was recorded
    try:
        with open(tmp, "w") as f:
            for op in args.ops.split(","):
                plan, docs_of, source = RECORDERS[op]
                for p in plan():
                    for contract, direction, inputs, outputs in docs_of(p, args.seed, notes):
                        prov = rr.provenance(contract, args.seed, p["index"])
                        prov["source"] = source[contract] if isinstance(source, dict) else source
                        doc = rr.case_doc(op, direction, p.get("attrs", {}), inputs, outputs, prov)
                        f.write(json.dumps(doc) + "\n")
                        key = "%s %s %s" % (op, direction, contract)
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


BENCH_PARAMS = 100_000_000  # the AdamW benchmark size


def bench(args):
    """Eager AdamW(fused=True) on one fp32 parameter of 10^8 elements (28 bytes each: param, grad,
    exp_avg, exp_avg_sq read, three written) and fanout_grad's glm45 order at 16384 x 4096 bf16,
    beside a device-to-device copy of the same bytes, timed as record_routing.py times (CUDA events)."""
    rr.load_torch()
    torch = rr.torch
    rows = []
    n = BENCH_PARAMS
    weight = torch.nn.Parameter(torch.randn(n, device=rr.DEVICE))
    weight.grad = torch.randn(n, device=rr.DEVICE)
    opt = torch.optim.AdamW([weight], lr=3e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1, fused=True)
    opt.step()  # creates the state
    adamw_bytes = 28 * n
    src = torch.empty(adamw_bytes // 2, dtype=torch.uint8, device=rr.DEVICE)
    dst = torch.empty_like(src)
    rows.append(("d2d copy of AdamW's bytes (read+write)", rr.timed_us(lambda: dst.copy_(src)), adamw_bytes))
    rows.append(("AdamW(fused=True).step(), fp32", rr.timed_us(opt.step), adamw_bytes))
    del src, dst, opt, weight
    torch.cuda.empty_cache()
    T, H = 16384, 4096
    g = [torch.randn(T, H, device=rr.DEVICE).to(torch.bfloat16) for _ in FANOUT_INPUTS]
    fan_bytes = 4 * T * H * 2
    src = torch.empty(fan_bytes // 2, dtype=torch.uint8, device=rr.DEVICE)
    dst = torch.empty_like(src)
    rows.append(("d2d copy of fanout_grad's bytes", rr.timed_us(lambda: dst.copy_(src)), fan_bytes))
    rows.append(("fanout_grad glm45 ((d + s) + r), bf16", rr.timed_us(lambda: (g[1] + g[2]) + g[0]), fan_bytes))
    print("eager torch %s on %s" % (torch.__version__, rr.device_name()))
    print("%-44s %10s %9s %8s %8s" % ("op", "us", "MB", "GB/s", "% copy"))
    copy = None
    for name, us, b in rows:
        gbs = b / us / 1e3
        copy = gbs if name.startswith("d2d") else copy
        print("%-44s %10.1f %9.1f %8.1f %7.1f%%" % (name, us, b / 1e6, gbs, 100 * gbs / copy))
    return 0


def selftest():
    plan = fanout_plan()
    assert len(plan) == 2 * len(FANOUT_SHAPES) * len(FANOUT_FAMILIES)
    assert {p["dt"] for p in plan} == {"bf16", "fp16", "fp32"}
    for family in FANOUT_FAMILIES:  # each family meets every dtype
        assert {p["dt"] for p in plan if p["family"] == family} == {"bf16", "fp16", "fp32"}, family
    assert sum(p["T"] * p["H"] * 2 for p in plan) < 4e6  # the recording stays a few MB
    assert 2 * len(plan) >= 100 and len(adamw_plan()) >= 100 and 2 * len(finalize_plan()) >= 100  # peer_replay's floor
    ap = adamw_plan()
    assert {p["dt"] for p in ap} == {"fp32", "bf16", "fp16"} and {p["n"] for p in ap} >= set(ADAMW_SIZES)
    for step in ADAMW_STEPS:  # each step meets every dtype and both maximize values
        assert {p["dt"] for p in ap if p["attrs"]["step"] == step} == {"fp32", "bf16", "fp16"}, step
    assert {p["attrs"]["maximize"] for p in ap} == {False, True}
    assert {p["family"] for p in ap} == set(ADAMW_FAMILIES)
    fp = finalize_plan()
    assert len(fp) == 2 * len(FINALIZE_DP) * len(FINALIZE_TOKENS)
    assert {p["E"] for p in fp} == {0, 8, 128, 160} and any(p["equal_counts"] and p["E"] for p in fp)
    for dp in FINALIZE_DP:  # each dp_size meets runs with and without the expert buffers
        assert {bool(p["E"]) for p in fp if p["attrs"]["dp_size"] == dp} == {False, True}, dp
    print("selftest passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", help="the .jsonl file to write (record mode)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", default=",".join(RECORDERS), help="comma-separated ops to record (default: all)")
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
