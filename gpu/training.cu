// The training-step kernels (spec OP-11, OP-12): fanout_grad, the sum of the gradients of the MoE
// input's three clones; adamw_step, one step of PyTorch 2.11's fused AdamW; and grad_finalize,
// Megatron's finalize_model_grads after the gradient sync (main_grad scaled, the routers' expert
// bias stepped).
//
// fanout_grad, adamw_step and grad_finalize's main_grad scaling are flat streaming kernels: a
// grid-stride loop over 16-byte packets of every tensor (8 bf16 or fp16 elements, 4 fp32), kIlp
// packets a group whose loads are issued before the previous group's arithmetic
// (pipelined_grid_stride), then the last n % packet elements one per thread. Where a tensor's
// address is not 16-byte aligned the same kernel walks single elements. Indices are 32-bit within
// a chunk of at most kChunkElements elements; larger tensors take several launches. Bytes per
// element (each input read once, each output written once): fanout_grad 4 x the element size (3
// read, 1 written), adamw_step 7 x (4 read, 3 written: 28 for fp32, 14 for bf16 and fp16),
// grad_finalize's main_grad 8 (fp32, 4 read, 4 written; a cudaMemcpyAsync where it is not scaled).
// grad_finalize's expert-bias step is one warp a layer (a few thousand cells in all), 16 bytes a
// [layer, expert] cell (counts and bias read, both written; the counts' second read hits cache),
// or two cudaMemcpyAsync where the contract leaves the buffers as they were.
//
// Every rounding is an explicit __f*_rn intrinsic, so that nvcc's contraction (--fmad=true) cannot
// fuse anything the contracts round twice; the results' NaNs are those of the fp32 unit
// (0x7FFFFFFF) and of the hardware's conversions (bf16 and fp16 0x7FFF), which is what eager
// PyTorch on CUDA writes.
#include "gpu/training_kernels.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "gpu/common/dtype_io.cuh"
#include "gpu/common/launch.cuh"
#include "gpu/runtime.h"

