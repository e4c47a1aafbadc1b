// The kernel records of the SwiGLU family: each binds its contract's launcher (gpu/swiglu_kernels.h)
// to device tensors. The op's validate (ops/swiglu_family) has checked the inputs; what is left
// here is the contract's own reading of the case: the clamp gate (ContractInfo::clamp_gate,
// evaluated here, not borrowed from another backend) and rule 7's plan for Megatron's d_scale.
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "gpu/common/row_sum.h"
#include "gpu/records.h"
#include "gpu/swiglu_kernels.h"

namespace bitparity::gpu {
namespace {

constexpr const char* kClampAttr = "clamp";

// The clamp a contract applies (spec OP-6): none without the attribute; kPositive ignores a
// value that is not > 0 (NaN included), kPresent applies any value.
std::optional<double> gated_clamp(const Case& c, ClampGate gate) {
  if (gate == ClampGate::kNone) return std::nullopt;
  const std::optional<double> value = c.float_attr(kClampAttr);
  if (!value) return std::nullopt;
  if (gate == ClampGate::kPositive && !(*value > 0)) return std::nullopt;
  return value;
}

// Megatron's limits: hi = float(c), lo = float(-c); a NaN limit fills the value half with NaN.
MegatronClamp megatron_clamp(std::optional<double> clamp) {
  MegatronClamp m;
  if (!clamp) return m;
  m.on = true;
  m.nan_limit = std::isnan(*clamp);
  m.hi = static_cast<float>(*clamp);
  m.lo = static_cast<float>(-*clamp);
  return m;
}

// PaddleFleet's limit: cv = float(clamp_value) (validate rejected a non-finite one).
PaddleClamp paddle_clamp(std::optional<double> clamp) {
  if (!clamp) return {};
  return {true, static_cast<float>(*clamp)};
}

// y is [rows, 2F] (validate).
struct Rows {
  int64_t rows, F;
};
Rows rows_of(const DeviceTensor& y) { return {y.shape.at(0), y.shape.at(1) / 2}; }

void* data_or_null(const DeviceTensor* t) { return t ? t->data() : nullptr; }

// swiglu: Megatron's eager or unfused functions, optional bias, no scale.
BoundLaunch bind_swiglu_megatron(const KernelArgs& k) {
  const DeviceTensor& y = required(k.inputs, "y");
  const auto [rows, F] = rows_of(y);
  const MegatronClamp clamp = megatron_clamp(gated_clamp(k.c, k.contract.clamp_gate));
  const void* bias = data_or_null(optional(k.inputs, "bias"));
  if (k.c.direction == Direction::kForward) {
    MegatronForward p;
    p.act = y.dtype;
    p.rows = rows;
    p.F = F;
    p.y = y.data();
    p.bias = bias;
    p.clamp = clamp;
    p.out = required(k.outputs, "out").data();
    p.ilp = k.ilp;
    p.stream = k.stream;
    return [p] { launch_megatron_forward(p); };
  }
  MegatronBackward p;
  p.act = y.dtype;
  p.rows = rows;
  p.F = F;
  p.y = y.data();
  p.bias = bias;
  p.g = required(k.inputs, "g").data();
  p.clamp = clamp;
  p.d_y = required(k.outputs, "d_y").data();
  p.ilp = k.ilp;
  p.stream = k.stream;
  return [p] { launch_megatron_backward(p); };
}

// swiglu_scale under Megatron's weighted functions: the forward is swiglu's kernel with a scale.
BoundLaunch bind_swiglu_scale_megatron(const KernelArgs& k) {
  const DeviceTensor& y = required(k.inputs, "y");
  const DeviceTensor& scale = required(k.inputs, "scale");
  const auto [rows, F] = rows_of(y);
  const MegatronClamp clamp = megatron_clamp(gated_clamp(k.c, k.contract.clamp_gate));
  if (k.c.direction == Direction::kForward) {
    MegatronForward p;
    p.act = y.dtype;
    p.rows = rows;
    p.F = F;
    p.y = y.data();
    p.scale = scale.data();
    p.scale_dtype = scale.dtype;
    p.clamp = clamp;
    p.out = required(k.outputs, "out").data();
    p.ilp = k.ilp;
    p.stream = k.stream;
    return [p] { launch_megatron_forward(p); };
  }
  MegatronScaleBackward p;
  p.act = y.dtype;
  p.scale_dtype = scale.dtype;
  p.rows = rows;
  p.F = F;
  p.y = y.data();
  p.scale = scale.data();
  p.g = required(k.inputs, "g").data();
  p.clamp = clamp;
  // Rule 7 has no plan for an empty row (the empty sum is +0) and rejects what it does not model.
  // The products act(swiglu) * g.to(w) are a tensor of promote(act, w): 16-bit when the two dtypes
  // are one 16-bit dtype, which torch.sum reduces in 8-element vectors; fp32 otherwise.
  const int product_bytes = y.dtype == scale.dtype && dtype_size(y.dtype) == 2 ? 2 : 4;
  if (rows > 0 && F > 0) p.plan = rule7_row_sum_plan(F, rows, product_bytes);
  p.d_y = required(k.outputs, "d_y").data();
  p.d_scale = required(k.outputs, "d_scale").data();
  p.ilp = k.ilp;
  p.stream = k.stream;
  return [p] { launch_megatron_scale_backward(p); };
}

// swiglu_scale under PaddleFleet's fused kernels. d_scale takes the shape validate gives it
// ([rows, 1] from the shipped clamp kernels); the kernel writes its rows values either way.
BoundLaunch bind_swiglu_scale_paddle(const KernelArgs& k) {
  const DeviceTensor& y = required(k.inputs, "y");
  const DeviceTensor& scale = required(k.inputs, "scale");
  const auto [rows, F] = rows_of(y);
  const PaddleClamp clamp = paddle_clamp(gated_clamp(k.c, k.contract.clamp_gate));
  if (k.c.direction == Direction::kForward) {
    PaddleForward p;
    p.act = y.dtype;
    p.scale_dtype = scale.dtype;
    p.rows = rows;
    p.F = F;
    p.y = y.data();
    p.scale = scale.data();
    p.clamp = clamp;
    p.out = required(k.outputs, "out").data();
    p.ilp = k.ilp;
    p.stream = k.stream;
    return [p] { launch_paddle_forward(p); };
  }
  PaddleBackward p;
  p.act = y.dtype;
  p.scale_dtype = scale.dtype;
  p.rows = rows;
  p.F = F;
  p.y = y.data();
  p.scale = scale.data();
  p.g = required(k.inputs, "g").data();
  p.clamp = clamp;
  p.d_y = required(k.outputs, "d_y").data();
  p.d_scale = required(k.outputs, "d_scale").data();
  p.ilp = k.ilp;
  p.stream = k.stream;
  return [p] { launch_paddle_backward(p); };
}

// --- the kernels' paths (KernelRecord::paths; the tags of ops/swiglu_family.cpp) -----------------

// Every launcher: nothing on zero rows or F == 0 (swiglu.cu launch_megatron_*, swiglu_scale.cu
// launch_*: d_scale zeroed); the clamp and the activation dtype are template parameters.
const std::vector<std::string> kCommonPaths = {"rows=0", "F=0", "clamp=none", "clamp=normal", "y=bf16", "y=fp32"};

// Megatron's elementwise kernels (swiglu.cu MegatronForwardBody, MegatronBackwardBody, each a kernel
// alone or a case of a batched launch): 16-byte packets where F is a multiple of the packet, else
// single elements; fp16 instantiated.
const std::vector<std::string> kMegatronElementwisePaths = {"F%packet=0", "F%packet!=0", "y=fp16"};

// Megatron's weighted backward (swiglu_scale.cu megatron_scale_backward_kernel): the vectorized
// and strided plans, 8 accumulators for 16-bit products, the 4-element groups of F % 8 == 4, the
// warp and the block tree.
const std::vector<std::string> kMegatronScaleBackwardPaths = {"d_scale:vectorized", "d_scale:strided",
                                                              "d_scale:16-bit_products", "d_scale:F%8=4",
                                                              "d_scale:block_tree", "d_scale:warp_tree"};

// Paddle's kernels (swiglu_scale.cu PaddleForwardBody, paddle_backward_kernel): whole packets
// only (validate), the backward's slot rotation at the end of a row and its partial last unit.
const std::vector<std::string> kPaddlePaths = {"F%packet=0", "units%8=0", "units%8!=0", "packets%32!=0"};

std::vector<std::string> joined(std::initializer_list<std::vector<std::string>> lists) {
  std::vector<std::string> out;
  for (const std::vector<std::string>& list : lists) out.insert(out.end(), list.begin(), list.end());
  return out;
}

}  // namespace

std::vector<KernelRecord> swiglu_family_kernels() {
  const std::vector<std::string> bias = {"bias", "no_bias"};  // the bias variant, a template parameter
  const std::vector<std::string> swiglu = joined({kCommonPaths, kMegatronElementwisePaths, bias});
  const std::vector<std::string> megatron_scale =
      joined({kCommonPaths, kMegatronElementwisePaths, kMegatronScaleBackwardPaths});
  const std::vector<std::string> paddle = joined({kCommonPaths, kPaddlePaths});
  std::vector<KernelRecord> records = {
      {"swiglu", "megatron_eager", bind_swiglu_megatron, swiglu},
      {"swiglu", "megatron_unfused", bind_swiglu_megatron, swiglu},
      {"swiglu_scale", "megatron_eager", bind_swiglu_scale_megatron, megatron_scale},
      {"swiglu_scale", "megatron_unfused", bind_swiglu_scale_megatron, megatron_scale},
      {"swiglu_scale", "paddle_fused", bind_swiglu_scale_paddle, paddle},
      {"swiglu_scale", "paddle_fused_shipped", bind_swiglu_scale_paddle, paddle},
  };
  // The elementwise kernels (swiglu's both directions, swiglu_scale's forward) go through
  // launch_row_chunks, the only launch of their case; the weighted backwards launch plainly.
  for (KernelRecord& r : records)
    r.collect_launches = r.op == "swiglu" ? std::vector<Direction>{Direction::kForward, Direction::kBackward}
                                          : std::vector<Direction>{Direction::kForward};
  return records;
}

}  // namespace bitparity::gpu
