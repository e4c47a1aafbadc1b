#include "testing/planted_bugs.h"

#include <cmath>
#include <optional>
#include <stdexcept>

#include "ops/expert_mlp.h"
#include "ops/training.h"
#include "reference/math/device_math.h"
#include "reference/numerics.h"
#include "reference/swiglu_common.h"

namespace bitparity::testing {
namespace {

Impl reference_impl(const Registry& registry, const std::string& op, const std::string& contract) {
  const Impl* impl = registry.impl(op, "ref:" + contract);
  if (!impl) throw std::logic_error("planted bugs: no ref:" + contract + " of " + op);
  return *impl;
}

const ContractInfo& contract_info(const Registry& registry, const std::string& op, const std::string& contract) {
  const OpInfo* info = registry.op(op);
  const ContractInfo* c = info ? info->contract(contract) : nullptr;
  if (!c) throw std::logic_error("planted bugs: no contract " + contract + " of " + op);
  return *c;
}

// The reference in every direction but `direction`, where `bug` runs instead.
Impl in_direction(Impl reference, Direction direction, Impl bug) {
  return [reference, direction, bug](const Case& c, const ContractInfo& contract) {
    return c.direction == direction ? bug(c, contract) : reference(c, contract);
  };
}

// Another reference contract's arithmetic under this contract's name (an order or a rounding of the
// other framework), in one direction.
Impl swapped(const Registry& registry, const std::string& op, const std::string& contract, const std::string& donor,
             Direction direction) {
  const Impl own = reference_impl(registry, op, contract), other = reference_impl(registry, op, donor);
  const ContractInfo& donor_info = contract_info(registry, op, donor);
  // The own contract runs first, so that a case it refuses is refused here too, and the donor's
  // values come back in the own contract's dtypes: the bug is the donor's arithmetic, not its input
  // checks or its output dtypes.
  return in_direction(own, direction, [own, other, donor_info](const Case& c, const ContractInfo& contract) {
    const TensorMap expected = own(c, contract);
    TensorMap out = other(c, donor_info);
    for (auto& [name, t] : out) {
      const auto want = expected.find(name);
      if (want == expected.end() || want->second.dtype() == t.dtype() || want->second.shape() != t.shape()) continue;
      Tensor cast(want->second.dtype(), t.shape());
      for (int64_t i = 0; i < t.numel(); ++i) cast.set_f32(i, t.f32(i));
      t = cast;
    }
    return out;
  });
}

// swiglu forward with the unclamped element formula replaced; clamped elements as the reference.
Impl swiglu_forward_with(const Registry& registry, float (*element)(DType act, float a, float b)) {
  const Impl reference = reference_impl(registry, "swiglu", "megatron_eager");
  return in_direction(reference, Direction::kForward, ref::with_canonical_nans([element](const Case& c, const ContractInfo& contract) {
    const Tensor y = ref::swiglu::biased_input(c);
    const int64_t rows = y.dim(0), F = y.dim(1) / 2;
    const std::optional<double> clamp = ref::swiglu::active_clamp(c, contract.clamp_gate);
    Tensor out(y.dtype(), {rows, F});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < F; ++j) {
        const float a = y.f32(r * 2 * F + j), b = y.f32(r * 2 * F + F + j);
        out.set_f32(r * F + j, clamp ? ref::swiglu::megatron_swiglu(y.dtype(), a, b, clamp) : element(y.dtype(), a, b));
      }
    return TensorMap{{"out", out}};
  }));
}

// Megatron's d_scale: the row sum of swiglu(y) * g.to(w), here summed left to right in fp32
// instead of in PyTorch's order (rule 7).
Impl sequential_d_scale(const Registry& registry) {
  const Impl reference = reference_impl(registry, "swiglu_scale", "megatron_eager");
  return in_direction(reference, Direction::kBackward, [reference](const Case& c, const ContractInfo& contract) {
    TensorMap out = reference(c, contract);
    const Tensor& y = *c.input("y");
    const Tensor& g = *c.input("g");
    const Tensor& scale = *c.input("scale");
    const int64_t rows = y.dim(0), F = y.dim(1) / 2;
    const std::optional<double> clamp = ref::swiglu::active_clamp(c, contract.clamp_gate);
    const DType act = y.dtype(), w = scale.dtype(), chain = ref::swiglu::promote(act, w);
    Tensor& d_scale = out.at("d_scale");
    for (int64_t r = 0; r < rows; ++r) {
      float sum = 0;
      for (int64_t j = 0; j < F; ++j) {
        const float sw = ref::swiglu::megatron_swiglu(act, y.f32(r * 2 * F + j), y.f32(r * 2 * F + F + j), clamp);
        sum += round_to(chain, sw * round_to(w, g.f32(r * F + j)));
      }
      d_scale.set_f32(r, ref::canonical(round_to(w, round_to(chain, sum))));
    }
    return out;
  });
}

// d_scale of a 2-D [rows, 1] scale returned as [rows] (a sum without keepdim).
Impl d_scale_without_keepdim(const Registry& registry) {
  const Impl reference = reference_impl(registry, "swiglu_scale", "megatron_eager");
  return in_direction(reference, Direction::kBackward, [reference](const Case& c, const ContractInfo& contract) {
    TensorMap out = reference(c, contract);
    const Tensor& d_scale = out.at("d_scale");
    if (d_scale.rank() == 2) {
      Tensor flat(d_scale.dtype(), {d_scale.dim(0)});
      for (int64_t i = 0; i < d_scale.numel(); ++i) flat.set_f32(i, d_scale.f32(i));
      out["d_scale"] = flat;
    }
    return out;
  });
}

// Paddle's forward with the clamp written as comparisons, so that a NaN passes through instead of
// becoming the clamp value (fminf/fmaxf return the other operand).
Impl paddle_nan_passes_clamp(const Registry& registry) {
  const Impl reference = reference_impl(registry, "swiglu_scale", "paddle_fused");
  return in_direction(reference, Direction::kForward, ref::with_canonical_nans([](const Case& c, const ContractInfo&) {
    const Tensor& y = *c.input("y");
    const Tensor& scale = *c.input("scale");
    const int64_t rows = y.dim(0), F = y.dim(1) / 2;
    const ref::swiglu::PaddleClamp clamp = ref::swiglu::paddle_clamp(c);
    Tensor out(y.dtype(), {rows, F});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < F; ++j) {
        float g = y.f32(r * 2 * F + j), v = y.f32(r * 2 * F + F + j);
        if (clamp.on) {
          g = g > clamp.cv ? clamp.cv : g;
          v = v > clamp.cv ? clamp.cv : (v < -clamp.cv ? -clamp.cv : v);
        }
        out.set_f32(r * F + j, ((g * ref::sigmoid_f32(g)) * v) * scale.f32(r));
      }
    return TensorMap{{"out", out}};
  }));
}