namespace bitparity::gpu {
namespace {

using namespace device;

// Elements of one launch at most: a multiple of every packet, and few enough packets and elements
// that the kernels index them in 32 bits (grid-stride steps included).
constexpr int64_t kChunkElements = int64_t{1} << 30;

// The ILP each kernel ships with where the caller asks for the default (kIlpDefault). Chosen by
// counting, not yet measured (bench/NOTES.md is where the measurement goes): one group of packets
// in flight besides the one being computed already keeps 48 (fanout) and 64 (adamw) bytes a thread
// loading at 4 blocks of 256 threads a multiprocessor. grad_finalize reads one tensor: ILP 4 keeps
// its 64 bytes a thread loading at the same 4 blocks, where ILP 1 would keep 16.
constexpr int kFanoutDefaultIlp = 1;
constexpr int kAdamwDefaultIlp = 1;
constexpr int kGradScaleDefaultIlp = 4;

// 16-byte packets an item loads: fanout reads three tensors, adamw four, grad_finalize one.
constexpr int kFanoutLoads = 3;
constexpr int kAdamwLoads = 4;
constexpr int kGradScaleLoads = 1;

// Blocks of adamw_step_kernel resident per multiprocessor, the register cap being 65536 / (256 n).
// At ILP 4 the two groups in flight (the one computed and the next one loading) hold 32 packets,
// 128 registers of data alone, which spill under blocks_per_sm's cap of 128; one block (255
// registers) keeps the same bytes in flight per multiprocessor as ILP 1 at four.
constexpr int adamw_blocks_per_sm(int ilp) { return ilp >= 4 ? 1 : blocks_per_sm(kAdamwLoads, ilp); }

bool aligned_to_packet(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// What a chunk's kernel walks: `items` groups of kN elements, then `tail` single elements.
struct Extent {
  uint32_t items = 0;
  uint32_t tail = 0;
};

// Launches kKernel(make(first_element, extent)) for each chunk of n elements, kN elements an item,
// on a resident grid, and checks each launch.
template <auto kKernel, int kN, class Make>
void launch_flat_chunks(int64_t n, void* stream, const char* what, Make&& make) {
  static_assert(kChunkElements % kN == 0, "a chunk is whole items, so that the next chunk stays aligned");
  for (int64_t first = 0; first < n; first += kChunkElements) {
    const int64_t elements = std::min(kChunkElements, n - first);
    Extent e;
    e.items = static_cast<uint32_t>(elements / kN);
    e.tail = static_cast<uint32_t>(elements % kN);
    const unsigned grid = resident_grid<kKernel>(std::max<int64_t>(e.items, e.tail));
    kKernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(make(first, e));
    check_launch(what, stream);
  }
}

// Calls Launch<Act, kIlp>::run(args) for args.dtype and args.ilp.
template <template <class, int> class Launch, class Args>
void dispatch_dtype(const Args& args, int default_ilp, const char* who) {
  switch (args.dtype) {
    case DType::kBF16: return dispatch_ilp<Launch, BF16>(args, default_ilp);
    case DType::kFP16: return dispatch_ilp<Launch, FP16>(args, default_ilp);
    case DType::kFP32: return dispatch_ilp<Launch, FP32>(args, default_ilp);
    default:
      throw std::invalid_argument(std::string(who) + ": no kernel for tensors of dtype " +
                                  std::string(dtype_name(args.dtype)));
  }
}

// --- fanout_grad ----------------------------------------------------------------------------

// Spec OP-11: two eager adds, each in fp32 and rounded to the dtype (round_as is the identity for
// fp32; the second rounding is the store's).
template <class Act>
__device__ __forceinline__ float fanout_sum(float dispatcher, float first, float last) {
  return __fadd_rn(round_as<Act>(__fadd_rn(dispatcher, first)), last);
}

struct FanoutChunk {
  Extent extent;
  const void* dispatcher;  // at the chunk's first element
  const void* first;
  const void* last;
  void* out;
};

template <class Act, int kN, int kIlp>
__global__ void __launch_bounds__(kThreads, blocks_per_sm(kFanoutLoads, kIlp)) fanout_grad_kernel(FanoutChunk p) {
  using S = typename Act::Storage;
  const S* d = static_cast<const S*>(p.dispatcher);
  const S* a = static_cast<const S*>(p.first);
  const S* b = static_cast<const S*>(p.last);
  S* out = static_cast<S*>(p.out);
  const uint32_t items = p.extent.items;
  const uint32_t stride = gridDim.x * blockDim.x;
  const uint32_t thread = blockIdx.x * blockDim.x + threadIdx.x;

  struct Group {
    Chunk<Act, kN> d[kIlp], a[kIlp], b[kIlp];
  };
  auto load = [&](Group& q, uint32_t k0) {
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const uint32_t k = k0 + u * stride;
      if (k >= items) break;
      const int64_t at = int64_t{k} * kN;
      q.d[u] = load_raw<Act, kN>(d + at);
      q.a[u] = load_raw<Act, kN>(a + at);
      q.b[u] = load_raw<Act, kN>(b + at);
    }
  };
  auto compute = [&](const Group& q, uint32_t k0) {
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const uint32_t k = k0 + u * stride;
      if (k >= items) break;
      float o[kN];
#pragma unroll
      for (int i = 0; i < kN; ++i)
        o[i] = fanout_sum<Act>(Act::load(q.d[u].e[i]), Act::load(q.a[u].e[i]), Act::load(q.b[u].e[i]));
      store_chunk<Act, kN>(out + int64_t{k} * kN, o);
    }
  };
  pipelined_grid_stride<Group>(thread, items, stride * kIlp, load, compute);

