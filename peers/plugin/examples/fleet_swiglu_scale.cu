// fleet_swiglu_scale.cu: bitparity's example plug-in (backend kind `fleet`). It is a SwiGLU-scale
// kernel written independently, in the style of PaddleFleet's fuse_swiglu_scale.cu
// (fused_swiglu_scale / fused_swiglu_scale_bwd and their _clamp variants, post-#1078). It serves
// swiglu_scale under the contract paddle_fused_shipped. A campaign compares it bit for bit with
// bitparity's reference of that contract and with every other backend:
//
//   bitparity --plugin PATH/fleet_swiglu_scale.so campaign --pair fleet:paddle_fused_shipped,ref:paddle_fused_shipped
//
// The Paddle conventions it follows:
//  - y is [rows, 2H] (Paddle's X): columns [0, H) are the gate g, [H, 2H) the value v. Each thread
//    reads 16-byte Packed128 vectors: 8 bf16 or 4 fp32 elements, so H must be a multiple of the
//    vector width (a whole vector per access; H = 0 is allowed). Paddle takes bf16 or fp32 X, a
//    bf16 or fp32 Scale, and fp32 X only with an fp32 Scale.
//  - 256 threads per block, one block per row, a grid-stride loop over the rows (the grid is capped
//    at 65535 blocks); thread t handles the columns t*VEC + m*256*VEC, m = 0, 1, ...
//  - The clamp kernels run when clamp is present and > 0 (Paddle's Python wrapper); they require a
//    finite clamp_value (the kernel's own check) and use it as float(clamp_value):
//    g = fminf(g, c), v = fmaxf(fminf(v, c), -c). fminf/fmaxf return the other operand for a
//    NaN, so a NaN gate or value becomes c; the backward's masks (g <= c, -c <= v <= c) are 0 for
//    a NaN.
//  - Everything is fp32 after the load: silu = g * sigmoid(g) with sigmoid = 1/(1 + expf(-g))
//    (CUDA's expf, no fast math), out = (silu * v) * s rounded once to the output dtype.
//  - The backward: d_u = dout * s; dv = d_u * silu (* v_mask); dg in the two kernels' own
//    multiplication orders. d_scale is a per-thread sum over the thread's columns in order, then a
//    shared-memory halving tree 128 -> 1, rounded to Scale's dtype. Its terms: dout * swiglu (fp32)
//    in the non-clamp kernel; in the clamp kernel swiglu cast to X's dtype times dout cast to
//    Scale's dtype, a bf16 product when both are bf16 and an fp32 product otherwise.
//  - d_scale's shape: the clamp kernels return [rows, 1] for any Scale rank, the non-clamp kernels
//    Scale's own shape (empty_like). Zero rows or H = 0: the outputs are allocated and nothing is
//    launched; d_scale is zeros then (Paddle returns paddle::zeros).
//
// It is compiled with nvcc's defaults, as a framework builds its kernels: FMA contraction on, so
// `sum += a * b` and `1 + g * (1 - sig)` become fused multiply-adds where nvcc contracts them.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>

#include "bitparity/plugin.h"

