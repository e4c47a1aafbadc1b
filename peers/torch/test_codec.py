#!/usr/bin/env python3
"""Tests of peers/torch/worker.py's standard-library parts: the tensor codec, the attributes, the
request envelope, the protocol loop, the bitwise comparison, the recordings' reader and the hello.
Runs with plain python3, no torch and no pytest:

    python3 peers/torch/test_codec.py

The GPU half (the ops themselves) is proved by `python3 peers/torch/worker.py --selftest` against
the recordings of eager PyTorch.
"""
import gzip
import io
import json
import math
import os
import re
import struct
import sys
import tempfile
import traceback
from array import array

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import worker  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))


def raises(fn, *words):
    """fn() must raise worker.ProtocolError whose message holds every word."""
    try:
        fn()
    except worker.ProtocolError as e:
        for w in words:
            assert w in str(e), "%r not in the message %r" % (w, str(e))
        return
    raise AssertionError("no ProtocolError (expected one naming %s)" % ", ".join(words))


def native_values(code, data):
    a = array(code)
    a.frombytes(data)
    return a.tolist()


# ---- the codec -----------------------------------------------------------------------------------------
def test_recorders_write_every_document_or_no_file():
    rr = worker.rr
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "out.jsonl")
        docs = [rr.case_doc("permute", "fwd", {}, {}, {"permuted": rr.tensor_doc("bf16", [1], hexs)}, {})
                for hexs in ("0000", "3f80", "8000")]
        assert rr.write_documents(path, iter(docs)) == (3, 2)
        with open(path) as f:
            assert [json.loads(line) for line in f] == docs

        def failing():
            yield docs[0]
            raise RuntimeError("a case failed")
        os.remove(path)
        try:
            rr.write_documents(path, failing())
            raise AssertionError("the failure was swallowed")
        except RuntimeError:
            pass
        assert os.listdir(d) == [], os.listdir(d)


def test_decode_16_bit_elements_most_significant_digit_first():
    dtype, shape, data = worker.decode_tensor({"dtype": "bf16", "shape": [1, 4], "hex": "3f80c0000000ff80"}, "y")
    assert (dtype, shape) == ("bf16", [1, 4])
    assert native_values("H", data) == [0x3F80, 0xC000, 0x0000, 0xFF80]


def test_decode_keeps_negative_zero_and_nan_payload_in_fp32():
    _, _, data = worker.decode_tensor({"dtype": "fp32", "shape": [3], "hex": "800000007fc00001ff800000"}, "x")
    bits = native_values("I", data)
    assert bits == [0x80000000, 0x7FC00001, 0xFF800000]
    values = struct.unpack("=3f", data)
    assert values[0] == 0 and math.copysign(1, values[0]) == -1
    assert math.isnan(values[1]) and values[2] == -math.inf


def test_decode_i64_and_bool_and_fp8():
    _, _, data = worker.decode_tensor({"dtype": "i64", "shape": [2], "hex": "fffffffffffffffe0000000100000000"}, "ids")
    assert native_values("q", data) == [-2, 1 << 32]
    _, _, data = worker.decode_tensor({"dtype": "bool", "shape": [2, 2], "hex": "01000001"}, "routing_map")
    assert data == b"\x01\x00\x00\x01"
    _, _, data = worker.decode_tensor({"dtype": "fp8_e4m3", "shape": [2], "hex": "7e80"}, "x")
    assert data == b"\x7e\x80"


def test_empty_tensors_and_uppercase_hex():
    assert worker.decode_tensor({"dtype": "bf16", "shape": [0, 8], "hex": ""}, "y") == ("bf16", [0, 8], b"")
    doc = worker.encode_tensor(*worker.decode_tensor({"dtype": "fp16", "shape": [2], "hex": "7C00FBFF"}, "x"))
    assert doc == {"dtype": "fp16", "shape": [2], "hex": "7c00fbff"}


def test_encode_is_the_inverse_of_decode():
    for doc in ({"dtype": "fp32", "shape": [2, 1], "hex": "3f800000807fffff"},
                {"dtype": "i64", "shape": [1], "hex": "8000000000000000"},
                {"dtype": "bool", "shape": [3], "hex": "010001"},
                {"dtype": "bf16", "shape": [], "hex": "0001"},
                {"dtype": "i32", "shape": [1], "hex": "ffffff85"}):
        assert worker.encode_tensor(*worker.decode_tensor(doc, "t")) == doc, doc
    # A value built natively comes out big-endian.
    assert worker.encode_tensor("fp32", [1], struct.pack("=f", 1.0))["hex"] == "3f800000"
    assert worker.encode_tensor("i64", [1], struct.pack("=q", -1))["hex"] == "f" * 16


