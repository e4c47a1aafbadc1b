// swiglu: SwiGLU silu(a) * b of y = [a | b], with optional bias and clamp (spec OP-4, OP-6).
#include "ops/swiglu_family.h"

namespace bitparity::ops {
namespace {

const char* const kMegatronFrom =
    "Megatron-LM eager functions (#5335 swiglu_eager/swiglu_back_eager/weighted_swiglu_back_eager; clamped "
    "functions of Megatron main, #5940); eager PyTorch 2.11 on CUDA 13.0, sm_90 (shared/probes)";
}  // namespace

OpInfo swiglu() {
  OpInfo op;
  op.name = "swiglu";
  op.doc = "SwiGLU silu(a) * b of y = [a | b] (Megatron SwiGLUFunction, BiasSwiGLUFunction), optional clamp";
  op.inputs[Direction::kForward] = {{"y", "[rows, 2F] activations", false, true}, {"bias", "[2F], added to y first", true}};
  op.inputs[Direction::kBackward] = {{"y", "[rows, 2F] activations", false, true},
                                     {"bias", "[2F], added to y first", true},
                                     {"g", "[rows, F] gradient of out", false, true}};
  op.outputs[Direction::kForward] = {{"out", "[rows, F]", false, true}};
  op.outputs[Direction::kBackward] = {{"d_y", "[rows, 2F] gradient of y (and, before its row sum, of bias)", false, true}};
  op.attrs = {{"clamp", AttrType::kFloat, "clamp value: a <= c, -c <= b <= c; absent means no clamp"}};
  op.contracts = {
      {"megatron_eager", "eager ops, each rounded to the activation dtype; clamp when present and > 0", kMegatronFrom, ClampGate::kPositive},
      {"megatron_unfused", "megatron_eager's arithmetic with the unfused glu() clamp gate: clamp whenever present",
       kMegatronFrom, ClampGate::kPresent}};
  op.validate = swiglu_family::validate_swiglu;
  swiglu_family::add_family_generators(op);
  return op;
}

}  // namespace bitparity::ops