  if (thread < p.extent.tail) {  // the elements after the last whole packet
    const int64_t i = int64_t{items} * kN + thread;
    out[i] = Act::store(fanout_sum<Act>(Act::load(d[i]), Act::load(a[i]), Act::load(b[i])));
  }
}

template <class Act, int kIlp, int kN>
void launch_fanout_as(const FanoutGrad& args) {
  const int64_t size = sizeof(typename Act::Storage);
  launch_flat_chunks<fanout_grad_kernel<Act, kN, kIlp>, kN>(args.n, args.stream, "fanout_grad",
                                                            [&](int64_t first, Extent e) {
                                                              const int64_t at = first * size;
                                                              return FanoutChunk{e, advanced(args.dispatcher, at),
                                                                                 advanced(args.first, at),
                                                                                 advanced(args.last, at),
                                                                                 advanced(args.out, at)};
                                                            });
}

template <class Act, int kIlp>
struct FanoutLaunch {
  static void run(const FanoutGrad& args) {
    const bool packets = aligned_to_packet(args.dispatcher) && aligned_to_packet(args.first) &&
                         aligned_to_packet(args.last) && aligned_to_packet(args.out);
    if (packets) return launch_fanout_as<Act, kIlp, kPacket<Act>>(args);
    launch_fanout_as<Act, kIlp, 1>(args);
  }
};

// --- adamw_step -----------------------------------------------------------------------------

struct AdamwChunk {
  Extent extent;
  float lr, beta1, beta2, eps, weight_decay, counter_before;
  bool maximize;
  const void* param;  // each at the chunk's first element
  const void* grad;
  const void* exp_avg;
  const void* exp_avg_sq;
  void* param_out;
  void* exp_avg_out;
  void* exp_avg_sq_out;
};

// The values fused_adam_utils.cuh computes once per block (lines 140-153), here once per thread
// (the same bits): the bias corrections with the device powf (libdevice __nv_powf, as torch's
// pow_(float, float) calls it), from the fp32 step counter after torch's `_foreach_add_(steps, 1)`.
struct AdamwConstants {
  float beta1, beta2, eps;
  float decay;        // f32(lr wd), where wd != 0
  float step_size;    // lr / bc1
  float bc2_sqrt;     // sqrt(bc2)
  uint32_t negate;    // maximize: the sign bit, flipped in every gradient
  bool decayed;       // wd != 0 (the test is on the fp32 value)
};

__device__ __forceinline__ AdamwConstants adamw_constants(const AdamwChunk& p) {
  const float t = __fadd_rn(p.counter_before, 1.0f);
  const float bc1 = __fsub_rn(1.0f, powf(p.beta1, t));
  const float bc2 = __fsub_rn(1.0f, powf(p.beta2, t));
  AdamwConstants k;
  k.beta1 = p.beta1;
  k.beta2 = p.beta2;
  k.eps = p.eps;
  k.decay = __fmul_rn(p.lr, p.weight_decay);
  k.step_size = __fdiv_rn(p.lr, bc1);
  k.bc2_sqrt = __fsqrt_rn(bc2);
  k.negate = p.maximize ? 0x80000000u : 0u;
  k.decayed = p.weight_decay != 0.0f;
  return k;
}

// adam_math (fused_adam_utils.cuh lines 43-89, ADAM_MODE::ADAMW) on one element, in its order.
__device__ __forceinline__ void adamw_element(const AdamwConstants& k, float& p, float g, float& m, float& v) {
  g = __uint_as_float(__float_as_uint(g) ^ k.negate);  // maximize: -g
  if (k.decayed) p = __fmaf_rn(-k.decay, p, p);       // p -= (lr wd) p, which nvcc contracts
  m = __fmaf_rn(k.beta1, m, __fmaf_rn(-k.beta1, g, g));
  const float g2 = __fmul_rn(g, g);
  v = __fmaf_rn(k.beta2, v, __fmaf_rn(-k.beta2, g2, g2));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), k.bc2_sqrt), k.eps);
  p = __fsub_rn(p, __fdiv_rn(__fmul_rn(k.step_size, m), denom));
}

