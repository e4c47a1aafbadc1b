// swiglu_scale: SwiGLU scaled per row, Megatron's weighted SwiGLU and PaddleFleet's fused_swiglu_scale (spec OP-5, OP-6).
#include "ops/swiglu_family.h"

namespace bitparity::ops {
namespace {

const char* const kMegatronFrom =
    "Megatron-LM eager functions (#5335 swiglu_eager/swiglu_back_eager/weighted_swiglu_back_eager; clamped "
    "functions of Megatron main, #5940); eager PyTorch 2.11 on CUDA 13.0, sm_90 (shared/probes)";
const char* const kPaddleFrom =
    "PaddleFleet paddlefleet_ops fuse_swiglu_scale.cu (version with input checks) and fused_swiglu_scale.py "
    "(#1078: clamp when not None and > 0)";

}  // namespace

OpInfo swiglu_scale() {
  OpInfo op;
  op.name = "swiglu_scale";
  op.doc = "SwiGLU scaled per row (Megatron WeightedSwiGLUFunction, PaddleFleet fused_swiglu_scale), optional clamp";
  op.inputs[Direction::kForward] = {{"y", "[rows, 2F] activations", false, true}, {"scale", "[rows] or [rows, 1] per-row scale", false, true}};
  op.inputs[Direction::kBackward] = {{"y", "[rows, 2F] activations", false, true},
                                     {"scale", "[rows] or [rows, 1] per-row scale", false, true},
                                     {"g", "[rows, F] gradient of out", false, true}};
  op.outputs[Direction::kForward] = {{"out", "[rows, F]", false, true}};
  op.outputs[Direction::kBackward] = {{"d_y", "[rows, 2F]", false, true}, {"d_scale", "scale's shape: [rows] or [rows, 1]; Megatron's row sum follows rule 7, whose order the row count sets", false, true, true}};
  op.attrs = {{"clamp", AttrType::kFloat, "clamp value: a <= c, -c <= b <= c; absent means no clamp"}};
  op.contracts = {
      {"megatron_eager",
       "bf(f32(bf(swiglu)) * w) (double rounding); d_scale = rule-7 row sum of swiglu * g.to(w); clamp when present "
       "and > 0",
       kMegatronFrom, ClampGate::kPositive},
      {"megatron_unfused", "megatron_eager's arithmetic with the unfused glu() clamp gate: clamp whenever present",
       kMegatronFrom, ClampGate::kPresent},
      {"paddle_fused",
       "x*sigmoid(x) silu, single rounding of the scaled output, NaN gate/value -> clamp value, its own d_scale "
       "order; bf16/fp32 only, F a multiple of the 16-byte vector; d_scale rank follows scale",
       kPaddleFrom, ClampGate::kPositive},
      {"paddle_fused_shipped", "paddle_fused, but the clamp kernels return d_scale as [rows, 1] for any scale rank",
       kPaddleFrom, ClampGate::kPositive}};
  op.validate = swiglu_family::validate_swiglu_scale;
  swiglu_family::add_family_generators(op);
  return op;
}

}  // namespace bitparity::ops
