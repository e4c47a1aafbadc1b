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
  TensorMap (*run)(const Case&, ExpModel);
};

const std::vector<CudaImpl>& cuda_impls() {
  static const std::vector<CudaImpl> impls = {
      {"swiglu", "megatron_eager", [](const Case& c, ExpModel e) { return swiglu_megatron_cuda(c, ClampGate::kPositive, e); }},
      {"swiglu", "megatron_unfused",
       [](const Case& c, ExpModel e) { return swiglu_megatron_cuda(c, ClampGate::kPresent, e); }},
      {"swiglu_scale", "megatron_eager",
       [](const Case& c, ExpModel e) { return swiglu_scale_megatron_cuda(c, ClampGate::kPositive, e); }},
      {"swiglu_scale", "megatron_unfused",
       [](const Case& c, ExpModel e) { return swiglu_scale_megatron_cuda(c, ClampGate::kPresent, e); }},
      {"swiglu_scale", "paddle_fused", [](const Case& c, ExpModel e) { return swiglu_scale_paddle_cuda(c, false, e); }},
      {"swiglu_scale", "paddle_fused_shipped",
       [](const Case& c, ExpModel e) { return swiglu_scale_paddle_cuda(c, true, e); }},
  };
  return impls;
}

}  // namespace

void register_cuda(Registry& registry) {
  registry.add_backend({"cuda", "bitparity's CUDA kernels (sm_90)", [] { return unavailable_reason(); }});
  for (const CudaImpl& impl : cuda_impls())
    registry.add_impl(impl.op, "cuda", impl.contract,
                      [run = impl.run](const Case& c) { return run(c, ExpModel::kDevice); });
}

Impl cuda_impl_with_reference_expf(const std::string& op, const std::string& contract) {
  for (const CudaImpl& impl : cuda_impls())
    if (op == impl.op && contract == impl.contract)
      return [run = impl.run](const Case& c) { return run(c, ExpModel::kCorrectlyRounded); };
  return {};
}

}  // namespace bitparity::gpu
