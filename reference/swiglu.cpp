// swiglu and its bias variant (spec OP-4, OP-6): Megatron's SwiGLUFunction / BiasSwiGLUFunction.
#include "reference/swiglu.h"

#include <utility>

#include "reference/numerics.h"
#include "reference/swiglu_common.h"

namespace bitparity::ref {
namespace {

TensorMap swiglu_megatron(const Case& c, const ContractInfo& contract) {
  const Tensor y = swiglu::biased_input(c);
  const int64_t rows = y.dim(0), F = y.dim(1) / 2;
  const std::optional<double> clamp = swiglu::active_clamp(c, contract.clamp_gate);
  const DType act = y.dtype();

  if (c.direction == Direction::kForward) {
    Tensor out(act, {rows, F});
    for (int64_t r = 0; r < rows; ++r) {
      if (r > 0 && swiglu::repeats_previous_row({&y}, r)) {
        swiglu::copy_previous_row(out, r);
        continue;
      }
      for (int64_t j = 0; j < F; ++j)
        out.set_f32(r * F + j, swiglu::megatron_swiglu(act, y.f32(r * 2 * F + j), y.f32(r * 2 * F + F + j), clamp));
    }
    return {{"out", std::move(out)}};
  }
  const Tensor& g = *c.input("g");
  Tensor d_y(act, {rows, 2 * F});
  for (int64_t r = 0; r < rows; ++r) {
    if (r > 0 && swiglu::repeats_previous_row({&y, &g}, r)) {
      swiglu::copy_previous_row(d_y, r);
      continue;
    }
    for (int64_t j = 0; j < F; ++j) {
      const auto grad = swiglu::megatron_swiglu_back(act, act, g.f32(r * F + j), y.f32(r * 2 * F + j),
                                                     y.f32(r * 2 * F + F + j), clamp);
      d_y.set_f32(r * 2 * F + j, grad.da);
      d_y.set_f32(r * 2 * F + F + j, grad.db);
    }
  }
  return {{"d_y", std::move(d_y)}};
}

}  // namespace

// The gate (fused functions: > 0; unfused glu(): present) is the contract's trait.
std::vector<ImplEntry> swiglu_impls() {
  return {{"swiglu", "megatron_eager", with_canonical_nans(swiglu_megatron)},
          {"swiglu", "megatron_unfused", with_canonical_nans(swiglu_megatron)}};
}

}  // namespace bitparity::ref
