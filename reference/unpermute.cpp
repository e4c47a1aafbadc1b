// unpermute (spec OP-3): the forward's sum of each token's slot rows (times probs) in each
// contract's order; the backward's copy (times probs) and d_probs, a rule-7 row sum over H.
#include <span>
#include <vector>

#include "ops/routing_map.h"
#include "reference/numerics.h"
#include "reference/routing.h"

namespace bitparity::ref {

namespace {

namespace rm = ops::routing_map;

enum class Order { kRule7, kSequential };

// out[t] = the sum over the token's slots j of x_j = f32(permuted[pos(t, e_j)]), or with probs
// x_j = f32(permuted[pos(t, e_j)]) * probs[t, e_j] in fp32; a token with no slot gets +0.
// kSequential: without probs, the accumulator is the dtype (rounded after every addition); with
// probs it is fp32, rounded once at the end.
TensorMap unpermute_forward(const Case& c, Order order) {
  const Tensor& permuted = *c.input("permuted");
  const Tensor* probs = c.input("probs");
  const rm::Routing r = rm::read("unpermute", c.input("routing_map"));
  const DType dt = permuted.dtype();
  const int64_t H = permuted.dim(1);
  Tensor out(dt, {r.tokens, H});
  std::vector<float> x;
  for (int64_t t = 0; t < r.tokens; ++t) {
    const rm::Routing::Run pos = r.positions(t);
    const rm::Routing::Run experts = r.slots(t);
    x.resize(pos.size());
    for (int64_t h = 0; h < H; ++h) {
      for (size_t j = 0; j < pos.size(); ++j) {
        x[j] = permuted.f32(pos[j] * H + h);
        if (probs) x[j] = x[j] * probs->f32(t * r.experts + experts[j]);  // bf16 * fp32 -> fp32
      }
      const float sum = order == Order::kRule7 ? torch_slot_sum(x, H, r.tokens) : atomic_sum(x, probs ? DType::kFP32 : dt);
      out.set_f32(t * H + h, canonical(sum));
    }
  }
  canonicalize_nans(out);
  return {{"out", out}};
}

// Every contract's backward: F.embedding's backward accumulates d_out[t] into each pos(t, e) in
// fp32 from +0 (so a -0 becomes +0, as eager PyTorch on an H200 does, peers/torch), then with probs
// the product's backward, dt((+0 + f32(d_out[t])) * p); d_probs[t, e] is the sum over H of
// f32(d_out[t, h]) * f32(permuted[pos(t, e), h]) (the broadcast's reduction: rule 7's last-dim row
// sum in a tensor of N rows; over H = 1 a size-1 reduction, which torch returns as the product
// itself, -0 included).
TensorMap unpermute_backward(const Case& c) {
  const Tensor& d_out = *c.input("d_out");
  const Tensor* probs = c.input("probs");
  const rm::Routing r = rm::read("unpermute", c.input("routing_map"));
  const DType dt = d_out.dtype();
  const int64_t H = d_out.dim(1), N = r.rows();
  Tensor d_permuted(dt, {N, H});
  for (int64_t t = 0; t < r.tokens; ++t)
    for (size_t j = 0; j < r.positions(t).size(); ++j) {
      const int64_t p = r.positions(t)[j];
      const float w = probs ? probs->f32(t * r.experts + r.slots(t)[j]) : 1.0f;
      for (int64_t h = 0; h < H; ++h) {
        const float g = 0.0f + d_out.f32(t * H + h);  // the embedding backward's accumulation
        d_permuted.set_f32(p * H + h, canonical(probs ? g * w : g));
      }
    }
  canonicalize_nans(d_permuted);
  if (!probs) return {{"d_permuted", d_permuted}};

  const Tensor& permuted = *c.input("permuted");
  Tensor d_probs(DType::kFP32, {r.tokens, r.experts});  // +0 off the map
  std::vector<float> products(static_cast<size_t>(H));
  for (int64_t t = 0; t < r.tokens; ++t)
    for (size_t j = 0; j < r.positions(t).size(); ++j) {
      const int64_t p = r.positions(t)[j];
      for (int64_t h = 0; h < H; ++h) products[static_cast<size_t>(h)] = d_out.f32(t * H + h) * permuted.f32(p * H + h);
      const float sum = H == 1 ? products[0] : torch_row_sum(products, N);
      d_probs.set_f32(t * r.experts + r.slots(t)[j], canonical(sum));
    }
  canonicalize_nans(d_probs);
  return {{"d_permuted", d_permuted}, {"d_probs", d_probs}};
}

// megatron_eager and paddle_aligned: F.embedding(rev, Z).reshape(T, k, H).sum(1) (rule 7).
TensorMap unpermute_aligned(const Case& c, const ContractInfo&) {
  return c.direction == Direction::kForward ? unpermute_forward(c, Order::kRule7) : unpermute_backward(c);
}

// baseline: scatter_add_ into an out of the dtype (or fp32 with probs), ascending position; fp32's
// atomic add flushes subnormals (atomic_sum).
TensorMap unpermute_baseline(const Case& c, const ContractInfo&) {
  return c.direction == Direction::kForward ? unpermute_forward(c, Order::kSequential) : unpermute_backward(c);
}

}  // namespace

std::vector<ImplEntry> unpermute_impls() {
  return {{"unpermute", "megatron_eager", unpermute_aligned},
          {"unpermute", "baseline", unpermute_baseline},
          {"unpermute", "paddle_aligned", unpermute_aligned}};
}

}  // namespace bitparity::ref