def test_hostile_tensors_are_errors_that_name_the_field():
    t = worker.decode_tensor
    raises(lambda: t({"dtype": "bf16", "shape": [2], "hex": "3f80"}, "inputs.y"), "inputs.y.hex", "4 hex digits", "got 4")
    raises(lambda: t({"dtype": "bf16", "shape": [1], "hex": "3f8g"}, "inputs.y"), "inputs.y.hex", "hexadecimal")
    raises(lambda: t({"dtype": "bf16", "shape": [1], "hex": "3f8 "}, "inputs.y"), "inputs.y.hex", "hexadecimal")
    raises(lambda: t({"dtype": "fp128", "shape": [1], "hex": "00"}, "inputs.y"), "inputs.y.dtype", "fp128")
    raises(lambda: t({"dtype": "bf16", "shape": [-1], "hex": ""}, "inputs.y"), "inputs.y.shape[0]")
    raises(lambda: t({"dtype": "bf16", "shape": [True], "hex": "0000"}, "inputs.y"), "inputs.y.shape[0]")
    raises(lambda: t({"dtype": "bf16", "shape": "2", "hex": ""}, "inputs.y"), "inputs.y.shape", "array")
    raises(lambda: t({"dtype": "bf16", "shape": [1] * 9, "hex": "0000"}, "inputs.y"), "at most 8 dims")
    raises(lambda: t({"dtype": "bf16", "shape": [1 << 20, 0, 1 << 20], "hex": ""}, "inputs.y"), "2^26")
    raises(lambda: t({"dtype": "bool", "shape": [2], "hex": "0102"}, "inputs.m"), "inputs.m.hex", "neither 00 nor 01")
    raises(lambda: t({"dtype": "bf16", "shape": [1], "hex": "0000", "scale": 2}, "inputs.y"), "inputs.y.scale")
    raises(lambda: t({"dtype": "bf16", "shape": [1], "hex": 16256}, "inputs.y"), "inputs.y.hex", "string")
    raises(lambda: t([1, 2], "inputs.y"), "inputs.y", "tensor object")


# ---- attributes ----------------------------------------------------------------------------------------
def test_float_attributes_take_the_special_strings():
    a = {"clamp": "nan", "lo": "-inf", "hi": "inf", "seven": 7, "neg_zero": -0.0, "none": None}
    assert math.isnan(worker.float_attr(a, "clamp"))
    assert worker.float_attr(a, "lo") == -math.inf and worker.float_attr(a, "hi") == math.inf
    assert worker.float_attr(a, "seven") == 7.0 and isinstance(worker.float_attr(a, "seven"), float)
    assert math.copysign(1, worker.float_attr(a, "neg_zero")) == -1
    assert worker.float_attr(a, "none") is None and worker.float_attr(a, "absent") is None
    raises(lambda: worker.float_attr({"clamp": "seven"}, "clamp"), "attrs.clamp", "seven")
    raises(lambda: worker.float_attr({"clamp": True}, "clamp"), "attrs.clamp")


def test_int_bool_and_string_attributes():
    assert worker.int_attr({"k": 8}, "k", required=True) == 8
    assert worker.int_attr({}, "num_tokens") is None
    raises(lambda: worker.int_attr({}, "k", required=True), "attrs.k", "required")
    raises(lambda: worker.int_attr({"k": 2.0}, "k"), "attrs.k", "integer")
    raises(lambda: worker.int_attr({"k": True}, "k"), "attrs.k", "integer")
    assert worker.bool_attr({"maximize": False}, "maximize") is False
    raises(lambda: worker.bool_attr({"maximize": 0}, "maximize"), "attrs.maximize")
    raises(lambda: worker.str_attr({"score": 1}, "score"), "attrs.score")
    assert worker.present(a=None, b=0, c=False) == {"b": 0, "c": False}


# ---- the request envelope and the protocol loop --------------------------------------------------------
def request(**changes):
    r = {"format": "bitparity-case/1", "op": "swiglu", "direction": "fwd", "attrs": {"clamp": 7.0},
         "inputs": {"y": {"dtype": "bf16", "shape": [1, 2], "hex": "3f80c000"}}, "id": 9, "contract": "megatron_eager"}
    r.update(changes)
    return r


