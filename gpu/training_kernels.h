// Launchers of the training-step kernels (spec OP-11, OP-12): the sum of the gradients of the MoE
// input's three clones (fanout_grad), one step of PyTorch's fused AdamW (adamw_step) and Megatron's
// finalize_model_grads after the gradient sync (grad_finalize), all in gpu/training.cu. The kernel
// records (gpu/training_records.cpp) bind them. No CUDA types here, so that host code compiled by
// g++ can call them, and nothing of C++20, which nvcc compiles as C++17.
//
// fanout_grad and adamw_step are elementwise over flat, contiguous tensors of one dtype (bf16, fp16
// or fp32); grad_finalize is elementwise over an fp32 buffer, plus a per-layer step over the
// routers' fp32 [layers, experts] buffers. Every pointer is device memory. A launcher launches
// nothing for zero elements, checks its launches and copies (runtime.h: check_launch, check_cuda)
// and throws gpu::CudaError on failure; it never validates a case (the op's validate has), and it
// writes every element of its outputs. Streams are cudaStream_t values passed as void*; nullptr is
// the default stream.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "gpu/common/ilp.h"

namespace bitparity::gpu {

// fanout_grad (spec OP-11): out = dt(f32(dt(f32(dispatcher) + f32(first))) + f32(last)), each add
// one fp32 addition (fp32 opmath of an eager add), each dt one RNE rounding to the dtype (none for
// fp32). The contract picks the order: glm45 adds g_shared first and g_router last, dsv4 g_router
// first and g_shared last.
struct FanoutGrad {
  DType dtype = DType::kBF16;        // every tensor's: bf16, fp16 or fp32
  int64_t n = 0;                     // elements of each tensor (T * H)
  const void* dispatcher = nullptr;  // g_dispatcher
  const void* first = nullptr;       // added to g_dispatcher
  const void* last = nullptr;        // added to that sum
  void* out = nullptr;               // d_hidden
  int ilp = kIlpDefault;  // kIlpDefault: the kernel's own; or 1, 2, 4 packets loaded together (same bits)
  void* stream = nullptr;
};
void launch_fanout_grad(const FanoutGrad& args);

// adamw_step, megatron_eager (spec OP-12): torch.optim.AdamW(fused=True) of PyTorch 2.11, one step,
// in fp32 opmath (fused_adam_utils.cuh lines 43-89 and 140-153, ADAM_MODE::ADAMW). Once:
//   t = f32(step - 1) + 1 (the fp32 step counter), bc1 = 1 - powf(beta1, t), bc2 = 1 - powf(beta2, t)
//   (CUDA's powf, on the device), bc2s = sqrt(bc2), ss = lr / bc1;
// each element, every operation rounded once in fp32 and no other contraction:
//   g = maximize ? -g : g;  wd != 0: p = fma(-(lr wd), p, p);
//   m = fma(beta1, m, fma(-beta1, g, g));  v = fma(beta2, v, fma(-beta2, g g, g g));
//   p = p - (ss m) / (sqrt(v) / bc2s + eps);
// p, m and v stored rounded to the dtype. The outputs are separate tensors (the step is not in place).
struct AdamwStep {
  DType dtype = DType::kFP32;  // every tensor's: fp32, bf16 or fp16
  int64_t n = 0;               // elements of each tensor
  // The hyper-parameters as the fused kernel holds them: f32 of the case's doubles.
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  float counter_before = 0;  // the fp32 step counter before the step: f32(step - 1), rounded once
  bool maximize = false;
  const void* param = nullptr;
  const void* grad = nullptr;
  const void* exp_avg = nullptr;
  const void* exp_avg_sq = nullptr;
  void* param_out = nullptr;
  void* exp_avg_out = nullptr;
  void* exp_avg_sq_out = nullptr;
  int ilp = kIlpDefault;  // kIlpDefault: the kernel's own; or 1, 2, 4 packets loaded together (same bits)
  void* stream = nullptr;
};
void launch_adamw_step(const AdamwStep& args);

// grad_finalize (spec OP-12), every tensor fp32. main_grad: where `scaled`, each element times
// `scale`, one fp32 product (a NaN as the fp32 unit writes it, 0x7FFFFFFF); else copied bit for
// bit (NaN payloads kept). The routers' buffers, where the case has them (layers > 0): without
// `update_bias` both copied bit for bit (megatron_aligned); with it (megatron_r013) per layer l
//   sum = the fp32 sum of the layer's counts (whole counts summing below 2^24: exact in any order),
//   average = sum * inv_experts, offset = average - count, sign = (0 < offset) - (offset < 0),
//   bias' = bias + sign * rate (each operation rounded once in fp32), and the counts zeroed (+0).
// The outputs are separate tensors (nothing in place).
struct GradFinalize {
  int64_t n = 0;                      // main_grad's elements
  const void* main_grad = nullptr;    // [n]
  void* main_grad_out = nullptr;      // [n]
  bool scaled = false;                // false: main_grad_out is a bit copy of main_grad
  float scale = 1;                    // the contract's fp32 factor: f32(1 / dp_size) or 1 / f32(num_tokens)
  int64_t layers = 0, experts = 0;    // the routers' buffers' shape; layers = 0: none (pointers null)
  const void* tokens_per_expert = nullptr;  // [layers, experts]
  const void* expert_bias = nullptr;        // [layers, experts]
  void* tokens_per_expert_out = nullptr;    // [layers, experts]
  void* expert_bias_out = nullptr;          // [layers, experts]
  bool update_bias = false;           // false: both buffers copied bit for bit; true: r0.13's step
  float inv_experts = 1;              // 1 / f32(experts), rounded once in fp32
  float rate = 0;                     // f32(bias_update_rate)
  int ilp = kIlpDefault;  // kIlpDefault: the kernel's own; or 1, 2, 4 packets loaded together (same bits)
  void* stream = nullptr;
};
void launch_grad_finalize(const GradFinalize& args);

}  // namespace bitparity::gpu