namespace {

constexpr int kBlockSize = 256;         // kSwiGLUBlockSize: threads per block, one block per row
constexpr int64_t kMaxGridSize = 65535;  // rows beyond it are covered by the grid-stride loop

// --- device side -----------------------------------------------------------------------------

// One 16-byte vector of T, loaded and stored as an int4 (LDG.128 / STG.128).
template <typename T>
struct alignas(16) Packed128 {
  static constexpr int kSize = 16 / static_cast<int>(sizeof(T));
  T elem[kSize];
};
static_assert(sizeof(Packed128<float>) == 16 && sizeof(Packed128<__nv_bfloat16>) == 16, "16-byte vectors");

template <typename T>
__device__ __forceinline__ Packed128<T> load128(const T* p) {
  Packed128<T> r;
  *reinterpret_cast<int4*>(&r) = *reinterpret_cast<const int4*>(p);
  return r;
}

template <typename T>
__device__ __forceinline__ void store128(T* p, const Packed128<T>& v) {
  *reinterpret_cast<int4*>(p) = *reinterpret_cast<const int4*>(&v);
}

// Paddle's precise_sigmoid: the x * sigmoid(x) form of silu uses this, with CUDA's expf.
__device__ __forceinline__ float precise_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// out[r, j] = T(silu(g) * v * s[r]) with g, v the (clamped) gate and value of row r.
template <typename T, typename ScaleT, bool kClamp>
__global__ void FleetSwiGLUScaleFwd(const T* __restrict__ x, const ScaleT* __restrict__ scale, T* __restrict__ out,
                                    int64_t rows, int64_t hidden, double clamp_value) {
  constexpr int kVec = Packed128<T>::kSize;
  const int tid = static_cast<int>(threadIdx.x);
  const float cv = static_cast<float>(clamp_value);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float s = static_cast<float>(scale[row]);
    const T* gate_row = x + row * 2 * hidden;
    const T* value_row = gate_row + hidden;
    T* out_row = out + row * hidden;
    for (int64_t col = static_cast<int64_t>(tid) * kVec; col < hidden; col += static_cast<int64_t>(kBlockSize) * kVec) {
      const Packed128<T> gate = load128(gate_row + col);
      const Packed128<T> value = load128(value_row + col);
      Packed128<T> res;
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        float g = static_cast<float>(gate.elem[i]);
        float v = static_cast<float>(value.elem[i]);
        if constexpr (kClamp) {
          g = fminf(g, cv);
          v = fmaxf(fminf(v, cv), -cv);
        }
        const float swiglu = (g * precise_sigmoid(g)) * v;
        res.elem[i] = static_cast<T>(swiglu * s);  // the one rounding of the scaled value
      }
      store128(out_row + col, res);
    }
  }
}

