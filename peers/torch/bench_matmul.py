"""Times eager torch.matmul (cuBLASLt, bf16 in, fp32 accumulate, bf16 out) at the gemm op's reference
shapes on a CUDA device, for the gemm benchmarks' comparison: median of CUDA-event timings, TFLOP/s.

    python3 peers/torch/bench_matmul.py [--iters 50]
"""
import argparse
import statistics

import torch

# The gemm op's reference inputs (ops/gemm.cpp): GLM-4.5's fc1 [M, 4096] @ [4096, 2816] and fc2
# [M, 1408] @ [1408, 4096] per expert.
SHAPES = [(64, 1408, 4096), (16, 4096, 2816), (32, 4096, 2816), (256, 4096, 2816), (4096, 4096, 2816),
          (256, 1408, 4096), (4096, 1408, 4096)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cuBLAS {torch.backends.cuda.preferred_blas_library()}")
    print(f"{'shape':28} {'us':>9} {'TFLOP/s':>9}")
    for m, k, n in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(5):
            torch.matmul(a, b)
        times = []
        for _ in range(args.iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.matmul(a, b)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        us = statistics.median(times)
        print(f"M{m}_K{k}_N{n:<14} {us:9.1f} {2 * m * n * k / us / 1e6:9.1f}")


if __name__ == "__main__":
    main()
