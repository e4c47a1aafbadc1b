// Exhaustive checks of the kernels' shortcuts against the operations they replace
// (gpu/tests/fast_math_check.cu), over every fp32 bit pattern.
#pragma once

#include <cstdint>
#include <vector>

namespace bitparity::gpu::testing_support {

struct ExhaustiveResult {
  uint64_t inputs = 0;       // bit patterns tried (2^32)
  uint64_t in_domain = 0;    // where the shortcut claims to be exact
  uint64_t mismatches = 0;   // in the domain, bits differ from the operation replaced
  std::vector<uint32_t> examples;  // up to 8 mismatching inputs
};

// sigmoid_silu_fast (in_domain true) against sigmoid_silu (__fdiv_rn), both outputs' bits.
ExhaustiveResult check_fast_sigmoid_silu();
// silu_fast (in_domain true) against sigmoid_silu(x).silu.
ExhaustiveResult check_fast_silu();
// sigmoid_fast (in_domain true) against sigmoid_silu(x).sigmoid.
ExhaustiveResult check_fast_sigmoid();
// round_as<BF16> (one cvt.rn.bf16x2) against BF16::load(BF16::store(x)) (__float2bfloat16_rn).
ExhaustiveResult check_bf16_rounding();

}  // namespace bitparity::gpu::testing_support
