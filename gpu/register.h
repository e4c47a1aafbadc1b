// The "cuda" backend: its kind and the kernel records of every op with kernels, made Impls.
#pragma once

#include <string>
#include <vector>

#include "core/registry.h"
#include "gpu/common/kernel_record.h"

namespace bitparity::gpu {

// Adds the "cuda" backend kind and an Impl per kernel record. Called by the composition root after
// the ops are added: each Impl takes its op's validate (for the outputs' shapes) from the registry.
// Throws std::logic_error for a record whose op or contract the registry lacks.
void register_cuda(Registry& registry);

// Every kernel record of bitparity's CUDA kernels.
const std::vector<KernelRecord>& kernel_records();
// The record of cuda:<contract> for `op`; nullptr when there is none.
const KernelRecord* kernel_record(const std::string& op, const std::string& contract);

// The Impl of cuda:<contract> for `op` with the ILP knob at `ilp` (kIlpDefault: each kernel's
// default, what register_cuda registers): a tuning knob that must not change a bit, not a
// backend. Empty when there is no such record or op.
Impl kernel_impl_at_ilp(const Registry& registry, const std::string& op, const std::string& contract, int ilp);

}  // namespace bitparity::gpu
