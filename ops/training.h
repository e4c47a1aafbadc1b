// The training-step ops of an MoE layer (spec OP-8, OP-11, OP-12): the loss, the gradient of the
// three-way clone of the layer's input, and the optimizer step.
#pragma once

#include <cstdint>
#include <optional>

#include "core/registry.h"

namespace bitparity::ops {

OpInfo fanout_grad();  // ops/fanout_grad.cpp
OpInfo adamw_step();   // ops/adamw_step.cpp
OpInfo grad_finalize();  // ops/grad_finalize.cpp
OpInfo cross_entropy();  // ops/cross_entropy.cpp

// cross_entropy's ignore_index attribute (PyTorch's default -100 when absent). Throws
// RejectError("attr") where it is not an int.
int64_t cross_entropy_ignore_index(const Case& c);

// cross_entropy's fused order cuts a row into kFusedSegments contiguous segments of
// fused_segment_span(V) = ceil(V / 8192) * 1024 elements (the last shorter or empty), each walked by
// kFusedSegmentLanes lanes (reference/cross_entropy.h states the order).
inline constexpr int64_t kFusedSegments = 8;
inline constexpr int64_t kFusedSegmentLanes = 1024;
constexpr int64_t fused_segment_span(int64_t V) {
  const int64_t lanes = kFusedSegments * kFusedSegmentLanes;
  return (V + lanes - 1) / lanes * kFusedSegmentLanes;
}
// The widest V whose segments bitparity's fused backward keeps in shared memory: above it the
// kernel takes its other path (a generated class of its own).
inline constexpr int64_t kFusedBufferedMaxV = 204800;

// adamw_step's attributes as torch.optim.AdamW takes them, an absent one at AdamW's default (lr
// 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2, maximize False); step has no default.
// For a case that validate accepted.
struct AdamwHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
  int64_t step = 1;
  bool maximize = false;
};
AdamwHyper adamw_hyper(const Case& c);

// The fp32 step counter the fused kernel reads: torch keeps it as an fp32 tensor, which holds
// f32(step - 1) before the step (a restored state) and gets 1 added in fp32. Exact up to 2^24.
float adamw_step_counter(int64_t step);

// grad_finalize's attributes (bias_update_rate at Megatron's default 1e-3 when absent). Throws
// RejectError("attr") where dp_size is missing or an attribute has the wrong type.
struct GradFinalizeAttrs {
  int64_t dp_size = 1;
  std::optional<int64_t> num_tokens;
  double bias_update_rate = 1e-3;
};
GradFinalizeAttrs grad_finalize_attrs(const Case& c);

}  // namespace bitparity::ops
