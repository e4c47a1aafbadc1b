// The kernels of swiglu_scale that reduce over a row: Megatron's weighted backward (d_scale in the
// rule-7 order of torch.sum) and PaddleFleet's fused kernels (their own d_scale order). Megatron's
// weighted forward is elementwise and lives in gpu/swiglu.cu.
#include "gpu/swiglu_kernels.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <cuda_runtime.h>

#include "gpu/runtime.h"
#include "gpu/common/dtype_io.cuh"
#include "gpu/common/launch.cuh"
#include "gpu/common/packet_ring.cuh"
#include "gpu/common/row_sum.cuh"
#include "gpu/swiglu_elements.cuh"

namespace bitparity::gpu {
namespace {

using namespace device;

// --- Megatron weighted backward ------------------------------------------------------------------
//
// d_scale is the rule-7 row sum (gpu/common/row_sum.cuh) of the products act(swiglu) * g.to(w),
// whose tensor has the dtype promote(act, w). A 16-bit product tensor (w of act's dtype) is summed
// in 8-element vectors: a thread is one lane with kAccumulators = 8 and reads one 16-byte packet
// per iteration. An fp32 product tensor is summed in 4-element vectors: with 16-bit activations a
// thread owns V = 2 consecutive lanes, so that it still reads one 16-byte packet (two groups) per
// iteration. G = L / V threads share a row.
template <class Act, int kAccumulators>
inline constexpr int kLanesPerThread =
    kAccumulators == kRuleVector16 ? 1 : (sizeof(typename Act::Storage) == 2 ? 2 : 1);

inline constexpr int kMaxRowThreads = kReduceMaxThreads;

// kBlock: the block size the kernel is compiled for, kThreads (several rows per block) or
// kMaxRowThreads (one row of more than 32 threads per block).
template <class Act, int kIlp, int kBlock, int kClamp, int kAccumulators>
__global__ void __launch_bounds__(kBlock, blocks_per_sm(6, kIlp) * kThreads / kBlock)
    megatron_scale_backward_kernel(MegatronScaleBackward p, int group) {
  using S = typename Act::Storage;
  constexpr int V = kLanesPerThread<Act, kAccumulators>;
  extern __shared__ float tree[];
  const int L = p.plan.lanes;
  const int64_t F = p.F;
  int64_t row;
  int t;
  if (group <= kWarpLanes) {
    row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / group) + threadIdx.x / group;
    t = static_cast<int>(threadIdx.x) % group;
  } else {
    row = blockIdx.x;
    t = static_cast<int>(threadIdx.x);
  }
  const bool live = row < p.rows;
  const bool chain_is_act = p.scale_dtype == Act::kDType;  // promote(act, w)
  auto chain = [chain_is_act](float x) { return chain_is_act ? round_as<Act>(x) : x; };

  float acc[V][kAccumulators];
#pragma unroll
  for (int q = 0; q < V; ++q)
#pragma unroll
    for (int i = 0; i < kAccumulators; ++i) acc[q][i] = 0.0f;

