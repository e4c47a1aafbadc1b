# Probe: torch.sum's last-dim order for 2-byte inputs (fp16, bf16) on CUDA, against rule 7's lane
# model with 4 or 8 elements a vectorized load. torch.sum(x, -1, dtype=torch.float32) reduces the
# 2-byte input with fp32 accumulation in one kernel, so its fp32 result shows the order exactly.
#
#   python3 peers/torch/probe_rowsum16.py OUT.json      (on a GPU machine with torch; about 10 s)
#
# Printed per (dtype, width, rows): the rows whose fp32 sum differs from each model, and whether the
# 2-byte-output sum is that fp32 value rounded once. On an H200 with torch 2.11.0+cu130: the
# 8-element model 0 mismatches at every width 128..4096 that is a multiple of 8, rows 1..512, both
# dtypes; the 4-element model (rule 7 as written for fp32 rows) mismatches there; widths of 4 mod 8
# and 8192 match neither (reference/numerics.cpp calls them unmodelled); widths below 128 match both;
# the 2-byte-output sum is always the fp32 sum rounded once.
import itertools, json, sys
import numpy as np, torch

MAX_THREADS, WARP = 512, 32

def p2(n):
    p = 1
    while p * 2 <= n and p * 2 <= MAX_THREADS:
        p *= 2
    return p

def model(x, rows, vec):
    """x: [R, W] float32 (the 2-byte values, exact); the rule-7 lane model with `vec` accumulators."""
    R, W = x.shape
    vectorized = W >= 128
    dim0 = W // vec if vectorized else W
    lanes = min(p2(dim0), WARP)
    height = min(p2(max(rows, 1)), MAX_THREADS // lanes)
    lanes = min(p2(dim0), MAX_THREADS // height)
    nacc = vec if vectorized else 4
    lane_vals = np.zeros((R, lanes), np.float32)
    for l in range(lanes):
        acc = np.zeros((R, nacc), np.float32)
        it = 0
        while True:
            if vectorized:
                base = vec * (l + lanes * it)
                if base >= dim0 * vec:
                    break
                acc = (acc + x[:, base:base + vec]).astype(np.float32)
            else:
                idx = l + lanes * it
                if idx >= W:
                    break
                acc[:, it % 4] = (acc[:, it % 4] + x[:, idx]).astype(np.float32)
            it += 1
        v = acc[:, 0].copy()
        for i in range(1, nacc):
            v = (v + acc[:, i]).astype(np.float32)
        lane_vals[:, l] = v
    s = lanes // 2
    while s >= 1:
        lane_vals[:, :s] = (lane_vals[:, :s] + lane_vals[:, s:2 * s]).astype(np.float32)
        s //= 2
    return lane_vals[:, 0]

rng = np.random.default_rng(5)
results = {}
for dt, W, rows in itertools.product(["fp16", "bf16"], [64, 120, 128, 132, 136, 200, 1408, 1412, 2368, 2816, 4096, 8192],
                                     [1, 2, 16, 17, 64, 512]):
    tdt = torch.float16 if dt == "fp16" else torch.bfloat16
    scale = 2.0 ** rng.integers(-6, 7, (rows, W)) if dt == "fp16" else 2.0 ** rng.integers(-20, 21, (rows, W))
    v = rng.standard_normal((rows, W)) * scale
    x = torch.tensor(v, dtype=torch.float32).to(tdt).cuda()
    got = torch.sum(x, dim=-1, dtype=torch.float32).cpu().numpy()
    got_native = torch.sum(x, dim=-1).float().cpu().numpy()
    xf = x.float().cpu().numpy()
    row = {}
    for vec in (4, 8):
        m = model(xf, rows, vec)
        row["vec%d" % vec] = int((m.view(np.uint32) != got.view(np.uint32)).sum())
    # does the 2-byte-output sum round the same fp32 value once?
    rounded = torch.tensor(got).to(tdt).float().numpy()
    row["native_is_rounded_fp32"] = int((rounded.view(np.uint32) != got_native.view(np.uint32)).sum())
    results["%s W=%d rows=%d" % (dt, W, rows)] = row
    print(dt, W, rows, row, flush=True)
json.dump(results, open(sys.argv[1], "w"), indent=1)
