// swiglu_scale: SwiGLU scaled per row (spec OP-5, OP-6). Megatron's WeightedSwiGLUFunction in its
// eager form, and PaddleFleet's fused_swiglu_scale kernels.
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "ops/swiglu_family.h"
#include "reference/numerics.h"
#include "reference/swiglu.h"
#include "reference/swiglu_common.h"

namespace bitparity::ref {
namespace {

// PaddleFleet's launch: 256 threads per row, each reading 16-byte packets (PaddleCase::vec).
constexpr int kPaddleBlock = 256;

float at(const Tensor& y, int64_t r, int64_t F, int64_t j, bool value_half) {
  return y.f32(r * 2 * F + (value_half ? F : 0) + j);
}

// ---------------------------------------------------------------------------------------------
// Megatron: out = bf(f32(swiglu_bf16) * w); backward swiglu_back(g * w, y); d_scale the PyTorch
// row sum (rule 7, for the products' element size) of swiglu_bf16 * g.to(w), keepdim, then .to(w).
TensorMap swiglu_scale_megatron(const Case& c, const ContractInfo& contract) {
  const Tensor& y = *c.input("y");
  const Tensor& scale = *c.input("scale");
  const int64_t rows = y.dim(0), F = y.dim(1) / 2;
  const std::optional<double> clamp = swiglu::active_clamp(c, contract.clamp_gate);
  const DType act = y.dtype(), w = scale.dtype(), chain = swiglu::promote(act, w);

  if (c.direction == Direction::kForward) {
    Tensor out(act, {rows, F});
    for (int64_t r = 0; r < rows; ++r) {
      if (r > 0 && swiglu::repeats_previous_row({&y, &scale}, r)) {
        swiglu::copy_previous_row(out, r);
        continue;
      }
      for (int64_t j = 0; j < F; ++j) {
        const float sw = swiglu::megatron_swiglu(act, at(y, r, F, j, false), at(y, r, F, j, true), clamp);
        out.set_f32(r * F + j, sw * scale.f32(r));  // one fp32 product, then .to(dtype)
      }
    }
    return {{"out", std::move(out)}};
  }
  const Tensor& g = *c.input("g");
  Tensor d_y(act, {rows, 2 * F});
  Tensor d_scale(w, scale.shape());
  std::vector<float> products(static_cast<size_t>(F));
  for (int64_t r = 0; r < rows; ++r) {
    if (r > 0 && swiglu::repeats_previous_row({&y, &g, &scale}, r)) {
      swiglu::copy_previous_row(d_y, r);
      swiglu::copy_previous_row(d_scale, r);
      continue;
    }
    const float s = scale.f32(r);
    for (int64_t j = 0; j < F; ++j) {
      const float a = at(y, r, F, j, false), b = at(y, r, F, j, true), gj = g.f32(r * F + j);
      const float g_scaled = round_to(chain, gj * s);  // g * weights
      const auto grad = swiglu::megatron_swiglu_back(act, chain, g_scaled, a, b, clamp);
      d_y.set_f32(r * 2 * F + j, grad.da);
      d_y.set_f32(r * 2 * F + F + j, grad.db);
      const float sw = grad.out;  // megatron_swiglu(act, a, b, clamp)
      products[static_cast<size_t>(j)] = round_to(chain, sw * round_to(w, gj));  // swiglu(y) * g.to(w)
    }
    // The products are a tensor of the chain dtype: a 16-bit one is summed in 8-element vectors.
    d_scale.set_f32(r, round_to(w, round_to(chain, torch_row_sum(products, rows, dtype_size(chain)))));
  }
  return {{"d_y", std::move(d_y)}, {"d_scale", std::move(d_scale)}};
}

// ---------------------------------------------------------------------------------------------
// PaddleFleet fuse_swiglu_scale.cu: x·σ(x) silu, one rounding of the scaled output, fminf/fmaxf
// clamp (a NaN gate or value becomes the clamp value), its own d_scale order: per thread over its
// 16-byte packets, then a shared-memory halving tree over 256 threads. Where nvcc contracts a
// multiply-add into an FMA, the formula says std::fma.

// What the kernel's arithmetic depends on: dtypes, the row layout and its 16-byte packets, the clamp.
struct PaddleCase {
  DType act, s;
  int64_t rows, F;
  swiglu::PaddleClamp clamp;
  int64_t vec;  // elements per packet
};

PaddleCase paddle_case(const Case& c) {
  const Tensor& y = *c.input("y");
  const DType act = y.dtype();
  return {act, c.input("scale")->dtype(), y.dim(0), y.dim(1) / 2, swiglu::paddle_clamp(c),
          ops::swiglu_family::paddle_packet_elements(act)};
}

// One term of the d_scale sum, accumulated into `acc` the way the kernel's source reads.
float paddle_d_scale_step(const PaddleCase& p, float acc, float sw, float dout) {
  if (!p.clamp.on) return std::fma(dout, sw, acc);  // local += dout * swiglu_val
  if (p.act == p.s) {
    if (p.act == DType::kFP32) return std::fma(sw, dout, acc);
    return acc + round_to(p.act, round_to(p.act, sw) * dout);  // bf16 * bf16 -> bf16, then += float
  }
  return std::fma(round_to(p.act, sw), dout, acc);  // float(bf16(sw)) * float(dout)
}

float paddle_tree(std::array<float, kPaddleBlock>& lane) {
  for (int stride = kPaddleBlock / 2; stride > 0; stride >>= 1)
    for (int t = 0; t < stride; ++t) lane[static_cast<size_t>(t)] += lane[static_cast<size_t>(t + stride)];
  return lane[0];
}

TensorMap swiglu_scale_paddle(const Case& c, const ContractInfo& contract) {
  const bool shipped_clamp_shape = ops::swiglu_family::is_shipped_clamp_shape(contract);
  const PaddleCase p = paddle_case(c);
  const Tensor& y = *c.input("y");
  const Tensor& scale = *c.input("scale");
  const int64_t rows = p.rows, F = p.F;
  const int64_t vec = p.vec;

  if (c.direction == Direction::kForward) {
    Tensor out(p.act, {rows, F});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < F; ++j) {
        const float g = swiglu::paddle_gate(at(y, r, F, j, false), p.clamp);
        const float v = swiglu::paddle_value(at(y, r, F, j, true), p.clamp);
        out.set_f32(r * F + j, ((g * sigmoid_f32(g)) * v) * scale.f32(r));
      }
    return {{"out", out}};
  }
  const Tensor& dout = *c.input("g");
  Tensor d_y(p.act, {rows, 2 * F});
  const Shape d_scale_shape = p.clamp.on && shipped_clamp_shape ? Shape{rows, 1} : scale.shape();
  Tensor d_scale(p.s, d_scale_shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = scale.f32(r);
    std::array<float, kPaddleBlock> lane{};
    for (int t = 0; t < kPaddleBlock; ++t)
      for (int64_t col = t * vec; col < F; col += kPaddleBlock * vec)
        for (int64_t i = 0; i < vec; ++i) {
          const int64_t j = col + i;
          const float g_raw = at(y, r, F, j, false), v_raw = at(y, r, F, j, true);
          const float d = dout.f32(r * F + j);
          const float g = swiglu::paddle_gate(g_raw, p.clamp);
          const float v = swiglu::paddle_value(v_raw, p.clamp);
          const float sig = sigmoid_f32(g);
          const float silu = g * sig;
          const float sw = silu * v;
          lane[static_cast<size_t>(t)] = paddle_d_scale_step(p, lane[static_cast<size_t>(t)], sw, d);
          const float d_u = d * s;
          const float bracket = std::fma(g, 1.0f - sig, 1.0f);  // 1 + g * (1 - sig), contracted
          float dg, dv;
          if (p.clamp.on) {
            const float g_mask = g_raw <= p.clamp.cv ? 1.0f : 0.0f;
            const float v_mask = (v_raw <= p.clamp.cv && v_raw >= -p.clamp.cv) ? 1.0f : 0.0f;
            dv = (d_u * silu) * v_mask;
            dg = (((d_u * sig) * bracket) * v) * g_mask;
          } else {
            dv = d_u * silu;
            dg = ((d_u * v) * sig) * bracket;
          }
          d_y.set_f32(r * 2 * F + j, dg);
          d_y.set_f32(r * 2 * F + F + j, dv);
        }
    d_scale.set_f32(r, paddle_tree(lane));
  }
  return {{"d_y", d_y}, {"d_scale", d_scale}};
}

}  // namespace

// Megatron's two gates are the contracts' traits; paddle_fused_shipped differs from paddle_fused
// in d_scale's shape only.
std::vector<ImplEntry> swiglu_scale_impls() {
  return {{"swiglu_scale", "megatron_eager", with_canonical_nans(swiglu_scale_megatron)},
          {"swiglu_scale", "megatron_unfused", with_canonical_nans(swiglu_scale_megatron)},
          {"swiglu_scale", "paddle_fused", with_canonical_nans(swiglu_scale_paddle)},
          {"swiglu_scale", "paddle_fused_shipped", with_canonical_nans(swiglu_scale_paddle)}};
}

}  // namespace bitparity::ref
