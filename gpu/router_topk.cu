// Megatron's aligned router (spec OP-1; the backward as router-backward-order.md verified it), one
// warp per token row.
//
// Forward: each lane scores the experts e = lane + 32 i of the row (in registers for E <= 256,
// else through an fp32 scratch row), then k selection rounds: round j picks the largest rank key
// below round j-1's winner, where a key orders R descending with NaN above every number and ties
// by ascending index (so the rounds yield the slots in topk's sorted order, and the chosen set is
// every key at or above the k-th). The slot scores go to a per-row workspace; the warp adds them
// in fp64 in rule 7's shape (the plan of a last-dim sum of k values in a tensor of T rows); probs
// and the routing map are written from the k-th key, the whole row at once.
//
// Backward: every d_logits entry first as if unselected (dS = +0 through the score's backward, so
// that NaN appears where the formula gives it), then the k slots overwrite theirs; D and dD are
// rule-7 sums over the slots (fp64 and fp32), each slot's terms recomputed from the logits.
//
// Every fp32 step is one explicitly rounded operation (__fadd_rn, __fmul_rn, __fdiv_rn, ...), so
// that nvcc contracts nothing the contract rounds twice; expf and log1pf are libdevice's (no fast
// math), the sigmoid is gpu/common/sigmoid_silu's 1 / (1 + expf(-x)).
#include "gpu/routing_kernels.h"

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "gpu/common/dtype_io.cuh"
#include "gpu/common/launch.cuh"
#include "gpu/common/sigmoid_silu.cuh"
#include "gpu/runtime.h"

