#!/usr/bin/env python3
"""The eager-PyTorch exec worker: serves bitparity's cases by running each op under eager PyTorch
on CUDA, with the code the recorders beside it (record_*.py) record, so that a campaign compares a
contract's CPU reference or CUDA kernel with the framework itself on every case it draws, not only
on the recorded ones.

    bitparity --exec torch="python3 peers/torch/worker.py" \\
        campaign --pair ref:megatron_eager,torch:megatron_eager --budget-seconds 300 --seed 7
    bitparity --exec torch="python3 peers/torch/worker.py" \\
        campaign --pair cuda:megatron_eager,torch:megatron_eager --budget-seconds 300
    bitparity --exec torch="python3 peers/torch/worker.py" diff --case case.json ref:glm45 torch:glm45
    python3 peers/torch/worker.py --selftest                 # every recording in peers/torch
    python3 peers/torch/worker.py --selftest peers/torch/routing.jsonl.gz

The protocol (peers/exec/exec_backend.h): the worker writes one hello line, {"format":
"bitparity-worker/1", "implements": {op: [contract, ...]}}, then answers each request line (a
bitparity-case/1 document plus "id" and "contract") with one line: {"id", "outputs"}, {"id",
"reject": {"class", "message"}} or {"id", "error"}. Tensors are row-major bit patterns in hex, each
element's most significant digit first. An exception while computing is an "error" answer and the
worker serves on; only a CUDA context that no longer works (a device-side assert, an illegal
address) ends it, without an answer, so that bitparity charges the fault to the case that caused
it and starts a fresh worker for the next one.

Served (the hello names them): swiglu and swiglu_scale under megatron_eager and megatron_unfused,
router_topk under megatron_eager and baseline (forward), permute and unpermute under
megatron_eager, fanout_grad (glm45, dsv4), adamw_step (megatron_eager), grad_finalize
(megatron_aligned, megatron_r013), embedding (megatron_eager, baseline), cross_entropy
(megatron_eager) and expert_mlp (megatron_eager: cuBLAS's GEMMs, judged within the chain bound). Not served: what no recorder runs (PaddleFleet's kernels, the fused cross entropy,
the atomic baselines of permute, unpermute and embedding).

`--selftest` pushes every recorded case (peers/torch/*.jsonl.gz, or the files named) through the
same dispatch and compares the outputs' bits with the recorded ones; it prints counts per op,
direction and contract, and exits 1 on any mismatch or error.

Without torch, or without a CUDA device, the worker says so on stderr and exits 2 before the hello.
The codec and the protocol checks need only the standard library (test_codec.py tests them).
"""
import argparse
import gzip
import json
import math
import os
import re
import sys
import zlib
from array import array

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import record_cross_entropy as rce  # noqa: E402  (the recorders' op functions; torch loads later)
import record_embedding as remb  # noqa: E402
import record_expert_mlp as rem  # noqa: E402
import record_routing as rr  # noqa: E402
import record_swiglu as rs  # noqa: E402
import record_training as rt  # noqa: E402

WORKER_FORMAT = "bitparity-worker/1"
CASE_FORMAT = "bitparity-case/1"
EXIT_USAGE = 2            # no torch, no CUDA, unreadable recordings, bad arguments
EXIT_CONTEXT_LOST = 3     # the CUDA context stopped working: a fresh worker must take over
ERROR_MESSAGE_CHARS = 4000  # torch's messages can carry whole stack traces

# ---- the case format's tensors (core/dtype.cpp, core/case_json.cpp) -------------------------------
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "fp8_e4m3": 1, "fp8_e5m2": 1,
                 "bool": 1, "i32": 4, "i64": 8}
MAX_RANK = 8               # kMaxTensorRank, core/tensor.h
MAX_ELEMENTS = 1 << 26     # kMaxTensorElements: the product of the nonzero dims
ARRAY_CODE = {array(code).itemsize: code for code in "QLIHB"}  # element width -> an array typecode
HEX_DIGITS = re.compile(r"[0-9a-fA-F]*\Z")


class ProtocolError(ValueError):
    """A request (or a recorded case) that is not what the protocol says: an "error" answer."""


class Reject(Exception):
    """The contract refusing the input, compared by bitparity with the other side's rejection."""

    def __init__(self, error_class, message):
        super().__init__(message)
        self.error_class = error_class


