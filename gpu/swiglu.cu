// The elementwise Megatron kernels (spec OP-4, OP-5, OP-6): swiglu forward with an optional bias
// and an optional per-row scale (WeightedSwiGLUFunction's forward), and swiglu's backward.
//
// Layout: a grid-stride loop over 16-byte packets of one row (8 bf16/fp16 or 4 fp32 elements of
// out, with the matching packets of both halves of y). Where F is not a multiple of the packet,
// the packets of the value half are not aligned, and the kernel walks single elements instead.
#include "gpu/swiglu_kernels.h"

#include <algorithm>

#include <cuda_runtime.h>

#include "gpu/runtime.h"
#include "gpu/swiglu_device.cuh"

namespace bitparity::gpu {
namespace {

using namespace device;

// The bias variant's input: act(y + bias), one eager add.
template <class Act>
__device__ __forceinline__ float biased(float y, const typename Act::Storage* bias, int64_t col) {
  return bias ? round_as<Act>(__fadd_rn(y, Act::load(bias[col]))) : y;
}

// Where the row of a packet starts, and its column.
struct PacketAt {
  int64_t row, col;
};

template <class Act, int kIlp>
__global__ void __launch_bounds__(kThreads) megatron_forward_kernel(MegatronForward p) {
  using S = typename Act::Storage;
  constexpr int N = kPacket<Act>;
  const S* y = static_cast<const S*>(p.y);
  const S* bias = static_cast<const S*>(p.bias);
  S* out = static_cast<S*>(p.out);
  const int64_t F = p.F;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;

  auto element = [&](float a, float b, float s) {
    const float sw = megatron_swiglu<Act>(a, b, p.clamp);
    return p.scale ? __fmul_rn(sw, s) : sw;  // f32(swiglu) * w, rounded once by the store
  };

  if (F % N == 0) {
    const int64_t per_row = F / N;
    const int64_t total = p.rows * per_row;
    for (int64_t k0 = first; k0 < total; k0 += stride * kIlp) {
      // The loads of kIlp packets first, then their arithmetic.
      PacketAt at[kIlp];
      Chunk<Act, N> a[kIlp], b[kIlp];
      float s[kIlp];
#pragma unroll
      for (int u = 0; u < kIlp; ++u) {
        const int64_t k = k0 + u * stride;
        if (k >= total) break;
        at[u].row = k / per_row;
        at[u].col = (k - at[u].row * per_row) * N;
        const S* row = y + at[u].row * 2 * F;
        a[u] = load_raw<Act, N>(row + at[u].col);
        b[u] = load_raw<Act, N>(row + F + at[u].col);
        s[u] = p.scale ? load_scalar(p.scale, p.scale_dtype, at[u].row) : 1.0f;
      }
#pragma unroll
      for (int u = 0; u < kIlp; ++u) {
        if (k0 + u * stride >= total) break;
        const int64_t col = at[u].col;
        float o[N];
#pragma unroll
        for (int i = 0; i < N; ++i)
          o[i] = element(biased<Act>(Act::load(a[u].e[i]), bias, col + i),
                         biased<Act>(Act::load(b[u].e[i]), bias, F + col + i), s[u]);
        store_chunk<Act, N>(out + at[u].row * F + col, o);
      }
    }
  } else {
    const int64_t total = p.rows * F;
    for (int64_t k = first; k < total; k += stride) {
      const int64_t r = k / F;
      const int64_t col = k - r * F;
      const S* row = y + r * 2 * F;
      const float a = biased<Act>(Act::load(row[col]), bias, col);
      const float b = biased<Act>(Act::load(row[F + col]), bias, F + col);
      const float s = p.scale ? load_scalar(p.scale, p.scale_dtype, r) : 1.0f;
      out[k] = Act::store(element(a, b, s));
    }
  }
}

template <class Act, int kIlp>
__global__ void __launch_bounds__(kThreads) megatron_backward_kernel(MegatronBackward p) {
  using S = typename Act::Storage;
  constexpr int N = kPacket<Act>;
  const S* y = static_cast<const S*>(p.y);
  const S* bias = static_cast<const S*>(p.bias);
  const S* g = static_cast<const S*>(p.g);
  S* d_y = static_cast<S*>(p.d_y);
  const int64_t F = p.F;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;

  if (F % N == 0) {
    const int64_t per_row = F / N;
    const int64_t total = p.rows * per_row;
    for (int64_t k0 = first; k0 < total; k0 += stride * kIlp) {
      PacketAt at[kIlp];
      Chunk<Act, N> a[kIlp], b[kIlp], gv[kIlp];
#pragma unroll
      for (int u = 0; u < kIlp; ++u) {
        const int64_t k = k0 + u * stride;
        if (k >= total) break;
        at[u].row = k / per_row;
        at[u].col = (k - at[u].row * per_row) * N;
        const S* row = y + at[u].row * 2 * F;
        a[u] = load_raw<Act, N>(row + at[u].col);
        b[u] = load_raw<Act, N>(row + F + at[u].col);
        gv[u] = load_raw<Act, N>(g + at[u].row * F + at[u].col);
      }
#pragma unroll
      for (int u = 0; u < kIlp; ++u) {
        if (k0 + u * stride >= total) break;
        const int64_t col = at[u].col;
        float da[N], db[N];
#pragma unroll
        for (int i = 0; i < N; ++i) {
          const MegatronGrad d = megatron_swiglu_back<Act>(
              true, Act::load(gv[u].e[i]), biased<Act>(Act::load(a[u].e[i]), bias, col + i),
              biased<Act>(Act::load(b[u].e[i]), bias, F + col + i), p.clamp);
          da[i] = d.da;
          db[i] = d.db;
        }
        store_chunk<Act, N>(d_y + at[u].row * 2 * F + col, da);
        store_chunk<Act, N>(d_y + at[u].row * 2 * F + F + col, db);
      }
    }
  } else {
    const int64_t total = p.rows * F;
    for (int64_t k = first; k < total; k += stride) {
      const int64_t r = k / F;
      const int64_t col = k - r * F;
      const S* row = y + r * 2 * F;
      const MegatronGrad d =
          megatron_swiglu_back<Act>(true, Act::load(g[k]), biased<Act>(Act::load(row[col]), bias, col),
                                       biased<Act>(Act::load(row[F + col]), bias, F + col), p.clamp);
      d_y[r * 2 * F + col] = Act::store(d.da);
      d_y[r * 2 * F + F + col] = Act::store(d.db);
    }
  }
}

template <class Act, int kIlp>
struct ForwardLaunch {
  static void run(const MegatronForward& p) {
    const unsigned grid = grid_for(elementwise_items(p.rows, p.F, kPacket<Act>));
    megatron_forward_kernel<Act, kIlp><<<grid, kThreads, 0, static_cast<cudaStream_t>(p.stream)>>>(p);
    check_launch("swiglu megatron_forward", p.stream);
  }
};

template <class Act, int kIlp>
struct BackwardLaunch {
  static void run(const MegatronBackward& p) {
    const unsigned grid = grid_for(elementwise_items(p.rows, p.F, kPacket<Act>));
    megatron_backward_kernel<Act, kIlp><<<grid, kThreads, 0, static_cast<cudaStream_t>(p.stream)>>>(p);
    check_launch("swiglu megatron_backward", p.stream);
  }
};

}  // namespace

void launch_megatron_forward(const MegatronForward& args) {
  if (args.rows == 0 || args.F == 0) return;
  dispatch_activation<ForwardLaunch, true>(args);
}

void launch_megatron_backward(const MegatronBackward& args) {
  if (args.rows == 0 || args.F == 0) return;
  dispatch_activation<BackwardLaunch, true>(args);
}

}  // namespace bitparity::gpu