namespace bitparity::gpu {
namespace {

using namespace device;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRowsPerBlock = kThreads / kWarpLanes;  // one warp a row
constexpr float kSoftplusThreshold = 20.0f;           // softplus(x; beta = 1, threshold = 20)
constexpr float kRouterEpsilon = 1e-20f;              // D = f32(sum) + f32(1e-20)
// Experts a lane keeps in registers: rows up to kRegisterExperts wide are scored once into
// registers; wider rows go through the scratch row.
constexpr int kRegisterExperts = 256;

bool needs_scratch(int64_t E) { return E > kRegisterExperts; }

// The forward's workspace: the slot scores [T, k] (k > 1), then the scratch scores [T, E].
size_t slot_scores_bytes(int64_t T, int64_t k) { return k > 1 ? aligned_bytes(static_cast<size_t>(T * k) * sizeof(float)) : 0; }

// --- scores --------------------------------------------------------------------------------------

// softplus(x) with beta = 1 and threshold 20, as ATen's kernel: x > 20 ? x : log1p(exp(x)).
__device__ __forceinline__ float softplus(float x) { return x > kSoftplusThreshold ? x : log1pf(expf(x)); }

// S = dL(score(x)), as an fp32 value.
template <class Act, bool kSqrtSoftplus>
__device__ __forceinline__ float router_score(float x) {
  if constexpr (kSqrtSoftplus) {
    return round_as<Act>(__fsqrt_rn(softplus(x)));
  } else {
    return round_as<Act>(sigmoid_silu(x).sigmoid);
  }
}

// d_logits (fp32) of one entry from dS: sigmoid (dS * (1 - y)) * y with y the fp32 sigmoid; or
// sqrt then softplus: g = dS / (2 s), x > 20 ? g : (g * z) / (z + 1), z = expf(x).
template <bool kSqrtSoftplus>
__device__ __forceinline__ float score_backward(float dS, float x) {
  if constexpr (kSqrtSoftplus) {
    const float s = __fsqrt_rn(softplus(x));
    const float g = __fdiv_rn(dS, __fmul_rn(2.0f, s));
    if (x > kSoftplusThreshold) return g;
    const float z = expf(x);
    return __fdiv_rn(__fmul_rn(g, z), __fadd_rn(z, 1.0f));
  } else {
    const float y = sigmoid_silu(x).sigmoid;
    return __fmul_rn(__fmul_rn(dS, __fsub_rn(1.0f, y)), y);
  }
}

// --- top-k order -----------------------------------------------------------------------------------

// A key whose unsigned order is topk's: R descending with NaN above every number (-0 ties with +0),
// then the index ascending. Never 0 (the "none" of a selection round) nor all ones (the bound of
// the first round).
__device__ __forceinline__ uint64_t rank_key(float r, int e) {
  uint32_t ordered;
  if (r != r) {
    ordered = 0xffffffffu;
  } else {
    const uint32_t bits = r == 0.0f ? 0u : __float_as_uint(r);
    ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  }
  return (static_cast<uint64_t>(ordered) << 32) | (0xfffffffeu - static_cast<uint32_t>(e));
}

// --- rule 7 across a warp ------------------------------------------------------------------------

__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

// Rule 7, last-dim sum of x(0) .. x(width - 1) (one row; `plan` from rule7_row_sum_plan(width,
// rows), at most 32 lanes: the slot sums have k <= kRouterMaxSlots) by the whole warp: plan lane l is
// thread l, with four accumulators from +0 (vectorized: acc[i] takes x(4 (l + L it) + i); else
// acc[it % 4] takes x(l + L it)); lane values ((a0 + a1) + a2) + a3 meet in the halving tree by
// shuffles. Every lane gets the sum.
template <class Acc, class X>
__device__ __forceinline__ Acc warp_rule7_sum(int width, const RowSumPlan& plan, X&& x) {
  const int l = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int L = plan.lanes;
  Acc a[4] = {Acc(0), Acc(0), Acc(0), Acc(0)};
  if (l < L) {
    if (plan.vectorized) {
      for (int g = l; 4 * g < width; g += L)
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = add_rn(a[i], x(4 * g + i));
    } else {
      for (int it0 = 0; l + L * it0 < width; it0 += 4)
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const int j = l + L * (it0 + b);
          if (j < width) a[b] = add_rn(a[b], x(j));
        }
    }
  }
  Acc w = add_rn(add_rn(add_rn(a[0], a[1]), a[2]), a[3]);
  for (int stride = L / 2; stride >= 1; stride /= 2) w = add_rn(w, __shfl_down_sync(kFullMask, w, stride));
  return __shfl_sync(kFullMask, w, 0);
}

// --- forward ---------------------------------------------------------------------------------------

// kPer experts a lane in registers (E <= 32 kPer), or 0: the scratch row.
template <class Act, bool kSqrtSoftplus, int kPer>
__global__ void __launch_bounds__(kThreads)
    router_forward_kernel(RouterForward p, float* all_slot_scores, float* all_scratch) {
  using S = typename Act::Storage;
  const RouterCommon& r = p.r;
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpLanes;
  if (row >= r.T) return;  // the whole warp
  const int E = static_cast<int>(r.E), k = static_cast<int>(r.k);
  const S* logits = static_cast<const S*>(r.logits) + row * E;
  const float* bias = r.bias;
  auto key_of = [bias](float s, int e) { return rank_key(bias ? __fadd_rn(s, bias[e]) : s, e); };
  float* slot_scores = all_slot_scores + row * k;  // k > 1
  float* scratch = all_scratch + row * E;           // kPer == 0

  constexpr int kRegs = kPer > 0 ? kPer : 1;
  float score[kRegs];
  uint64_t key[kRegs];
  if constexpr (kPer > 0) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = lane + kWarpLanes * i;
      score[i] = 0.0f;
      key[i] = 0;
      if (e < E) {
        score[i] = router_score<Act, kSqrtSoftplus>(Act::load(logits[e]));
        key[i] = key_of(score[i], e);
      }
    }
  } else {
    for (int e = lane; e < E; e += kWarpLanes) scratch[e] = router_score<Act, kSqrtSoftplus>(Act::load(logits[e]));
  }

  // Round j: the largest key below round j-1's winner, and its score.
  uint64_t bound = ~uint64_t{0};
  for (int j = 0; j < k; ++j) {
    uint64_t best = 0;
    float best_score = 0.0f;
    auto consider = [&](uint64_t candidate, float s) {
      if (candidate < bound && candidate > best) {
        best = candidate;
        best_score = s;
      }
    };
    if constexpr (kPer > 0) {
#pragma unroll
      for (int i = 0; i < kPer; ++i) consider(key[i], score[i]);
    } else {
      for (int e = lane; e < E; e += kWarpLanes) consider(key_of(scratch[e], e), scratch[e]);
    }
#pragma unroll
    for (int offset = kWarpLanes / 2; offset >= 1; offset /= 2) {
      const uint64_t other = __shfl_xor_sync(kFullMask, best, offset);
      const float other_score = __shfl_xor_sync(kFullMask, best_score, offset);
      if (other > best) {
        best = other;
        best_score = other_score;
      }
    }
    bound = best;
    if (k > 1 && lane == 0) slot_scores[j] = best_score;
  }
  __syncwarp();
  const uint64_t kth = bound;  // the chosen set: every key >= kth

  float D = 0.0f;
  if (k > 1) {
    const double sum =
        warp_rule7_sum<double>(k, r.plan, [slot_scores](int j) { return static_cast<double>(slot_scores[j]); });
    D = __fadd_rn(__double2float_rn(sum), kRouterEpsilon);
  }

  uint8_t* map = static_cast<uint8_t*>(p.routing_map) + row * E;
  auto emit = [&](int e, float s, uint64_t e_key) {
    const bool chosen = e_key >= kth;
    map[e] = chosen ? 1 : 0;
    if (k > 1) {
      float P = 0.0f;
      if (chosen) {
        P = __fdiv_rn(s, D);
        if (r.scaled) P = __fmul_rn(P, r.scale);
      }
      static_cast<float*>(p.probs)[row * E + e] = P;
    } else {
      float P = 0.0f;
      if (chosen) P = r.scaled ? round_as<Act>(__fmul_rn(s, r.scale)) : s;
      static_cast<S*>(p.probs)[row * E + e] = Act::store(P);
    }
  };
  if constexpr (kPer > 0) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = lane + kWarpLanes * i;
      if (e < E) emit(e, score[i], key[i]);
    }
  } else {
    for (int e = lane; e < E; e += kWarpLanes) emit(e, scratch[e], key_of(scratch[e], e));
  }
}

