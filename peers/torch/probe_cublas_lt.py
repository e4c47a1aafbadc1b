"""Runs a gemm case file through cuBLASLt the way bitparity's cuda:cublas calls it (gpu/cublas_lt.h:
column-major out^T = b^T a^T, bf16, CUBLAS_COMPUTE_32F, the heuristic's first algorithm, a 32 MiB
workspace) and prints the algorithm's configuration and, per output, cuBLAS's bits beside the exact
sum rounded once to bf16 (fp64, then RNE), with the fp32 value of the sum.

    python3 peers/torch/probe_cublas_lt.py CASE.json [LIBCUBLASLT]

Exits 1 when an output differs from the exact sum rounded once, 0 otherwise.
"""
import ctypes
import json
import struct
import sys

import torch

CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF = 68, 0, 14
DESC_TRANSA, DESC_TRANSB, PREF_MAX_WORKSPACE = 3, 4, 1
CONFIG = [("algo", 0, 4), ("tile", 1, 4), ("splitk", 2, 4), ("reduction", 3, 4), ("swizzle", 4, 4),
          ("custom", 5, 4), ("stages", 6, 4), ("inner", 7, 2), ("cluster", 8, 2)]


def bf16_values(tensor_json):
    h = tensor_json["hex"]
    return [struct.unpack(">f", bytes.fromhex(h[i:i + 4] + "0000"))[0] for i in range(0, len(h), 4)]




def main():
    case = json.load(open(sys.argv[1]))
    lib = ctypes.CDLL(sys.argv[2] if len(sys.argv) > 2 else "libcublasLt.so.13")
    (M, K), (_, N) = case["inputs"]["a"]["shape"], case["inputs"]["b"]["shape"]
    a = torch.tensor(bf16_values(case["inputs"]["a"]), dtype=torch.float32).view(M, K).to(torch.bfloat16).cuda()
    b = torch.tensor(bf16_values(case["inputs"]["b"]), dtype=torch.float32).view(K, N).to(torch.bfloat16).cuda()
    out = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    handle, desc, la, lb, ld, pref = (ctypes.c_void_p() for _ in range(6))

    def ok(status, what):
        if status != 0:
            sys.exit(f"{what}: cublasStatus {status}")

    ok(lib.cublasLtCreate(ctypes.byref(handle)), "create")
    ok(lib.cublasLtMatmulDescCreate(ctypes.byref(desc), CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc")
    none = ctypes.c_int(0)
    for attr in (DESC_TRANSA, DESC_TRANSB):
        ok(lib.cublasLtMatmulDescSetAttribute(desc, attr, ctypes.byref(none), 4), "trans")
    for layout, rows, cols, lead in ((la, N, K, N), (lb, K, M, K), (ld, N, M, N)):
        ok(lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), CUDA_R_16BF, ctypes.c_uint64(rows),
                                          ctypes.c_uint64(cols), ctypes.c_int64(lead)), "layout")
    ok(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "pref")
    workspace_bytes = ctypes.c_uint64(32 << 20)
    ok(lib.cublasLtMatmulPreferenceSetAttribute(pref, PREF_MAX_WORKSPACE, ctypes.byref(workspace_bytes), 8), "ws")
    heuristic = (ctypes.c_uint8 * 96)()  # cublasLtMatmulHeuristicResult_t: algo (64 bytes) first
    found = ctypes.c_int(0)
    ok(lib.cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld, ld, pref, 1, heuristic, ctypes.byref(found)),
       "heuristic")
    config = []
    for name, attr, size in CONFIG:
        value, written = ctypes.c_uint64(0), ctypes.c_size_t(0)
        if lib.cublasLtMatmulAlgoConfigGetAttribute(heuristic, attr, ctypes.byref(value), size,
                                                    ctypes.byref(written)) == 0:
            config.append(f"{name} {value.value}")
    print(f"cuBLASLt {lib.cublasLtGetVersion()}: [{M}, {K}] @ [{K}, {N}]: " + " ".join(config))
    workspace = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    ok(lib.cublasLtMatmul(handle, desc, ctypes.byref(alpha), ctypes.c_void_p(b.data_ptr()), la,
                          ctypes.c_void_p(a.data_ptr()), lb, ctypes.byref(beta), ctypes.c_void_p(out.data_ptr()), ld,
                          ctypes.c_void_p(out.data_ptr()), ld, heuristic, ctypes.c_void_p(workspace.data_ptr()),
                          workspace_bytes, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)), "matmul")
    torch.cuda.synchronize()
    got = out.view(torch.int16).cpu().tolist()
    exact = (a.double() @ b.double()).cpu()
    exact_once = exact.to(torch.bfloat16).view(torch.int16).tolist()
    differ = 0
    for m in range(M):
        for n in range(N):
            g, e = got[m][n] & 0xFFFF, exact_once[m][n] & 0xFFFF
            if g != e:
                differ += 1
                print(f"out[{m}, {n}]: cuBLAS 0x{g:04x}, exact sum {exact[m][n].item()!r} rounded once 0x{e:04x}")
    print(f"{differ} of {M * N} outputs differ from the exact sum rounded once")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
