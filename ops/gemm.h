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

// kCublasBoundDoc's bound on |out - truth| for one output of K products whose absolute values sum
// to S (the finite ones): INFINITY where a partial sum may overflow fp32, 0 for a NaN or infinite
// truth (asked for exactly). Any fp32 accumulation order of bf16 products rounded to bf16 stays
// within it (fixed_order's included).
double gemm_element_bound(int64_t K, double S, double truth);

// A bf16 tensor whose elements are 2^e (1 + m / 128) with a random sign and mantissa and e uniform in
// [lo, hi] (e < -126: subnormal), drawn from splitmix64 so that (shape, seed, lo, hi) name its bits.
Tensor bf16_with_exponents(Shape shape, uint64_t seed, int lo, int hi);

}  // namespace bitparity::ops