  if (live) {
    const S* a_row = static_cast<const S*>(p.y) + row * 2 * F;
    const S* b_row = a_row + F;
    const S* g_row = static_cast<const S*>(p.g) + row * F;
    S* da_row = static_cast<S*>(p.d_y) + row * 2 * F;
    S* db_row = da_row + F;
    const float s = load_scalar(p.scale, p.scale_dtype, row);
    // d_y of one element, and its d_scale term act(swiglu) * g.to(w) in the chain dtype; kFast as
    // in megatron_swiglu_back.
    auto element = [&](auto fast_tag, float a, float b, float g, float& da, float& db, bool* in_domain) {
      constexpr bool kFast = decltype(fast_tag)::value;
      const MegatronGrad d = megatron_swiglu_back<Act, kFast, kClamp>(chain_is_act, chain(__fmul_rn(g, s)), a, b,
                                                                      p.clamp, in_domain);
      da = d.da;
      db = d.db;
      return chain(__fmul_rn(d.swiglu, round_dtype(p.scale_dtype, g)));
    };
    // kN contiguous elements at column c: d_y, and each product added to lane_acc0[i], which is
    // acc[i / 4][i % 4] of this thread's lanes. The shortcut first; a chunk with an element
    // outside its domain is recomputed with the IEEE divisions before anything is added or stored.
    auto compute_chunk = [&](auto kN_tag, int64_t c, const auto& a, const auto& b, const auto& g, float* lane_acc0) {
      constexpr int kN = decltype(kN_tag)::value;
      float da[kN], db[kN], x[kN];
      unsigned redo = 0;  // elements outside the shortcut's domain
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        bool in_domain = true;
        x[i] = element(std::true_type{}, Act::load(a.e[i]), Act::load(b.e[i]), Act::load(g.e[i]), da[i], db[i],
                       &in_domain);
        redo |= in_domain ? 0u : 1u << i;
      }
      if (redo) {
#pragma unroll
        for (int i = 0; i < kN; ++i)
          if (redo & (1u << i))
            x[i] = element(std::false_type{}, Act::load(a.e[i]), Act::load(b.e[i]), Act::load(g.e[i]), da[i], db[i],
                           nullptr);
      }
#pragma unroll
      for (int i = 0; i < kN; ++i) lane_acc0[i] = __fadd_rn(lane_acc0[i], x[i]);
      store_chunk<Act, kN>(da_row + c, da);
      store_chunk<Act, kN>(db_row + c, db);
    };
    if (p.plan.vectorized) {
      constexpr int kUnit = kAccumulators * V;  // one 16-byte packet: V lanes' groups
      if (V == 1 || F % kUnit == 0) {
        // Groups of kIlp iterations' packets; the next group's loads are issued before the current
        // group is computed. The lanes still accumulate in iteration order.
        struct Group {
          Chunk<Act, kUnit> a[kIlp], b[kIlp], g[kIlp];
        };
        const int64_t iteration = int64_t{kAccumulators} * L, step = iteration * kIlp;
        auto load = [&](Group& q, int64_t start0) {
#pragma unroll
          for (int u = 0; u < kIlp; ++u) {
            const int64_t c = start0 + iteration * u;
            if (c >= F) break;
            q.a[u] = load_raw<Act, kUnit>(a_row + c);
            q.b[u] = load_raw<Act, kUnit>(b_row + c);
            q.g[u] = load_raw<Act, kUnit>(g_row + c);
          }
        };
        Group current;
        const int64_t first = int64_t{kUnit} * t;
        if (first < F) load(current, first);
        for (int64_t start0 = first; start0 < F; start0 += step) {
          Group next;
          if (start0 + step < F) load(next, start0 + step);
#pragma unroll
          for (int u = 0; u < kIlp; ++u) {
            const int64_t c = start0 + iteration * u;
            if (c >= F) break;
            compute_chunk(std::integral_constant<int, kUnit>{}, c, current.a[u], current.b[u], current.g[u],
                          &acc[0][0]);
          }
          current = next;
        }
      } else {
        // 16-bit activations with an fp32 product tensor and F % 8 == 4: each lane's 4-element
        // group alone (8-byte accesses). (kAccumulators == 8 plans only rows of a multiple of 8.)
        for (int64_t start = int64_t{kUnit} * t; start < F; start += int64_t{kRuleVector} * L) {
#pragma unroll
          for (int q = 0; q < V; ++q) {
            const int64_t c = start + kRuleVector * q;
            if (c >= F) continue;
            compute_chunk(std::integral_constant<int, kRuleVector>{}, c, load_raw<Act, kRuleVector>(a_row + c),
                          load_raw<Act, kRuleVector>(b_row + c), load_raw<Act, kRuleVector>(g_row + c), acc[q]);
          }
        }
      }
    } else {
      // Lane l = V * t + q reads element l + L * it into acc[q][it % 4].
      for (int64_t it0 = 0; int64_t{V} * t + int64_t{L} * it0 < F; it0 += kRuleVector) {
#pragma unroll
        for (int k = 0; k < kRuleVector; ++k)
#pragma unroll
          for (int q = 0; q < V; ++q) {
            const int lane = V * t + q;
            const int64_t j = lane + int64_t{L} * (it0 + k);
            if (lane >= L || j >= F) continue;
            float da, db;
            const float x = element(std::false_type{}, Act::load(a_row[j]), Act::load(b_row[j]), Act::load(g_row[j]),
                                    da, db, nullptr);
            acc[q][k] = __fadd_rn(acc[q][k], x);
            da_row[j] = Act::store(da);
            db_row[j] = Act::store(db);
          }
      }
    }
  }

