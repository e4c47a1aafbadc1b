// The H200 tensor core's bf16 MMA step (spec rule 13) and the GEMM contracts built on it (spec
// OP-10): the reference's own model of `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`, one
// output at a time, so that a GEMM whose K-chunk order is written down is reproducible bit for bit.
// The CUDA kernels issue the instruction itself; no code is shared with them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/registry.h"

namespace bitparity::ref {

// The K-width of one MMA step: 16 products enter the accumulator at once.
inline constexpr int kMmaChunk = 16;

// One output of one MMA step: d = c + sum_{k<16} a_k b_k, with a and b bf16 bit patterns and c, d
// fp32 bit patterns, as the H200 computes it (rule 13):
//   - each product exact, its alignment tag ea + eb (bf16 subnormals decode with e = -126 and no
//     hidden bit; so does an fp32 subnormal c); zero terms ignored;
//   - the 16 products and c in one fused sum: Emax the largest tag of the nonzero terms, each term
//     truncated toward zero to a multiple of 2^(Emax - 25), the integer sum exact, the result
//     rounded to fp32 toward zero (subnormals kept; exponent overflow gives +-Inf);
//   - an exact-zero sum is +0, and so is a sum that rounds toward zero to 0 (a refinement of rule 13
//     measured on the H200: -0.75 * 2^-149 gives +0, while terms below 2^-149 do count in the
//     sum: 2^-134 + 2 * 0.75 * 2^-149 gives 2^-134 + 2^-149; peers/hw's directed cases); NaN input, Inf * 0 or +Inf with -Inf give 0x7FFFFFFF; otherwise an
//     Inf term gives that Inf.
uint32_t mma_bf16_step(const uint16_t* a, const uint16_t* b, uint32_t c);

// One output of the fixed_order GEMM: the K products in chunks of kMmaChunk (the last one padded
// with zero products, which the step ignores), each chunk one MMA step whose c is the accumulator,
// chunks in ascending k from an accumulator of +0; K = 0 gives +0. (A step never returns -0, so an
// all-zero chunk would change nothing; none is taken all the same.) `a` holds a[k] at a[k * a_stride],
// `b` holds b[k] at b[k * b_stride]. Returns the fp32 accumulator's bit pattern.
uint32_t fixed_order_dot(const uint16_t* a, int64_t a_stride, const uint16_t* b, int64_t b_stride, int64_t K);

std::vector<ImplEntry> gemm_impls();  // reference/gemm.cpp

}  // namespace bitparity::ref