// Fused AdamW with one of its fp32 steps done another way.
enum class AdamwBug { kDecayNotContracted, kCorrectlyRoundedPowf };

Impl adamw_with(const Registry& registry, AdamwBug bug) {
  const Impl reference = reference_impl(registry, "adamw_step", "megatron_eager");
  return in_direction(reference, Direction::kForward, ref::with_canonical_nans([bug](const Case& c, const ContractInfo&) {
    const ops::AdamwHyper h = ops::adamw_hyper(c);
    const float lr = static_cast<float>(h.lr), b1 = static_cast<float>(h.beta1), b2 = static_cast<float>(h.beta2);
    const float eps = static_cast<float>(h.eps), wd = static_cast<float>(h.weight_decay);
    const float t = ops::adamw_step_counter(h.step);
    const auto pow = [bug](float b, float e) {
      return bug == AdamwBug::kCorrectlyRoundedPowf ? static_cast<float>(std::pow(static_cast<double>(b), static_cast<double>(e)))
                                                    : ref::math::libdevice_powf(b, e);
    };
    const float bc1 = 1.0f - pow(b1, t), bc2 = 1.0f - pow(b2, t);
    const float bc2_sqrt = std::sqrt(bc2), step_size = lr / bc1, decay = lr * wd;
    const Tensor& param = *c.input("param");
    const Tensor& grad = *c.input("grad");
    const Tensor& exp_avg = *c.input("exp_avg");
    const Tensor& exp_avg_sq = *c.input("exp_avg_sq");
    Tensor p_out(param.dtype(), param.shape()), m_out(param.dtype(), param.shape()), v_out(param.dtype(), param.shape());
    for (int64_t i = 0; i < param.numel(); ++i) {
      float p = param.f32(i), g = grad.f32(i), m = exp_avg.f32(i), v = exp_avg_sq.f32(i);
      if (h.maximize) g = -g;
      if (wd != 0.0f) {
        if (bug == AdamwBug::kDecayNotContracted) {
          const float d = decay * p;
          p = p - d;
        } else {
          p = std::fma(-decay, p, p);
        }
      }
      m = std::fma(b1, m, std::fma(-b1, g, g));
      const float g2 = g * g;
      v = std::fma(b2, v, std::fma(-b2, g2, g2));
      const float denom = std::sqrt(v) / bc2_sqrt + eps;
      p = p - (step_size * m) / denom;
      p_out.set_f32(i, p);
      m_out.set_f32(i, m);
      v_out.set_f32(i, v);
    }
    return TensorMap{{"param", p_out}, {"exp_avg", m_out}, {"exp_avg_sq", v_out}};
  }));
}