def swap_to_native(data, width):
    """Big-endian element bytes to the machine's order, and back (the swap is its own inverse)."""
    if width == 1 or sys.byteorder == "big" or not data:
        return bytes(data)
    elements = array(ARRAY_CODE[width])
    elements.frombytes(data)
    elements.byteswap()
    return elements.tobytes()


def shape_of(value, field):
    if not isinstance(value, list):
        raise ProtocolError("%s: expected an array of dimensions, got %s" % (field, type(value).__name__))
    if len(value) > MAX_RANK:
        raise ProtocolError("%s: a tensor has at most %d dims; got %d" % (field, MAX_RANK, len(value)))
    product = 1
    for i, d in enumerate(value):
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            raise ProtocolError("%s[%d]: expected a non-negative integer, got %r" % (field, i, d))
        product *= max(d, 1)
        if product > MAX_ELEMENTS:
            raise ProtocolError("%s: more than 2^26 elements (the product of the nonzero dims)" % field)
    return list(value)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def decode_tensor(doc, field):
    """A tensor document -> (dtype, shape, the elements' bytes in the machine's order)."""
    if not isinstance(doc, dict):
        raise ProtocolError("%s: expected a tensor object {dtype, shape, hex}, got %s" % (field, type(doc).__name__))
    for key in doc:
        if key not in ("dtype", "shape", "hex"):
            raise ProtocolError("%s.%s: unexpected field in a tensor (expected dtype, shape, hex)" % (field, key))
    dtype = doc.get("dtype")
    if dtype not in ELEMENT_BYTES:
        raise ProtocolError("%s.dtype: unknown dtype %r (known: %s)" % (field, dtype, ", ".join(ELEMENT_BYTES)))
    shape = shape_of(doc.get("shape"), field + ".shape")
    text = doc.get("hex")
    if not isinstance(text, str):
        raise ProtocolError("%s.hex: expected a string of hex digits, got %s" % (field, type(text).__name__))
    width = ELEMENT_BYTES[dtype]
    n = numel(shape)
    if len(text) != 2 * width * n:
        raise ProtocolError("%s.hex: expected %d hex digits per element for %d %s elements of shape %s (%d digits); "
                            "got %d" % (field, 2 * width, n, dtype, shape, 2 * width * n, len(text)))
    if not HEX_DIGITS.match(text):
        raise ProtocolError("%s.hex: not a string of hexadecimal digits" % field)
    data = bytes.fromhex(text)
    if dtype == "bool" and data.strip(b"\x00\x01"):
        raise ProtocolError("%s.hex: a bool element is neither 00 nor 01" % field)
    return dtype, shape, swap_to_native(data, width)


def encode_tensor(dtype, shape, native):
    """(dtype, shape, the elements' bytes in the machine's order) -> a tensor document."""
    return {"dtype": dtype, "shape": [int(d) for d in shape], "hex": swap_to_native(native, ELEMENT_BYTES[dtype]).hex()}