def test_a_request_is_parsed_into_its_parts():
    rid, contract, op, direction, attrs, inputs = worker.parse_request(request())
    assert (rid, contract, op, direction, attrs) == (9, "megatron_eager", "swiglu", "fwd", {"clamp": 7.0})
    assert inputs["y"][:2] == ("bf16", [1, 2]) and native_values("H", inputs["y"][2]) == [0x3F80, 0xC000]


def test_envelope_errors_are_error_answers_with_the_request_id():
    for changes, words in (({"format": "bitparity-case/2"}, ["format"]),
                           ({"op": "softmax"}, ["softmax"]),
                           ({"contract": "paddle_fused"}, ["paddle_fused"]),
                           ({"direction": "both"}, ["direction"]),
                           ({"attrs": []}, ["attrs"]),
                           ({"inputs": None}, ["inputs"]),
                           ({"inputs": {"y": {"dtype": "bf16", "shape": [1, 2], "hex": "3f80"}}}, ["inputs.y.hex"])):
        reply, ok = worker.answer(request(**changes))
        assert ok and reply["id"] == 9 and set(reply) == {"id", "error"}, reply
        for w in words:
            assert w in reply["error"], (w, reply)
    for bad_id in ("9", True, None, 1.5):
        reply, ok = worker.answer(request(id=bad_id))
        assert ok and reply["id"] == 0 and "id" in reply["error"], reply
    reply, ok = worker.answer(["not", "an", "object"])
    assert ok and reply == {"id": 0, "error": reply["error"]} and "JSON object" in reply["error"]


class Recorder(io.StringIO):
    def __init__(self):
        super().__init__()
        self.flushed_at = []

    def flush(self):
        self.flushed_at.append(len(self.getvalue()))


def test_the_loop_says_hello_then_answers_each_line_and_serves_on_after_garbage():
    lines = [b'{"id": 1, "x": 1}\n', b"\n", b"this is not json\n", b'{"id": 2}\n']
    seen = []

    def respond(req):
        seen.append(req["id"])
        return {"id": req["id"], "outputs": {}}, True

    out = Recorder()
    assert worker.protocol_loop(io.BytesIO(b"".join(lines)), out, respond) == 0
    written = out.getvalue().splitlines()
    assert json.loads(written[0]) == worker.hello()
    assert [json.loads(w) for w in written[1:]][0] == {"id": 1, "outputs": {}}
    garbage = json.loads(written[2])
    assert garbage["id"] == 0 and "not a JSON document" in garbage["error"]
    assert json.loads(written[3]) == {"id": 2, "outputs": {}} and seen == [1, 2]
    # Each line is flushed as it is written: bitparity waits for it.
    ends = [sum(len(w) + 1 for w in written[:i + 1]) for i in range(len(written))]
    assert out.flushed_at == ends, (out.flushed_at, ends)


def test_the_loop_ends_without_an_answer_when_the_cuda_context_is_lost():
    out = Recorder()
    err = io.StringIO()
    saved, sys.stderr = sys.stderr, err
    try:
        worker.protocol_loop(io.BytesIO(b'{"id": 4}\n{"id": 5}\n'), out,
                             lambda req: ({"id": req["id"], "error": "AcceleratorError: illegal address"}, False))
        raise AssertionError("the loop went on after the context was lost")
    except SystemExit as e:
        assert e.code == worker.EXIT_CONTEXT_LOST
    finally:
        sys.stderr = saved
    assert len(out.getvalue().splitlines()) == 1  # the hello only: the faulty case is not answered
    assert "request 4" in err.getvalue() and "illegal address" in err.getvalue()


# ---- the bitwise comparison of the self-test -----------------------------------------------------------
def test_first_difference_names_the_element_and_counts_them():
    rec = {"out": {"dtype": "bf16", "shape": [3], "hex": "3f80800000ff"}}
    assert worker.first_difference(rec, {"out": {"dtype": "bf16", "shape": [3], "hex": "3F80800000FF"}}) is None
    d = worker.first_difference(rec, {"out": {"dtype": "bf16", "shape": [3], "hex": "3f800000ffff"}})
    assert "2 of 3 elements" in d and "index 1" in d and "0x8000" in d and "0x0000" in d, d  # -0 vs +0 differ
    d = worker.first_difference(rec, {"out": {"dtype": "fp16", "shape": [3], "hex": "3f80800000ff"}})
    assert "fp16" in d, d
    d = worker.first_difference(rec, {"out": rec["out"], "d_y": rec["out"]})
    assert "unexpected ['d_y']" in d, d
    d = worker.first_difference(rec, {})
    assert "missing ['out']" in d, d