template <class Act, int kN, int kIlp>
__global__ void __launch_bounds__(kThreads, adamw_blocks_per_sm(kIlp)) adamw_step_kernel(AdamwChunk p) {
  using S = typename Act::Storage;
  const S* param = static_cast<const S*>(p.param);
  const S* grad = static_cast<const S*>(p.grad);
  const S* exp_avg = static_cast<const S*>(p.exp_avg);
  const S* exp_avg_sq = static_cast<const S*>(p.exp_avg_sq);
  S* param_out = static_cast<S*>(p.param_out);
  S* exp_avg_out = static_cast<S*>(p.exp_avg_out);
  S* exp_avg_sq_out = static_cast<S*>(p.exp_avg_sq_out);
  const uint32_t items = p.extent.items;
  const uint32_t stride = gridDim.x * blockDim.x;
  const uint32_t thread = blockIdx.x * blockDim.x + threadIdx.x;
  const AdamwConstants k = adamw_constants(p);

  struct Group {
    Chunk<Act, kN> p[kIlp], g[kIlp], m[kIlp], v[kIlp];
  };
  auto load = [&](Group& q, uint32_t k0) {
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const uint32_t item = k0 + u * stride;
      if (item >= items) break;
      const int64_t at = int64_t{item} * kN;
      q.p[u] = load_raw<Act, kN>(param + at);
      q.g[u] = load_raw<Act, kN>(grad + at);
      q.m[u] = load_raw<Act, kN>(exp_avg + at);
      q.v[u] = load_raw<Act, kN>(exp_avg_sq + at);
    }
  };
  auto compute = [&](const Group& q, uint32_t k0) {
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const uint32_t item = k0 + u * stride;
      if (item >= items) break;
      float pv[kN], mv[kN], vv[kN];
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        pv[i] = Act::load(q.p[u].e[i]);
        mv[i] = Act::load(q.m[u].e[i]);
        vv[i] = Act::load(q.v[u].e[i]);
        adamw_element(k, pv[i], Act::load(q.g[u].e[i]), mv[i], vv[i]);
      }
      const int64_t at = int64_t{item} * kN;
      store_chunk<Act, kN>(param_out + at, pv);
      store_chunk<Act, kN>(exp_avg_out + at, mv);
      store_chunk<Act, kN>(exp_avg_sq_out + at, vv);
    }
  };
  pipelined_grid_stride<Group>(thread, items, stride * kIlp, load, compute);

  if (thread < p.extent.tail) {  // the elements after the last whole packet
    const int64_t i = int64_t{items} * kN + thread;
    float pi = Act::load(param[i]), mi = Act::load(exp_avg[i]), vi = Act::load(exp_avg_sq[i]);
    adamw_element(k, pi, Act::load(grad[i]), mi, vi);
    param_out[i] = Act::store(pi);
    exp_avg_out[i] = Act::store(mi);
    exp_avg_sq_out[i] = Act::store(vi);
  }
}

template <class Act, int kIlp, int kN>
void launch_adamw_as(const AdamwStep& args) {
  const int64_t size = sizeof(typename Act::Storage);
  launch_flat_chunks<adamw_step_kernel<Act, kN, kIlp>, kN>(args.n, args.stream, "adamw_step", [&](int64_t first, Extent e) {
    const int64_t at = first * size;
    AdamwChunk c;
    c.extent = e;
    c.lr = args.lr;
    c.beta1 = args.beta1;
    c.beta2 = args.beta2;
    c.eps = args.eps;
    c.weight_decay = args.weight_decay;
    c.counter_before = args.counter_before;
    c.maximize = args.maximize;
    c.param = advanced(args.param, at);
    c.grad = advanced(args.grad, at);
    c.exp_avg = advanced(args.exp_avg, at);
    c.exp_avg_sq = advanced(args.exp_avg_sq, at);
    c.param_out = advanced(args.param_out, at);
    c.exp_avg_out = advanced(args.exp_avg_out, at);
    c.exp_avg_sq_out = advanced(args.exp_avg_sq_out, at);
    return c;
  });
}

