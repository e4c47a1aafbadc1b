// The elementwise Megatron kernels (spec OP-4, OP-5, OP-6): swiglu forward with an optional bias
// and an optional per-row scale (WeightedSwiGLUFunction's forward), and swiglu's backward.
//
// Layout: a grid-stride loop over 16-byte packets of one row (8 bf16/fp16 or 4 fp32 elements of
// out, with the matching packets of both halves of y), indexed in 32 bits (the launcher splits
// larger tensors into row chunks). Where F is not a multiple of the packet, the packets of the
// value half are not aligned, and the kernel walks single elements instead.
//
// Speed (bench/NOTES.md): the clamp and the bias are template parameters, so that an element has
// no branch; sigmoid and silu take the shortcut of sigmoid_silu_fast, and a packet with an element
// outside its domain (rare: x = +-0, |x| >= 2^124, Inf and NaN) is recomputed with the
// IEEE divisions, so the bits are those of the plain formulas everywhere.
#include "gpu/swiglu_kernels.h"

#include <algorithm>

#include <cuda_runtime.h>

#include "gpu/runtime.h"
#include "gpu/common/dtype_io.cuh"
#include "gpu/common/launch.cuh"
#include "gpu/swiglu_elements.cuh"

namespace bitparity::gpu {
namespace {

using namespace device;

// The bias variant's input: act(y + bias), one eager add.
template <class Act, bool kBias>
__device__ __forceinline__ float biased(float y, float bias) {
  if constexpr (kBias) return round_as<Act>(__fadd_rn(y, bias));
  return y;
}

// One output of the forward: swiglu, times the row's scale where there is one (f32(swiglu) * w,
// rounded once by the store).
template <class Act, bool kFast, int kClamp>
__device__ __forceinline__ float forward_element(float a, float b, bool scaled, float s, const MegatronClamp& clamp,
                                                 bool* in_domain) {
  const float sw = megatron_swiglu<Act, kFast, kClamp>(a, b, clamp, in_domain);
  return scaled ? __fmul_rn(sw, s) : sw;
}

template <class Act, int kIlp, int kClamp, bool kBias>
struct MegatronForwardBody {
  using Args = MegatronForward;
  static constexpr int kMinBlocks = blocks_per_sm(4, kIlp);
  static __device__ __forceinline__ void run(const MegatronForward& p, Divider per_row, GridPos at);
};

template <class Act, int kIlp, int kClamp, bool kBias>
__device__ __forceinline__ void MegatronForwardBody<Act, kIlp, kClamp, kBias>::run(const MegatronForward& p,
                                                                                    Divider per_row, GridPos at) {
  using S = typename Act::Storage;
  constexpr int N = kPacket<Act>;
  const S* y = static_cast<const S*>(p.y);
  const S* bias = static_cast<const S*>(p.bias);
  S* out = static_cast<S*>(p.out);
  const int64_t F = p.F;
  const bool scaled = p.scale != nullptr;
  const uint32_t total = static_cast<uint32_t>(p.rows) * per_row.d;
  const uint32_t stride = at.blocks * blockDim.x;
  const uint32_t first = at.block * blockDim.x + threadIdx.x;

  if (F % N == 0) {
    // kIlp packets (at k0, k0 + stride, ...) make a group; the next group's loads are issued before
    // the current group's arithmetic, so that every thread keeps loads in flight while it computes.
    struct Group {
      uint32_t row[kIlp], col[kIlp];
      Chunk<Act, N> a[kIlp], b[kIlp], bias_a[kIlp], bias_b[kIlp];
      float s[kIlp];
    };
    auto load = [&](Group& q, uint32_t k0) {
#pragma unroll
      for (int u = 0; u < kIlp; ++u) {
        const uint32_t k = k0 + u * stride;
        if (k >= total) break;
        q.row[u] = per_row.div(k);
        q.col[u] = (k - q.row[u] * per_row.d) * N;
        const S* y_row = y + int64_t{q.row[u]} * 2 * F;
        q.a[u] = load_raw<Act, N>(y_row + q.col[u]);
        q.b[u] = load_raw<Act, N>(y_row + F + q.col[u]);
        if constexpr (kBias) {
          q.bias_a[u] = load_raw<Act, N>(bias + q.col[u]);
          q.bias_b[u] = load_raw<Act, N>(bias + F + q.col[u]);
        }
        q.s[u] = scaled ? load_scalar(p.scale, p.scale_dtype, q.row[u]) : 1.0f;
      }
    };
    auto compute = [&](const Group& q, uint32_t k0) {
#pragma unroll
      for (int u = 0; u < kIlp; ++u) {
        if (k0 + u * stride >= total) break;
        float av[N], bv[N], o[N];
#pragma unroll
        for (int i = 0; i < N; ++i) {
          av[i] = biased<Act, kBias>(Act::load(q.a[u].e[i]), Act::load(q.bias_a[u].e[i]));
          bv[i] = biased<Act, kBias>(Act::load(q.b[u].e[i]), Act::load(q.bias_b[u].e[i]));
        }
        // The shortcut (silu_fast) for all; a packet with an element outside its domain (0, Inf,
        // NaN, |x| >= 2^124: rare enough that one flag for the packet costs least) again exactly.
        bool in_domain = true;
#pragma unroll
        for (int i = 0; i < N; ++i)
          o[i] = forward_element<Act, true, kClamp>(av[i], bv[i], scaled, q.s[u], p.clamp, &in_domain);
        if (!in_domain) {
#pragma unroll
          for (int i = 0; i < N; ++i)
            o[i] = forward_element<Act, false, kClamp>(av[i], bv[i], scaled, q.s[u], p.clamp, nullptr);
        }
        store_chunk<Act, N>(out + int64_t{q.row[u]} * F + q.col[u], o);
      }
    };
    pipelined_grid_stride<Group>(first, total, stride * kIlp, load, compute);
  } else {
    for (uint32_t k = first; k < total; k += stride) {
      const uint32_t r = per_row.div(k);
      const int64_t col = k - r * per_row.d;
      const S* y_row = y + int64_t{r} * 2 * F;
      const float a = biased<Act, kBias>(Act::load(y_row[col]), kBias ? Act::load(bias[col]) : 0.0f);
      const float b = biased<Act, kBias>(Act::load(y_row[F + col]), kBias ? Act::load(bias[F + col]) : 0.0f);
      const float s = scaled ? load_scalar(p.scale, p.scale_dtype, r) : 1.0f;
      out[int64_t{r} * F + col] = Act::store(forward_element<Act, false, kClamp>(a, b, scaled, s, p.clamp, nullptr));
    }
  }
}

template <class Act, int kIlp, int kClamp, bool kBias>
struct MegatronBackwardBody {
  using Args = MegatronBackward;
  static constexpr int kMinBlocks = blocks_per_sm(6, kIlp);
  static __device__ __forceinline__ void run(const MegatronBackward& p, Divider per_row, GridPos at);
};

template <class Act, int kIlp, int kClamp, bool kBias>
__device__ __forceinline__ void MegatronBackwardBody<Act, kIlp, kClamp, kBias>::run(const MegatronBackward& p,
                                                                                     Divider per_row, GridPos at) {
  using S = typename Act::Storage;
  constexpr int N = kPacket<Act>;
  const S* y = static_cast<const S*>(p.y);
  const S* bias = static_cast<const S*>(p.bias);
  const S* g = static_cast<const S*>(p.g);
  S* d_y = static_cast<S*>(p.d_y);
  const int64_t F = p.F;
  const uint32_t total = static_cast<uint32_t>(p.rows) * per_row.d;
  const uint32_t stride = at.blocks * blockDim.x;
  const uint32_t first = at.block * blockDim.x + threadIdx.x;

  if (F % N == 0) {
    // Groups of kIlp packets, the next group's loads in flight during the current one's arithmetic
    // (as in the forward).
    struct Group {
      uint32_t row[kIlp], col[kIlp];
      Chunk<Act, N> a[kIlp], b[kIlp], gv[kIlp], bias_a[kIlp], bias_b[kIlp];
    };
    auto load = [&](Group& q, uint32_t k0) {
#pragma unroll
      for (int u = 0; u < kIlp; ++u) {
        const uint32_t k = k0 + u * stride;
        if (k >= total) break;
        q.row[u] = per_row.div(k);
        q.col[u] = (k - q.row[u] * per_row.d) * N;
        const S* y_row = y + int64_t{q.row[u]} * 2 * F;
        q.a[u] = load_raw<Act, N>(y_row + q.col[u]);
        q.b[u] = load_raw<Act, N>(y_row + F + q.col[u]);
        q.gv[u] = load_raw<Act, N>(g + int64_t{q.row[u]} * F + q.col[u]);
        if constexpr (kBias) {
          q.bias_a[u] = load_raw<Act, N>(bias + q.col[u]);
          q.bias_b[u] = load_raw<Act, N>(bias + F + q.col[u]);
        }
      }
    };
    auto compute = [&](const Group& q, uint32_t k0) {
#pragma unroll
      for (int u = 0; u < kIlp; ++u) {
        if (k0 + u * stride >= total) break;
        float av[N], bv[N], da[N], db[N];
#pragma unroll
        for (int i = 0; i < N; ++i) {
          av[i] = biased<Act, kBias>(Act::load(q.a[u].e[i]), Act::load(q.bias_a[u].e[i]));
          bv[i] = biased<Act, kBias>(Act::load(q.b[u].e[i]), Act::load(q.bias_b[u].e[i]));
        }
        unsigned redo = 0;  // elements outside the shortcut's domain, computed again exactly
#pragma unroll
        for (int i = 0; i < N; ++i) {
          bool in_domain = true;
          const MegatronGrad d = megatron_swiglu_back<Act, true, kClamp>(true, Act::load(q.gv[u].e[i]), av[i], bv[i],
                                                                          p.clamp, &in_domain);
          da[i] = d.da;
          db[i] = d.db;
          redo |= in_domain ? 0u : 1u << i;
        }
        if (redo) {
#pragma unroll
          for (int i = 0; i < N; ++i) {
            if (!(redo & (1u << i))) continue;
            const MegatronGrad d =
                megatron_swiglu_back<Act, false, kClamp>(true, Act::load(q.gv[u].e[i]), av[i], bv[i], p.clamp);
            da[i] = d.da;
            db[i] = d.db;
          }
        }
        S* d_row = d_y + int64_t{q.row[u]} * 2 * F;
        store_chunk<Act, N>(d_row + q.col[u], da);
        store_chunk<Act, N>(d_row + F + q.col[u], db);
      }
    };
    pipelined_grid_stride<Group>(first, total, stride * kIlp, load, compute);
  } else {
    for (uint32_t k = first; k < total; k += stride) {
      const uint32_t r = per_row.div(k);
      const int64_t col = k - r * per_row.d;
      const S* y_row = y + int64_t{r} * 2 * F;
      const float a = biased<Act, kBias>(Act::load(y_row[col]), kBias ? Act::load(bias[col]) : 0.0f);
      const float b = biased<Act, kBias>(Act::load(y_row[F + col]), kBias ? Act::load(bias[F + col]) : 0.0f);
      const MegatronGrad d =
          megatron_swiglu_back<Act, false, kClamp>(true, Act::load(g[int64_t{r} * F + col]), a, b, p.clamp);
      d_y[int64_t{r} * 2 * F + col] = Act::store(d.da);
      d_y[int64_t{r} * 2 * F + F + col] = Act::store(d.db);
    }
  }
}

// Runs Go<kClamp, kBias>::run(args) for the case's clamp and bias, known at compile time there.
template <template <int, bool> class Go, class Args>
void dispatch_clamp_bias(const Args& args) {
  const bool bias = args.bias != nullptr;
  if (args.clamp.on) return bias ? Go<kClampOn, true>::run(args) : Go<kClampOn, false>::run(args);
  return bias ? Go<kClampOff, true>::run(args) : Go<kClampOff, false>::run(args);
}

template <class Act, int kIlp>
struct ForwardLaunch {
  template <int kClamp, bool kBias>
  struct Go {
    static void run(const MegatronForward& p) {
      const int64_t act = sizeof(typename Act::Storage);
      launch_row_chunks<MegatronForwardBody<Act, kIlp, kClamp, kBias>>(
          p, elementwise_items(1, p.F, kPacket<Act>), "swiglu megatron_forward",
          [&](MegatronForward& c, int64_t first) {
            c.y = advanced(c.y, first * 2 * p.F * act);
            c.out = advanced(c.out, first * p.F * act);
            c.scale = advanced(c.scale, first * static_cast<int64_t>(dtype_size(p.scale_dtype)));
          });
    }
  };
  static void run(const MegatronForward& p) { dispatch_clamp_bias<Go>(p); }
};

template <class Act, int kIlp>
struct BackwardLaunch {
  template <int kClamp, bool kBias>
  struct Go {
    static void run(const MegatronBackward& p) {
      const int64_t act = sizeof(typename Act::Storage);
      launch_row_chunks<MegatronBackwardBody<Act, kIlp, kClamp, kBias>>(
          p, elementwise_items(1, p.F, kPacket<Act>), "swiglu megatron_backward",
          [&](MegatronBackward& c, int64_t first) {
            c.y = advanced(c.y, first * 2 * p.F * act);
            c.g = advanced(c.g, first * p.F * act);
            c.d_y = advanced(c.d_y, first * 2 * p.F * act);
          });
    }
  };
  static void run(const MegatronBackward& p) { dispatch_clamp_bias<Go>(p); }
};

}  // namespace

void launch_megatron_forward(const MegatronForward& args) {
  if (args.rows == 0 || args.F == 0) return;
  dispatch_activation<ForwardLaunch, true>(args, /*default_ilp=*/1);
}

void launch_megatron_backward(const MegatronBackward& args) {
  if (args.rows == 0 || args.F == 0) return;
  dispatch_activation<BackwardLaunch, true>(args, /*default_ilp=*/1);
}

}  // namespace bitparity::gpu
