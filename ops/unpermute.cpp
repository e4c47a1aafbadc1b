// unpermute: the experts' rows back to their tokens (spec OP-3). Forward: each token's slot rows
// summed (times its probs, when given); backward: the token's gradient copied to each slot row
// (times the prob), and d_probs, the dot product of the gradient with each slot row.
#include <vector>

#include <Eigen/Dense>
#include <unsupported/Eigen/MPRealSupport>

#include "core/error.h"
#include "core/gen.h"
#include "core/random.h"
#include "ops/routing.h"
#include "ops/routing_map.h"

namespace bitparity::ops {
namespace {

namespace rm = routing_map;

const char* const kMegatronFrom =
    "Megatron-LM #5335 f5b5555ec6 moe_utils.py unpermute() (F.embedding gather, reshape, sum(dim=1); probs "
    "applied first) under GLM_ALIGN_BIT_EXACT; eager PyTorch 2.11 on CUDA 13.0, sm_90 (rule 7)";
const char* const kBaselineFrom =
    "Megatron-LM main d98e8a64dd unpermute(): scatter_add_ / index_add_ with atomics (PR #7149), order of arrival";
const char* const kPaddleFrom =
    "PaddleFleet fork zrr1999/PaddleFleet@143f7b78 moe_utils.py _UnpermuteGatherSumAlignedPyLayer";

// --- validate ----------------------------------------------------------------------------------

OutputMetas validate(const Case& c, const ContractInfo& contract) {
  const std::string who = "unpermute";
  const Tensor* probs = c.input("probs");
  if (c.direction == Direction::kForward) {
    const Tensor& permuted = rm::required(who, c, "permuted");
    const rm::Counts m = rm::read_counts(who, c.input("routing_map"));
    rm::check_counts(who, m, contract);
    const int64_t H = rm::check_data(who, permuted, "permuted", m.entries, "N = the true entries of routing_map");
    if (probs) rm::check_probs(who, *probs, m);
    return {{"out", {{m.tokens, H}, permuted.dtype()}}};
  }
  const Tensor& d_out = rm::required(who, c, "d_out");
  const rm::Counts m = rm::read_counts(who, c.input("routing_map"));
  const int64_t H = rm::check_data(who, d_out, "d_out", m.tokens, "T = routing_map's rows");
  rm::check_counts(who, m, contract);
  if (probs) rm::check_probs(who, *probs, m);
  const Tensor* permuted = c.input("permuted");
  if (probs && !permuted)
    throw RejectError("shape", who + ": permuted is required in the backward when probs is given (d_probs reads it)");
  if (permuted) {
    rm::check_data(who, *permuted, "permuted", m.entries, "N = the true entries of routing_map");
    if (permuted->dim(1) != H)
      throw RejectError("shape", who + ": permuted must have d_out's width H = " + std::to_string(H) + "; got " +
                                     shape_string(permuted->shape()));
    if (permuted->dtype() != d_out.dtype())
      throw RejectError("dtype", who + ": permuted must have d_out's dtype " + std::string(dtype_name(d_out.dtype())) +
                                     " (out has permuted's dtype); got " + std::string(dtype_name(permuted->dtype())));
  }
  OutputMetas metas = {{"d_permuted", {{m.entries, H}, d_out.dtype()}}};
  if (probs) metas["d_probs"] = {{m.tokens, m.experts}, DType::kFP32};
  return metas;
}

// --- error inputs --------------------------------------------------------------------------------

constexpr int64_t kT = 2, kE = 4, kK = 2, kH = 8;

Tensor routing(int64_t T, const std::vector<int64_t>& counts = {}) { return rm::small_routing_map(T, kE, kK, counts); }

// A well-formed case of T tokens with probs; the error inputs each break one thing.
Case small_case(Direction d, int64_t T = kT) {
  Case c;
  c.op = "unpermute";
  c.direction = d;
  c.inputs["routing_map"] = routing(T);
  c.inputs["probs"] = Tensor(DType::kFP32, {T, kE});
  c.inputs["permuted"] = Tensor(DType::kBF16, {T * kK, kH});
  if (d == Direction::kBackward) c.inputs["d_out"] = Tensor(DType::kBF16, {T, kH});
  return c;
}

std::vector<ErrorInput> error_inputs(Direction d) {
  const bool bwd = d == Direction::kBackward;
  std::vector<ErrorInput> out;
  auto add = [&](std::string name, auto edit, std::string error_class, std::string field,
                 std::vector<std::string> contracts = {}) {
    Case c = small_case(d);
    edit(c);
    out.push_back({std::move(name), std::move(c), std::move(error_class), std::move(field), std::move(contracts)});
  };
  add("unequal_k", [](Case& c) {
        c.inputs["routing_map"] = routing(kT, {2, 1});
        c.inputs["permuted"] = Tensor(DType::kBF16, {3, kH});
      }, "shape", "routing_map", {"megatron_eager", "paddle_aligned"});
  out.push_back({"zero_tokens", small_case(d, 0), "shape", "routing_map", {"megatron_eager"}});
  add("routing_map_not_bool", [](Case& c) { c.inputs["routing_map"] = Tensor(DType::kFP32, {kT, kE}); }, "dtype",
      "routing_map");
  add("routing_map_narrower_than_probs", [](Case& c) { c.inputs["probs"] = Tensor(DType::kFP32, {kT, kE + 1}); },
      "shape", "probs");
  add("probs_bf16", [](Case& c) { c.inputs["probs"] = Tensor(DType::kBF16, {kT, kE}); }, "dtype", "probs");
  add("permuted_rows_not_the_true_entries",
      [](Case& c) { c.inputs["permuted"] = Tensor(DType::kBF16, {kT * kK - 1, kH}); }, "shape", "permuted");
  add("permuted_int32", [](Case& c) { c.inputs["permuted"] = Tensor(DType::kI32, {kT * kK, kH}); }, "dtype", "permuted");
  if (bwd) {
    add("H_mismatch", [](Case& c) { c.inputs["permuted"] = Tensor(DType::kBF16, {kT * kK, kH + 1}); }, "shape",
        "permuted");
    add("probs_without_permuted", [](Case& c) { c.inputs.erase("permuted"); }, "shape", "permuted");
    add("d_out_rows_differ", [](Case& c) { c.inputs["d_out"] = Tensor(DType::kBF16, {kT + 1, kH}); }, "shape", "d_out");
    add("permuted_other_dtype", [](Case& c) { c.inputs["permuted"] = Tensor(DType::kFP32, {kT * kK, kH}); }, "dtype",
        "permuted");
  }
  return out;
}

// --- reference inputs ----------------------------------------------------------------------------

enum : uint64_t { kSeedMap = 21, kSeedData = 22, kSeedProbs = 23, kSeedPermuted = 24 };

// The router's probs: on every routed entry a positive value in [1/16, 1), +0 elsewhere.
Tensor router_like_probs(const Tensor& map, uint64_t seed) {
  constexpr double kMinProb = 1.0 / 16;
  Tensor probs(DType::kFP32, map.shape());
  for (int64_t i = 0; i < map.numel(); ++i) {
    if (!map.bits(i)) continue;
    const double u = static_cast<double>(splitmix64_mix(seed + static_cast<uint64_t>(i)) >> 11) * 0x1p-53;
    probs.set_f32(i, static_cast<float>(kMinProb + (1.0 - kMinProb) * u));
  }
  return probs;
}

Case reference_case(Direction d, int64_t T, int64_t H, int64_t E, int64_t k, bool with_probs) {
  Case c;
  c.op = "unpermute";
  c.direction = d;
  const Tensor map = rm::large_routing_map(T, E, k, kSeedMap);
  c.inputs["routing_map"] = map;
  if (with_probs) c.inputs["probs"] = router_like_probs(map, kSeedProbs);
  if (d == Direction::kForward) {
    c.inputs["permuted"] = gen::large_tensor(DType::kBF16, {T * k, H}, kSeedData);
  } else {
    c.inputs["d_out"] = gen::large_tensor(DType::kBF16, {T, H}, kSeedData);
    if (with_probs) c.inputs["permuted"] = gen::large_tensor(DType::kBF16, {T * k, H}, kSeedPermuted);
  }
  return c;
}

std::vector<ReferenceInput> reference_inputs(Direction d) {
  std::vector<ReferenceInput> out;
  for (const rm::ReferenceShape& s : rm::kReferenceShapes)
    for (const bool with_probs : {false, true}) {
      const std::string name = rm::reference_name(s) + (with_probs ? "_probs" : "");
      out.push_back({name, {}, [d, s, with_probs] { return reference_case(d, s.tokens, s.H, s.E, s.k, with_probs); },
                     s.bench_only});
    }
  return out;
}

// --- oracle: the exact values --------------------------------------------------------------------

constexpr int kExactBits = 704;  // holds any sum of up to 2^32 fp32 products exactly
using MpMatrix = Eigen::Matrix<mpfr::mpreal, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MpRow = Eigen::Matrix<mpfr::mpreal, 1, Eigen::Dynamic>;

MpRow exact_row(const Tensor& t, int64_t row) {
  const int64_t H = t.dim(1);
  MpRow v(H);
  for (int64_t h = 0; h < H; ++h) v(h) = mpfr::mpreal(t.f64(row * H + h), kExactBits);
  return v;
}

double prob(const Tensor* probs, const rm::Routing& r, int64_t t, int64_t e) {
  return probs ? probs->f64(t * r.experts + e) : 1.0;
}

std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const rm::Routing r = rm::read("unpermute", c.input("routing_map"));
  const Tensor* probs = c.input("probs");
  std::map<std::string, std::vector<double>> truth;
  if (c.direction == Direction::kForward) {
    // out[t] = the exact sum over the token's slots of permuted[pos(t, e)] (times probs[t, e]).
    const Tensor& permuted = *c.input("permuted");
    const int64_t H = permuted.dim(1);
    std::vector<double>& out = truth["out"];
    for (int64_t t = 0; t < r.tokens; ++t) {
      const rm::Routing::Run s = r.slots(t);
      MpMatrix terms(static_cast<Eigen::Index>(s.size()), H);
      for (size_t j = 0; j < s.size(); ++j)
        terms.row(static_cast<Eigen::Index>(j)) =
            exact_row(permuted, r.positions(t)[j]) * mpfr::mpreal(prob(probs, r, t, s[j]), kExactBits);
      for (int64_t h = 0; h < H; ++h) out.push_back(s.empty() ? 0.0 : terms.col(h).sum().toDouble());
    }
    return truth;
  }
  const Tensor& d_out = *c.input("d_out");
  const int64_t H = d_out.dim(1);
  std::vector<double>& d_permuted = truth["d_permuted"];
  d_permuted.assign(static_cast<size_t>(r.rows() * H), 0.0);
  for (int64_t t = 0; t < r.tokens; ++t)
    for (size_t j = 0; j < r.slots(t).size(); ++j) {
      const int64_t p = r.positions(t)[j];
      const double w = prob(probs, r, t, r.slots(t)[j]);
      for (int64_t h = 0; h < H; ++h) d_permuted[static_cast<size_t>(p * H + h)] = d_out.f64(t * H + h) * w;  // exact: 24 x 24 bits
    }
  if (!probs) return truth;
  // d_probs[t, e] = the exact dot product of d_out[t] with permuted[pos(t, e)]; 0 off the map.
  const Tensor& permuted = *c.input("permuted");
  std::vector<double>& d_probs = truth["d_probs"];
  d_probs.assign(static_cast<size_t>(r.tokens * r.experts), 0.0);
  for (int64_t t = 0; t < r.tokens; ++t) {
    const MpRow g = exact_row(d_out, t);
    for (size_t j = 0; j < r.slots(t).size(); ++j) {
      const MpRow z = exact_row(permuted, r.positions(t)[j]);
      d_probs[static_cast<size_t>(t * r.experts + r.slots(t)[j])] =
          H == 0 ? 0.0 : g.cwiseProduct(z).sum().toDouble();
    }
  }
  return truth;
}

}  // namespace