  const float total = rule7_row_total<V>(acc, L, group, t, tree);
  if (live && t == 0) store_scalar(p.d_scale, p.scale_dtype, row, round_dtype(p.scale_dtype, chain(total)));
}

template <class Act, int kIlp>
struct MegatronScaleBackwardLaunch {
  static void run(const MegatronScaleBackward& p) {
    if (p.clamp.on) return vector<kClampOn>(p);
    vector<kClampOff>(p);
  }
  // A vectorized plan of 16-bit products: 8 accumulators a lane; every other plan: 4.
  template <int kClamp>
  static void vector(const MegatronScaleBackward& p) {
    if constexpr (sizeof(typename Act::Storage) == 2) {
      if (p.plan.vectorized && p.plan.vector == kRuleVector16) return go<kClamp, kRuleVector16>(p);
    }
    if (p.plan.vectorized && p.plan.vector != kRuleVector)
      throw std::invalid_argument("megatron_scale_backward: a rule-7 plan of " + std::to_string(p.plan.vector) +
                                  "-element vectors for this activation dtype");
    go<kClamp, kRuleVector>(p);
  }
  template <int kClamp, int kAccumulators>
  static void go(const MegatronScaleBackward& p) {
    constexpr int V = kLanesPerThread<Act, kAccumulators>;
    const int group = std::max(1, p.plan.lanes / V);
    if (group > kMaxRowThreads || p.plan.lanes > kReduceMaxThreads)
      throw std::invalid_argument("megatron_scale_backward: a rule-7 plan of more than 512 lanes");
    const auto stream = static_cast<cudaStream_t>(p.stream);
    if (group <= kWarpLanes) {
      const int64_t rows_per_block = kThreads / group;
      const auto grid = static_cast<unsigned>((p.rows + rows_per_block - 1) / rows_per_block);
      megatron_scale_backward_kernel<Act, kIlp, kThreads, kClamp, kAccumulators>
          <<<grid, kThreads, 0, stream>>>(p, group);
    } else {
      const size_t shared = sizeof(float) * static_cast<size_t>(group) * V;
      megatron_scale_backward_kernel<Act, kIlp, kMaxRowThreads, kClamp, kAccumulators>
          <<<static_cast<unsigned>(p.rows), static_cast<unsigned>(group), shared, stream>>>(p, group);
    }
    check_launch("swiglu_scale megatron_scale_backward", p.stream);
  }
};

// --- PaddleFleet fused kernels ---------------------------------------------------------------------
//
// The stored kernel gives each row a block of 256 threads; thread t walks the 16-byte packets
// t, t + 256, ... accumulating its d_scale terms in order, and a shared-memory tree halves the 256
// partial sums (stride 128 down to 1). Here one warp owns a row and each thread holds 8 of those
// 256 virtual threads (t = lane + 32 k): strides 128, 64 and 32 are additions inside a thread,
// strides 16 to 1 are shuffles. The order of every addition is the stored kernel's.
constexpr int kPaddleBlock = 256;
constexpr int kPaddleSlots = kPaddleBlock / kWarpLanes;

template <class Act, int kIlp, int kClamp>
struct PaddleForwardBody {
  using Args = PaddleForward;
  static constexpr int kMinBlocks = blocks_per_sm(4, kIlp);
  static __device__ __forceinline__ void run(const PaddleForward& p, Divider per_row, GridPos at);
};