// d_x = [dg, dv] and d_scale[r] = sum_j swiglu * dout, per thread then a halving tree.
template <typename T, typename ScaleT, bool kClamp>
__global__ void FleetSwiGLUScaleBwd(const T* __restrict__ x, const ScaleT* __restrict__ scale,
                                    const T* __restrict__ d_out, T* __restrict__ d_x, ScaleT* __restrict__ d_scale,
                                    int64_t rows, int64_t hidden, double clamp_value) {
  constexpr int kVec = Packed128<T>::kSize;
  __shared__ float partial[kBlockSize];
  const int tid = static_cast<int>(threadIdx.x);
  const float cv = static_cast<float>(clamp_value);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float s = static_cast<float>(scale[row]);
    const T* gate_row = x + row * 2 * hidden;
    const T* value_row = gate_row + hidden;
    const T* dout_row = d_out + row * hidden;
    T* dg_row = d_x + row * 2 * hidden;
    T* dv_row = dg_row + hidden;
    float local_sum = 0.0f;  // this thread's part of d_scale[row], in column order
    for (int64_t col = static_cast<int64_t>(tid) * kVec; col < hidden; col += static_cast<int64_t>(kBlockSize) * kVec) {
      const Packed128<T> gate = load128(gate_row + col);
      const Packed128<T> value = load128(value_row + col);
      const Packed128<T> dout_vec = load128(dout_row + col);
      Packed128<T> dg_vec, dv_vec;
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const float g = static_cast<float>(gate.elem[i]);
        const float v = static_cast<float>(value.elem[i]);
        const float dout = static_cast<float>(dout_vec.elem[i]);
        float g_eff = g, v_eff = v, g_mask = 1.0f, v_mask = 1.0f;
        if constexpr (kClamp) {
          g_eff = fminf(g, cv);
          v_eff = fmaxf(fminf(v, cv), -cv);
          g_mask = (g <= cv) ? 1.0f : 0.0f;
          v_mask = (v <= cv && v >= -cv) ? 1.0f : 0.0f;
        }
        const float sig = precise_sigmoid(g_eff);
        const float silu = g_eff * sig;
        const float swiglu = silu * v_eff;

        if constexpr (kClamp) {
          // Paddle's clamp kernels sum swiglu.cast(X dtype) * dout.cast(Scale dtype): a bf16
          // product when both are bf16, otherwise an fp32 product of the two.
          if constexpr (std::is_same_v<T, ScaleT>) {
            local_sum += static_cast<float>(static_cast<T>(swiglu) * static_cast<ScaleT>(dout_vec.elem[i]));
          } else {
            local_sum += static_cast<float>(static_cast<T>(swiglu)) * static_cast<float>(static_cast<ScaleT>(dout_vec.elem[i]));
          }
        } else {
          local_sum += dout * swiglu;  // fp32 swiglu, not rounded to X's dtype
        }

        const float d_u = dout * s;
        if constexpr (kClamp) {
          dv_vec.elem[i] = static_cast<T>(d_u * silu * v_mask);
          dg_vec.elem[i] = static_cast<T>(d_u * sig * (1.0f + g_eff * (1.0f - sig)) * v_eff * g_mask);
        } else {
          dv_vec.elem[i] = static_cast<T>(d_u * silu);
          dg_vec.elem[i] = static_cast<T>(d_u * v_eff * sig * (1.0f + g_eff * (1.0f - sig)));
        }
      }
      store128(dg_row + col, dg_vec);
      store128(dv_row + col, dv_vec);
    }

    // The block's 256 partial sums, halved 128 -> 1: partial[t] += partial[t + stride].
    partial[tid] = local_sum;
    __syncthreads();
    for (int stride = kBlockSize / 2; stride > 0; stride >>= 1) {
      if (tid < stride) partial[tid] += partial[tid + stride];
      __syncthreads();
    }
    if (tid == 0) d_scale[row] = static_cast<ScaleT>(partial[0]);
    __syncthreads();  // partial[] is rewritten by the next row of this block
  }
}

// --- host side -------------------------------------------------------------------------------

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case BITPARITY_BF16: return "bfloat16";
    case BITPARITY_FP16: return "float16";
    case BITPARITY_FP32: return "float32";
    case BITPARITY_FP64: return "float64";
    case BITPARITY_FP8_E4M3: return "float8_e4m3fn";
    case BITPARITY_FP8_E5M2: return "float8_e5m2";
    case BITPARITY_BOOL: return "bool";
    case BITPARITY_I32: return "int32";
    case BITPARITY_I64: return "int64";
    default: return "unknown";
  }
}

int64_t element_size(int32_t dtype) { return dtype == BITPARITY_BF16 ? 2 : 4; }  // X and Scale dtypes only

