// The expert MLP (spec OP-10 with OP-4/5/6): fc1 -> weighted SwiGLU -> fc2 on one expert's tokens,
// with Megatron's small-batch padding. Its contracts are compositions of two ops' contracts: the
// GEMM's (gemm) and the activation's (swiglu_scale with probs, swiglu without), so that every
// backend that implements those stages implements expert_mlp the same way, stage by stage.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/registry.h"

namespace bitparity::ops {

OpInfo expert_mlp();  // ops/expert_mlp.cpp

// The padding rule (spec OP-10): an expert with 0 < M < kExpertPadBelow tokens is padded with zero
// rows (and zero probs) to kExpertPadRows, computed, and sliced back; M = 0 computes nothing.
inline constexpr int64_t kExpertPadBelow = 17;
inline constexpr int64_t kExpertPadRows = 32;
inline int64_t expert_padded_rows(int64_t M) { return M > 0 && M < kExpertPadBelow ? kExpertPadRows : M; }

// What each contract of expert_mlp is made of: gemm's contract for its five GEMMs, and the
// activation's (swiglu_scale's with probs, swiglu's without).
struct ExpertComposition {
  std::string contract, gemm_contract, activation_contract;
};
std::vector<ExpertComposition> expert_mlp_compositions();

// The bound of the contracts whose GEMMs are cuBLAS's (megatron_eager): per output, the unrounded
// MLP's value and how far any fp32 accumulation order of every GEMM (gemm's cublas bound) together
// with Megatron's activation chain may take the computed value from it; unbounded where a non-finite
// value or a possible overflow reaches the output. ops/expert_mlp_bound.cpp; kExpertChainBoundDoc
// states the derivation.
std::map<std::string, ElementBounds> expert_mlp_chain_bound(const Case& c);
extern const char* const kExpertChainBoundDoc;

// Whether a chain applies the padding rule: kMegatron always in the registry; kNone only for the
// planted bug that forgets it (testing/planted_bugs.cpp).
enum class ExpertPadding { kMegatron, kNone };

// Whether a kind's gemm computes each output row from its own row of `a` alone, whatever the row
// count (the reference's contracts do; a library may choose its algorithm, and so its order, by the
// row count, which is why Megatron pads). Where it does, the forward computes only the rows it
// returns: the padded rows' outputs are sliced away unread, so the bits are the padded chain's.
enum class GemmRows { kMayDependOnCount, kIndependent };

// The chain of contract `contract` on backend kind `kind` (its gemm and activation stages taken
// from `registry`), or nothing when the kind lacks a stage.
std::optional<Impl> expert_mlp_chain(const Registry& registry, const std::string& kind, const std::string& contract,
                                     ExpertPadding padding, GemmRows rows = GemmRows::kMayDependOnCount);

// The implementations of expert_mlp's contracts on backend kind `kind`, each built from that kind's
// implementations of the stage contracts in `registry` (those it lacks leave the contract out, and so
// does a kind that implements the contract itself, as the CUDA backend's composed kernel record does).
// Called by the composition root once the kind's stage implementations are registered.
std::vector<ImplEntry> expert_mlp_impls(const Registry& registry, const std::string& kind,
                                        GemmRows rows = GemmRows::kMayDependOnCount);

}  // namespace bitparity::ops
