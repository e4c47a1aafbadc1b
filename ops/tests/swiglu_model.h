// The SwiGLU family's semantics as its property tests state them, from the spec and independent of
// reference/ and of ops/: the clamp limit a gate leaves in effect (OP-6), the exact forward in
// fp64, and the output shapes (OP-4 .. OP-6) that validate must declare. Which gate a contract
// applies is the registry's ContractInfo::clamp_gate.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/case.h"
#include "core/registry.h"

namespace bitparity::ops::swiglu_model {

// The ops whose semantics this file states.
inline bool is_swiglu_family(const std::string& op) { return op == "swiglu" || op == "swiglu_scale"; }

// Whether PaddleFleet dispatches to its clamp kernels (OP-6: not None and > 0; NaN is not > 0).
inline bool paddle_clamp_kernel(std::optional<double> clamp) { return clamp && *clamp > 0; }

// The clamp limit in effect: the attribute, a double, converted once to fp32 (ATen's clamp with a
// Python scalar, PaddleFleet's static_cast<float>), or none when the gate is closed. OP-6: Megatron's
// fused autograd functions and PaddleFleet's wrappers clamp iff `clamp_value is not None and
// clamp_value > 0` (kPositive); Megatron's unfused glu() clamps whenever it is not None (kPresent).
inline std::optional<float> active_limit(std::optional<double> clamp, ClampGate gate) {
  if (!clamp || gate == ClampGate::kNone) return std::nullopt;
  if (gate == ClampGate::kPositive && !(*clamp > 0)) return std::nullopt;
  return static_cast<float>(*clamp);
}

// a.clamp(max=c) and b.clamp(min=-c, max=c) on exact values; torch's min-max clamp with
// min > max returns max (a limit <= 0 under the kPresent gate pins b to c).
struct Clamped {
  double a, b;
};
inline Clamped clamp_halves(double a, double b, std::optional<float> limit) {
  if (!limit) return {a, b};
  const double c = *limit;
  if (std::isnan(c)) return {a, NAN};
  return {a > c ? c : a, std::min(std::max(b, -c), c)};
}

inline double silu(double x) { return x / (1.0 + std::exp(-x)); }

// The true value of one output element: silu(a_c) * b_c (times the row's scale for swiglu_scale).
inline double exact_swiglu(double a, double b, std::optional<float> limit) {
  const Clamped c = clamp_halves(a, b, limit);
  return silu(c.a) * c.b;
}

// The shape and dtype of an output of swiglu / swiglu_scale (OP-4 .. OP-6): out [rows, F] and
// d_y [rows, 2F] in y's dtype; d_scale in scale's dtype and shape (#1078 review: keepdim =
// scale.ndim > 1), except that the stored PaddleFleet clamp kernels always return [rows, 1]
// (FusedGradClampInferShape), which is contract paddle_fused_shipped.
struct OutputSpec {
  Shape shape;
  DType dtype;
};
inline OutputSpec expected_output(const Case& c, const std::string& contract, const std::string& output) {
  const Tensor& y = *c.input("y");
  const int64_t rows = y.dim(0), F = y.dim(1) / 2;
  if (output == "out") return {{rows, F}, y.dtype()};
  if (output == "d_y") return {{rows, 2 * F}, y.dtype()};
  if (output == "d_scale") {
    const Tensor& scale = *c.input("scale");
    if (contract == "paddle_fused_shipped" && paddle_clamp_kernel(c.float_attr("clamp")))
      return {{rows, 1}, scale.dtype()};
    return {scale.shape(), scale.dtype()};
  }
  throw std::logic_error("no shape rule for output " + output + " of " + c.op);
}

}  // namespace bitparity::ops::swiglu_model