def float_attr(attrs, name):
    """A float attribute: a number or "nan", "inf", "+inf", "-inf"; None when absent (or null)."""
    value = attrs.get(name)
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    special = {"nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf}
    if isinstance(value, str) and value in special:
        return special[value]
    raise ProtocolError('attrs.%s: expected a number or one of "nan", "inf", "-inf"; got %r' % (name, value))


def int_attr(attrs, name, required=False):
    value = attrs.get(name)
    if value is None:
        if required:
            raise ProtocolError("attrs.%s: required" % name)
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError("attrs.%s: expected an integer, got %r" % (name, value))
    return value


def bool_attr(attrs, name):
    value = attrs.get(name)
    if value is not None and not isinstance(value, bool):
        raise ProtocolError("attrs.%s: expected true or false, got %r" % (name, value))
    return value


def str_attr(attrs, name):
    value = attrs.get(name)
    if value is not None and not isinstance(value, str):
        raise ProtocolError("attrs.%s: expected a string, got %r" % (name, value))
    return value


def present(**attrs):
    """The attributes that were given (absent means "not given", as in the case format)."""
    return {k: v for k, v in attrs.items() if v is not None}


# ---- outputs compared bit for bit (the self-test) ---------------------------------------------------
def first_difference(expected, got):
    """None when the two {name: tensor document} maps hold the same tensors bit for bit, else a line
    naming the first difference: a missing or extra output, a dtype or shape, or the element (with
    both bit patterns and how many elements differ)."""
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    if missing or extra:
        return "outputs differ: missing %s, unexpected %s" % (missing or "none", extra or "none")
    for name in sorted(expected):
        e, g = expected[name], got[name]
        if e["dtype"] != g["dtype"] or list(e["shape"]) != list(g["shape"]):
            return "%s: recorded %s %s, got %s %s" % (name, e["dtype"], e["shape"], g["dtype"], g["shape"])
        if e["hex"].lower() == g["hex"].lower():
            continue
        digits = 2 * ELEMENT_BYTES[e["dtype"]]
        eh, gh = e["hex"].lower(), g["hex"].lower()
        differ = [i for i in range(len(eh) // digits) if eh[i * digits:(i + 1) * digits] != gh[i * digits:(i + 1) * digits]]
        i = differ[0]
        return "%s: %d of %d elements differ; first at flat index %d: recorded 0x%s, got 0x%s" % (
            name, len(differ), len(eh) // digits, i, eh[i * digits:(i + 1) * digits], gh[i * digits:(i + 1) * digits])
    return None


# ---- torch: loading and tensors ----------------------------------------------------------------------
torch = None
F = None
TORCH_DTYPE = {}   # case dtype -> torch dtype
CASE_DTYPE = {}    # torch dtype -> case dtype
BITS_VIEW = {}     # element width -> the torch integer type of that width


def die(code, message):
    sys.stderr.write("peers/torch/worker.py: %s\n" % message)
    sys.stderr.flush()
    sys.exit(code)


def load_torch():
    """Imports torch, checks that CUDA works, and loads the recorders' torch globals; exits 2 with a
    message naming what is missing otherwise."""
    global torch, F
    try:
        import torch as torch_module
        import torch.nn.functional as functional
    except Exception as e:  # ImportError, or an install that fails while loading
        die(EXIT_USAGE, "cannot import torch (%s: %s); this worker runs eager PyTorch on CUDA: install PyTorch "
                        "with CUDA support" % (type(e).__name__, e))
    torch, F = torch_module, functional
    if not torch.cuda.is_available():
        die(EXIT_USAGE, "torch %s sees no CUDA device (torch.cuda.is_available() is false); this worker runs "
                        "eager PyTorch on CUDA" % torch.__version__)
    try:
        torch.zeros(1, device=rr.DEVICE).add_(1).item()
    except Exception as e:
        die(EXIT_USAGE, "CUDA does not work under torch %s: %s" % (torch.__version__, first_line(e)))
    try:
        rr.load_torch()
        rs.load_torch()
    except ImportError as e:
        die(EXIT_USAGE, "the recorders' functions need numpy: %s" % e)
    TORCH_DTYPE.update({"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64,
                        "bool": torch.bool, "i32": torch.int32, "i64": torch.int64})
    for name, attr in (("fp8_e4m3", "float8_e4m3fn"), ("fp8_e5m2", "float8_e5m2")):
        if hasattr(torch, attr):
            TORCH_DTYPE[name] = getattr(torch, attr)
    CASE_DTYPE.update({t: name for name, t in TORCH_DTYPE.items()})
    BITS_VIEW.update({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64})


def first_line(e):
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def to_device(dtype, shape, native):
    """A decoded tensor on the CUDA device: a fresh allocation, as the recorders' inputs were."""
    if dtype not in TORCH_DTYPE:
        raise Reject("dtype", "torch %s has no %s dtype" % (torch.__version__, dtype))
    if not native:
        return torch.empty(shape, dtype=TORCH_DTYPE[dtype], device=rr.DEVICE)
    bits = torch.frombuffer(bytearray(native), dtype=BITS_VIEW[ELEMENT_BYTES[dtype]])
    return bits.view(TORCH_DTYPE[dtype]).reshape(shape).to(rr.DEVICE)


def from_device(t, name):
    """A result tensor (any device) as a tensor document."""
    if t.dtype not in CASE_DTYPE:
        raise ProtocolError("output %s has dtype %s, which the case format has no name for" % (name, t.dtype))
    dtype = CASE_DTYPE[t.dtype]
    size = t.numel() * ELEMENT_BYTES[dtype]
    if size == 0:
        return encode_tensor(dtype, t.shape, b"")
    buffer = bytearray(size)
    torch.frombuffer(buffer, dtype=torch.uint8).copy_(t.detach().contiguous().reshape(-1).view(torch.uint8))
    return encode_tensor(dtype, t.shape, bytes(buffer))


def context_works():
    """Whether the CUDA context still runs work (a device-side assert or an illegal address leaves
    it failing every call)."""
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device=rr.DEVICE).add_(1).item()
        return True
    except Exception:
        return False


# ---- the ops, each as its contract's source runs it -------------------------------------------------
class Case:
    def __init__(self, op, direction, attrs, inputs):
        self.op, self.direction, self.attrs, self.inputs = op, direction, attrs, inputs

    def fwd_only(self):
        if self.direction != "fwd":
            raise ProtocolError("%s has no %s direction" % (self.op, self.direction))

    def need(self, name):
        if name not in self.inputs:
            raise ProtocolError("inputs.%s: missing required input of %s %s" % (name, self.op, self.direction))
        return self.inputs[name]


def serve_swiglu(c, contract):
    """Megatron's eager swiglu / swiglu_back (clamped when the contract's gate opens); with a bias,
    bias_swiglu's y + bias first."""
    clamp = float_attr(c.attrs, "clamp")
    y = c.need("y")
    bias = c.inputs.get("bias")
    y_in = y + bias if bias is not None else y
    if c.direction == "fwd":
        return {"out": rs.swiglu_fwd(y_in, clamp, contract)}
    return {"d_y": rs.swiglu_bwd(c.need("g"), y_in, clamp, contract)}


def serve_swiglu_scale(c, contract):
    """Megatron's weighted SwiGLU: the weights as [rows, 1]; d_scale in the scale's own shape."""
    clamp = float_attr(c.attrs, "clamp")
    y, scale = c.need("y"), c.need("scale")
    w = scale.reshape(y.shape[0], 1)
    if c.direction == "fwd":
        return {"out": rs.weighted_fwd(y, w, clamp, contract)}
    d_y, d_w = rs.weighted_bwd(c.need("g"), y, w, clamp, contract)
    return {"d_y": d_y, "d_scale": d_w.reshape(scale.shape)}


_TOPK_AT = []


def given_slots(idx):
    """A stand-in for torch.topk that returns the case's slots: the values gathered at idx, whose
    backward is topk's own (value_selecting_reduction_backward, ATen ReduceOps.cpp: zeros of the
    input's shape, scatter_ of the gradient at the indices)."""
    if not _TOPK_AT:
        class TopkAt(torch.autograd.Function):
            @staticmethod
            def forward(ctx, scores, indices):
                ctx.save_for_backward(indices)
                ctx.shape = scores.shape
                return scores.gather(1, indices)

            @staticmethod
            def backward(ctx, grad):
                (indices,) = ctx.saved_tensors
                return torch.zeros(ctx.shape, dtype=grad.dtype, device=grad.device).scatter_(1, indices, grad), None

        _TOPK_AT.append(TopkAt)

    def select(scores, k, dim):
        if dim != 1 or list(idx.shape) != [scores.shape[0], k]:
            raise ProtocolError("inputs.topk_idx: expected shape [T, k] = [%d, %d], got %s"
                                % (scores.shape[0], k, list(idx.shape)))
        return _TOPK_AT[0].apply(scores, idx), idx

    return select


def serve_router_topk(c, contract):
    """Megatron's topk_softmax_with_capacity (#5335's fp64 denominator; baseline: core_r0.13's). The
    backward runs autograd through the forward with the case's topk_idx in place of topk's choice."""
    k = int_attr(c.attrs, "k", required=True)
    score = str_attr(c.attrs, "score") or "sigmoid"
    if score not in ("sigmoid", "sqrt_softplus"):
        raise Reject("attr", 'router_topk: score must be "sigmoid" or "sqrt_softplus"; got %r' % score)
    scaling = float_attr(c.attrs, "scaling")
    logits, bias = c.need("logits"), c.inputs.get("bias")
    if c.direction == "fwd":
        route = rr.router_aligned if contract == "megatron_eager" else rr.router_r013
        with torch.no_grad():
            probs, routing_map, _ = route(logits, bias, k, score, scaling)
        return {"probs": probs, "routing_map": routing_map}
    if contract != "megatron_eager":
        raise Reject("unmodelled", "router_topk: the %s contract has no backward" % contract)
    L = logits.clone().requires_grad_(True)
    probs, _, _ = rr.router_aligned(L, bias, k, score, scaling, select=given_slots(c.need("topk_idx")))
    (d_logits,) = torch.autograd.grad(probs, L, c.need("d_probs"))
    return {"d_logits": d_logits}


def serve_permute(c, contract):
    """Megatron's aligned permute(); the backward through _PermuteAlignedAutogradFn, whose gradient
    does not read the tokens' values (zeros stand in for them). baseline: core_r0.13.0's
    index_select, its backward index_add_ into zeros (atomics)."""
    routing_map = c.need("routing_map")
    if contract == "baseline":
        sorted_indices = rr.sorted_indices_of(routing_map)
        if c.direction == "fwd":
            with torch.no_grad():
                return {"permuted": rr.permute_r013(c.need("tokens"), sorted_indices)}
        d_permuted = c.need("d_permuted")
        tokens = torch.zeros(routing_map.shape[0], d_permuted.shape[1], dtype=d_permuted.dtype, device=rr.DEVICE,
                             requires_grad=True)
        (d_tokens,) = torch.autograd.grad(rr.permute_r013(tokens, sorted_indices), tokens, d_permuted)
        return {"d_tokens": d_tokens}
    if c.direction == "fwd":
        with torch.no_grad():
            permuted, _, _ = rr.permute_aligned(c.need("tokens"), routing_map)
        return {"permuted": permuted}
    d_permuted = c.need("d_permuted")
    tokens = torch.zeros(routing_map.shape[0], d_permuted.shape[1], dtype=d_permuted.dtype, device=rr.DEVICE,
                         requires_grad=True)
    permuted, _, _ = rr.permute_aligned(tokens, routing_map)
    (d_tokens,) = torch.autograd.grad(permuted, tokens, d_permuted)
    return {"d_tokens": d_tokens}


def serve_unpermute(c, contract):
    """Megatron's aligned unpermute() (gather, reshape, sum), with or without probs; the backward by
    autograd. Without probs the gradient does not read permuted's values (zeros stand in when the
    case leaves it out)."""
    routing_map, probs = c.need("routing_map"), c.inputs.get("probs")
    sorted_indices = rr.sorted_indices_of(routing_map)
    T = routing_map.shape[0]
    # baseline: core_r0.13.0's unpermute (scatter_add_ into zeros, atomics), its backward by autograd
    unpermute = rr.unpermute_r013 if contract == "baseline" else rr.unpermute_aligned
    if c.direction == "fwd":
        permuted = c.need("permuted")
        with torch.no_grad():
            out = unpermute(permuted, sorted_indices, torch.Size([T, permuted.shape[1]]), probs=probs,
                            routing_map=routing_map)
        return {"out": out}
    d_out = c.need("d_out")
    permuted = c.inputs.get("permuted")
    if permuted is None:
        if probs is not None:
            raise ProtocolError("inputs.permuted: required with probs (d_probs reads it)")
        permuted = torch.zeros(int(routing_map.sum()), d_out.shape[1], dtype=d_out.dtype, device=rr.DEVICE)
    Z = permuted.clone().requires_grad_(True)
    wrt = [Z]
    P = None
    if probs is not None:
        P = probs.clone().requires_grad_(True)
        wrt.append(P)
    out = unpermute(Z, sorted_indices, torch.Size([T, d_out.shape[1]]), probs=P, routing_map=routing_map)
    grads = torch.autograd.grad(out, wrt, d_out)
    result = {"d_permuted": grads[0]}
    if P is not None:
        result["d_probs"] = grads[1]
    return result


def serve_fanout_grad(c, contract):
    c.fwd_only()
    return {"d_hidden": rt.fanout_orders({name: c.need(name) for name in rt.FANOUT_INPUTS})[contract]}


def serve_adamw_step(c, contract):
    c.fwd_only()
    a = c.attrs
    attrs = present(lr=float_attr(a, "lr"), beta1=float_attr(a, "beta1"), beta2=float_attr(a, "beta2"),
                    eps=float_attr(a, "eps"), weight_decay=float_attr(a, "weight_decay"),
                    maximize=bool_attr(a, "maximize"), step=int_attr(a, "step", required=True))
    param, exp_avg, exp_avg_sq, _ = rt.adamw_fused_step({name: c.need(name) for name in rt.ADAMW_STATES}, attrs)
    return {"param": param, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}


def serve_grad_finalize(c, contract):
    c.fwd_only()
    a = c.attrs
    attrs = present(dp_size=int_attr(a, "dp_size", required=True), num_tokens=int_attr(a, "num_tokens"),
                    bias_update_rate=float_attr(a, "bias_update_rate"))
    x = {"main_grad": c.need("main_grad")}
    x.update({name: c.inputs[name] for name in ("tokens_per_expert", "expert_bias") if name in c.inputs})
    return (rt.finalize_aligned if contract == "megatron_aligned" else rt.finalize_r013)(x, attrs)


def serve_embedding(c, contract):
    """VocabParallelEmbedding's lookup: weight[masked_input] (megatron_eager) or F.embedding
    (baseline); the backward by autograd into a zero table of num_embeddings rows (the gradient does
    not read the table's values)."""
    start = int_attr(c.attrs, "vocab_start")
    use_index = contract == "megatron_eager"
    ids = c.need("ids")
    if c.direction == "fwd":
        with torch.no_grad():
            return {"out": remb.megatron_lookup(c.need("weight"), ids, start, use_index)}
    g = c.need("g")
    V = int_attr(c.attrs, "num_embeddings", required=True)
    weight = torch.zeros(V, g.shape[1], dtype=g.dtype, device=rr.DEVICE, requires_grad=True)
    remb.megatron_lookup(weight, ids, start, use_index).backward(g)
    return {"d_weight": weight.grad if weight.grad is not None else torch.zeros_like(weight)}


def serve_cross_entropy(c, contract):
    """F.cross_entropy(reduction='none', ignore_index) on the fp32 logits, and its autograd backward."""
    ignore = int_attr(c.attrs, "ignore_index")
    ignore = rce.DEFAULT_IGNORE if ignore is None else ignore
    logits, labels = c.need("logits"), c.need("labels")
    if c.direction == "fwd":
        with torch.no_grad():
            return {"loss": rce.eager_loss(logits, labels, ignore)}
    _, d_logits = rce.eager_backward(logits, labels, c.need("g"), ignore)
    return {"d_logits": d_logits}


def serve_expert_mlp(c, contract):
    """Megatron's expert in eager PyTorch (record_expert_mlp.py): the padding, cuBLAS's GEMMs and the
    eager weighted SwiGLU, which is megatron_eager itself (judged within its chain bound)."""
    clamp = float_attr(c.attrs, "clamp")
    d_out = c.need("d_out") if c.direction == "bwd" else None
    return rem.expert_mlp(c.need("x"), c.need("w1"), c.need("w2"), c.inputs.get("probs"), d_out, clamp,
                          checked=False)


# op -> (its function, the contracts whose source the recorders' code runs). Not served: PaddleFleet's
# fused kernels, the fused cross entropy, and embedding's atomic baseline, which no recorder runs.
OPS = {
    "swiglu": (serve_swiglu, ("megatron_eager", "megatron_unfused")),
    "swiglu_scale": (serve_swiglu_scale, ("megatron_eager", "megatron_unfused")),
    "router_topk": (serve_router_topk, ("megatron_eager", "baseline")),
    "permute": (serve_permute, ("megatron_eager", "baseline")),
    "unpermute": (serve_unpermute, ("megatron_eager", "baseline")),
    "fanout_grad": (serve_fanout_grad, ("glm45", "dsv4")),
    "adamw_step": (serve_adamw_step, ("megatron_eager",)),
    "grad_finalize": (serve_grad_finalize, ("megatron_aligned", "megatron_r013")),
    "embedding": (serve_embedding, ("megatron_eager", "baseline")),
    "cross_entropy": (serve_cross_entropy, ("megatron_eager",)),
    "expert_mlp": (serve_expert_mlp, ("megatron_eager",)),
}


def hello():
    return {"format": WORKER_FORMAT, "implements": {op: list(contracts) for op, (_, contracts) in OPS.items()}}


def serves(op, contract):
    return op in OPS and contract in OPS[op][1]


# ---- one request, one answer ------------------------------------------------------------------------
def parse_request(request):
    """Checks a request's envelope; returns (id, contract, op, direction, attrs, {name: decoded})."""
    if not isinstance(request, dict):
        raise ProtocolError("expected a JSON object (a bitparity-case/1 document with id and contract), got %s"
                            % type(request).__name__)
    rid = request.get("id")
    if not isinstance(rid, int) or isinstance(rid, bool):
        raise ProtocolError("id: expected an integer, got %r" % (rid,))
    if request.get("format") != CASE_FORMAT:
        raise ProtocolError('format: expected "%s", got %r' % (CASE_FORMAT, request.get("format")))
    op, contract, direction = request.get("op"), request.get("contract"), request.get("direction")
    if not isinstance(contract, str):
        raise ProtocolError("contract: expected a string, got %r" % (contract,))
    if not serves(op, contract):
        raise ProtocolError("this worker does not implement %r under contract %r (its hello names what it does)"
                            % (op, contract))
    if direction not in ("fwd", "bwd"):
        raise ProtocolError('direction: expected "fwd" or "bwd", got %r' % (direction,))
    attrs = request.get("attrs", {})
    if not isinstance(attrs, dict):
        raise ProtocolError("attrs: expected an object, got %s" % type(attrs).__name__)
    inputs = request.get("inputs")
    if not isinstance(inputs, dict):
        raise ProtocolError("inputs: expected an object of named tensors, got %s" % type(inputs).__name__)
    decoded = {name: decode_tensor(t, "inputs." + name) for name, t in inputs.items()}
    return rid, contract, op, direction, attrs, decoded


def answer(request):
    """The answer to one parsed request line. The second value is False when the CUDA context stopped
    working (the caller must not go on)."""
    rid = request.get("id") if isinstance(request, dict) else None
    rid = rid if isinstance(rid, int) and not isinstance(rid, bool) else 0
    try:
        rid, contract, op, direction, attrs, decoded = parse_request(request)
        inputs = {name: to_device(*t) for name, t in decoded.items()}
        outputs = OPS[op][0](Case(op, direction, attrs, inputs), contract)
        return {"id": rid, "outputs": {name: from_device(t, name) for name, t in outputs.items()}}, True
    except Reject as e:
        return {"id": rid, "reject": {"class": e.error_class, "message": str(e)}}, True
    except ProtocolError as e:
        return {"id": rid, "error": str(e)}, True
    except Exception as e:  # torch refusing the input, running out of memory, a device fault
        message = "%s: %s" % (type(e).__name__, str(e).strip()[:ERROR_MESSAGE_CHARS])
        ok = context_works()
        if ok:
            torch.cuda.empty_cache()
        return {"id": rid, "error": message}, ok


def protocol_loop(stdin, out, respond):
    """Writes the hello, then one answer line per request line (blank lines skipped), flushing each,
    until stdin ends (returns 0). `respond` maps a parsed request to (answer, the context works)."""
    out.write(json.dumps(hello()) + "\n")
    out.flush()
    while True:
        line = stdin.readline()
        if not line:
            return 0
        if not line.strip():
            continue
        try:
            request = json.loads(line.decode("utf-8") if isinstance(line, bytes) else line)
        except (UnicodeDecodeError, ValueError) as e:
            reply, ok = {"id": 0, "error": "the request is not a JSON document: %s" % e}, True
        else:
            reply, ok = respond(request)
        if not ok:
            die(EXIT_CONTEXT_LOST, "the CUDA context stopped working on request %d (%s); exiting so that a fresh "
                                   "worker serves the next case" % (reply["id"], reply["error"][:500]))
        out.write(json.dumps(reply, separators=(",", ":")) + "\n")
        out.flush()


def serve():
    load_torch()
    # The protocol owns the original stdout; anything else written to fd 1 (a stray print, a
    # library's message) goes to stderr, where bitparity keeps it for fault messages.
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol_loop(sys.stdin.buffer, protocol, answer)


# ---- the self-test over the recordings --------------------------------------------------------------
class RecordingError(Exception):
    pass


def default_recordings():
    names = sorted(n for n in os.listdir(HERE) if n.endswith(".jsonl") or n.endswith(".jsonl.gz"))
    return [os.path.join(HERE, n) for n in names]


def recorded_lines(path):
    """(line number, text) of each non-empty line; gzip or plain text, as core/recording.cpp reads."""
    try:
        with open(path, "rb") as f:
            compressed = f.read(2) == b"\x1f\x8b"
        stream = gzip.open(path, "rb") if compressed else open(path, "rb")
        with stream:
            for number, raw in enumerate(stream, 1):
                if raw.strip():
                    yield number, raw.decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
        raise RecordingError("cannot read %s: %s" % (path, e))


def recorded_case(path, number, text):
    """A recorded line -> (the request it makes, its contract, its recorded outputs)."""
    where = "%s:%d" % (path, number)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise RecordingError("%s: not a JSON document: %s" % (where, e))
    if not isinstance(doc, dict):
        raise RecordingError("%s: expected a JSON object, got %s" % (where, type(doc).__name__))
    provenance, outputs = doc.get("provenance"), doc.get("outputs")
    if not isinstance(provenance, dict) or not isinstance(provenance.get("contract"), str):
        raise RecordingError("%s: provenance.contract (the contract recorded) is missing" % where)
    if not isinstance(outputs, dict):
        raise RecordingError("%s: outputs (what eager PyTorch produced) are missing" % where)
    for name, t in outputs.items():
        try:
            decode_tensor(t, "outputs." + name)
        except ProtocolError as e:
            raise RecordingError("%s: %s" % (where, e))
    request = {k: doc[k] for k in ("format", "op", "direction", "attrs", "inputs") if k in doc}
    request.update(id=number, contract=provenance["contract"])
    return request, provenance["contract"], outputs


DETAILS_SHOWN = 10  # mismatches and errors printed in full


def replay(path, counts, not_served, details):
    """Pushes one recording's cases through answer(); False when the CUDA context stopped working."""
    for number, text in recorded_lines(path):
        request, contract, expected = recorded_case(path, number, text)
        key = (str(request.get("op")), str(request.get("direction")), contract)
        if not serves(request.get("op"), contract):
            not_served[key] = not_served.get(key, 0) + 1
            continue
        row = counts.setdefault(key, [0, 0, 0, 0])  # cases, identical, mismatched, errors
        row[0] += 1
        reply, ok = answer(request)
        if "outputs" in reply:
            difference = first_difference(expected, reply["outputs"])
            row[1 if difference is None else 2] += 1
            problem = difference and "MISMATCH " + difference
        else:
            row[3] += 1
            problem = "ERROR " + (reply.get("error") or "rejected: %s" % json.dumps(reply.get("reject")))
        if problem:
            details.append("%s:%d %s: %s" % (path, number, " ".join(key), problem))
        if not ok:
            return False
    return True


def selftest(paths):
    load_torch()
    paths = paths or default_recordings()
    if not paths:
        die(EXIT_USAGE, "no recordings (*.jsonl.gz) in %s" % HERE)
    counts = {}        # (op, direction, contract) -> [cases, identical, mismatched, errors]
    not_served = {}    # (op, direction, contract) -> cases
    details = []
    context_lost = False
    try:
        for path in paths:
            if not replay(path, counts, not_served, details):
                context_lost = True
                break
    except RecordingError as e:
        die(EXIT_USAGE, str(e))
    print("%-14s %-4s %-17s %7s %9s %10s %6s" % ("op", "dir", "contract", "cases", "identical", "mismatched", "errors"))
    for key in sorted(counts):
        print("%-14s %-4s %-17s %7d %9d %10d %6d" % (key + tuple(counts[key])))
    for key in sorted(not_served):
        print("%-14s %-4s %-17s %7d not served" % (key + (not_served[key],)))
    for line in details[:DETAILS_SHOWN]:
        print(line)
    if len(details) > DETAILS_SHOWN:
        print("... and %d more" % (len(details) - DETAILS_SHOWN))
    total = [sum(row[i] for row in counts.values()) for i in range(4)]
    print("selftest: %d cases served, %d identical, %d mismatched, %d errors; %d not served (torch %s on %s)"
          % (total[0], total[1], total[2], total[3], sum(not_served.values()), torch.__version__, rr.device_name()))
    if context_lost:
        print("selftest: FAILED, the CUDA context stopped working; the cases after it were not run")
        return 1
    if total[0] == 0:
        print("selftest: FAILED, no recorded case is one this worker serves")
        return 1
    if total[2] or total[3]:
        print("selftest: FAILED")
        return 1
    print("selftest: passed")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="peers/torch/worker.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               '  bitparity --exec torch="python3 peers/torch/worker.py" campaign \\\n'
               "      --pair ref:megatron_eager,torch:megatron_eager --budget-seconds 300\n"
               "  python3 peers/torch/worker.py --selftest\n"
               "  python3 peers/torch/worker.py --selftest peers/torch/routing.jsonl.gz\n\n"
               "Without --selftest the worker speaks bitparity-worker/1 on stdin and stdout: started by\n"
               "bitparity's --exec, not by hand. Exit status: 0 at the end of its input, 2 without torch\n"
               "or CUDA (or with unreadable recordings), 3 when the CUDA context stopped working;\n"
               "--selftest exits 1 on any mismatch or error.")
    ap.add_argument("--selftest", action="store_true",
                    help="replay recorded cases through the worker's dispatch and compare the bits")
    ap.add_argument("files", nargs="*", metavar="FILE",
                    help="recordings for --selftest (*.jsonl.gz or *.jsonl; default: every one beside this file)")
    args = ap.parse_args(argv)
    if args.files and not args.selftest:
        ap.error("recordings are read only with --selftest")
    if args.selftest:
        return selftest(args.files)
    return serve()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # bitparity went away: nothing is left to answer
        sys.exit(0)
