#include "gpu/register.h"

#include <vector>

#include "gpu/runtime.h"
#include "gpu/swiglu_ops.h"

namespace bitparity::gpu {
namespace {

using ref::swiglu::ClampGate;

struct CudaImpl {
  const char* op;
  const char* contract;
  TensorMap (*run)(const Case&, const CudaOptions&);
};

const std::vector<CudaImpl>& cuda_impls() {
  static const std::vector<CudaImpl> impls = {
      {"swiglu", "megatron_eager",
       [](const Case& c, const CudaOptions& o) { return swiglu_megatron_cuda(c, ClampGate::kPositive, o); }},
      {"swiglu", "megatron_unfused",
       [](const Case& c, const CudaOptions& o) { return swiglu_megatron_cuda(c, ClampGate::kPresent, o); }},
      {"swiglu_scale", "megatron_eager",
       [](const Case& c, const CudaOptions& o) { return swiglu_scale_megatron_cuda(c, ClampGate::kPositive, o); }},
      {"swiglu_scale", "megatron_unfused",
       [](const Case& c, const CudaOptions& o) { return swiglu_scale_megatron_cuda(c, ClampGate::kPresent, o); }},
      {"swiglu_scale", "paddle_fused",
       [](const Case& c, const CudaOptions& o) { return swiglu_scale_paddle_cuda(c, false, o); }},
      {"swiglu_scale", "paddle_fused_shipped",
       [](const Case& c, const CudaOptions& o) { return swiglu_scale_paddle_cuda(c, true, o); }},
  };
  return impls;
}

}  // namespace

void register_cuda(Registry& registry) {
  registry.add_backend({"cuda", "bitparity's CUDA kernels (sm_90)", [] { return unavailable_reason(); }});
  for (const CudaImpl& impl : cuda_impls())
    registry.add_impl(impl.op, "cuda", impl.contract,
                      [run = impl.run](const Case& c) { return run(c, CudaOptions{}); });
}

Impl cuda_impl_with_ilp(const std::string& op, const std::string& contract, int ilp) {
  for (const CudaImpl& impl : cuda_impls())
    if (op == impl.op && contract == impl.contract)
      return [run = impl.run, ilp](const Case& c) { return run(c, CudaOptions{ilp}); };
  return {};
}

}  // namespace bitparity::gpu