template <class Act, int kIlp>
struct AdamwLaunch {
  static void run(const AdamwStep& args) {
    const void* tensors[] = {args.param,     args.grad,        args.exp_avg,       args.exp_avg_sq,
                             args.param_out, args.exp_avg_out, args.exp_avg_sq_out};
    const bool packets = std::all_of(std::begin(tensors), std::end(tensors), aligned_to_packet);
    if (packets) return launch_adamw_as<Act, kIlp, kPacket<Act>>(args);
    launch_adamw_as<Act, kIlp, 1>(args);
  }
};

// --- grad_finalize --------------------------------------------------------------------------

struct GradScaleChunk {
  Extent extent;
  float scale;
  const void* grad;  // at the chunk's first element
  void* out;
};

// main_grad * scale: one fp32 product an element (`grad_data *= scale` in fp32).
template <class Act, int kN, int kIlp>
__global__ void __launch_bounds__(kThreads, blocks_per_sm(kGradScaleLoads, kIlp)) grad_scale_kernel(GradScaleChunk p) {
  using S = typename Act::Storage;
  const S* grad = static_cast<const S*>(p.grad);
  S* out = static_cast<S*>(p.out);
  const float scale = p.scale;
  const uint32_t items = p.extent.items;
  const uint32_t stride = gridDim.x * blockDim.x;
  const uint32_t thread = blockIdx.x * blockDim.x + threadIdx.x;

  struct Group {
    Chunk<Act, kN> g[kIlp];
  };
  auto load = [&](Group& q, uint32_t k0) {
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const uint32_t k = k0 + u * stride;
      if (k >= items) break;
      q.g[u] = load_raw<Act, kN>(grad + int64_t{k} * kN);
    }
  };
  auto compute = [&](const Group& q, uint32_t k0) {
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const uint32_t k = k0 + u * stride;
      if (k >= items) break;
      float o[kN];
#pragma unroll
      for (int i = 0; i < kN; ++i) o[i] = __fmul_rn(Act::load(q.g[u].e[i]), scale);
      store_chunk<Act, kN>(out + int64_t{k} * kN, o);
    }
  };
  pipelined_grid_stride<Group>(thread, items, stride * kIlp, load, compute);

  if (thread < p.extent.tail) {  // the elements after the last whole packet
    const int64_t i = int64_t{items} * kN + thread;
    out[i] = Act::store(__fmul_rn(Act::load(grad[i]), scale));
  }
}

template <class Act, int kIlp, int kN>
void launch_grad_scale_as(const GradFinalize& args) {
  const int64_t size = sizeof(typename Act::Storage);
  launch_flat_chunks<grad_scale_kernel<Act, kN, kIlp>, kN>(args.n, args.stream, "grad_finalize",
                                                           [&](int64_t first, Extent e) {
                                                             const int64_t at = first * size;
                                                             return GradScaleChunk{e, args.scale,
                                                                                   advanced(args.main_grad, at),
                                                                                   advanced(args.main_grad_out, at)};
                                                           });
}

template <class Act, int kIlp>
struct GradScaleLaunch {
  static void run(const GradFinalize& args) {
    if (aligned_to_packet(args.main_grad) && aligned_to_packet(args.main_grad_out))
      return launch_grad_scale_as<Act, kIlp, kPacket<Act>>(args);
    launch_grad_scale_as<Act, kIlp, 1>(args);
  }
};

constexpr int kWarp = 32;
constexpr int kLayersPerBlock = kThreads / kWarp;  // one warp a layer