# ---- reading recordings --------------------------------------------------------------------------------
def test_recordings_are_read_gzip_or_plain_and_hostile_ones_name_the_file():
    doc = {"format": "bitparity-case/1", "op": "fanout_grad", "direction": "fwd", "attrs": {}, "inputs": {},
           "outputs": {"d_hidden": {"dtype": "bf16", "shape": [1], "hex": "3f80"}}, "provenance": {"contract": "glm45"}}
    text = json.dumps(doc) + "\n\n" + json.dumps(doc) + "\n"
    with tempfile.TemporaryDirectory() as d:
        plain, packed, cut = (os.path.join(d, n) for n in ("a.jsonl", "b.jsonl.gz", "c.jsonl.gz"))
        with open(plain, "w") as f:
            f.write(text)
        with gzip.open(packed, "wt") as f:
            f.write(text)
        with open(packed, "rb") as f:
            whole = f.read()
        with open(cut, "wb") as f:
            f.write(whole[:len(whole) // 2])
        for path in (plain, packed):
            lines = list(worker.recorded_lines(path))
            assert [n for n, _ in lines] == [1, 3], lines
            req, contract, outputs = worker.recorded_case(path, *lines[1])
            assert contract == "glm45" and req["id"] == 3 and req["contract"] == "glm45"
            assert "outputs" not in req and "provenance" not in req and outputs == doc["outputs"]
        try:
            list(worker.recorded_lines(cut))
            raise AssertionError("a truncated recording was read")
        except worker.RecordingError as e:
            assert "c.jsonl.gz" in str(e), e
        for bad, words in (("{", ["x.jsonl:7", "JSON"]),
                           (json.dumps(dict(doc, provenance={})), ["x.jsonl:7", "provenance.contract"]),
                           (json.dumps(dict(doc, outputs={"d": {"dtype": "bf16", "shape": [2], "hex": ""}})),
                            ["x.jsonl:7", "outputs.d.hex"])):
            try:
                worker.recorded_case("x.jsonl", 7, bad)
                raise AssertionError("accepted %s" % bad)
            except worker.RecordingError as e:
                for w in words:
                    assert w in str(e), (w, str(e))


# ---- the hello -----------------------------------------------------------------------------------------
# What the recorders' code runs, by op (peers/torch/record_*.py), written out independently of OPS.
RECORDED_CONTRACTS = {
    "swiglu": {"megatron_eager", "megatron_unfused"}, "swiglu_scale": {"megatron_eager", "megatron_unfused"},
    "router_topk": {"megatron_eager", "baseline"}, "permute": {"megatron_eager", "baseline"},
    "unpermute": {"megatron_eager", "baseline"},
    "fanout_grad": {"glm45", "dsv4"}, "adamw_step": {"megatron_eager"},
    "grad_finalize": {"megatron_aligned", "megatron_r013"}, "embedding": {"megatron_eager", "baseline"},
    "cross_entropy": {"megatron_eager"}, "expert_mlp": {"megatron_eager"},
}


def test_the_hello_names_what_the_recorders_run_and_bitparity_knows():
    h = json.loads(json.dumps(worker.hello()))
    assert h["format"] == "bitparity-worker/1"
    assert {op: set(c) for op, c in h["implements"].items()} == RECORDED_CONTRACTS
    for op, contracts in h["implements"].items():
        with open(os.path.join(ROOT, "ops", op + ".cpp")) as f:
            spec = f.read()
        assert '"%s"' % op in spec, op
        for contract in contracts:  # the registry's contract names (ops/<op>.cpp), letter for letter
            assert re.search(r'\{\s*"%s",' % contract, spec), (op, contract)


def test_the_worker_serves_exactly_the_recorded_pairs():
    pairs = set()
    for path in worker.default_recordings():
        for _, text in worker.recorded_lines(path):
            head = json.loads(text)
            pairs.add((head["op"], head["provenance"]["contract"]))
    assert pairs, "no recordings beside the worker"
    served = {(op, c) for op, cs in worker.hello()["implements"].items() for c in cs}
    assert pairs == served, (sorted(pairs - served), sorted(served - pairs))


def main():
    tests = [(name, fn) for name, fn in sorted(globals().items()) if name.startswith("test_") and callable(fn)]
    failed = 0
    for name, fn in tests:
        try:
            fn()
            print("ok   %s" % name)
        except Exception:
            failed += 1
            print("FAIL %s\n%s" % (name, traceback.format_exc()))
    print("%d of %d passed" % (len(tests) - failed, len(tests)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
