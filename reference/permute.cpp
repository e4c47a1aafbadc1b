// permute (spec OP-2): the forward copy, and the backward's sum of each token's slot rows in each
// contract's order (the sums themselves are in reference/numerics.h, shared with unpermute).
#include <cstring>
#include <span>
#include <vector>

#include "ops/routing_map.h"
#include "reference/numerics.h"
#include "reference/routing.h"

namespace bitparity::ref {

namespace {

namespace rm = ops::routing_map;

// permuted[p] = tokens[token_of_row[p]]: every contract's forward, bits copied.
TensorMap permute_forward(const Case& c) {
  const Tensor& tokens = *c.input("tokens");
  const rm::Routing r = rm::read("permute", c.input("routing_map"));
  const int64_t H = tokens.dim(1);
  Tensor permuted(tokens.dtype(), {r.rows(), H});
  const size_t row_bytes = static_cast<size_t>(H * dtype_size(tokens.dtype()));
  for (int64_t p = 0; p < r.rows(); ++p)
    if (row_bytes > 0)
      std::memcpy(permuted.data() + static_cast<size_t>(p) * row_bytes,
                  tokens.data() + static_cast<size_t>(r.token_of_row[static_cast<size_t>(p)]) * row_bytes, row_bytes);
  return {{"permuted", permuted}};
}

enum class Order { kRule7, kSequentialRounded };

// d_tokens[t] = the sum of d_permuted's rows pos(t, e_j) over the token's slots j; a token with no
// slot (padding, k = 0) gets +0.
TensorMap permute_backward(const Case& c, Order order) {
  const Tensor& dp = *c.input("d_permuted");
  const rm::Routing r = rm::read("permute", c.input("routing_map"));
  const DType dt = dp.dtype();
  const int64_t H = dp.dim(1);
  Tensor d_tokens(dt, {r.tokens, H});
  std::vector<float> x;
  for (int64_t t = 0; t < r.tokens; ++t) {
    const rm::Routing::Run pos = r.positions(t);
    x.resize(pos.size());
    for (int64_t h = 0; h < H; ++h) {
      for (size_t j = 0; j < pos.size(); ++j) x[j] = dp.f32(pos[j] * H + h);
      const float sum = order == Order::kRule7 ? torch_slot_sum(x, H, r.tokens) : atomic_sum(x, dt);
      d_tokens.set_f32(t * H + h, canonical(sum));
    }
  }
  canonicalize_nans(d_tokens);
  return {{"d_tokens", d_tokens}};
}

// megatron_eager and paddle_aligned: dY.float().index_select(0, rev).reshape(T, k, H).sum(1).to(dt).
TensorMap permute_aligned(const Case& c, const ContractInfo&) {
  return c.direction == Direction::kForward ? permute_forward(c) : permute_backward(c, Order::kRule7);
}

// baseline: index_select's backward, index_add_ into a d_tokens of the dtype (atomics; the
// reference's order is ascending position, which for one token is ascending expert id; fp32's
// atomic add flushes subnormals, atomic_sum).
TensorMap permute_baseline(const Case& c, const ContractInfo&) {
  return c.direction == Direction::kForward ? permute_forward(c) : permute_backward(c, Order::kSequentialRounded);
}

}  // namespace

std::vector<ImplEntry> permute_impls() {
  return {{"permute", "megatron_eager", permute_aligned},
          {"permute", "baseline", permute_baseline},
          {"permute", "paddle_aligned", permute_aligned}};
}

}  // namespace bitparity::ref