struct ExpertBiasStep {
  int64_t layers, experts;
  float inv_experts, rate;
  const float* counts;  // [layers, experts]
  const float* bias;
  float* counts_out;
  float* bias_out;
};

// core_r0.13's get_updated_expert_bias and the counts' zero_(), one warp a layer, the warps
// walking layers w, w + W, ... : the lanes' strided partial sums, then a butterfly across the
// warp (whole counts below 2^24: every partial sum exact, so the order is free), then each lane's
// experts stepped by sign(average - count) * rate.
__global__ void __launch_bounds__(kThreads) expert_bias_kernel(ExpertBiasStep p) {
  const int64_t E = p.experts;
  const int64_t lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t{gridDim.x} * kLayersPerBlock;
  for (int64_t l = int64_t{blockIdx.x} * kLayersPerBlock + threadIdx.x / kWarp; l < p.layers; l += warps) {
    const int64_t row = l * E;
    float sum = 0.0f;
    for (int64_t e = lane; e < E; e += kWarp) sum = __fadd_rn(sum, p.counts[row + e]);
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, offset));
    const float average = __fmul_rn(sum, p.inv_experts);
    for (int64_t e = lane; e < E; e += kWarp) {
      const float offset = __fsub_rn(average, p.counts[row + e]);
      const float sign = static_cast<float>((0.0f < offset) - (offset < 0.0f));  // torch.sign: -1, +0 or +1
      p.bias_out[row + e] = __fadd_rn(p.bias[row + e], __fmul_rn(sign, p.rate));
      p.counts_out[row + e] = 0.0f;
    }
  }
}

void launch_expert_bias_step(const GradFinalize& args) {
  ExpertBiasStep p;
  p.layers = args.layers;
  p.experts = args.experts;
  p.inv_experts = args.inv_experts;
  p.rate = args.rate;
  p.counts = static_cast<const float*>(args.tokens_per_expert);
  p.bias = static_cast<const float*>(args.expert_bias);
  p.counts_out = static_cast<float*>(args.tokens_per_expert_out);
  p.bias_out = static_cast<float*>(args.expert_bias_out);
  const unsigned grid = row_team_grid<expert_bias_kernel>(args.layers, kLayersPerBlock, 0);
  expert_bias_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(args.stream)>>>(p);
  check_launch("grad_finalize: expert bias", args.stream);
}

// A bit copy of `bytes` bytes, device to device, on the stream.
void copy_bits(void* to, const void* from, int64_t bytes, void* stream, const char* what) {
  check_cuda(cudaMemcpyAsync(to, from, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                             static_cast<cudaStream_t>(stream)),
             what);
}

}  // namespace

void launch_fanout_grad(const FanoutGrad& args) {
  if (args.n == 0) return;
  dispatch_dtype<FanoutLaunch>(args, kFanoutDefaultIlp, "fanout_grad");
}

void launch_adamw_step(const AdamwStep& args) {
  if (args.n == 0) return;
  dispatch_dtype<AdamwLaunch>(args, kAdamwDefaultIlp, "adamw_step");
}

void launch_grad_finalize(const GradFinalize& args) {
  constexpr int64_t kF32 = sizeof(float);
  if (args.n > 0) {
    if (args.scaled)
      dispatch_ilp<GradScaleLaunch, FP32>(args, kGradScaleDefaultIlp);
    else
      copy_bits(args.main_grad_out, args.main_grad, args.n * kF32, args.stream, "grad_finalize: main_grad copy");
  }
  const int64_t cells = args.layers * args.experts;
  if (cells == 0) return;
  if (args.update_bias) return launch_expert_bias_step(args);
  copy_bits(args.tokens_per_expert_out, args.tokens_per_expert, cells * kF32, args.stream,
            "grad_finalize: tokens_per_expert copy");
  copy_bits(args.expert_bias_out, args.expert_bias, cells * kF32, args.stream, "grad_finalize: expert_bias copy");
}

}  // namespace bitparity::gpu
