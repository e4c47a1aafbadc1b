// The ILP knob of the kernels: work items a thread loads together (or, in the elementwise kernels,
// the group whose loads are in flight while the previous group is computed). A tuning knob that
// changes no bit; 0 asks for each kernel's default, the best shape measured on an H200
// (bench/NOTES.md), and 1, 2 and 4 for the variants that the tests hold to the default's bits:
// mostly the ILP of that name, for a few kernels other shapes of the same order (cross_entropy's
// fused kernels name theirs in gpu/cross_entropy.cu, routing's gather_sum in gpu/routing.cu).
// Included by device and host code alike.
#pragma once

namespace bitparity::gpu {

inline constexpr int kIlpDefault = 0;
inline constexpr int kIlpChoices[] = {1, 2, 4};

}  // namespace bitparity::gpu