// --- backward --------------------------------------------------------------------------------------

// GatherBackward0 is zeros.scatter_add_: an atomic add onto +0, so a -0 becomes +0. For fp32 it is
// RED.ADD.F32.FTZ, which flushes a subnormal addend to a sign-preserving zero (+0 once added to
// +0); bf16's is not flushed.
template <class Act>
__device__ __forceinline__ float scatter_add_onto_zero(float dG) {
  if (Act::kDType == DType::kFP32 && fabsf(dG) < FLT_MIN) return 0.0f;
  return round_as<Act>(__fadd_rn(0.0f, dG));
}

template <class Act, bool kSqrtSoftplus>
__global__ void __launch_bounds__(kThreads) router_backward_kernel(RouterBackward p) {
  using S = typename Act::Storage;
  const RouterCommon& r = p.r;
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpLanes;
  if (row >= r.T) return;  // the whole warp
  const int E = static_cast<int>(r.E), k = static_cast<int>(r.k);
  const S* logits = static_cast<const S*>(r.logits) + row * E;
  S* d_logits = static_cast<S*>(p.d_logits) + row * E;
  const int64_t* idx = p.topk_idx + row * k;

  // Every entry as if unselected: dS = +0.
  for (int e = lane; e < E; e += kWarpLanes)
    d_logits[e] = Act::store(score_backward<kSqrtSoftplus>(0.0f, Act::load(logits[e])));
  __syncwarp();

  auto expert = [idx](int j) { return static_cast<int>(idx[j]); };
  auto G = [&](int j) { return router_score<Act, kSqrtSoftplus>(Act::load(logits[expert(j)])); };
  // dP_j, scaled (MulBackward0): fp32 probs dP * scale; dL probs (k == 1) dL(f32(dP) * scale).
  auto dP = [&](int j) {
    const int64_t at = row * E + expert(j);
    if (k > 1) {
      const float d = static_cast<const float*>(p.d_probs)[at];
      return r.scaled ? __fmul_rn(d, r.scale) : d;
    }
    const float d = Act::load(static_cast<const S*>(p.d_probs)[at]);
    return r.scaled ? round_as<Act>(__fmul_rn(d, r.scale)) : d;
  };

  float D = 0.0f, dD = 0.0f;
  if (k > 1) {
    const double sum = warp_rule7_sum<double>(k, r.plan, [&](int j) { return static_cast<double>(G(j)); });
    D = __fadd_rn(__double2float_rn(sum), kRouterEpsilon);
    // m_j = (-dP_j) * ((G_j / D) / D)
    dD = warp_rule7_sum<float>(k, r.plan, [&](int j) { return __fmul_rn(-dP(j), __fdiv_rn(__fdiv_rn(G(j), D), D)); });
  }
  for (int j = lane; j < k; j += kWarpLanes) {
    const int e = expert(j);
    float dG = dP(j);
    // dG = dL(f32(dL(dP / D)) + f32(dL(dD))): three roundings to bf16, none for fp32.
    if (k > 1) dG = round_as<Act>(__fadd_rn(round_as<Act>(__fdiv_rn(dG, D)), round_as<Act>(dD)));
    // GatherBackward0 adds onto +0 (a -0 becomes +0; fp32's atomic add flushes a subnormal dG);
    // TopkBackward0 scatters (-0 kept).
    const float dS = p.gather_path ? scatter_add_onto_zero<Act>(dG) : dG;
    d_logits[e] = Act::store(score_backward<kSqrtSoftplus>(dS, Act::load(logits[e])));
  }
}