// The aligned mode's gradient scaling as a division by dp_size instead of a product with the fp32
// reciprocal.
Impl grad_finalize_divides(const Registry& registry) {
  const Impl reference = reference_impl(registry, "grad_finalize", "megatron_aligned");
  return in_direction(reference, Direction::kForward, [reference](const Case& c, const ContractInfo& contract) {
    TensorMap out = reference(c, contract);
    const ops::GradFinalizeAttrs a = ops::grad_finalize_attrs(c);
    if (a.dp_size > 1) {
      const Tensor& g = *c.input("main_grad");
      Tensor& scaled = out.at("main_grad");
      for (int64_t i = 0; i < g.numel(); ++i) scaled.set_f32(i, ref::canonical(g.f32(i) / static_cast<float>(a.dp_size)));
    }
    return out;
  });
}

// The GEMM as a sequential loop over k: each output's products added one at a time to an
// accumulator that `add` rounds, in place of `contract`'s reference, forward only.
Impl gemm_sequential(const Registry& registry, const std::string& contract, float (*add)(float acc, float product)) {
  const Impl reference = reference_impl(registry, "gemm", contract);
  return in_direction(reference, Direction::kForward, [add](const Case& c, const ContractInfo&) {
    const Tensor& a = *c.input("a");
    const Tensor& b = *c.input("b");
    const int64_t M = a.dim(0), K = a.dim(1), N = b.dim(1);
    Tensor out(DType::kBF16, {M, N});
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        float acc = 0.0f;
        for (int64_t k = 0; k < K; ++k) acc = add(acc, a.f32(m * K + k) * b.f32(k * N + n));
        out.set_f32(m * N + n, acc);
      }
    ref::canonicalize_nans(out);
    return TensorMap{{"out", out}};
  });
}

// A CUDA-core loop: an fp32 accumulator rounded to nearest, instead of the tensor core's fused step
// over 16 products (truncation below 2^(Emax-25), toward zero).
float fp32_add(float acc, float product) { return acc + product; }
// A bf16 accumulator (each addition rounded to bf16, as a kernel that keeps its partial sums in the
// output dtype would): far outside the bound that fp32 accumulation in any order allows.
float bf16_add(float acc, float product) { return round_to(DType::kBF16, acc + product); }

// expert_mlp's reference chain without Megatron's small-M padding: an expert of 0 < M < 17 tokens
// computed at M rows.
Impl expert_mlp_unpadded(const Registry& registry) {
  std::optional<Impl> chain = ops::expert_mlp_chain(registry, "ref", "fixed_order", ops::ExpertPadding::kNone);
  if (!chain) throw std::logic_error("planted bugs: no ref:fixed_order chain of expert_mlp");
  return *chain;
}

}  // namespace

