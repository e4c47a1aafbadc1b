// cross_entropy (spec OP-8): eager F.cross_entropy(logits, labels, reduction='none',
// ignore_index) of PyTorch 2.11 on CUDA, fp32, and bitparity's fused contract. Per row:
//   m = max_j x_j; S = the kernel's fp32 sum of expf(x_j ⊖ m) (cross_entropy.h); L = logf(S);
//   logp_j = (x_j ⊖ m) ⊖ L; loss = -1 ⊗ logp_t (nll_loss: -weight * input), +0 where the label is
//   ignore_index.
// Backward (nll_loss backward, then _log_softmax_backward_data on the forward's saved logp):
//   gO = -1 ⊗ g at the label (ignored rows: none); G = the row sum of gO: +0 ⊕ gO_t (every other
//   term is +0; at V = 1 too, where a g of +0 gives G = +0 and d_logits = fma(-1, +0, -0) = -0, as
//   recorded on the H200);
//   d_logits_j = fma(-expf(logp_j), G, gO_j) with gO_j = +0 off the label.
// expf and logf are libdevice's (rule 12, reference/math). Compiled with -ffp-contract=off: every
// operation here rounds once, and the fmas are explicit.
#include "reference/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/training.h"
#include "reference/math/device_math.h"
#include "reference/numerics.h"
#include "reference/training.h"

