#include "gpu/register.h"

#include <stdexcept>

#include "gpu/runtime.h"
#include "gpu/records.h"

namespace bitparity::gpu {

const std::vector<KernelRecord>& kernel_records() {
  static const std::vector<KernelRecord> records = [] {
    std::vector<KernelRecord> all;
    for (KernelRecord& r : swiglu_family_kernels()) all.push_back(std::move(r));
    for (KernelRecord& r : routing_kernels()) all.push_back(std::move(r));
    for (KernelRecord& r : training_kernels()) all.push_back(std::move(r));
    for (KernelRecord& r : embedding_kernels()) all.push_back(std::move(r));
    for (KernelRecord& r : cross_entropy_kernels()) all.push_back(std::move(r));
    for (KernelRecord& r : gemm_kernels()) all.push_back(std::move(r));
    for (KernelRecord& r : expert_mlp_kernels()) all.push_back(std::move(r));
    return all;
  }();
  return records;
}

const KernelRecord* kernel_record(const std::string& op, const std::string& contract) {
  for (const KernelRecord& r : kernel_records())
    if (r.op == op && r.contract == contract) return &r;
  return nullptr;
}

Impl kernel_impl_at_ilp(const Registry& registry, const std::string& op, const std::string& contract, int ilp) {
  const KernelRecord* record = kernel_record(op, contract);
  const OpInfo* info = registry.op(op);
  if (!record || !info) return {};
  return kernel_impl(*record, info->validate, ilp);
}

void register_cuda(Registry& registry) {
  // Any number of calls at once: each thread's launches and copies go on its own stream
  // (gpu/runtime.h), its buffers are its own, and the kernels keep no state between calls
  // (cuBLASLt's workspace is the thread's): SameBitsFromConcurrentThreads checks it.
  registry.add_backend(
      {"cuda", "bitparity's CUDA kernels (sm_90)", [] { return unavailable_reason(); }, kAnyNumberOfCalls});
  std::vector<ImplEntry> entries;
  for (const KernelRecord& record : kernel_records()) {
    const OpInfo* op = registry.op(record.op);
    if (!op) throw std::logic_error("a CUDA kernel of op '" + record.op + "', which the registry lacks");
    if (!op->has_contract(record.contract))
      throw std::logic_error("a CUDA kernel of " + record.op + " under contract '" + record.contract +
                             "', which the op lacks");
    entries.push_back({record.op, record.contract, kernel_impl(record, op->validate)});
  }
  registry.add_impls("cuda", entries);
  // Each record's batch path: small cases staged together, one synchronization (run_batch).
  for (const KernelRecord& record : kernel_records()) {
    const Validate validate = registry.op(record.op)->validate;
    registry.add_batch_impl(record.op, "cuda", record.contract,
                            [&record, validate](const std::vector<const Case*>& cases, const ContractInfo& contract) {
                              return run_batch(record, validate, contract, cases);
                            });
  }
}

}  // namespace bitparity::gpu
