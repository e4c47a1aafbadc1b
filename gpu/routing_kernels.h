// Launchers of the routing kernels (spec OP-1, OP-2, OP-3): the router's scores, top-k and
// normalization (gpu/router_topk.cu), and the permute / unpermute that move token rows to their
// experts' positions and back (gpu/routing.cu). The kernel records (gpu/routing_records.cpp) bind
// them. No CUDA types here, so that host code compiled by g++ can call them, and nothing of C++20,
// which nvcc compiles as C++17 here.
//
// Every pointer is device memory; tensors are row-major and contiguous; a bool tensor holds one
// byte an element (nonzero is true). A launcher checks its launches (runtime.h: check_launch) and
// throws gpu::CudaError on failure; it never validates a case (the op's validate has), and it
// writes every element of its outputs. Streams are cudaStream_t values passed as void*; nullptr is
// the default stream.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "gpu/common/ilp.h"
#include "gpu/common/row_sum.h"

namespace bitparity::gpu {

// --- the routing index (gpu/routing.cu) ---------------------------------------------------------
//
// permute and unpermute address the permuted rows through one index built on the device from the
// routing map M [T, E]: position pos(t, e) = off[e] + #{t' < t : M[t', e]} with
// off[e] = sum_{e' < e} count(e') (expert-major), and per token its slots, the positions of its
// experts in ascending expert order (slot j of t is its j-th smallest expert id). The index lives in
// a workspace the caller allocates once (routing_workspace_bytes) and passes to every launch; each
// launch rebuilds it first, so that a launch depends on nothing but its arguments.
struct RoutingShape {
  DType dtype = DType::kBF16;  // the token rows' dtype: bf16, fp16 or fp32
  int64_t T = 0;  // tokens (rows of the routing map)
  int64_t E = 0;  // experts (columns of the routing map)
  int64_t N = 0;  // permuted rows: the true entries of the routing map
  int64_t H = 0;  // elements of a token row
};

// Bytes of device workspace a launch of this shape needs; `fp32_rows` adds a [T, H] fp32 buffer
// (the order-of-arrival unpermute with probs accumulates there before its one rounding). Throws
// std::invalid_argument where a count does not fit the kernels' 32-bit indices.
size_t routing_workspace_bytes(const RoutingShape& shape, bool fp32_rows = false);

struct RoutingCommon {
  RoutingShape shape;
  const void* routing_map = nullptr;  // [T, E] bool
  void* workspace = nullptr;          // routing_workspace_bytes(shape, ...) bytes
  int ilp = kIlpDefault;  // kIlpDefault: the kernel's own; or 1, 2, 4 (same bits)
  void* stream = nullptr;
};

// permute forward (every contract): permuted[pos(t, e)] = tokens[t], a copy of the bits.
struct PermuteForward {
  RoutingCommon r;
  const void* tokens = nullptr;  // [T, H]
  void* permuted = nullptr;      // [N, H]
};
void launch_permute_forward(const PermuteForward& args);

// permute backward. Deterministic (megatron_eager, paddle_aligned): for H > 1 rule 7, middle dim,
// d_tokens[t] = dt(((a0 + a1) + a2) + a3) with a_{j mod 4} += f32(d_permuted[slot j of t]), j
// ascending, each accumulator from +0; for H == 1 the slots are the last dim of [T, k] and
// d_tokens[t] = dt(rule 7's last-dim row sum of the k values, `slot_plan`). A token without slots
// gets +0. order_of_arrival (baseline, index_add_): d_tokens zeroed, then every row of d_permuted
// added atomically into its token's row in the dtype, each addition rounded to it.
struct PermuteBackward {
  RoutingCommon r;
  bool order_of_arrival = false;
  // Deterministic with H == 1: rule7_row_sum_plan(k, T), k the slots of every routed token.
  RowSumPlan slot_plan;
  const void* d_permuted = nullptr;  // [N, H]
  void* d_tokens = nullptr;          // [T, H]
};
void launch_permute_backward(const PermuteBackward& args);

// unpermute forward. Deterministic: out[t] = the sum of permute's backward (H == 1: the last-dim
// row sum of `slot_plan`), with x_j = f32(permuted[slot j]) or, with probs, f32(permuted[slot j]) *
// probs[t, e_j] (one fp32 product). order_of_arrival (baseline, scatter_add_): without probs atomic
// additions in the dtype; with probs the fp32 products added atomically in fp32, then rounded once
// to the dtype.
struct UnpermuteForward {
  RoutingCommon r;
  bool order_of_arrival = false;
  // Deterministic with H == 1: rule7_row_sum_plan(k, T), k the slots of every routed token.
  RowSumPlan slot_plan;
  const void* permuted = nullptr;  // [N, H]
  const void* probs = nullptr;     // [T, E] fp32, or nullptr
  void* out = nullptr;             // [T, H]
};
void launch_unpermute_forward(const UnpermuteForward& args);

// unpermute backward (every contract): F.embedding's backward sums d_out[t] into zeros in fp32,
// so d_permuted[pos(t, e)] = dt(+0 + f32(d_out[t])) (a -0 becomes +0, a NaN the fp32 unit's
// canonical NaN) or, with probs, dt((+0 + f32(d_out[t])) * probs[t, e]); with probs also
// d_probs[t, e] = the rule-7 last-dim sum over h of f32(d_out[t, h]) * f32(permuted[pos(t, e), h])
// in a tensor of N rows (`plan`: rule7_row_sum_plan(H, N)), for H == 1 the product itself (no
// reduction, a -0 kept), and +0 where the routing map is false.
struct UnpermuteBackward {
  RoutingCommon r;
  const void* d_out = nullptr;     // [T, H]
  const void* probs = nullptr;     // [T, E] fp32, or nullptr
  const void* permuted = nullptr;  // [N, H]; required with probs
  RowSumPlan plan;                 // with probs and H > 1
  void* d_permuted = nullptr;      // [N, H]
  void* d_probs = nullptr;         // [T, E] fp32; with probs
};
void launch_unpermute_backward(const UnpermuteBackward& args);

// The index of a map of one 128-token tile and at most kIndexOneKernelExperts experts is built by
// one kernel (one pass of its block's scan); of any other map of at most 128 tiles and
// kIndexPlaceSumsCounts tile counts (tiles x E) by two, count and place, place summing the tile
// counts itself; of the rest by three, count, scan and place.
inline constexpr int kIndexOneKernelExperts = 2048;
inline constexpr int64_t kIndexPlaceSumsCounts = 32768;
// copy_rows (permute's forward, unpermute's backward without probs) takes a block per token where a
// row has at least this many vectors (a thread per vector otherwise).
inline constexpr int kCopyRowsTokenBlockVectors = 256;

// --- the router (gpu/router_topk.cu), Megatron's aligned router (megatron_eager) ------------------

enum class RouterScore { kSigmoid, kSqrtSoftplus };

// The most slots the kernels take: the slot sums (D, dD) are rule-7 sums of k values, whose lane
// count is P2(k) for every row count while k <= 32 (one warp's lanes), as the reference models them.
inline constexpr int64_t kRouterMaxSlots = 32;

struct RouterCommon {
  DType dtype = DType::kBF16;  // the logits' dtype dL: bf16 or fp32
  int64_t T = 0, E = 0, k = 0;  // 1 <= k <= min(E, kRouterMaxSlots)
  RouterScore score = RouterScore::kSigmoid;
  bool scaled = false;  // the scaling attribute is present and nonzero (Python truthiness)
  float scale = 1.0f;   // f32(scaling)
  RowSumPlan plan;      // k > 1: rule7_row_sum_plan(k, T), the order of the slot sums (<= 32 lanes)
  const void* logits = nullptr;  // [T, E] dL
  const float* bias = nullptr;   // [E] fp32, or nullptr
  void* workspace = nullptr;     // router_workspace_bytes(T, E, k) bytes
  void* stream = nullptr;
};

// Bytes of device workspace a router launch needs.
size_t router_workspace_bytes(int64_t T, int64_t E, int64_t k);

// S = dL(score(f32 L)), score sigmoid (libdevice expf, IEEE division) or sqrt(softplus) with
// softplus x > 20 ? x : log1pf(expf(x)); R = f32(S) + bias or S; the k slots in descending R
// (NaN above every number), ties by ascending index; G = S at the slots;
// D = f32(fp64 rule-7 sum of G over the slots) + f32(1e-20); P = f32(G) / D (k == 1: P = G in
// dL); scaled: P *= scale (k == 1: rounded to dL); probs = P at the slots, +0 elsewhere;
// routing_map = the slots.
struct RouterForward {
  RouterCommon r;
  void* probs = nullptr;        // [T, E]: fp32 when k > 1, dL when k == 1
  void* routing_map = nullptr;  // [T, E] bool
};
void launch_router_forward(const RouterForward& args);

// router-backward-order.md §2 and §3: from the slots topk_idx and d_probs, recomputing S, y, G and
// D; `gather_path` (the bias is present): dS = (+0) + dG, else dS = dG (a -0 kept).
struct RouterBackward {
  RouterCommon r;
  bool gather_path = false;
  const int64_t* topk_idx = nullptr;  // [T, k]
  const void* d_probs = nullptr;      // [T, E]: fp32 when k > 1, dL when k == 1
  void* d_logits = nullptr;           // [T, E] dL
};
void launch_router_backward(const RouterBackward& args);

}  // namespace bitparity::gpu
