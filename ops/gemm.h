// The expert MLP's GEMM (spec OP-10, rule 13): out = a @ b in bf16 with fp32 accumulation and one
// rounding. Its contracts differ in the order in which the K products enter the accumulator.
#pragma once

#include <cstdint>
#include <vector>

#include "core/registry.h"

namespace bitparity::ops {

OpInfo gemm();  // ops/gemm.cpp

// fixed_order's K-chunk: the products of one tensor-core MMA step (m16n8k16), which enter the fp32
// accumulator together, chunks in ascending k (reference/gemm.h states the arithmetic).
inline constexpr int64_t kGemmChunk = 16;

// Each output of a [M, K] @ b [K, N] as the exact sum of its products (fp64, sequential in k, Eigen):
// the op's oracle, the truth of the cublas contract's bound and ref:cublas's sum before its one
// rounding.
std::vector<double> gemm_exact_sums(const Tensor& a, const Tensor& b);

}  // namespace bitparity::ops
