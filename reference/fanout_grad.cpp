// fanout_grad (spec OP-11): the three clones' gradients summed by eager adds, each computed in fp32
// (ATen's opmath for bf16 and fp16) and rounded to the dtype, in the contract's order.
#include "reference/numerics.h"
#include "reference/training.h"

namespace bitparity::ref {
namespace {

// The contract's order: glm45 adds g_dispatcher + g_shared first, dsv4 g_dispatcher + g_router.
TensorMap fanout_grad(const Case& c, const char* first, const char* last) {
  const Tensor& d = *c.input("g_dispatcher");
  const Tensor& a = *c.input(first);
  const Tensor& b = *c.input(last);
  Tensor partial(d.dtype(), d.shape()), out(d.dtype(), d.shape());
  for (int64_t i = 0; i < d.numel(); ++i) {
    partial.set_f32(i, d.f32(i) + a.f32(i));
    out.set_f32(i, partial.f32(i) + b.f32(i));
  }
  return {{"d_hidden", out}};
}

TensorMap glm45(const Case& c, const ContractInfo&) { return fanout_grad(c, "g_shared", "g_router"); }
TensorMap dsv4(const Case& c, const ContractInfo&) { return fanout_grad(c, "g_router", "g_shared"); }

}  // namespace

std::vector<ImplEntry> fanout_grad_impls() {
  return {{"fanout_grad", "glm45", with_canonical_nans(glm45)}, {"fanout_grad", "dsv4", with_canonical_nans(dsv4)}};
}

}  // namespace bitparity::ref
