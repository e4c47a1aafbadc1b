// permute (spec OP-2): the forward copy, and the backward's sum of each token's slot rows in each
// contract's order. Also the two slot-sum orders that unpermute's forward shares (the same sum).
#include <cstring>
#include <span>
#include <vector>

#include "ops/routing_map.h"
#include "reference/math/device_math.h"
#include "reference/numerics.h"
#include "reference/routing.h"

namespace bitparity::ref {
namespace routing_sums {

// Rule 7, middle-dim reduce of [T, k, H] over k: one thread per output with four fp32
// accumulators, acc[j mod 4] += x_j for j ascending, each from +0, combined left to right.
float rule7_slot_sum(std::span<const float> x) {
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (size_t j = 0; j < x.size(); ++j) acc[j % 4] += x[j];
  return ((acc[0] + acc[1]) + acc[2]) + acc[3];
}

// The aligned contracts' slot sum of [T, k, H] over k. With H = 1 the slot dimension is the
// innermost one and torch reduces it as a last-dim row sum of [T, k] (rule 7's lane model, rows =
// T); otherwise it is the middle-dim reduce above. (Eager PyTorch 2.11 on an H200, peers/torch.)
float aligned_slot_sum(std::span<const float> x, int64_t H, int64_t T) {
  return H == 1 ? torch_row_sum(x, T) : rule7_slot_sum(x);
}

// The order the reference fixes for the atomic baselines: ascending position from +0, the
// accumulator rounded to `each` after every addition (fp32: a plain sequential fp32 sum).
float sequential_sum(std::span<const float> x, DType each) {
  float acc = 0.0f;
  for (float v : x) acc = round_to(each, acc + v);
  return acc;
}

// An arithmetic result as the GPU's fp32 units return it: a NaN is the canonical 0x7FFFFFFF.
float canonical(float v) { return v != v ? f32_from_bits(math::kCanonicalNanBits) : v; }

}  // namespace routing_sums

namespace {

namespace rm = ops::routing_map;
using namespace routing_sums;

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
    const std::vector<int64_t>& pos = r.positions[static_cast<size_t>(t)];
    x.resize(pos.size());
    for (int64_t h = 0; h < H; ++h) {
      for (size_t j = 0; j < pos.size(); ++j) x[j] = dp.f32(pos[j] * H + h);
      const float sum = order == Order::kRule7 ? aligned_slot_sum(x, H, r.tokens) : sequential_sum(x, dt);
      d_tokens.set_f32(t * H + h, canonical(sum));
    }
  }
  return {{"d_tokens", d_tokens}};
}

// megatron_eager and paddle_aligned: dY.float().index_select(0, rev).reshape(T, k, H).sum(1).to(dt).
TensorMap permute_aligned(const Case& c, const ContractInfo&) {
  return c.direction == Direction::kForward ? permute_forward(c) : permute_backward(c, Order::kRule7);
}

// baseline: index_select's backward, index_add_ into a d_tokens of the dtype (atomics; the
// reference's order is ascending position, which for one token is ascending expert id).
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
