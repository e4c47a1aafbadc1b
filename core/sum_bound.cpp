#include "core/sum_bound.h"

#include <cmath>

#include "core/compare.h"

namespace bitparity {

const char* const kAnyOrderBoundDoc =
    "any order of the n additions: |result - truth| <= (ea + es + eo + e64)(1 + 1e-12), where S = sum |a_j| "
    "(the finite addends; computed in fp64 and raised by (1 + 2^-53)^n - 1 of itself for that sum's "
    "error); ea = 2^-24 S + n 2^-125 where each addend is an fp32 product rounded or flushed first (else 0); "
    "es = ((1 + u)^(n-1) - 1)(S + ea) + n (1 + u)^(n-1) eta for the additions (the first, to +0, "
    "exact but for a flush), u the unit roundoff of the addition's dtype plus 2^-23 where a bf16 or fp16 "
    "addition passes through fp32, eta = 2^-125 for fp32 and bf16 (a flushed addend and a flushed result) and "
    "2^-25 for fp16; eo = u_o (|truth| + ea + es + e64) + eta_o where the sum is rounded once more, to the "
    "output dtype; e64 = ((1 + 2^-53)^n - 1) S the fp64 truth's own error. A sum whose partial sums may "
    "overflow the addition's dtype in some order (S + ea + es reaching its overflow threshold) is unbounded; "
    "where the truth is NaN or infinite (a NaN or infinite addend) every order gives it, and so must the result";

namespace {

// Unit roundoff (half an ulp at 1) of a floating dtype.
double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return std::ldexp(1.0, -8);
    case DType::kFP16: return std::ldexp(1.0, -11);
    case DType::kFP64: return std::ldexp(1.0, -53);
    default: return std::ldexp(1.0, -24);
  }
}

// The absolute error one rounding may add where its result or an operand is subnormal: a flushed
// value (fp32's and bf16's range: below 2^-126, twice for an addend and a result) or half fp16's
// smallest subnormal.
double underflow_error(DType dtype) { return dtype == DType::kFP16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -125); }

// (1 + u)^n - 1, rounded up well past its own error by the caller's (1 + 1e-12).
double growth(double u, int64_t n) { return std::expm1(static_cast<double>(n) * std::log1p(u)); }

}  // namespace

double any_order_bound(const AnyOrderSum& arithmetic, int64_t n, double S_computed, double truth) {
  if (n <= 0) return 0;  // no addend: the zeroed +0
  // The caller's S is itself an fp64 sum of n terms: raised by its own error bound, so that the
  // bound holds for every n, not only where that error is below the final (1 + 1e-12).
  const double S = S_computed * (1 + growth(std::ldexp(1.0, -53), n));
  const double ea = arithmetic.rounded_addends ? std::ldexp(S, -24) + static_cast<double>(n) * std::ldexp(1.0, -125) : 0;
  const double u = unit_roundoff(arithmetic.step) + (arithmetic.step == DType::kFP32 ? 0 : std::ldexp(1.0, -23));
  const double g = growth(u, n - 1);  // the first addition, to +0, is exact but for a flush
  const double es = g * (S + ea) + static_cast<double>(n) * (1 + g) * underflow_error(arithmetic.step);
  if (!(S + ea + es < overflow_threshold(arithmetic.step))) return INFINITY;  // a partial sum may overflow
  if (!std::isfinite(truth)) return 0;  // NaN or an infinity, whatever the order
  const double e64 = growth(std::ldexp(1.0, -53), n) * S;
  const double eo = arithmetic.out == arithmetic.step
                        ? 0
                        : unit_roundoff(arithmetic.out) * (std::fabs(truth) + ea + es + e64) + underflow_error(arithmetic.out);
  return (ea + es + eo + e64) * (1 + 1e-12);
}

}  // namespace bitparity
