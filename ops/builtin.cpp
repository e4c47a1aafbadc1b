#include "ops/builtin.h"

#include <string>
#include <vector>

#include "ops/embedding.h"
#include "ops/expert_mlp.h"
#include "ops/gemm.h"
#include "ops/routing.h"
#include "ops/swiglu_family.h"
#include "ops/training.h"
#include "reference/backend.h"
#include "reference/embedding.h"
#include "reference/gemm.h"
#include "reference/routing.h"
#include "reference/swiglu.h"
#include "reference/training.h"
#ifdef BITPARITY_HAVE_CUDA
#include "gpu/register.h"
#endif

namespace bitparity {

// The composition root: every op's spec, the reference's implementations, then the backends
// built into this binary (which read the registered specs).
const Registry& builtin_registry() {
  static const Registry registry = [] {
    Registry r;
    r.add_backend(ref::backend());
    r.add_op(ops::swiglu());
    r.add_op(ops::swiglu_scale());
    r.add_op(ops::router_topk());
    r.add_op(ops::permute());
    r.add_op(ops::unpermute());
    r.add_op(ops::fanout_grad());
    r.add_op(ops::adamw_step());
    r.add_op(ops::grad_finalize());
    r.add_op(ops::embedding());
    r.add_op(ops::cross_entropy());
    r.add_op(ops::gemm());
    r.add_op(ops::expert_mlp());
    r.add_impls("ref", ref::swiglu_impls());
    r.add_impls("ref", ref::swiglu_scale_impls());
    r.add_impls("ref", ref::router_topk_impls());
    r.add_impls("ref", ref::permute_impls());
    r.add_impls("ref", ref::unpermute_impls());
    r.add_impls("ref", ref::fanout_grad_impls());
    r.add_impls("ref", ref::adamw_step_impls());
    r.add_impls("ref", ref::grad_finalize_impls());
    r.add_impls("ref", ref::embedding_impls());
    r.add_impls("ref", ref::cross_entropy_impls());
    r.add_impls("ref", ref::gemm_impls());
#ifdef BITPARITY_HAVE_CUDA
    gpu::register_cuda(r);
#else
    // Known but absent, so that a cuda:C entry replays as a skip with this reason, not as an
    // unknown backend.
    r.add_backend({"cuda", "bitparity's CUDA kernels (sm_90)", [] {
                     return std::optional<std::string>("this binary was built without CUDA (no nvcc)");
                   }});
#endif
    // Ops composed of other ops' contracts, on every kind that implements the stages.
    std::vector<std::string> kinds;
    for (const BackendKind& kind : r.backends()) kinds.push_back(kind.name);
    // The reference's gemm computes each row alone (its contracts' orders run over K only).
    for (const std::string& kind : kinds)
      r.add_impls(kind, ops::expert_mlp_impls(r, kind,
                                              kind == "ref" ? ops::GemmRows::kIndependent
                                                            : ops::GemmRows::kMayDependOnCount));
    return r;
  }();
  return registry;
}

}  // namespace bitparity
