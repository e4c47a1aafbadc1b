#!/usr/bin/env python3
"""Records eager PyTorch's own outputs of the routing ops (router_topk, permute, unpermute) as
bitparity-case/1 documents.

Runs the code of record on a CUDA device and writes one JSON document per line: the case, the
contract it exercises, and the outputs PyTorch produced. bitparity's `peer_replay_test` replays
every line against ref:<contract> and requires identical bits, so the reference is pinned to real
PyTorch, not to a re-reading of its source.

The code of record is Megatron-LM PR #5335 at f5b5555ec6 (GLM_ALIGN_BIT_EXACT=1),
megatron/core/transformer/moe/moe_utils.py, transcribed below without its logging hooks:
- router_topk, megatron_eager, fwd and bwd: topk_softmax_with_capacity, the sigmoid branch and
  what follows it (lines 736-786: fp64 denominator, scaling, scatter). The sqrt_softplus score is
  Megatron main's `softplus(logits.float()).sqrt()`, cast back with type_as like the sigmoid.
  The bwd case carries the topk indices the forward returned, in CUDA's own order (ties included),
  because the backward's reduction runs over slots in that order.
- router_topk, baseline, fwd: the same function at core_r0.13.0 (73a28a1078, the parent of
  f5b5555ec6), lines 594-611: the denominator summed in the logits dtype.
- permute, megatron_eager: permute() and _PermuteAlignedAutogradFn (lines 291-427), fwd and bwd.
- unpermute, megatron_eager: unpermute()'s gather-reshape-sum path (lines 430-542), with and
  without probs, fwd and bwd.

    python3 peers/torch/record_routing.py OUT.jsonl [--seed 1]   # record (cuda)
    python3 peers/torch/record_routing.py --check [--seed 1]     # aligned paths give the same bits twice
    python3 peers/torch/record_routing.py --bench                # eager timings at T=16384, H=4096
    python3 peers/torch/record_routing.py --selftest             # the stdlib parts, no torch needed

Recording writes about 1,000 documents (about 13.5 MB): router_topk 140 configurations x (eager fwd,
eager bwd, baseline fwd); permute and unpermute 150 configurations x (fwd, bwd) each. It then prints
NOTE lines on what torch did where the interface states a fact (the NaN order of topk, the sign of
zero through single-slot sums and the embedding backward, zeros_like's dtype check).
"""
import argparse
import itertools
import json
import math
import os
import random
import struct
import sys

# torch and numpy are imported by load_torch(): the case layout, the hex encoding and the grids
# below use the standard library only, so `--selftest` runs on a machine without them.
np = None
torch = None
F = None
DEVICE = "cuda"  # the recording is of eager PyTorch on CUDA

# ---- the case format (core/case_json.cpp) --------------------------------------------------------
BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "i64": 8, "bool": 1}
PACK = {1: "B", 2: "H", 4: "I", 8: "Q"}
FORMAT = "bitparity-case/1"
CODE_OF_RECORD = "Megatron-LM f5b5555ec6 (#5335) megatron/core/transformer/moe/moe_utils.py"
BASELINE_SOURCE = "Megatron-LM 73a28a1078 (core_r0.13.0) megatron/core/transformer/moe/moe_utils.py"
ROUTER_EPS = 1e-20  # Megatron's router denominator epsilon
SPECIAL_MIN_T = 17  # router cases with at least this many rows start with the special rows


def hex_of_bits(bits, dtype):
    """Each element's bit pattern as 2*bytes hex digits, most significant digit first, row-major."""
    width = BYTES[dtype]
    mask = (1 << (8 * width)) - 1
    bits = [int(b) & mask for b in bits]
    return struct.pack(">%d%s" % (len(bits), PACK[width]), *bits).hex()


def tensor_doc(dtype, shape, hex_text):
    return {"dtype": dtype, "shape": [int(d) for d in shape], "hex": hex_text}


def case_doc(op, direction, attrs, inputs, outputs, provenance):
    return {"format": FORMAT, "op": op, "attrs": attrs, "direction": direction,
            "inputs": inputs, "outputs": outputs, "provenance": provenance}


def write_documents(path, documents):
    """Writes an iterable of case documents, one JSON line each, to `path` (the file appears only when
    every document was written); returns (documents, documents with a non-zero output bit)."""
    total = nonzero = 0
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            for doc in documents:
                f.write(json.dumps(doc) + "\n")
                total += 1
                nonzero += any(set(t["hex"]) - {"0"} for t in doc["outputs"].values())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return total, nonzero


def f32_bits(x):
    return struct.unpack(">I", struct.pack(">f", x))[0]


def bf16_bits(x):
    """RNE of an fp32 value to bf16 (finite values; for the self-test)."""
    b = f32_bits(x)
    return (b + 0x7FFF + ((b >> 16) & 1)) >> 16


# ---- permute / unpermute positions (spec OP-2: expert-major, tokens ascending) --------------------
def expert_positions(rows):
    """rows: T lists of E bools. Returns (sorted_tokens, slots): sorted_tokens[p] is the token at
    permuted row p (experts ascending, then tokens ascending); slots[t] lists pos(t, e) for the
    token's experts e ascending, pos(t, e) = off[e] + #{t' < t : M[t', e]}."""
    T = len(rows)
    E = len(rows[0]) if T else 0
    count = [sum(1 for t in range(T) if rows[t][e]) for e in range(E)]
    off = [0] * E
    for e in range(1, E):
        off[e] = off[e - 1] + count[e - 1]
    seen = [0] * E
    slots = []
    for t in range(T):
        mine = []
        for e in range(E):
            if rows[t][e]:
                mine.append(off[e] + seen[e])
                seen[e] += 1
        slots.append(mine)
    sorted_tokens = [t for e in range(E) for t in range(T) if rows[t][e]]
    return sorted_tokens, slots


# ---- the grids ----------------------------------------------------------------------------------
ROUTER_KS = [1, 2, 4, 6, 8]
ROUTER_ES = [8, 16, 64, 128, 160, 256]
ROUTER_TS = [1, 3, 17, 40]
ROUTER_BIASES = ["none", "zero", "random"]
ROUTER_SCALINGS = [None, 1.0, 2.5, 1.3, 0.0]  # 0.0: Megatron's `if scaling_factor:` skips it
MOVE_TS = [1, 5, 17, 64]
MOVE_HS = [1, 8, 24, 64, 136]
MOVE_ES = [4, 8, 16, 128]
MOVE_KS = [1, 2, 4, 6, 8]
MOVE_FAMILIES = ["order", "mixed", "order", "moderate"]
MAP_STYLES = ["random", "random", "clustered", "same", "random"]
MOVE_CONFIGS = 150
MOVE_MAX_ELEMENTS = 8192  # T * k * H: keeps the recording under ~15 MB (the first configs may exceed it)