OpInfo unpermute() {
  OpInfo op;
  op.name = "unpermute";
  op.doc = "the experts' rows back to their tokens, summed (Megatron unpermute(), PaddleFleet "
           "_UnpermuteGatherSumAlignedPyLayer), optionally times probs";
  op.inputs[Direction::kForward] = {
      {"permuted", "[N, H] bf16, fp16 or fp32, N = the true entries of routing_map, expert-major", false, false},
      {"routing_map", "[T, E] bool: token t goes to expert e", false, true},
      {"probs", "[T, E] fp32: each slot's row is multiplied by probs[t, e] before the sum", true, true}};
  op.inputs[Direction::kBackward] = {
      {"d_out", "[T, H] gradient of out", false, true},
      {"routing_map", "[T, E] bool", false, true},
      {"probs", "[T, E] fp32", true, true},
      {"permuted", "[N, H] the forward's input; required with probs (d_probs reads it)", true, false}};
  op.outputs[Direction::kForward] = {{"out", "[T, H] in permuted's dtype", false, true}};
  op.outputs[Direction::kBackward] = {
      {"d_permuted", "[N, H] in d_out's dtype: d_out[t] (times probs[t, e]) at pos(t, e)", false, false},
      {"d_probs", "[T, E] fp32, with probs only: the rule-7 row sum over H of d_out[t] * permuted[pos(t, e)] in a "
                  "tensor of N rows, so its order depends on the number of routed pairs; +0 off the map",
       true, true, true}};
  op.contracts = {
      {"megatron_eager",
       "out[t] = dt(((a0+a1)+a2)+a3), a_(j mod 4) += x_j over the token's experts e_j ascending (rule 7, middle "
       "dim; with H = 1 the last-dim row sum of [T, k]), x_j = f32(permuted[pos(t, e_j)]) or, with probs, that "
       "times probs[t, e_j] in fp32; backward d_permuted = dt(+0 + f32(d_out[t])) (the embedding backward's fp32 "
       "accumulation: -0 becomes +0), with probs times p; d_probs the rule-7 last-dim row sum over H with rows = "
       "N (H = 1: the product itself); every row must route to row 0's k; T = 0 refused",
       kMegatronFrom},
      {"baseline",
       "scatter_add_ with atomics, whose order is the order of arrival: the reference adds the token's rows in "
       "ascending position from +0, rounding to the dtype after every addition; with probs the fp32 products are "
       "summed in fp32 in that order and rounded once (fp32's atomic add flushes a subnormal addend or result to "
       "a zero of its sign); backward as megatron_eager; any experts per row, T = 0 allowed",
       kBaselineFrom, ClampGate::kNone, true},
      {"paddle_aligned",
       "megatron_eager's arithmetic; rows with no expert are padding (out row +0, d_probs row +0); the other rows "
       "share one k; T = 0 and all padding allowed. Unverified: Paddle's sum(axis=1) order (rule 7 assumed) and "
       "its topk tie rule (which experts a tied row routes to)",
       kPaddleFrom}};
  op.validate = validate;
  rm::add_routing_generators(op);
  op.error_inputs = error_inputs;
  op.reference_inputs = reference_inputs;
  op.oracle = oracle;
  return op;
}

}  // namespace bitparity::ops