std::string shape_string(const bitparity_tensor& t) {
  std::string s = "[";
  for (int32_t d = 0; d < t.rank; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  return s + "]";
}

bitparity_status fail(bitparity_error* error, bitparity_status status, const char* error_class, const std::string& message) {
  if (error) {
    std::snprintf(error->error_class, sizeof(error->error_class), "%s", error_class);
    std::snprintf(error->message, sizeof(error->message), "%s", message.c_str());
  }
  return status;
}

bitparity_status reject(bitparity_error* error, const char* error_class, const std::string& message) {
  return fail(error, BITPARITY_REJECT, error_class, message);
}

bitparity_status backend_error(bitparity_error* error, const std::string& message) {
  return fail(error, BITPARITY_ERROR, "", message);
}

bitparity_status cuda_error(bitparity_error* error, const char* op_name, const char* what, cudaError_t err) {
  return backend_error(error, std::string(op_name) + ": " + what + " failed: " + cudaGetErrorName(err) + " (" +
                                  cudaGetErrorString(err) + ")");
}

const bitparity_tensor* find_input(const bitparity_call* call, const char* name) {
  for (int64_t i = 0; i < call->num_inputs; ++i)
    if (call->inputs[i].name && std::strcmp(call->inputs[i].name, name) == 0) return &call->inputs[i];
  return nullptr;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <typename T, typename ScaleT>
void launch_fwd(bool clamp, int grid, cudaStream_t stream, const void* x, const void* scale, void* out, int64_t rows,
                int64_t hidden, double clamp_value) {
  const T* xp = static_cast<const T*>(x);
  const ScaleT* sp = static_cast<const ScaleT*>(scale);
  T* op = static_cast<T*>(out);
  if (clamp)
    FleetSwiGLUScaleFwd<T, ScaleT, true><<<grid, kBlockSize, 0, stream>>>(xp, sp, op, rows, hidden, clamp_value);
  else
    FleetSwiGLUScaleFwd<T, ScaleT, false><<<grid, kBlockSize, 0, stream>>>(xp, sp, op, rows, hidden, 0.0);
}

template <typename T, typename ScaleT>
void launch_bwd(bool clamp, int grid, cudaStream_t stream, const void* x, const void* scale, const void* d_out,
                void* d_x, void* d_scale, int64_t rows, int64_t hidden, double clamp_value) {
  const T* xp = static_cast<const T*>(x);
  const ScaleT* sp = static_cast<const ScaleT*>(scale);
  const T* dp = static_cast<const T*>(d_out);
  T* dxp = static_cast<T*>(d_x);
  ScaleT* dsp = static_cast<ScaleT*>(d_scale);
  if (clamp)
    FleetSwiGLUScaleBwd<T, ScaleT, true><<<grid, kBlockSize, 0, stream>>>(xp, sp, dp, dxp, dsp, rows, hidden, clamp_value);
  else
    FleetSwiGLUScaleBwd<T, ScaleT, false><<<grid, kBlockSize, 0, stream>>>(xp, sp, dp, dxp, dsp, rows, hidden, 0.0);
}

bitparity_status compute(const bitparity_call* call, bitparity_error* error) {
  if (!call || !call->op || !call->direction) return backend_error(error, "fleet: incomplete call");
  if (std::strcmp(call->op, "swiglu_scale") != 0)
    return backend_error(error, std::string("fleet: op ") + call->op + " is not implemented");
  if (!call->contract || std::strcmp(call->contract, "paddle_fused_shipped") != 0)
    return backend_error(error, std::string("fleet: swiglu_scale contract ") + (call->contract ? call->contract : "(null)") +
                                    " is not implemented");
  const bool bwd = std::strcmp(call->direction, "bwd") == 0;
  if (!bwd && std::strcmp(call->direction, "fwd") != 0)
    return backend_error(error, std::string("fleet: unknown direction ") + call->direction);

  // The attribute: clamp when present and > 0 (Paddle's wrapper), the clamp kernels otherwise not.
  bool has_clamp_attr = false;
  double clamp_value = 0.0;
  for (int64_t i = 0; i < call->num_attrs; ++i) {
    const bitparity_attr& a = call->attrs[i];
    if (!a.name || std::strcmp(a.name, "clamp") != 0) continue;
    if (a.type == BITPARITY_ATTR_FLOAT) clamp_value = a.float_value;
    else if (a.type == BITPARITY_ATTR_INT) clamp_value = static_cast<double>(a.int_value);
    else return reject(error, "attr", "fused_swiglu_scale: clamp (clamp_value) must be a number");
    has_clamp_attr = true;
  }
  const bool clamp = has_clamp_attr && clamp_value > 0.0;
  const char* op_name = bwd ? (clamp ? "fused_swiglu_scale_clamp_bwd" : "fused_swiglu_scale_bwd")
                            : (clamp ? "fused_swiglu_scale_clamp" : "fused_swiglu_scale");
  const std::string who = op_name;

  const bitparity_tensor* x = find_input(call, "y");
  const bitparity_tensor* scale = find_input(call, "scale");
  const bitparity_tensor* d_out = bwd ? find_input(call, "g") : nullptr;
  if (!x || !scale || (bwd && !d_out))
    return backend_error(error, who + ": the case lacks input " + (!x ? "y" : !scale ? "scale" : "g"));

  // Paddle's input checks, in its order.
  if (x->rank != 2 || x->shape[1] % 2 != 0)
    return reject(error, "shape", who + ": X (input y) must have shape [rows, 2 * hidden_size]; got " + shape_string(*x));
  const int64_t rows = x->shape[0];
  const int64_t hidden = x->shape[1] / 2;
  if (!(scale->rank == 1 || (scale->rank == 2 && scale->shape[1] == 1)))
    return reject(error, "shape", who + ": Scale (input scale) must have shape [rows] or [rows, 1]; got " +
                                      shape_string(*scale));
  if (scale->shape[0] != rows)
    return reject(error, "shape", who + ": Scale (input scale) must contain exactly one value per X row (rows = " +
                                      std::to_string(rows) + "); got " + shape_string(*scale));
  if (bwd) {
    if (d_out->rank != 2 || d_out->shape[0] != rows || d_out->shape[1] != hidden)
      return reject(error, "shape", who + ": DOut (input g) must have shape [" + std::to_string(rows) + ", " +
                                        std::to_string(hidden) + "]; got " + shape_string(*d_out));
    if (d_out->dtype != x->dtype)
      return reject(error, "dtype", who + ": DOut (input g) dtype must match X (input y) dtype");
  }
  if (x->dtype != BITPARITY_BF16 && x->dtype != BITPARITY_FP32)
    return reject(error, "dtype", who + ": X (input y) must be bfloat16 or float32; got " + dtype_name(x->dtype));
  if (scale->dtype != BITPARITY_BF16 && scale->dtype != BITPARITY_FP32)
    return reject(error, "dtype", who + ": Scale (input scale) must be bfloat16 or float32; got " + dtype_name(scale->dtype));
  if (x->dtype == BITPARITY_FP32 && scale->dtype != BITPARITY_FP32)
    return reject(error, "dtype", who + ": float32 X (input y) requires float32 Scale (input scale)");
  const int64_t vec = 16 / element_size(x->dtype);
  if (hidden % vec != 0)
    return reject(error, "shape", who + ": hidden_size must be divisible by the vector width (" + std::to_string(vec) +
                                      " for " + dtype_name(x->dtype) + "); got " + std::to_string(hidden));
  if (clamp && !std::isfinite(clamp_value))
    return reject(error, "attr", who + ": clamp_value must be finite and greater than zero");

  // Outputs with Paddle's shapes: out [rows, H]; d_x like X; d_scale [rows, 1] from the clamp
  // kernels, Scale's own shape from the others.
  void* out = nullptr;
  void* d_x = nullptr;
  void* d_scale = nullptr;
  if (!bwd) {
    const int64_t out_shape[2] = {rows, hidden};
    if (call->allocate_output(call, "out", x->dtype, 2, out_shape, &out) != 0)
      return backend_error(error, who + ": could not allocate out");
  } else {
    const int64_t clamp_shape[2] = {rows, 1};
    const int32_t d_scale_rank = clamp ? 2 : scale->rank;
    const int64_t* d_scale_shape = clamp ? clamp_shape : scale->shape;
    if (call->allocate_output(call, "d_y", x->dtype, 2, x->shape, &d_x) != 0)
      return backend_error(error, who + ": could not allocate d_y");
    if (call->allocate_output(call, "d_scale", scale->dtype, d_scale_rank, d_scale_shape, &d_scale) != 0)
      return backend_error(error, who + ": could not allocate d_scale");
  }

  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  if (rows == 0 || hidden == 0) {
    // No launch. d_scale is zeros (rows > 0 with H = 0: a row's empty sum); the rest is empty.
    if (bwd && d_scale && rows > 0) {
      const cudaError_t err = cudaMemsetAsync(d_scale, 0, static_cast<size_t>(rows * element_size(scale->dtype)), stream);
      if (err != cudaSuccess) return cuda_error(error, op_name, "zero-filling d_scale", err);
    }
    return BITPARITY_OK;
  }

  // Packed128 accesses: the row starts are 16-byte aligned when the buffers are (H is a multiple
  // of the vector, so every row and both halves of y start on a 16-byte boundary).
  if (!x->data || !scale->data || (bwd && !d_out->data))
    return backend_error(error, who + ": an input of a non-empty case has no data");
  if (!aligned16(x->data) || (bwd && !aligned16(d_out->data)) || (out && !aligned16(out)) || (d_x && !aligned16(d_x)))
    return backend_error(error, who + ": Packed128 needs 16-byte aligned X, DOut and outputs");

  (void)cudaGetLastError();  // a stale error of an earlier call is not this launch's
  const int grid = static_cast<int>(std::min<int64_t>(rows, kMaxGridSize));
  const bool bf16_x = x->dtype == BITPARITY_BF16;
  const bool bf16_scale = scale->dtype == BITPARITY_BF16;
  if (!bwd) {
    if (bf16_x && !bf16_scale)
      launch_fwd<__nv_bfloat16, float>(clamp, grid, stream, x->data, scale->data, out, rows, hidden, clamp_value);
    else if (bf16_x)
      launch_fwd<__nv_bfloat16, __nv_bfloat16>(clamp, grid, stream, x->data, scale->data, out, rows, hidden, clamp_value);
    else
      launch_fwd<float, float>(clamp, grid, stream, x->data, scale->data, out, rows, hidden, clamp_value);
  } else {
    if (bf16_x && !bf16_scale)
      launch_bwd<__nv_bfloat16, float>(clamp, grid, stream, x->data, scale->data, d_out->data, d_x, d_scale, rows, hidden,
                                       clamp_value);
    else if (bf16_x)
      launch_bwd<__nv_bfloat16, __nv_bfloat16>(clamp, grid, stream, x->data, scale->data, d_out->data, d_x, d_scale, rows,
                                               hidden, clamp_value);
    else
      launch_bwd<float, float>(clamp, grid, stream, x->data, scale->data, d_out->data, d_x, d_scale, rows, hidden,
                               clamp_value);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_error(error, op_name, "kernel launch", err);
  return BITPARITY_OK;
}

const bitparity_impl kImpls[] = {
    {"swiglu_scale", "paddle_fused_shipped"},
};

const bitparity_plugin kPlugin = {
    BITPARITY_PLUGIN_ABI_VERSION,
    "fleet",
    "bitparity's example plug-in: an independently written SwiGLU-scale kernel in PaddleFleet's style "
    "(fuse_swiglu_scale.cu after #1078: Packed128, fminf/fmaxf clamp, clamp kernels' d_scale [rows, 1])",
    BITPARITY_MEMORY_CUDA,
    kImpls,
    static_cast<int64_t>(sizeof(kImpls) / sizeof(kImpls[0])),
    compute,
};

}  // namespace

// The entry point. It touches no CUDA state: the runtime starts on the first compute.
extern "C" __attribute__((visibility("default"))) const bitparity_plugin* bitparity_plugin_v1(uint32_t host_abi_version) {
  if (host_abi_version < BITPARITY_PLUGIN_ABI_VERSION) {
    std::fprintf(stderr, "fleet_swiglu_scale: built for plug-in ABI %u; the host speaks %u\n",
                 static_cast<unsigned>(BITPARITY_PLUGIN_ABI_VERSION), static_cast<unsigned>(host_abi_version));
    return nullptr;
  }
  return &kPlugin;
}