template <class Act, int kIlp, int kClamp>
__device__ __forceinline__ void PaddleForwardBody<Act, kIlp, kClamp>::run(const PaddleForward& p, Divider per_row,
                                                                          GridPos at) {
  using S = typename Act::Storage;
  constexpr int N = kPacket<Act>;
  const S* y = static_cast<const S*>(p.y);
  S* out = static_cast<S*>(p.out);
  const int64_t F = p.F;
  const uint32_t total = static_cast<uint32_t>(p.rows) * per_row.d;
  const uint32_t stride = at.blocks * blockDim.x;
  // Groups of kIlp packets, the next group's loads in flight during the current one's arithmetic.
  struct Group {
    uint32_t row[kIlp], col[kIlp];
    Chunk<Act, N> a[kIlp], b[kIlp];
    float s[kIlp];
  };
  auto load = [&](Group& q, uint32_t k0) {
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const uint32_t k = k0 + u * stride;
      if (k >= total) break;
      q.row[u] = per_row.div(k);
      q.col[u] = (k - q.row[u] * per_row.d) * N;
      q.a[u] = load_raw<Act, N>(y + int64_t{q.row[u]} * 2 * F + q.col[u]);
      q.b[u] = load_raw<Act, N>(y + int64_t{q.row[u]} * 2 * F + F + q.col[u]);
      q.s[u] = load_scalar(p.scale, p.scale_dtype, q.row[u]);
    }
  };
  auto compute = [&](const Group& q, uint32_t k0) {
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      if (k0 + u * stride >= total) break;
      float o[N];
      unsigned redo = 0;  // elements outside the shortcut's domain
#pragma unroll
      for (int i = 0; i < N; ++i) {
        bool in_domain = true;
        o[i] = paddle_forward<true, kClamp>(Act::load(q.a[u].e[i]), Act::load(q.b[u].e[i]), q.s[u], p.clamp,
                                            &in_domain);
        redo |= in_domain ? 0u : 1u << i;
      }
      if (redo) {
#pragma unroll
        for (int i = 0; i < N; ++i)
          if (redo & (1u << i))
            o[i] = paddle_forward<false, kClamp>(Act::load(q.a[u].e[i]), Act::load(q.b[u].e[i]), q.s[u], p.clamp);
      }
      store_chunk<Act, N>(out + int64_t{q.row[u]} * F + q.col[u], o);
    }
  };
  pipelined_grid_stride<Group>(at.block * blockDim.x + threadIdx.x, total, stride * kIlp, load, compute);
}

// Persistent warps: warp w of W walks rows w, w + W, ..., its copies of the a, b and dout packets
// (cp.async into a PacketRing) running kStages units of 32 packets ahead of the arithmetic. Unit
// u of a row is virtual thread 32 (u % 8) + lane's next packet; its terms go to lane[0], and the
// eight partial sums rotate by one after each unit, so that slot u % 8 is always at lane[0] and the
// loop body is one copy of the arithmetic.
inline constexpr int kPaddleLoads = 3;  // a, b and dout
// The ILP knob is the ring's depth: 2, 3 or 4 units of 1.5 KiB a warp (bf16). Bounded to 80
// registers the arithmetic spills and runs at half the speed; at 2 blocks a SM the ring keeps
// enough bytes in flight (bench/NOTES.md).
template <int kIlp>
inline constexpr int kPaddleStages = kIlp == 1 ? 2 : kIlp == 2 ? 3 : 4;

