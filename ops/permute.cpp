// permute: tokens to their experts (spec OP-2). Forward: the expert-major copy of the tokens;
// backward: each token's gradient, the sum of its slots' rows.
#include <vector>

#include <Eigen/Dense>
#include <unsupported/Eigen/MPRealSupport>

#include "core/error.h"
#include "core/gen.h"
#include "ops/routing.h"
#include "ops/routing_map.h"

namespace bitparity::ops {
namespace {

namespace rm = routing_map;

const char* const kMegatronFrom =
    "Megatron-LM #5335 f5b5555ec6 moe_utils.py _PermuteAlignedAutogradFn and permute() (GLM_ALIGN_BIT_EXACT); "
    "eager PyTorch 2.11 on CUDA 13.0, sm_90 (rule 7, middle-dim reduce)";
const char* const kBaselineFrom =
    "Megatron-LM core_r0.13 permute(): index_select, whose backward is index_add_ with atomics (order of arrival)";
const char* const kPaddleFrom =
    "PaddleFleet fork zrr1999/PaddleFleet@143f7b78 moe_utils.py _PermuteAlignedPyLayer, _build_aligned_gather_index";

// --- validate ----------------------------------------------------------------------------------

OutputMetas validate(const Case& c, const ContractInfo& contract) {
  const std::string who = "permute";
  if (c.direction == Direction::kForward) {
    const Tensor& tokens = rm::required(who, c, "tokens");
    const rm::Counts m = rm::read_counts(who, c.input("routing_map"));
    const int64_t H = rm::check_data(who, tokens, "tokens", m.tokens, "T = routing_map's rows");
    rm::check_counts(who, m, contract);
    return {{"permuted", {{m.entries, H}, tokens.dtype()}}};
  }
  const Tensor& d_permuted = rm::required(who, c, "d_permuted");
  const rm::Counts m = rm::read_counts(who, c.input("routing_map"));
  rm::check_counts(who, m, contract);
  const int64_t H = rm::check_data(who, d_permuted, "d_permuted", m.entries, "N = the true entries of routing_map");
  return {{"d_tokens", {{m.tokens, H}, d_permuted.dtype()}}};
}

// --- error inputs --------------------------------------------------------------------------------

constexpr int64_t kT = 2, kE = 4, kK = 2, kH = 8;

Tensor routing(int64_t T, const std::vector<int64_t>& counts = {}) { return rm::small_routing_map(T, kE, kK, counts); }

Case small_case(Direction d, int64_t T = kT) {
  Case c;
  c.op = "permute";
  c.direction = d;
  c.inputs["routing_map"] = routing(T);
  if (d == Direction::kForward) c.inputs["tokens"] = Tensor(DType::kBF16, {T, kH});
  else c.inputs["d_permuted"] = Tensor(DType::kBF16, {T * kK, kH});
  return c;
}

std::vector<ErrorInput> error_inputs(Direction d) {
  const bool fwd = d == Direction::kForward;
  const std::string data = fwd ? "tokens" : "d_permuted";
  std::vector<ErrorInput> out;
  auto add = [&](std::string name, auto edit, std::string error_class, std::string field,
                 std::vector<std::string> contracts = {}) {
    Case c = small_case(d);
    edit(c);
    out.push_back({std::move(name), std::move(c), std::move(error_class), std::move(field), std::move(contracts)});
  };
  add("unequal_k", [](Case& c) {
        c.inputs["routing_map"] = routing(kT, {2, 1});
        if (c.inputs.count("d_permuted")) c.inputs["d_permuted"] = Tensor(DType::kBF16, {3, kH});
      }, "shape", "routing_map", {"megatron_eager", "paddle_aligned"});
  out.push_back({"zero_tokens", small_case(d, 0), "shape", "routing_map", {"megatron_eager"}});
  add("routing_map_not_bool", [](Case& c) { c.inputs["routing_map"] = Tensor(DType::kI32, {kT, kE}); }, "dtype",
      "routing_map");
  add("routing_map_rank1", [](Case& c) { c.inputs["routing_map"] = Tensor(DType::kBool, {kT * kE}); }, "shape",
      "routing_map");
  add(data + "_int32", [&](Case& c) { c.inputs[data] = Tensor(DType::kI32, c.inputs[data].shape()); }, "dtype", data);
  add(data + "_rank1", [&](Case& c) { c.inputs[data] = Tensor(DType::kBF16, {c.inputs[data].numel()}); }, "shape", data);
  if (fwd) {
    add("tokens_rows_differ", [](Case& c) { c.inputs["tokens"] = Tensor(DType::kBF16, {kT + 1, kH}); }, "shape",
        "tokens");
  } else {
    add("d_permuted_rows_not_the_true_entries",
        [](Case& c) { c.inputs["d_permuted"] = Tensor(DType::kBF16, {kT * kK + 1, kH}); }, "shape", "d_permuted");
  }
  return out;
}

// --- reference inputs ----------------------------------------------------------------------------

enum : uint64_t { kSeedMap = 11, kSeedData = 12 };

Case reference_case(Direction d, int64_t T, int64_t H, int64_t E, int64_t k) {
  Case c;
  c.op = "permute";
  c.direction = d;
  c.inputs["routing_map"] = rm::large_routing_map(T, E, k, kSeedMap);
  if (d == Direction::kForward) c.inputs["tokens"] = gen::large_tensor(DType::kBF16, {T, H}, kSeedData);
  else c.inputs["d_permuted"] = gen::large_tensor(DType::kBF16, {T * k, H}, kSeedData);
  return c;
}


std::vector<ReferenceInput> reference_inputs(Direction d) {
  std::vector<ReferenceInput> out;
  for (const rm::ReferenceShape& s : rm::kReferenceShapes)
    out.push_back({rm::reference_name(s), {}, [d, s] { return reference_case(d, s.tokens, s.H, s.E, s.k); }, s.bench_only});
  return out;
}

// --- oracle: the exact values --------------------------------------------------------------------

constexpr int kExactBits = 704;  // holds any sum of up to 2^32 fp32 products exactly
using MpMatrix = Eigen::Matrix<mpfr::mpreal, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const rm::Routing r = rm::read("permute", c.input("routing_map"));
  std::map<std::string, std::vector<double>> truth;
  if (c.direction == Direction::kForward) {
    const Tensor& tokens = *c.input("tokens");
    const int64_t H = tokens.dim(1);
    std::vector<double>& permuted = truth["permuted"];
    for (int64_t p = 0; p < r.rows(); ++p)
      for (int64_t h = 0; h < H; ++h) permuted.push_back(tokens.f64(r.token_of_row[static_cast<size_t>(p)] * H + h));
    return truth;
  }
  // d_tokens[t] = the exact sum of its slots' rows of d_permuted.
  const Tensor& dp = *c.input("d_permuted");
  const int64_t H = dp.dim(1);
  std::vector<double>& d_tokens = truth["d_tokens"];
  for (int64_t t = 0; t < r.tokens; ++t) {
    const rm::Routing::Run pos = r.positions(t);
    MpMatrix slots(static_cast<Eigen::Index>(pos.size()), H);
    for (size_t j = 0; j < pos.size(); ++j)
      for (int64_t h = 0; h < H; ++h) slots(static_cast<Eigen::Index>(j), h) = mpfr::mpreal(dp.f64(pos[j] * H + h), kExactBits);
    for (int64_t h = 0; h < H; ++h) d_tokens.push_back(pos.empty() ? 0.0 : slots.col(h).sum().toDouble());
  }
  return truth;
}

}  // namespace