// --- launchers ---------------------------------------------------------------------------------------

unsigned row_grid(int64_t T) { return static_cast<unsigned>((T + kRowsPerBlock - 1) / kRowsPerBlock); }

void check_router(const RouterCommon& r, const char* who) {
  if (r.k < 1 || r.k > r.E || r.k > kRouterMaxSlots || r.E >= (int64_t{1} << 31) - 2)
    throw std::invalid_argument(std::string(who) + ": k = " + std::to_string(r.k) + ", E = " + std::to_string(r.E) +
                                " (the kernels take 1 <= k <= min(E, " + std::to_string(kRouterMaxSlots) + "))");
  if (r.k > 1 && (r.plan.lanes < 1 || r.plan.lanes > kWarpLanes))
    throw std::invalid_argument(std::string(who) + ": the slot sums' rule-7 plan must have 1 to 32 lanes");
}

template <class Act, bool kSqrtSoftplus>
void forward_as(const RouterForward& p) {
  const auto stream = static_cast<cudaStream_t>(p.r.stream);
  const unsigned grid = row_grid(p.r.T);
  const int64_t E = p.r.E;
  float* slot_scores = static_cast<float*>(p.r.workspace);
  float* scratch = reinterpret_cast<float*>(static_cast<char*>(p.r.workspace) + slot_scores_bytes(p.r.T, p.r.k));
  if (needs_scratch(E)) {
    router_forward_kernel<Act, kSqrtSoftplus, 0><<<grid, kThreads, 0, stream>>>(p, slot_scores, scratch);
  } else if (E <= 2 * kWarpLanes) {
    router_forward_kernel<Act, kSqrtSoftplus, 2><<<grid, kThreads, 0, stream>>>(p, slot_scores, scratch);
  } else if (E <= 4 * kWarpLanes) {
    router_forward_kernel<Act, kSqrtSoftplus, 4><<<grid, kThreads, 0, stream>>>(p, slot_scores, scratch);
  } else {
    router_forward_kernel<Act, kSqrtSoftplus, 8><<<grid, kThreads, 0, stream>>>(p, slot_scores, scratch);
  }
  check_launch("router_topk forward", p.r.stream);
}

template <class Act, bool kSqrtSoftplus>
void backward_as(const RouterBackward& p) {
  router_backward_kernel<Act, kSqrtSoftplus>
      <<<row_grid(p.r.T), kThreads, 0, static_cast<cudaStream_t>(p.r.stream)>>>(p);
  check_launch("router_topk backward", p.r.stream);
}

template <template <class, bool> class Go, class Args>
void dispatch_router(const Args& p) {
  const bool sqrt_softplus = p.r.score == RouterScore::kSqrtSoftplus;
  switch (p.r.dtype) {
    case DType::kBF16: return sqrt_softplus ? Go<BF16, true>::run(p) : Go<BF16, false>::run(p);
    case DType::kFP32: return sqrt_softplus ? Go<FP32, true>::run(p) : Go<FP32, false>::run(p);
    default:
      throw std::invalid_argument(std::string("router_topk: no kernel for logits of dtype ") +
                                  std::string(dtype_name(p.r.dtype)));
  }
}

template <class Act, bool kSqrtSoftplus>
struct ForwardGo {
  static void run(const RouterForward& p) { forward_as<Act, kSqrtSoftplus>(p); }
};
template <class Act, bool kSqrtSoftplus>
struct BackwardGo {
  static void run(const RouterBackward& p) { backward_as<Act, kSqrtSoftplus>(p); }
};

}  // namespace

size_t router_workspace_bytes(int64_t T, int64_t E, int64_t k) {
  const size_t scratch = needs_scratch(E) ? static_cast<size_t>(T * E) * sizeof(float) : 0;
  return slot_scores_bytes(T, k) + scratch;
}

void launch_router_forward(const RouterForward& args) {
  if (args.r.T == 0) return;
  check_router(args.r, "router_topk forward");
  if (!args.r.workspace && router_workspace_bytes(args.r.T, args.r.E, args.r.k) > 0)
    throw std::invalid_argument("router_topk forward: no workspace (router_workspace_bytes)");
  dispatch_router<ForwardGo>(args);
}

void launch_router_backward(const RouterBackward& args) {
  if (args.r.T == 0) return;
  check_router(args.r, "router_topk backward");
  dispatch_router<BackwardGo>(args);
}

}  // namespace bitparity::gpu