template <class Act, int kIlp, int kClamp>
__global__ void __launch_bounds__(kThreads, 2) paddle_backward_kernel(PaddleBackward p) {
  using S = typename Act::Storage;
  constexpr int N = kPacket<Act>;
  constexpr int kWarps = kThreads / kWarpLanes;
  extern __shared__ uint4 ring_memory[];
  const PacketRing<kPaddleStages<kIlp>, kPaddleLoads> ring{ring_memory + threadIdx.x, kThreads};
  const int lane_id = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int64_t warp = int64_t{blockIdx.x} * kWarps + threadIdx.x / kWarpLanes;
  const int64_t warps = int64_t{gridDim.x} * kWarps;
  const int64_t F = p.F;
  const int packets = static_cast<int>(F / N);
  const int units = (packets + kWarpLanes - 1) / kWarpLanes;
  const S* y = static_cast<const S*>(p.y);
  const S* dout = static_cast<const S*>(p.g);
  S* d_y = static_cast<S*>(p.d_y);
  const bool scale_is_act = p.scale_dtype == Act::kDType;

  float lane[kPaddleSlots];
  float s = 0.0f;  // the row's scale, loaded one row ahead
  float s_next = warp < p.rows ? load_scalar(p.scale, p.scale_dtype, warp) : 0.0f;
  auto issue = [&](int stage, int64_t row, int unit) {
    const int packet = unit * kWarpLanes + lane_id;
    if (packet >= packets) return;
    const S* a = y + row * 2 * F + int64_t{packet} * N;
    ring.fill(stage, 0, a);
    ring.fill(stage, 1, a + F);
    ring.fill(stage, 2, dout + row * F + int64_t{packet} * N);
  };
  // One packet of the row: d_y stored, its eight terms added to acc.
  auto compute = [&](int stage, int64_t row, int packet, float& acc) {
    Chunk<Act, N> a, b, g;
    a.raw = ring.get(stage, 0);
    b.raw = ring.get(stage, 1);
    g.raw = ring.get(stage, 2);
    float dg[N], dv[N];
    const float acc_before = acc;
    bool in_domain = true;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const PaddleGrad d = paddle_backward<Act, true, kClamp>(Act::load(a.e[i]), Act::load(b.e[i]), Act::load(g.e[i]),
                                                              s, scale_is_act, p.clamp, acc, &in_domain);
      dg[i] = d.dg;
      dv[i] = d.dv;
    }
    if (!in_domain) {  // the packet again with the IEEE divisions, from the same partial sum
      acc = acc_before;
      a.raw = ring.get(stage, 0);  // read again rather than held in registers through the fast path
      b.raw = ring.get(stage, 1);
      g.raw = ring.get(stage, 2);
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const PaddleGrad d = paddle_backward<Act, false, kClamp>(Act::load(a.e[i]), Act::load(b.e[i]),
                                                                 Act::load(g.e[i]), s, scale_is_act, p.clamp, acc);
        dg[i] = d.dg;
        dv[i] = d.dv;
      }
    }
    S* da = d_y + row * 2 * F + int64_t{packet} * N;
    store_chunk<Act, N>(da, dg);
    store_chunk<Act, N>(da + F, dv);
  };
  auto rotate = [&] {  // lane[k] <- lane[k + 1], the first to the last
    const float first = lane[0];
#pragma unroll
    for (int k = 0; k + 1 < kPaddleSlots; ++k) lane[k] = lane[k + 1];
    lane[kPaddleSlots - 1] = first;
  };
  auto begin = [&](int64_t row) {
    s = s_next;
    if (row + warps < p.rows) s_next = load_scalar(p.scale, p.scale_dtype, row + warps);
#pragma unroll
    for (int k = 0; k < kPaddleSlots; ++k) lane[k] = 0.0f;
  };
  auto consume = [&](int stage, int64_t row, int unit) {
    const int packet = unit * kWarpLanes + lane_id;
    if (packet < packets) compute(stage, row, packet, lane[0]);
    rotate();
  };
  auto end = [&](int64_t row) {
    for (int k = units % kPaddleSlots; k != 0 && k < kPaddleSlots; ++k) rotate();  // slot 0 back at lane[0]
    // Strides 128, 64, 32 of the 256-thread tree: virtual thread 32 k + lane_id adds 32 (k + s/32) + lane_id.
#pragma unroll
    for (int slots = kPaddleSlots / 2; slots >= 1; slots /= 2)
#pragma unroll
      for (int k = 0; k < slots; ++k) lane[k] = __fadd_rn(lane[k], lane[k + slots]);
    // Strides 16 to 1.
#pragma unroll
    for (int stride = kWarpLanes / 2; stride >= 1; stride /= 2)
      lane[0] = __fadd_rn(lane[0], __shfl_down_sync(0xffffffffu, lane[0], stride));
    if (lane_id == 0) store_scalar(p.d_scale, p.scale_dtype, row, lane[0]);
  };
  stream_rows<kPaddleStages<kIlp>>(warp, warps, p.rows, units, issue, begin, consume, end);
}