OpInfo permute() {
  OpInfo op;
  op.name = "permute";
  op.doc = "tokens to their experts, expert-major (Megatron _PermuteAlignedAutogradFn, PaddleFleet _PermuteAlignedPyLayer)";
  op.inputs[Direction::kForward] = {{"tokens", "[T, H] bf16, fp16 or fp32", false, true},
                                    {"routing_map", "[T, E] bool: token t goes to expert e", false, true}};
  op.inputs[Direction::kBackward] = {
      {"d_permuted", "[N, H], N = the true entries of routing_map, expert-major", false, false},
      {"routing_map", "[T, E] bool", false, true}};
  op.outputs[Direction::kForward] = {
      {"permuted", "[N, H]: for e = 0..E-1, the tokens t ascending with routing_map[t, e]; a copy", false, false}};
  op.outputs[Direction::kBackward] = {{"d_tokens", "[T, H]: each token's slot rows summed", false, true}};
  op.contracts = {
      {"megatron_eager",
       "copy forward; backward d_tokens[t] = dt(((a0+a1)+a2)+a3), a_(j mod 4) += f32(d_permuted[pos(t, e_j)]) over "
       "the token's experts e_j ascending (rule 7, middle dim; with H = 1 the last-dim row sum of [T, k]), one "
       "rounding; every row must route to row 0's k "
       "(k = 0 everywhere allowed); T = 0 refused (Megatron reads k from row 0)",
       kMegatronFrom},
      {"baseline",
       "copy forward; backward index_add_ with atomics, whose order is the order of arrival: the reference adds the "
       "token's rows in ascending position from +0, rounding to the dtype after every addition (fp32's atomic add "
       "flushes a subnormal addend or result to a zero of its sign); any experts per row, T = 0 allowed",
       kBaselineFrom, ClampGate::kNone, true},
      {"paddle_aligned",
       "megatron_eager's arithmetic; rows with no expert are padding (d_tokens row +0); the other rows share one k; "
       "T = 0 and all padding allowed. Unverified: Paddle's sum(axis=1) order (rule 7 assumed) and its topk tie rule "
       "(which experts a tied row routes to)",
       kPaddleFrom}};
  op.validate = validate;
  rm::add_routing_generators(op);
  op.error_inputs = error_inputs;
  op.reference_inputs = reference_inputs;
  op.oracle = oracle;
  return op;
}

}  // namespace bitparity::ops
