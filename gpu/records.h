// The kernel records of each op that has CUDA kernels, one function per op (its records file);
// gpu/register.cpp joins them into the cuda backend.
#pragma once

#include <vector>

#include "gpu/common/kernel_record.h"

namespace bitparity::gpu {

std::vector<KernelRecord> swiglu_family_kernels();  // gpu/swiglu_records.cpp: swiglu, swiglu_scale
std::vector<KernelRecord> routing_kernels();        // gpu/routing_records.cpp: router_topk, permute, unpermute
std::vector<KernelRecord> training_kernels();       // gpu/training_records.cpp: fanout_grad, adamw_step, grad_finalize
std::vector<KernelRecord> embedding_kernels();      // gpu/embedding_records.cpp: embedding
std::vector<KernelRecord> cross_entropy_kernels();  // gpu/cross_entropy_records.cpp: cross_entropy
std::vector<KernelRecord> gemm_kernels();           // gpu/gemm_records.cpp: gemm
std::vector<KernelRecord> expert_mlp_kernels();     // gpu/expert_mlp_records.cpp: expert_mlp, composed of the others

}  // namespace bitparity::gpu