template <class Act, int kIlp>
struct PaddleForwardLaunch {
  static void run(const PaddleForward& p) {
    if (p.clamp.on) return go<kClampOn>(p);
    go<kClampOff>(p);
  }
  template <int kClamp>
  static void go(const PaddleForward& p) {
    const int64_t act = sizeof(typename Act::Storage);
    launch_row_chunks<PaddleForwardBody<Act, kIlp, kClamp>>(
        p, p.F / kPacket<Act>, "swiglu_scale paddle_forward", [&](PaddleForward& c, int64_t first) {
          c.y = advanced(c.y, first * 2 * p.F * act);
          c.out = advanced(c.out, first * p.F * act);
          c.scale = advanced(c.scale, first * static_cast<int64_t>(dtype_size(p.scale_dtype)));
        });
  }
};

template <class Act, int kIlp>
struct PaddleBackwardLaunch {
  static void run(const PaddleBackward& p) {
    if (p.clamp.on) return go<kClampOn>(p);
    go<kClampOff>(p);
  }
  template <int kClamp>
  static void go(const PaddleBackward& p) {
    constexpr auto kKernel = paddle_backward_kernel<Act, kIlp, kClamp>;
    const size_t ring = PacketRing<kPaddleStages<kIlp>, kPaddleLoads>::bytes(kThreads);
    const unsigned grid = row_team_grid<kKernel>(p.rows, kThreads / kWarpLanes, ring);
    kKernel<<<grid, kThreads, ring, static_cast<cudaStream_t>(p.stream)>>>(p);
    check_launch("swiglu_scale paddle_backward", p.stream);
  }
};

// d_scale of rows of width 0: the empty sum, +0 in every row (all bits zero in bf16, fp16 and fp32).
void zero_d_scale(void* d_scale, DType scale_dtype, int64_t rows, void* stream, const char* what) {
  check_cuda(cudaMemsetAsync(d_scale, 0, static_cast<size_t>(rows) * dtype_size(scale_dtype),
                             static_cast<cudaStream_t>(stream)),
             what);
}

void require_packets(DType act, int64_t F, const char* who) {
  const int64_t packet = 16 / dtype_size(act);
  if (F % packet != 0)
    throw std::invalid_argument(std::string(who) + ": F must be a multiple of the 16-byte packet");
}

}  // namespace

void launch_megatron_scale_backward(const MegatronScaleBackward& args) {
  if (args.rows == 0) return;
  if (args.F == 0) return zero_d_scale(args.d_scale, args.scale_dtype, args.rows, args.stream, "swiglu_scale d_scale");
  dispatch_activation<MegatronScaleBackwardLaunch, true>(args, /*default_ilp=*/2);
}

void launch_paddle_forward(const PaddleForward& args) {
  if (args.rows == 0 || args.F == 0) return;
  require_packets(args.act, args.F, "paddle_forward");
  dispatch_activation<PaddleForwardLaunch, false>(args, /*default_ilp=*/1);
}

void launch_paddle_backward(const PaddleBackward& args) {
  if (args.rows == 0) return;
  if (args.F == 0) return zero_d_scale(args.d_scale, args.scale_dtype, args.rows, args.stream, "swiglu_scale d_scale");
  require_packets(args.act, args.F, "paddle_backward");
  dispatch_activation<PaddleBackwardLaunch, false>(args, /*default_ilp=*/1);
}

}  // namespace bitparity::gpu
