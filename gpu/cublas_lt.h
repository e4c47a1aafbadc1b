// The cublas contract of the gemm op (spec OP-10): NVIDIA's cuBLASLt called the way PyTorch and
// Transformer Engine call it for a row-major bf16 product: the column-major product out^T = b^T a^T
// (cublasLtMatmul with A = b [N x K, ld N], B = a [K x M, ld K], D = out [N x M, ld N], no
// transposes), bf16 A, B, C and D, CUBLAS_COMPUTE_32F with fp32 alpha = 1 and beta = 0, the first
// algorithm that cublasLtMatmulAlgoGetHeuristic returns for a 32 MiB workspace.
//
// The library is opened at run time (dlopen): the binaries do not depend on it, a machine without
// it runs everything else, and a gemm case on cuda:cublas there fails with a message that names
// what was searched. BITPARITY_CUBLASLT names the file to open; otherwise libcublasLt.so.13 through
// the loader's path, then the CUDA toolkit's lib64. No CUDA types here (host code).
#pragma once

#include <cstdint>
#include <string>

#include "gpu/gemm_kernels.h"

namespace bitparity::gpu {

// out = a @ b through cuBLASLt on g.stream (g.ilp is ignored). Launches nothing where M or N is 0;
// K = 0 writes +0 (as PyTorch's matmul does without calling cuBLAS). Throws std::runtime_error
// when the library cannot be opened and CudaError when a call fails, naming the call and status.
void launch_gemm_cublas(const Gemm& g);

// The algorithm that cublasLtMatmulAlgoGetHeuristic picks for an [M, K] @ [K, N] product, as the
// findings record it: "algo 66 tile 20 stages 22 splitk 1 reduction 0 swizzle 0 custom 0 inner 0
// cluster 0" (cublasLtMatmulAlgoConfigAttributes_t). Requires M, K, N > 0.
std::string cublas_gemm_algorithm(int64_t M, int64_t K, int64_t N);

// The opened library's file and version ("libcublasLt.so.13 130100"), or why it could not be
// opened.
std::string cublas_lt_description();

}  // namespace bitparity::gpu