def router_plan():
    """One config per (k, E) pair x logits dtype x score; bias, scaling and T rotate with strides
    that meet every (dtype, score, bias) combination with small and special-row T. Plus T = 0."""
    pairs = [(k, E) for k in ROUTER_KS for E in ROUTER_ES if k <= E] + [(k, k) for k in (1, 2, 4, 6)]
    plan = []
    for pi, (k, E) in enumerate(pairs):
        for c, (dt, score) in enumerate(itertools.product(["bf16", "fp32"], ["sigmoid", "sqrt_softplus"])):
            T = ROUTER_TS[(pi // 3 + c) % len(ROUTER_TS)]
            if T == 40 and E >= 128:
                T = 3  # keeps the recording small; E >= 128 still meets the special rows at T = 17
            plan.append({"dt": dt, "score": score, "k": k, "E": E, "T": T,
                         "bias": ROUTER_BIASES[(pi + c) % 3],
                         "scaling": ROUTER_SCALINGS[(pi + 2 * c) % len(ROUTER_SCALINGS)]})
    for c, (dt, score) in enumerate(itertools.product(["bf16", "fp32"], ["sigmoid", "sqrt_softplus"])):
        plan.append({"dt": dt, "score": score, "k": [1, 8, 2, 6][c], "E": [8, 64, 16, 256][c], "T": 0,
                     "bias": ROUTER_BIASES[c % 3], "scaling": ROUTER_SCALINGS[c]})
    for i, p in enumerate(plan):
        p["index"] = i
        p["name_score"] = not (p["score"] == "sigmoid" and i % 2 == 0)  # absent score means sigmoid
    return plan


def move_plan(op):
    """(T, H, k, E) drawn from the grid without repeats (a fixed shuffle; the extremes first), with
    the token dtype, value family and routing-map style rotating."""
    combos = [(T, H, k, E) for T in MOVE_TS for H in MOVE_HS for E in MOVE_ES for k in MOVE_KS
              if k <= E and T * k * H <= MOVE_MAX_ELEMENTS]
    random.Random(1000 + len(op)).shuffle(combos)
    first = [(17, 136, 8, 128), (64, 24, 8, 128), (1, 1, 1, 4), (17, 24, 4, 4), (64, 8, 8, 8), (5, 136, 6, 16)]
    combos = first + [c for c in combos if c not in first]
    plan = []
    for i, (T, H, k, E) in enumerate(combos[:MOVE_CONFIGS]):
        plan.append({"T": T, "H": H, "k": k, "E": E, "index": i,
                     "dt": "fp32" if i % 10 in (3, 7) else ("fp16" if i % 10 == 5 else "bf16"),
                     "family": MOVE_FAMILIES[(i // 2) % len(MOVE_FAMILIES)],
                     "style": MAP_STYLES[i % len(MAP_STYLES)],
                     "probs": op == "unpermute" and i % 2 == 0})
    return plan


def estimated_bytes(op, p):
    """Hex characters the config's documents hold (the bulk of the file)."""
    w = {d: 2 * b for d, b in BYTES.items()}
    if op == "router_topk":
        TE = p["T"] * p["E"]
        wl = w[p["dt"]]
        wp = w["fp32"] if p["k"] > 1 else wl
        bias = 3 * w["fp32"] * p["E"] if p["bias"] != "none" else 0
        return TE * ((wl + wp + w["bool"]) + (2 * wl + wp) + (2 * wl + w["bool"])) + p["T"] * p["k"] * w["i64"] + bias
    T, H, k, E = p["T"], p["H"], p["k"], p["E"]
    wt = w[p["dt"]]
    per = 2 * (T * H + T * k * H) * wt + 2 * T * E * w["bool"]
    if op == "unpermute" and p["probs"]:
        per += T * k * H * wt + 3 * T * E * w["fp32"]
    return per


# ---- torch: loading, tensors <-> the case format -----------------------------------------------
def load_torch():
    global np, torch, F
    import numpy
    import torch as torch_module
    import torch.nn.functional as functional
    np, torch, F = numpy, torch_module, functional
    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("record_routing.py: no CUDA device; the recording is of eager PyTorch on CUDA")


def device_name():
    return torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def dtype_name(t):
    return {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32",
            torch.bool: "bool", torch.int64: "i64"}[t.dtype]


def bits_list(t):
    t = t.detach().contiguous().cpu().reshape(-1)
    if t.dtype == torch.bool:
        return t.to(torch.uint8).tolist()
    view = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32,
            torch.int64: torch.int64}[t.dtype]
    return t.view(view).tolist()


def tensor_json(t):
    dt = dtype_name(t)
    return tensor_doc(dt, list(t.shape), hex_of_bits(bits_list(t), dt))


def same_bits(a, b):
    """Identical dtype, shape and bits (NaN payloads and the sign of zero included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    view = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}.get(a.dtype)
    if view is None:
        return torch.equal(a, b)
    return torch.equal(a.contiguous().view(view), b.contiguous().view(view))


def note(notes, what, count=1):
    """Observations printed after recording (facts the interface relies on); counts add up, a
    count of None marks a plain fact."""
    notes[what] = None if count is None else notes.get(what, 0) + count


NEG_ZERO = {"bf16": -0x8000, "fp16": -0x8000, "fp32": -0x80000000}  # -0 as a signed integer view


def zero_fate(src, dst):
    """Where src holds -0: how many dst elements (same dtype and shape) are -0 and how many +0."""
    view = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}[src.dtype]
    neg = NEG_ZERO[dtype_name(src)]
    s = src.contiguous().view(view) == neg
    d = dst.contiguous().view(view)
    return int((s & (d == neg)).sum()), int((s & (d == 0)).sum())


def note_zero_fate(notes, what, src, dst):
    kept, flipped = zero_fate(src, dst)
    note(notes, what + ": -0 kept (elements)", kept)
    note(notes, what + ": -0 became +0 (elements)", flipped)


def provenance(contract, seed, index):
    return {"peer": "torch " + torch.__version__, "device": device_name(),
            "contract": contract, "seed": seed, "index": index,
            "source": BASELINE_SOURCE if contract == "baseline" else CODE_OF_RECORD}


def on_device(v, dt):
    """A float64 numpy array to a device tensor of dtype dt (one rounding per element)."""
    return torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)).to(
        {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dt]).to(DEVICE)


def rng_for(seed, stream, index):
    return np.random.default_rng([seed, stream, index])


# ---- Megatron-LM f5b5555ec6, moe_utils.py, in its arithmetic (bit-exact mode) ------------------
def router_aligned(logits, expert_bias, topk, score, scaling_factor, select=None):
    """topk_softmax_with_capacity, lines 736-786, score_function sigmoid (or sqrt_softplus),
    _is_bit_exact() true, no groups, no capacity. The probs buffer takes P's dtype (see NOTE in
    main(): zeros_like(logits) rejects fp32 P for bf16 logits). `select` stands in for torch.topk
    (same arguments and results): peers/torch/worker.py passes one that returns the slots a backward
    case gives, since the backward's reduction runs over the slots in that order."""
    select = select or torch.topk
    if score == "sigmoid":
        scores = torch.sigmoid(logits.float()).type_as(logits)
    else:
        scores = F.softplus(logits.float()).sqrt().type_as(logits)
    if expert_bias is not None:
        scores_for_routing = scores + expert_bias
        _, top_indices = select(scores_for_routing, k=topk, dim=1)
        scores = torch.gather(scores, dim=1, index=top_indices).type_as(logits)
    else:
        scores, top_indices = select(scores, k=topk, dim=1)
    _scores_f64 = scores.double()
    _sum_f64 = _scores_f64.sum(dim=-1, keepdim=True)
    _denom = _sum_f64.float() + ROUTER_EPS
    probs = scores / _denom if topk > 1 else scores
    if scaling_factor:
        probs = probs * scaling_factor
    topk_masked_gates = torch.zeros(logits.shape, dtype=probs.dtype, device=logits.device).scatter(1, top_indices, probs)
    topk_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    return topk_masked_gates, topk_map, top_indices


def router_r013(logits, expert_bias, topk, score, scaling_factor):
    """core_r0.13.0 topk_softmax_with_capacity, lines 594-611 (sigmoid; sqrt_softplus swapped in)."""
    if score == "sigmoid":
        scores = torch.sigmoid(logits.float()).type_as(logits)
    else:
        scores = F.softplus(logits.float()).sqrt().type_as(logits)
    if expert_bias is not None:
        scores_for_routing = scores + expert_bias
        _, top_indices = torch.topk(scores_for_routing, k=topk, dim=1)
        scores = torch.gather(scores, dim=1, index=top_indices).type_as(logits)
    else:
        scores, top_indices = torch.topk(scores, k=topk, dim=1)
    probs = scores / (scores.sum(dim=-1, keepdim=True) + ROUTER_EPS) if topk > 1 else scores
    if scaling_factor:
        probs = probs * scaling_factor
    topk_masked_gates = torch.zeros_like(logits).scatter(1, top_indices, probs)
    topk_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    return topk_masked_gates, topk_map, top_indices


def make_permute_aligned_fn():
    class _PermuteAlignedAutogradFn(torch.autograd.Function):
        """Lines 291-315: forward index_select; backward gather, reshape [T, k, H], fp32 sum(dim=1)."""

        @staticmethod
        def forward(ctx, tokens, sorted_indices, reverse_indices_flat, num_tokens, topk, hidden):
            ctx.input_dtype = tokens.dtype
            ctx.num_tokens = num_tokens
            ctx.topk = topk
            ctx.hidden = hidden
            ctx.save_for_backward(reverse_indices_flat)
            permuted_input = tokens.index_select(0, sorted_indices)
            return permuted_input

        @staticmethod
        def backward(ctx, grad_permuted):
            (reverse_indices_flat,) = ctx.saved_tensors
            gathered = grad_permuted.float().index_select(0, reverse_indices_flat)
            gathered = gathered.reshape(ctx.num_tokens, ctx.topk, ctx.hidden)
            grad_tokens = gathered.sum(dim=1)
            return grad_tokens.to(ctx.input_dtype), None, None, None, None, None

    return _PermuteAlignedAutogradFn


_PERMUTE_FN = []


def permute_aligned(tokens, routing_map):
    """permute(), lines 318-427, fused=False, drop_and_pad=False, probs=None, _is_bit_exact()."""
    if not _PERMUTE_FN:
        _PERMUTE_FN.append(make_permute_aligned_fn())
    num_tokens, hidden = tokens.shape
    num_experts = routing_map.shape[1]
    rm_orig_bool = routing_map.bool()
    routing_map = rm_orig_bool.T.contiguous()
    token_indices = torch.arange(num_tokens, device=routing_map.device).unsqueeze(0).expand(num_experts, -1)
    sorted_indices = token_indices.masked_select(routing_map)
    rm_T_int = routing_map.long()
    tokens_per_expert = rm_T_int.sum(dim=-1)
    expert_offsets = torch.zeros(num_experts + 1, dtype=torch.long, device=tokens.device)
    expert_offsets[1:] = torch.cumsum(tokens_per_expert, dim=0)
    position_in_expert_T = rm_T_int.cumsum(dim=-1) - 1
    global_position = (position_in_expert_T + expert_offsets[:-1].unsqueeze(1)).T
    topk_val = int(rm_orig_bool.long().sum(dim=-1)[0].item())
    valid_positions = global_position * rm_orig_bool.long()
    reverse_indices_flat = torch.masked_select(valid_positions, rm_orig_bool).reshape(num_tokens * topk_val)
    reverse_indices_flat.requires_grad_(False)
    permuted_input = _PERMUTE_FN[0].apply(tokens, sorted_indices, reverse_indices_flat, num_tokens, topk_val, hidden)
    return permuted_input, None, sorted_indices


def unpermute_aligned(permuted_tokens, sorted_indices, restore_shape, probs=None, routing_map=None):
    """unpermute(), lines 430-542, fused=False, drop_and_pad=False, _is_bit_exact()."""
    _, hidden = restore_shape
    input_dtype = permuted_tokens.dtype
    if probs is not None:
        permuted_probs = probs.T.contiguous().masked_select(routing_map.T.contiguous())
        permuted_tokens = permuted_tokens * permuted_probs.unsqueeze(-1)
    num_tokens = restore_shape[0]
    num_experts = routing_map.shape[1]
    routing_map_bool = routing_map.bool()
    routing_map_T = routing_map_bool.T.contiguous()
    tokens_per_expert = routing_map_T.long().sum(dim=-1)
    expert_offsets = torch.zeros(num_experts + 1, dtype=torch.long, device=permuted_tokens.device)
    expert_offsets[1:] = torch.cumsum(tokens_per_expert, dim=0)
    position_in_expert_T = routing_map_T.long().cumsum(dim=-1) - 1
    global_position = position_in_expert_T + expert_offsets[:-1].unsqueeze(1)
    global_position_per_token = global_position.T
    topk = int(routing_map_bool.long().sum(dim=-1)[0].item())
    valid_positions = global_position_per_token * routing_map_bool.long()
    reverse_indices = valid_positions[routing_map_bool].reshape(num_tokens, topk)
    gathered = F.embedding(reverse_indices.reshape(-1), permuted_tokens)
    gathered = gathered.reshape(num_tokens, topk, hidden)
    output_tokens = gathered.sum(dim=1)
    return output_tokens.to(dtype=input_dtype)


def unpermute_scatter_add(permuted_tokens, sorted_indices, restore_shape):
    """The replaced path (r0.13 and #5335 without bit-exact): zeros + scatter_add_ (atomics)."""
    _, hidden = restore_shape
    output_tokens = torch.zeros(restore_shape, dtype=permuted_tokens.dtype, device=permuted_tokens.device)
    output_tokens.scatter_add_(0, sorted_indices.unsqueeze(1).expand(-1, hidden), permuted_tokens)
    return output_tokens


def permute_r013(tokens, sorted_indices):
    """core_r0.13.0's permute() (moe_utils.py, not fused, no drop_and_pad): index_select; its
    backward, index_select's, is index_add_ into zeros (atomics)."""
    return tokens.index_select(0, sorted_indices)


def unpermute_r013(permuted_tokens, sorted_indices, restore_shape, probs=None, routing_map=None):
    """core_r0.13.0's unpermute() (not fused, no drop_and_pad): with probs each row times its prob
    (bf16 x fp32 promotes to fp32), scatter_add_ into zeros of the product's dtype, cast back."""
    _, hidden = restore_shape
    input_dtype = permuted_tokens.dtype
    if probs is not None:
        permuted_probs = probs.T.contiguous().masked_select(routing_map.T.contiguous())
        permuted_tokens = permuted_tokens * permuted_probs.unsqueeze(-1)
    output_tokens = torch.zeros(restore_shape, dtype=permuted_tokens.dtype, device=permuted_tokens.device)
    output_tokens.scatter_add_(0, sorted_indices.unsqueeze(1).expand(-1, hidden), permuted_tokens)
    return output_tokens.to(dtype=input_dtype)


def sorted_indices_of(routing_map):
    T, E = routing_map.shape
    token_indices = torch.arange(T, device=routing_map.device).unsqueeze(0).expand(E, -1)
    return token_indices.masked_select(routing_map.bool().T.contiguous())


# ---- values ---------------------------------------------------------------------------------------
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-40, -1e-40, 3e38, -3e38, 1.0, -1.0, 2.0 ** -126]
PROB_SPECIALS = [0.0, -0.0, math.nan, 1e-40, 1.0, math.inf, 1024.0]


def draw(rng, shape, family):
    n = int(np.prod(shape)) if shape else 1
    if family == "moderate":
        v = rng.uniform(1, 2, n) * np.exp2(rng.integers(-6, 7, n)) * rng.choice([-1.0, 1.0], n)
    elif family == "probs":
        v = rng.uniform(0, 1, n)
        pick = rng.random(n) < 0.08
        v[pick] = rng.choice(PROB_SPECIALS, int(pick.sum()))
    else:  # mixed: moderate with specials, subnormals and signed zeros sprinkled in
        v = rng.uniform(1, 2, n) * np.exp2(rng.integers(-8, 9, n)) * rng.choice([-1.0, 1.0], n)
        pick = rng.random(n) < 0.15
        v[pick] = rng.choice(SPECIALS, int(pick.sum()))
    return v.reshape(shape)


def slot_values(rng, T, k, H, family):
    """[T, k, H] values per token slot (slot j = the token's j-th smallest expert). The "order"
    family mixes magnitudes 2^14, 1 and 2^-14 and puts +B and -B (|B| ~ 2^14) in two slots of each
    (token, column), so the fp32 sum over slots depends on its order; some tokens are all -0."""
    if family == "order":
        cls = rng.integers(0, 3, (T, k, H))
        expo = np.choose(cls, [14, 0, -14]) + rng.integers(-2, 1, (T, k, H))
        v = rng.uniform(1, 2, (T, k, H)) * np.exp2(expo) * rng.choice([-1.0, 1.0], (T, k, H))
        if k >= 2 and T > 0:
            a = rng.integers(0, k, (T, H))
            b = (a + 1 + rng.integers(0, k - 1, (T, H))) % k
            big = rng.uniform(1, 2, (T, H)) * 2.0 ** 14 * rng.choice([-1.0, 1.0], (T, H))
            ti, hi = np.meshgrid(np.arange(T), np.arange(H), indexing="ij")
            v[ti, a, hi] = big
            v[ti, b, hi] = -big
    else:
        v = draw(rng, (T, k, H), family)
    if T > 1:
        v[rng.random(T) < 0.15] = -0.0
    return v


def routing_rows(rng, T, E, k, style):
    m = np.zeros((T, E), dtype=bool)
    pool = rng.choice(E, min(E, k + 2), replace=False) if style == "clustered" else None
    same = rng.choice(E, k, replace=False)
    for t in range(T):
        if style == "same":
            m[t, same] = True
        elif style == "clustered":
            m[t, rng.choice(pool, k, replace=False)] = True
        else:
            m[t, rng.choice(E, k, replace=False)] = True
    return m


def router_logits(rng, T, E):
    """The probe's rows: randn, every other row x3; with T >= 17 the special rows come first."""
    v = rng.standard_normal((T, E)) * (1 + 2 * (np.arange(T) % 2))[:, None]
    if T >= SPECIAL_MIN_T:
        v[0] = -math.inf                       # sigma = 0, D = 1e-20
        v[1] = -60.0                           # sum of G below 1e-20
        v[2] = -95.0                           # fp32 sigmoid subnormal / 0
        v[3] = 0.0                             # all ties
        v[4] = 30.0                            # saturated sigmoid
        v[5, : E // 2] = -math.inf             # half -inf
        v[6, ::3] = -200.0                     # softplus underflows
        v[7] *= 8.0                            # wide spread
        v[8, rng.integers(0, E)] = math.nan    # one NaN
        v[9] = rng.standard_normal()           # equal logits, not zero
        v[10, rng.choice(E, min(E, 3), replace=False)] = math.nan  # NaNs: their order among themselves
        v[11] = math.nan                       # all NaN
        v[12, rng.choice(E, min(E, 2), replace=False)] = math.inf  # +inf ties at the top
    return v


def router_d_probs(rng, T, E):
    v = rng.standard_normal((T, E)) * np.exp2(rng.integers(-6, 7, (T, E)))
    if T >= 3:
        v[T - 1] = -0.0
        v[T - 2, ::2] = -0.0
    if T >= 4:  # subnormal fp32 gradients of both signs: the gather path's fp32 atomic add flushes them
        e = np.arange(E)
        v[T - 3] = np.ldexp(np.where(e % 2 == 0, 1.0, -1.0) * (1 + (e % 7) / 8), -127 - (e % 16))
    return v


# ---- the recorders --------------------------------------------------------------------------------
STREAMS = {"router_topk": 1, "permute": 2, "unpermute": 3}


def router_docs(p, seed, notes):
    rng = rng_for(seed, STREAMS["router_topk"], p["index"])
    T, E, k, dt = p["T"], p["E"], p["k"], p["dt"]
    logits = on_device(router_logits(rng, T, E), dt)
    bias = None
    if p["bias"] == "zero":
        bias = torch.zeros(E, dtype=torch.float32, device=DEVICE)
    elif p["bias"] == "random":
        bias = on_device(rng.standard_normal(E) * 0.02, "fp32")
    d_probs_values = router_d_probs(rng, T, E)

    L = logits.clone().requires_grad_(True)
    probs, routing_map, idx = router_aligned(L, bias, k, p["score"], p["scaling"])
    d_probs = on_device(d_probs_values, dtype_name(probs))
    (d_logits,) = torch.autograd.grad(probs, L, d_probs)
    with torch.no_grad():
        base_probs, base_map, base_idx = router_r013(logits, bias, k, p["score"], p["scaling"])
    sync()
    # What the interface takes as given; a failure here means the transcription is wrong.
    assert routing_map.shape == (T, E) and idx.shape == (T, k) and idx.dtype == torch.int64
    assert bool((routing_map.sum(dim=1) == k).all()), "a routing_map row without k experts"
    assert probs.dtype == (torch.float32 if k > 1 else logits.dtype), probs.dtype
    assert base_probs.dtype == logits.dtype and d_logits.dtype == logits.dtype
    if not torch.equal(base_idx, idx):
        note(notes, "router: r0.13 and #5335 selected different idx (cases)")

    fwd_in = {"logits": tensor_json(logits)}
    if bias is not None:
        fwd_in["bias"] = tensor_json(bias)
    bwd_in = dict(fwd_in, topk_idx=tensor_json(idx), d_probs=tensor_json(d_probs))
    return [
        ("megatron_eager", "fwd", fwd_in, {"probs": tensor_json(probs), "routing_map": tensor_json(routing_map)}),
        ("megatron_eager", "bwd", bwd_in, {"d_logits": tensor_json(d_logits)}),
        ("baseline", "fwd", fwd_in, {"probs": tensor_json(base_probs), "routing_map": tensor_json(base_map)}),
    ]


def placed(slot_vals, slots, N, H):
    """[T, k, H] slot values to the permuted layout: row slots[t][j] holds slot_vals[t, j]."""
    out = np.zeros((N, H))
    flat = [q for s in slots for q in s]
    if flat:
        out[flat] = slot_vals.reshape(len(flat), H)
    return out


def permute_docs(p, seed, notes):
    rng = rng_for(seed, STREAMS["permute"], p["index"])
    T, H, k, E, dt = p["T"], p["H"], p["k"], p["E"], p["dt"]
    m = routing_rows(rng, T, E, k, p["style"])
    sorted_tokens, slots = expert_positions(m.tolist())
    N = len(sorted_tokens)
    tokens = on_device(draw(rng, (T, H), "mixed" if p["family"] != "moderate" else "moderate"), dt)
    d_permuted = on_device(placed(slot_values(rng, T, k, H, p["family"]), slots, N, H), dt)
    routing_map = torch.from_numpy(m).to(DEVICE)

    X = tokens.clone().requires_grad_(True)
    permuted, _, sorted_indices = permute_aligned(X, routing_map)
    (d_tokens,) = torch.autograd.grad(permuted, X, d_permuted)
    sync()
    assert permuted.shape == (N, H) and d_tokens.shape == (T, H) and d_tokens.dtype == tokens.dtype
    assert sorted_indices.tolist() == sorted_tokens, "permute order differs from spec OP-2's positions"
    if not same_bits(permuted, tokens[torch.tensor(sorted_tokens, dtype=torch.long, device=DEVICE)]):
        note(notes, "permute fwd: not a bit copy of tokens (cases)")
    if k == 1:  # a sum over one slot: does it keep a -0 (a copy) or add it to +0?
        rev = torch.tensor([s[0] for s in slots], dtype=torch.long, device=DEVICE)
        note_zero_fate(notes, "permute bwd k=1 d_permuted -> d_tokens", d_permuted[rev], d_tokens)

    inputs = {"tokens": tensor_json(tokens), "routing_map": tensor_json(routing_map)}
    bwd_in = {"d_permuted": tensor_json(d_permuted), "routing_map": tensor_json(routing_map)}
    return [
        ("megatron_eager", "fwd", inputs, {"permuted": tensor_json(permuted)}),
        ("megatron_eager", "bwd", bwd_in, {"d_tokens": tensor_json(d_tokens)}),
    ]


def unpermute_docs(p, seed, notes):
    rng = rng_for(seed, STREAMS["unpermute"], p["index"])
    T, H, k, E, dt = p["T"], p["H"], p["k"], p["E"], p["dt"]
    m = routing_rows(rng, T, E, k, p["style"])
    sorted_tokens, slots = expert_positions(m.tolist())
    N = len(sorted_tokens)
    permuted = on_device(placed(slot_values(rng, T, k, H, p["family"]), slots, N, H), dt)
    d_out = on_device(draw(rng, (T, H), "mixed" if p["family"] == "mixed" else "moderate"), dt)
    routing_map = torch.from_numpy(m).to(DEVICE)
    probs = None
    if p["probs"]:
        pv = draw(rng, (T, E), "probs")
        if p["family"] == "order" and T > 0:  # one weight per token keeps +B p and -B p cancelling
            pv[:] = rng.uniform(0, 1, (T, 1))
        probs = on_device(pv, "fp32")

    Z = permuted.clone().requires_grad_(True)
    wrt = [Z]
    P = None
    if probs is not None:
        P = probs.clone().requires_grad_(True)
        wrt.append(P)
    out = unpermute_aligned(Z, sorted_indices_of(routing_map), torch.Size([T, H]), probs=P, routing_map=routing_map)
    grads = torch.autograd.grad(out, wrt, d_out)
    sync()
    assert out.shape == (T, H) and out.dtype == permuted.dtype
    assert grads[0].shape == (N, H) and grads[0].dtype == d_out.dtype
    if probs is None:
        token_of_row = [0] * N
        for t, s in enumerate(slots):
            for q in s:
                token_of_row[q] = t
        copy = d_out[torch.tensor(token_of_row, dtype=torch.long, device=DEVICE)]
        if not same_bits(grads[0], copy):
            note(notes, "unpermute bwd (no probs): d_permuted not a bit copy of d_out (cases)")
        note_zero_fate(notes, "unpermute bwd (no probs) d_out -> d_permuted", copy, grads[0])
        if k == 1:
            rev = torch.tensor([s[0] for s in slots], dtype=torch.long, device=DEVICE)
            note_zero_fate(notes, "unpermute fwd (no probs) k=1 permuted -> out", permuted[rev], out)
    else:
        assert grads[1].shape == (T, E) and grads[1].dtype == torch.float32

    fwd_in = {"permuted": tensor_json(permuted), "routing_map": tensor_json(routing_map)}
    bwd_in = {"d_out": tensor_json(d_out), "routing_map": tensor_json(routing_map)}
    bwd_out = {"d_permuted": tensor_json(grads[0])}
    if probs is not None:
        fwd_in["probs"] = tensor_json(probs)
        bwd_in["probs"] = fwd_in["probs"]
        bwd_in["permuted"] = fwd_in["permuted"]
        bwd_out["d_probs"] = tensor_json(grads[1])
    return [
        ("megatron_eager", "fwd", fwd_in, {"out": tensor_json(out)}),
        ("megatron_eager", "bwd", bwd_in, bwd_out),
    ]


RECORDERS = {"router_topk": router_docs, "permute": permute_docs, "unpermute": unpermute_docs}


def plan_of(op):
    return router_plan() if op == "router_topk" else move_plan(op)


def attrs_of(op, p):
    if op != "router_topk":
        return {}
    attrs = {"k": p["k"]}
    if p["name_score"]:
        attrs["score"] = p["score"]
    if p["scaling"] is not None:
        attrs["scaling"] = p["scaling"]
    return attrs


def documents(op, p, seed, notes):
    out = []
    for contract, direction, inputs, outputs in RECORDERS[op](p, seed, notes):
        out.append(case_doc(op, direction, attrs_of(op, p), inputs, outputs,
                            provenance(contract, seed, p["index"])))
    return out


# ---- modes -----------------------------------------------------------------------------------------
def observe_code_of_record(notes):
    """Facts the interface relies on that only the real torch can settle; printed, not recorded."""
    L = torch.zeros(2, 8, dtype=torch.bfloat16, device=DEVICE)
    P = torch.full((2, 2), 0.5, dtype=torch.float32, device=DEVICE)
    idx = torch.tensor([[0, 1], [2, 3]], device=DEVICE)
    try:
        r = torch.zeros_like(L).scatter(1, idx, P)
        note(notes, "verbatim zeros_like(bf16 logits).scatter(fp32 P) (k > 1): accepted, dtype " + str(r.dtype), None)
    except RuntimeError as e:
        note(notes, "verbatim zeros_like(bf16 logits).scatter(fp32 P) (k > 1): raises: " + str(e).splitlines()[0], None)
    for dt in (torch.bfloat16, torch.float32):
        row = torch.tensor([[0.5, math.nan, 0.25, math.nan, 0.75, 0.75, math.nan, 0.1]], device=DEVICE).to(dt)
        got = torch.topk(row, k=5, dim=1).indices.tolist()[0]
        note(notes, "topk of [.5, nan, .25, nan, .75, .75, nan, .1] (%s), k=5: indices %s" % (str(dt), got), None)


def record(args):
    load_torch()
    torch.manual_seed(args.seed)
    notes = {}
    observe_code_of_record(notes)
    counts = {}
    nonzero = 0
    total = 0
    tmp = args.out + ".tmp"  # the file appears only when every case was recorded
    try:
        with open(tmp, "w") as f:
            for op in ("router_topk", "permute", "unpermute"):
                for p in plan_of(op):
                    try:
                        docs = documents(op, p, args.seed, notes)
                    except Exception as e:  # only T = 0 may be refused by torch; it is noted and skipped
                        if op == "router_topk" and p["T"] == 0:
                            note(notes, "router_topk T=0 skipped (config %d): %r" % (p["index"], e), None)
                            continue
                        raise
                    for doc in docs:
                        f.write(json.dumps(doc) + "\n")
                        key = "%s %s %s" % (op, doc["direction"], doc["provenance"]["contract"])
                        counts[key] = counts.get(key, 0) + 1
                        total += 1
                        nonzero += any(set(t["hex"]) - {"0"} for t in doc["outputs"].values())
        os.replace(tmp, args.out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    size = os.path.getsize(args.out)
    print("recorded %d cases (%.1f MB) with torch %s on %s to %s"
          % (total, size / 1e6, torch.__version__, device_name(), args.out))
    for key in sorted(counts):
        print("  %-36s %d" % (key, counts[key]))
    for what in sorted(notes):
        print("NOTE %s%s" % (what, "" if notes[what] is None else ": %d" % notes[what]))
    if nonzero * 2 <= total:
        print("FAIL: most recorded outputs are all zero (%d of %d have a non-zero bit)" % (nonzero, total))
        return 1
    return 0


def check(args):
    """Re-runs recorded configurations and larger ones twice; the aligned paths must give the same
    bits. The atomic scatter_add_ unpermute is run too, for information only."""
    load_torch()
    failures = 0
    notes = {}
    picks = {"router_topk": [p for p in router_plan() if p["T"] >= SPECIAL_MIN_T][:8],
             "permute": [p for p in move_plan("permute") if p["k"] >= 4][:6],
             "unpermute": [p for p in move_plan("unpermute") if p["k"] >= 4][:6]}
    for op, plan in picks.items():
        for p in plan:
            a = documents(op, p, args.seed, notes)
            b = documents(op, p, args.seed, notes)
            same = [x["outputs"] == y["outputs"] for x, y in zip(a, b)]
            if not all(same):
                failures += 1
                print("DIFFERS %s config %d: %s" % (op, p["index"], json.dumps(p)))
            else:
                print("same    %s config %d (%d documents)" % (op, p["index"], len(a)))

    g = torch.Generator(device=DEVICE).manual_seed(args.seed)
    T, H, E, k = 4096, 1024, 128, 8
    m = torch.zeros(T, E, dtype=torch.bool, device=DEVICE)
    m.scatter_(1, torch.rand(T, E, generator=g, device=DEVICE).topk(k, dim=1).indices, True)
    X = torch.randn(T, H, generator=g, device=DEVICE).to(torch.bfloat16)
    dY = (torch.randn(T * k, H, generator=g, device=DEVICE) * 1e3).to(torch.bfloat16)
    Z = (torch.randn(T * k, H, generator=g, device=DEVICE) * 1e3).to(torch.bfloat16)
    probs = torch.rand(T, E, generator=g, device=DEVICE)
    dO = torch.randn(T, H, generator=g, device=DEVICE).to(torch.bfloat16)
    L = torch.randn(T, 256, generator=g, device=DEVICE).to(torch.bfloat16)
    dP = torch.randn(T, 256, generator=g, device=DEVICE)

    def permute_bwd():
        Xg = X.clone().requires_grad_(True)
        y, _, _ = permute_aligned(Xg, m)
        return torch.autograd.grad(y, Xg, dY)

    def unpermute_both(with_probs):
        def run():
            Zg = Z.clone().requires_grad_(True)
            Pg = probs.clone().requires_grad_(True) if with_probs else None
            o = unpermute_aligned(Zg, sorted_indices_of(m), torch.Size([T, H]), probs=Pg, routing_map=m)
            return (o,) + torch.autograd.grad(o, [Zg] + ([Pg] if with_probs else []), dO)
        return run

    def router_both():
        Lg = L.clone().requires_grad_(True)
        pr, rm, ix = router_aligned(Lg, torch.zeros(256, device=DEVICE), 8, "sigmoid", 2.5)
        return (pr, rm, ix) + torch.autograd.grad(pr, Lg, dP)

    shape = "T=%d H=%d E=%d k=%d bf16" % (T, H, E, k)
    for name, fn in (("permute bwd " + shape, permute_bwd),
                     ("unpermute fwd+bwd " + shape, unpermute_both(False)),
                     ("unpermute fwd+bwd with probs " + shape, unpermute_both(True)),
                     ("router fwd+bwd T=%d E=256 k=8 bf16 zero bias, scaling 2.5" % T, router_both)):
        runs = [fn() for _ in range(3)]
        ok = all(same_bits(x, y) for r in runs[1:] for x, y in zip(runs[0], r))
        failures += not ok
        print("%s %s" % ("same   " if ok else "DIFFERS", name))
    base = [unpermute_scatter_add(Z, sorted_indices_of(m), torch.Size([T, H])) for _ in range(3)]
    print("info: baseline scatter_add_ unpermute gives %s bits on 3 runs"
          % ("the same" if all(same_bits(base[0], b) for b in base[1:]) else "different"))
    print("check: %s" % ("FAILED, %d differ" % failures if failures else "every aligned path is deterministic"))
    return 1 if failures else 0


BENCH_T, BENCH_H, BENCH_K = 16384, 4096, 8
BENCH_ES = (128, 160)  # permute / unpermute
BENCH_ROUTER_ES = (128, 256)


def timed_us(fn, iters=60, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) * 1e3 / iters


def bench(args):
    """Eager timings (torch.cuda.Event, 60 iterations after 10 warm-up) of the aligned ops, the
    atomic baselines and a device-to-device copy; GB/s counts each op's minimal traffic (read the
    input once, write the output once)."""
    load_torch()
    torch.manual_seed(args.seed)
    T, H, k = BENCH_T, BENCH_H, BENCH_K
    rows = []
    for E in BENCH_ES:
        m = torch.zeros(T, E, dtype=torch.bool, device=DEVICE)
        m.scatter_(1, torch.rand(T, E, device=DEVICE).topk(k, dim=1).indices, True)
        N = T * k
        X = torch.randn(T, H, device=DEVICE).to(torch.bfloat16)
        Z = torch.randn(N, H, device=DEVICE).to(torch.bfloat16)
        dO = torch.randn(T, H, device=DEVICE).to(torch.bfloat16)
        probs = torch.rand(T, E, device=DEVICE)
        si = sorted_indices_of(m)
        shape = torch.Size([T, H])
        spread = N * H * 2 + T * H * 2  # bytes: read [T, H] and write [N, H] or the reverse
        src = torch.empty(N * H + T * H, dtype=torch.bfloat16, device=DEVICE)
        dst = torch.empty_like(src)
        copy_us = timed_us(lambda: dst.copy_(src))
        rows.append(("d2d copy of the same bytes (read+write)", E, copy_us, 2 * spread))
        # The memory's own ceilings for the permute's mix (8 bytes written per byte read): write-only
        # and read-only streams of the same bytes.
        rows.append(("write-only stream (fill_) of those bytes", E, timed_us(lambda: dst.fill_(0)), spread))
        rows.append(("read-only stream (amax) of those bytes", E, timed_us(lambda: src.amax()), spread))

        Xg = X.clone().requires_grad_(True)
        Y, _, _ = permute_aligned(Xg, m)
        rows.append(("permute fwd (aligned permute())", E, timed_us(lambda: permute_aligned(X, m)), spread))
        rows.append(("permute bwd (aligned, fp32 sum(1))", E,
                     timed_us(lambda: torch.autograd.grad(Y, Xg, Z, retain_graph=True)), spread))
        rows.append(("permute bwd baseline (index_add_)", E,
                     timed_us(lambda: torch.zeros(T, H, dtype=torch.bfloat16, device=DEVICE).index_add_(0, si, Z)), spread))
        rows.append(("unpermute fwd (aligned, embedding+sum)", E,
                     timed_us(lambda: unpermute_aligned(Z, si, shape, routing_map=m)), spread))
        Zg = Z.clone().requires_grad_(True)
        O = unpermute_aligned(Zg, si, shape, routing_map=m)
        rows.append(("unpermute bwd (aligned, embedding bwd)", E,
                     timed_us(lambda: torch.autograd.grad(O, Zg, dO, retain_graph=True)), spread))
        Pg = probs.clone().requires_grad_(True)
        Op = unpermute_aligned(Zg, si, shape, probs=Pg, routing_map=m)
        rows.append(("unpermute fwd with probs (aligned)", E,
                     timed_us(lambda: unpermute_aligned(Z, si, shape, probs=probs, routing_map=m)), spread))
        rows.append(("unpermute bwd with probs (aligned)", E,
                     timed_us(lambda: torch.autograd.grad(Op, [Zg, Pg], dO, retain_graph=True)), spread))
        rows.append(("unpermute baseline (scatter_add_)", E,
                     timed_us(lambda: unpermute_scatter_add(Z, si, shape)), spread))
        rows.append(("unpermute baseline (index_add_)", E,
                     timed_us(lambda: torch.zeros(T, H, dtype=torch.bfloat16, device=DEVICE).index_add_(0, si, Z)), spread))
        del Y, Xg, O, Op, Zg, Pg, src, dst
        torch.cuda.empty_cache()
    copy_gbs = {E: b / us / 1e3 for name, E, us, b in rows if name.startswith("d2d")}
    print("eager torch %s on %s: T=%d H=%d k=%d bf16; permute moves 2 + 2/k bytes per [T*k, H] element,"
          " unpermute 2k + 2 per [T, H] element" % (torch.__version__, device_name(), T, H, k))
    print("%-42s %4s %10s %9s %8s %8s" % ("op", "E", "us", "MB", "GB/s", "% copy"))
    for name, E, us, b in rows:
        gbs = b / us / 1e3
        print("%-42s %4d %10.1f %9.1f %8.1f %7.1f%%" % (name, E, us, b / 1e6, gbs, 100 * gbs / copy_gbs[E]))
    for E in BENCH_ROUTER_ES:
        logits = torch.randn(T, E, device=DEVICE).to(torch.bfloat16)
        zero = torch.zeros(E, device=DEVICE)
        with torch.no_grad():
            aligned = timed_us(lambda: router_aligned(logits, zero, k, "sigmoid", None))
            base = timed_us(lambda: router_r013(logits, zero, k, "sigmoid", None))
        print("router fwd %dx%d k=%d bf16 sigmoid zero bias: aligned (fp64 denominator) %.1f us, r0.13 %.1f us"
              % (T, E, k, aligned, base))
    return 0


# ---- the stdlib self-test ----------------------------------------------------------------------------
def selftest():
    assert hex_of_bits([0x3F80, -32768, 0x7FC0], "bf16") == "3f808000" + "7fc0"
    assert hex_of_bits([f32_bits(1.0), f32_bits(-0.0)], "fp32") == "3f800000" + "80000000"
    assert hex_of_bits([5, 0], "i64") == "0000000000000005" + "0" * 16
    assert hex_of_bits([1, 0, 1], "bool") == "010001"
    assert hex_of_bits([], "fp32") == ""
    assert bf16_bits(1.0) == 0x3F80 and bf16_bits(1.0 + 2.0 ** -8) == 0x3F80 and bf16_bits(1.0 + 3 * 2.0 ** -8) == 0x3F82
    assert hex_of_bits([-1], "fp16") == "ffff" and hex_of_bits([-2], "i64") == "f" * 15 + "e"
    # T=3, E=4: rows -> experts {1,3}, {0,1}, {1,3}; counts 1,3,0,2 -> off 0,1,4,4.
    rows = [[False, True, False, True], [True, True, False, False], [False, True, False, True]]
    sorted_tokens, slots = expert_positions(rows)
    assert sorted_tokens == [1, 0, 1, 2, 0, 2], sorted_tokens
    assert slots == [[1, 4], [0, 2], [3, 5]], slots
    assert expert_positions([]) == ([], [])
    doc = case_doc("permute", "fwd", {}, {"tokens": tensor_doc("bf16", (1, 2), "3f808000")}, {}, {"contract": "x"})
    assert list(doc) == ["format", "op", "attrs", "direction", "inputs", "outputs", "provenance"]
    assert json.loads(json.dumps(doc))["inputs"]["tokens"]["shape"] == [1, 2]

    rp = router_plan()
    combos = {(p["dt"], p["score"], p["bias"]) for p in rp}
    assert len(combos) == 12, combos
    for key in combos:  # every (dtype, score, bias) meets the special rows and small T
        ts = {p["T"] for p in rp if (p["dt"], p["score"], p["bias"]) == key}
        assert any(t >= SPECIAL_MIN_T for t in ts) and any(0 < t < SPECIAL_MIN_T for t in ts), (key, ts)
    assert {p["k"] for p in rp} == set(ROUTER_KS) and {p["scaling"] for p in rp} == set(ROUTER_SCALINGS)
    assert all(p["k"] <= p["E"] for p in rp) and any(p["k"] == p["E"] for p in rp)
    for dt, sc in itertools.product(["bf16", "fp32"], ["sigmoid", "sqrt_softplus"]):
        assert {p["k"] for p in rp if p["dt"] == dt and p["score"] == sc and p["T"] > 0} == set(ROUTER_KS)
    sizes = {"router_topk": sum(estimated_bytes("router_topk", p) for p in rp)}
    for op in ("permute", "unpermute"):
        mp = move_plan(op)
        assert len(mp) == MOVE_CONFIGS and len({(p["T"], p["H"], p["k"], p["E"]) for p in mp}) == MOVE_CONFIGS
        for axis, values in (("T", MOVE_TS), ("H", MOVE_HS), ("E", MOVE_ES), ("k", MOVE_KS), ("dt", ["bf16", "fp16", "fp32"]),
                             ("family", set(MOVE_FAMILIES)), ("style", set(MAP_STYLES))):
            assert {p[axis] for p in mp} == set(values), (op, axis)
        if op == "unpermute":
            assert {(p["family"], p["probs"]) for p in mp} == {(f, b) for f in MOVE_FAMILIES for b in (True, False)}
        sizes[op] = sum(estimated_bytes(op, p) for p in mp)
    docs = {"router_topk": 3 * len(rp), "permute": 2 * MOVE_CONFIGS, "unpermute": 2 * MOVE_CONFIGS}
    for op in sizes:
        print("%-12s %4d documents, about %.1f MB" % (op, docs[op], sizes[op] / 1e6))
    assert sum(sizes.values()) < 15e6, sizes
    print("selftest: ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", help="the .jsonl file to write (record mode)")
    ap.add_argument("--seed", type=int, default=1)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="re-run configurations twice; exit 1 if bits differ")
    mode.add_argument("--bench", action="store_true", help="print eager timings; writes no file")
    mode.add_argument("--selftest", action="store_true", help="test the stdlib parts (no torch)")
    args = ap.parse_args()
    if args.seed < 0:
        ap.error("--seed must be a non-negative integer")
    if args.selftest:
        return selftest()
    if args.check:
        return check(args)
    if args.bench:
        return bench(args)
    if not args.out:
        ap.error("give the output path (or --check, --bench, --selftest)")
    return record(args)


if __name__ == "__main__":
    sys.exit(main())