namespace bitparity::ref {

using math::MathModel;

const char* softmax_kernel_name(SoftmaxKernel kernel) {
  switch (kernel) {
    case SoftmaxKernel::kWarp: return "warp";
    case SoftmaxKernel::kReg: return "reg";
    case SoftmaxKernel::kSmem: return "smem";
    case SoftmaxKernel::kIlp: return "ilp";
  }
  return "?";
}

namespace {

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

// The halving tree v[l] = v[l] ⊕ v[l + h], h = n/2, ..., 1 (shfl_xor / shfl_down), n a power of two.
float halving_sum(std::vector<float> v) {
  for (size_t h = v.size() / 2; h >= 1; h /= 2)
    for (size_t l = 0; l < h; ++l) v[l] = v[l] + v[l + h];
  return v[0];
}

// cuda_utils::BlockReduce: a halving tree over each warp's 32 lanes, the B/32 warp totals padded
// with +0 to 32, and a halving tree over those.
float block_reduce(const std::vector<float>& acc) {
  std::vector<float> warps(32, 0.0f);
  for (size_t w = 0; w * 32 < acc.size(); ++w)
    warps[w] = halving_sum(std::vector<float>(acc.begin() + static_cast<std::ptrdiff_t>(32 * w),
                                              acc.begin() + static_cast<std::ptrdiff_t>(32 * w + 32)));
  return halving_sum(warps);
}

// ilpReduce's per-thread order (cunn_SoftMaxForward, ILP = 4), transcribed from the probes' layouts.py
// lay_ilp(V, B, shift): an unaligned head of one element per thread, then 4-vectors at 4 (t + k B),
// then a scalar tail. Adds e[index] for each index in thread order into acc[t].
void ilp_sums(const std::vector<float>& e, int64_t V, int64_t B, int64_t shift, std::vector<float>& acc) {
  constexpr int64_t kIlp = 4;
  int64_t size = V, base = 0;  // base: the original index of data[0]
  if (shift > 0) {
    base = -shift;
    size = V + shift;
    for (int64_t t = 0; t < B; ++t)
      if (t >= shift && t < size) acc[static_cast<size_t>(t)] = acc[static_cast<size_t>(t)] + e[static_cast<size_t>(base + t)];
    size -= std::min(B, size);
    base += B;
  }
  const int64_t last = size % (kIlp * B);
  for (int64_t t = 0; t < B; ++t) {
    float a = acc[static_cast<size_t>(t)];
    for (int64_t off = t; off * kIlp < size - last; off += B)
      for (int64_t j = 0; j < kIlp; ++j) a = a + e[static_cast<size_t>(base + off * kIlp + j)];
    for (int64_t off = size - last + t; off < size; off += B) a = a + e[static_cast<size_t>(base + off)];
    acc[static_cast<size_t>(t)] = a;
  }
}

}  // namespace

int64_t softmax_forward_block(int64_t V) {
  const int64_t mb = std::min<int64_t>(V, 1024);
  return mb % 32 == 0 ? mb : (mb / 32 + 1) * 32;
}

EagerForwardPlan eager_forward_plan(int64_t V) {
  EagerForwardPlan p;
  if (V <= kWarpMaxV) {
    const int64_t P = next_pow2(V);
    p.kernel = SoftmaxKernel::kWarp;
    p.threads = std::min<int64_t>(P, 32);
    p.per_thread = P / p.threads;
    return p;
  }
  p.threads = softmax_forward_block(V);
  p.per_thread = (V + 1023) / 1024;
  if (p.per_thread < 10) p.kernel = SoftmaxKernel::kReg;
  else if (V % 4 == 0 && V < kSmemLimitV) p.kernel = SoftmaxKernel::kSmem;
  else p.kernel = SoftmaxKernel::kIlp;
  return p;
}

RowStats eager_row_stats(std::span<const float> row, int64_t row_index) {
  const int64_t V = static_cast<int64_t>(row.size());
  const EagerForwardPlan plan = eager_forward_plan(V);
  RowStats st;
  // The max: the warp kernel starts from the first element, the block kernels from -FLT_MAX (with
  // fmaxf). They differ only for a row of -Inf (m = -Inf against -FLT_MAX) and where a NaN is
  // present; either way every logp of such a row is NaN (S is NaN, or S = 0 and L = -Inf).
  float m = plan.kernel == SoftmaxKernel::kWarp ? row[0] : -std::numeric_limits<float>::max();
  for (const float x : row) m = plan.kernel == SoftmaxKernel::kWarp ? (m > x ? m : x) : cuda_fmaxf(m, x);
  st.max = m;
  std::vector<float> e(row.size());
  for (size_t j = 0; j < row.size(); ++j) e[j] = row[j] - m;
  math::expf_n(MathModel::kLibdevice, e, e);
  std::vector<float> acc(static_cast<size_t>(plan.threads), 0.0f);
  switch (plan.kernel) {
    case SoftmaxKernel::kWarp:
      for (int64_t l = 0; l < plan.threads; ++l)
        for (int64_t it = 0; it < plan.per_thread; ++it) {
          const int64_t j = l + it * plan.threads;
          if (j < V) acc[static_cast<size_t>(l)] = acc[static_cast<size_t>(l)] + e[static_cast<size_t>(j)];
        }
      st.sum = halving_sum(acc);
      return st;
    case SoftmaxKernel::kReg:
      for (int64_t t = 0; t < plan.threads; ++t)
        for (int64_t r = 0; r < plan.per_thread; ++r) {
          const int64_t j = t + r * plan.threads;
          if (j < V) acc[static_cast<size_t>(t)] = acc[static_cast<size_t>(t)] + e[static_cast<size_t>(j)];
        }
      break;
    case SoftmaxKernel::kSmem:
      for (int64_t t = 0; t < plan.threads; ++t)
        for (int64_t o = t; 4 * o < V; o += plan.threads)
          for (int64_t j = 0; j < 4; ++j) acc[static_cast<size_t>(t)] = acc[static_cast<size_t>(t)] + e[static_cast<size_t>(4 * o + j)];
      break;
    case SoftmaxKernel::kIlp:
      ilp_sums(e, V, plan.threads, (row_index % 4) * (V % 4) % 4, acc);
      break;
  }
  st.sum = block_reduce(acc);
  return st;
}

namespace {

struct Online {
  float m = -kInf;
  float s = 0.0f;
};

void online_add(Online& a, float x) {
  if (x > a.m) {
    a.s = std::fma(a.s, math::libdevice_expf(math::default_ex2_tables(), a.m - x), 1.0f);
    a.m = x;
  } else if (x != -kInf) {
    a.s = a.s + math::libdevice_expf(math::default_ex2_tables(), x - a.m);
  }
}

Online combine(const Online& a, const Online& b) {
  if (b.m > a.m) return {b.m, std::fma(a.s, math::libdevice_expf(math::default_ex2_tables(), a.m - b.m), b.s)};
  if (b.m == -kInf) return a;
  return {a.m, std::fma(b.s, math::libdevice_expf(math::default_ex2_tables(), b.m - a.m), a.s)};
}

}  // namespace

RowStats fused_row_stats(std::span<const float> row) {
  const auto V = static_cast<int64_t>(row.size());
  const int64_t S = ops::fused_segment_span(V);
  std::vector<Online> segments(static_cast<size_t>(ops::kFusedSegments));
  std::vector<Online> lanes(static_cast<size_t>(ops::kFusedSegmentLanes));
  // combine(x, Online{}) is x, bit for bit: each halving step skips the pairs whose second half is
  // an empty lane (past the `used` lanes a short row fills), as it leaves the first unchanged.
  auto halve = [](std::vector<Online>& v, size_t used) {
    for (size_t h = v.size() / 2; h >= 1; h /= 2) {
      for (size_t t = 0; t + h < used; ++t) v[t] = combine(v[t], v[t + h]);
      used = std::min(used, h);
    }
  };
  size_t used_segments = 0;
  for (int64_t seg = 0; seg < ops::kFusedSegments; ++seg) {
    std::fill(lanes.begin(), lanes.end(), Online{});
    const int64_t end = std::min(V, (seg + 1) * S);
    for (int64_t j = seg * S; j < end; ++j)
      online_add(lanes[static_cast<size_t>((j - seg * S) % ops::kFusedSegmentLanes)], row[static_cast<size_t>(j)]);
    const auto filled = static_cast<size_t>(std::clamp<int64_t>(end - seg * S, 0, ops::kFusedSegmentLanes));
    halve(lanes, filled);
    segments[static_cast<size_t>(seg)] = lanes[0];
    if (filled > 0) used_segments = static_cast<size_t>(seg) + 1;
  }
  halve(segments, used_segments);
  return {segments[0].m, segments[0].s};
}

namespace {

enum class Order { kEager, kFused };

struct Rows {
  int64_t N = 0, V = 0;
  const Tensor* logits = nullptr;
  const Tensor* labels = nullptr;
  int64_t ignore_index = -100;
};

Rows rows_of(const Case& c) {
  Rows r;
  r.logits = c.input("logits");
  r.labels = c.input("labels");
  r.N = r.logits->dim(0);
  r.V = r.logits->dim(1);
  r.ignore_index = ops::cross_entropy_ignore_index(c);
  return r;
}

// logp of row i (every element), as the contract's forward writes it.
std::vector<float> log_softmax_row(const Rows& r, int64_t i, Order order, RowStats* stats_out = nullptr) {
  std::vector<float> x(static_cast<size_t>(r.V));
  for (int64_t j = 0; j < r.V; ++j) x[static_cast<size_t>(j)] = r.logits->f32(i * r.V + j);
  const RowStats st = order == Order::kEager ? eager_row_stats(x, i) : fused_row_stats(x);
  const float L = math::libdevice_logf(st.sum);
  for (float& v : x) v = (v - st.max) - L;
  if (stats_out) *stats_out = st;
  return x;
}

int64_t label(const Rows& r, int64_t i) { return static_cast<int64_t>(r.labels->bits(i)); }

TensorMap forward(const Case& c, Order order) {
  const Rows r = rows_of(c);
  Tensor loss(DType::kFP32, {r.N});
  for (int64_t i = 0; i < r.N; ++i) {
    const int64_t t = label(r, i);
    if (t == r.ignore_index) {
      loss.set_f32(i, 0.0f);
      continue;
    }
    RowStats st;
    std::vector<float> x(static_cast<size_t>(r.V));
    for (int64_t j = 0; j < r.V; ++j) x[static_cast<size_t>(j)] = r.logits->f32(i * r.V + j);
    st = order == Order::kEager ? eager_row_stats(x, i) : fused_row_stats(x);
    const float logp_t = (x[static_cast<size_t>(t)] - st.max) - math::libdevice_logf(st.sum);
    loss.set_f32(i, -1.0f * logp_t);
  }
  return {{"loss", loss}};
}

TensorMap backward(const Case& c, Order order) {
  const Rows r = rows_of(c);
  const Tensor& g = *c.input("g");
  Tensor d(DType::kFP32, {r.N, r.V});
  std::vector<float> e(static_cast<size_t>(r.V));
  for (int64_t i = 0; i < r.N; ++i) {
    const int64_t t = label(r, i);
    const bool ignored = t == r.ignore_index;
    const float gO_t = ignored ? 0.0f : -1.0f * g.f32(i);
    // The row sum of gO: +0 plus the one term, in every kernel (V = 1 included).
    const float G = ignored ? 0.0f : 0.0f + gO_t;
    const std::vector<float> logp = log_softmax_row(r, i, order);
    math::expf_n(MathModel::kLibdevice, logp, e);
    for (int64_t j = 0; j < r.V; ++j) {
      const float gO = (!ignored && j == t) ? gO_t : 0.0f;
      d.set_f32(i * r.V + j, std::fma(-e[static_cast<size_t>(j)], G, gO));
    }
  }
  return {{"d_logits", d}};
}

TensorMap run(const Case& c, Order order) {
  return c.direction == Direction::kForward ? forward(c, order) : backward(c, order);
}

TensorMap eager(const Case& c, const ContractInfo&) { return run(c, Order::kEager); }
TensorMap fused(const Case& c, const ContractInfo&) { return run(c, Order::kFused); }

}  // namespace

std::vector<ImplEntry> cross_entropy_impls() {
  return {{"cross_entropy", "megatron_eager", with_canonical_nans(eager)},
          {"cross_entropy", "fused", with_canonical_nans(fused)}};
}

}  // namespace bitparity::ref