std::vector<PlantedBug> planted_bugs(const Registry& r) {
  const Direction fwd = Direction::kForward, bwd = Direction::kBackward;
  ContractInfo present_gate = contract_info(r, "swiglu", "megatron_eager");
  present_gate.clamp_gate = ClampGate::kPresent;
  const Impl swiglu_reference = reference_impl(r, "swiglu", "megatron_eager");
  std::vector<PlantedBug> bugs = {
      {"swiglu_single_rounding", "swiglu", "megatron_eager",
       "silu(a) * b rounded once, not bf(f32(bf(silu(a))) * b) (rule 1: every eager op rounds)", 2,
       swiglu_forward_with(r, [](DType act, float a, float b) { return round_to(act, ref::silu_f32(a) * b); })},
      {"swiglu_silu_rounded_sigmoid", "swiglu", "megatron_eager",
       "silu as x * bf16(sigmoid(x)) instead of F.silu's x / (1 + exp(-x)) rounded once", 2,
       swiglu_forward_with(r,
                           [](DType act, float a, float b) {
                             const float silu = round_to(act, a * round_to(act, ref::sigmoid_f32(a)));
                             return round_to(act, silu * b);
                           })},
      {"swiglu_clamp_gate_present", "swiglu", "megatron_eager",
       "the clamp applied when clamp_value is present instead of when it is > 0", 2,
       [swiglu_reference, present_gate](const Case& c, const ContractInfo&) { return swiglu_reference(c, present_gate); }},
      {"swiglu_scale_d_scale_no_keepdim", "swiglu_scale", "megatron_eager",
       "d_scale of a [rows, 1] scale returned as [rows] (the row sum without keepdim)", 2, d_scale_without_keepdim(r)},
      {"swiglu_scale_sequential_d_scale", "swiglu_scale", "megatron_eager",
       "d_scale summed left to right instead of in PyTorch's row-sum order (rule 7)", 2, sequential_d_scale(r)},
      {"swiglu_scale_nan_passes_clamp", "swiglu_scale", "paddle_fused",
       "a NaN gate or value kept instead of becoming the clamp value (fminf/fmaxf)", 2, paddle_nan_passes_clamp(r)},
      {"router_topk_bf16_denominator", "router_topk", "megatron_eager",
       "the top-k probabilities normalised by a bf16 sum instead of the fp64 denominator", 2,
       swapped(r, "router_topk", "megatron_eager", "baseline", fwd)},
      {"permute_sequential_sum", "permute", "megatron_eager",
       "d_tokens summed over the slots one rounded add at a time (index_add_) instead of sum(1) in fp32", 2,
       swapped(r, "permute", "megatron_eager", "baseline", bwd)},
      {"unpermute_sequential_sum", "unpermute", "megatron_eager",
       "the k slots of a token added one rounded add at a time (scatter_add_) instead of in fp32", 2,
       swapped(r, "unpermute", "megatron_eager", "baseline", fwd)},
      {"fanout_grad_dsv4_order", "fanout_grad", "glm45",
       "the three clones' gradients added as (dispatcher + router) + shared, DSv4's order", 2,
       swapped(r, "fanout_grad", "glm45", "dsv4", fwd)},
      {"adamw_decay_not_contracted", "adamw_step", "megatron_eager",
       "weight decay as p - (lr wd) p in two roundings instead of nvcc's fma(-(lr wd), p, p)", 2,
       adamw_with(r, AdamwBug::kDecayNotContracted)},
      {"adamw_correctly_rounded_powf", "adamw_step", "megatron_eager",
       "bias corrections with a correctly rounded pow instead of CUDA's powf (rule 12)", 2,
       adamw_with(r, AdamwBug::kCorrectlyRoundedPowf)},
      {"embedding_rounded_once", "embedding", "megatron_eager",
       "duplicate ids folded in fp32 and rounded once (F.embedding's backward) instead of rounded to the "
       "weight dtype after every addition for rows wider than 32",
       3, swapped(r, "embedding", "megatron_eager", "baseline", bwd)},  // two additions round alike
      {"cross_entropy_one_pass_order", "cross_entropy", "megatron_eager",
       "the row's max and sum of exp in one pass over 1024 lanes (online max) instead of the order of "
       "PyTorch's softmax kernel for this vocabulary size",
       2, swapped(r, "cross_entropy", "megatron_eager", "fused", fwd), 60},  // rows of up to 151552 logits
      {"grad_finalize_divides", "grad_finalize", "megatron_aligned",
       "main_grad / dp_size instead of main_grad * f32(1 / dp_size)", 2, grad_finalize_divides(r)},
      {"gemm_sequential_fp32", "gemm", "fixed_order",
       "the products added one at a time to an fp32 accumulator rounded to nearest (a CUDA-core loop) instead "
       "of the tensor core's fused step over 16 products, truncated and rounded toward zero (rule 13)",
       2, gemm_sequential(r, "fixed_order", fp32_add)},
      {"gemm_bf16_accumulator", "gemm", "cublas",
       "partial sums rounded to bf16 after every addition instead of accumulated in fp32 (outside the cublas "
       "contract's error bound)",
       2, gemm_sequential(r, "cublas", bf16_add)},
      {"expert_mlp_unpadded", "expert_mlp", "fixed_order",
       "an expert of 0 < M < 17 tokens computed at M rows instead of padded with zero rows to 32 (OP-10): d_probs "
       "takes the row sum's plan for M rows (rule 7), and zero rows meeting a non-finite weight no longer reach "
       "the weight gradients",
       2, expert_mlp_unpadded(r)},
  };
  return bugs;
}

Registry with_planted_bugs(const Registry& registry) {
  Registry out = registry;
  for (PlantedBug& bug : planted_bugs(registry)) {
    const std::string kind = "planted_" + bug.name;
    out.add_backend({kind, "test-only: " + bug.op + " " + bug.contract + " with a planted bug: " + bug.rule, nullptr});
    out.add_impl(bug.op, kind, bug.contract, std::move(bug.impl));
  }
  return out;
}

}  // namespace bitparity::testing
