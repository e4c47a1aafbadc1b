// The kernel records of the routing ops (spec OP-1, OP-2, OP-3): each binds its launcher
// (gpu/routing_kernels.h) to device tensors. The ops' validate has checked the inputs and fixed
// the output shapes; what is left here is each contract's own reading of the case: the router's
// attributes, whether a baseline sums in order of arrival (ContractInfo::order_of_arrival), rule 7's
// plans, and the device workspace of the index, allocated at bind so that a launch allocates
// nothing.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "gpu/common/device_tensor.h"
#include "gpu/common/row_sum.h"
#include "gpu/records.h"
#include "gpu/routing_kernels.h"
#include "gpu/runtime.h"
#include "ops/routing_map.h"

namespace bitparity::gpu {
namespace {

static_assert(kIndexOneKernelExperts == ops::routing_map::kOneKernelExperts,
              "the op's index:one_kernel tag names the maps the CUDA index builds in one kernel");
static_assert(kIndexPlaceSumsCounts == ops::routing_map::kPlaceSumsCounts,
              "the op's index:two_kernels tag names the maps the CUDA index builds in two kernels");
static_assert(kCopyRowsTokenBlockVectors == ops::routing_map::kCopyRowsTokenBlockVectors,
              "the op's copy_rows:token_blocks tag names the rows copy_rows takes a block per token");

using Workspace = std::shared_ptr<DeviceBuffer>;

// The launch's workspace: the thread's where the launch is on its stream (launch_workspace).
Workspace workspace_of(size_t bytes, const KernelArgs& k) { return launch_workspace(bytes, k.stream); }

const void* data_or_null(const DeviceTensor* t) { return t ? t->data() : nullptr; }

// --- permute and unpermute ----------------------------------------------------------------------

// routing_map is [T, E] and the token rows [*, H] (validate); N is the permuted rows' count.
RoutingCommon routing_common(const KernelArgs& k, const DeviceTensor& rows, int64_t N) {
  const DeviceTensor& map = required(k.inputs, "routing_map");
  RoutingCommon r;
  r.shape.dtype = rows.dtype;
  r.shape.T = map.shape.at(0);
  r.shape.E = map.shape.at(1);
  r.shape.N = N;
  r.shape.H = rows.shape.at(1);
  r.routing_map = map.data();
  r.ilp = k.ilp;
  r.stream = k.stream;
  return r;
}

// The aligned contracts' slot sum at H == 1: torch reduces the k slots of [T, k, 1] as the last
// dim of [T, k], rule 7 with rows T. Every routed token has the same k (validate: megatron_eager,
// and paddle_aligned's non-padding rows), read from the map here: the case's own host copy where
// it still holds one (a staged batch's bind then makes no round trip to the device between its
// cases), else the device tensor downloaded (a benchmark's case drops its host inputs once
// uploaded). Rule 7 rejects ("unmodelled") the widths it does not model. No plan where no token is
// routed (every sum is empty: +0).
RowSumPlan slot_row_plan(const KernelArgs& k, const RoutingShape& shape) {
  if (k.contract.order_of_arrival || shape.H != 1 || shape.T == 0 || shape.N == 0) return {};
  const DeviceTensor& device = required(k.inputs, "routing_map");
  const auto host = k.c.inputs.find("routing_map");
  const bool on_host =
      host != k.c.inputs.end() && host->second.dtype() == device.dtype && host->second.shape() == device.shape;
  std::optional<Tensor> downloaded;
  const Tensor* map = on_host ? &host->second : &downloaded.emplace(download(device));
  const ops::routing_map::Counts counts = ops::routing_map::read_counts(k.c.op, map);  // T > 0 rows
  return rule7_row_sum_plan(*std::max_element(counts.per_row.begin(), counts.per_row.end()), shape.T);
}

BoundLaunch bind_permute(const KernelArgs& k) {
  if (k.c.direction == Direction::kForward) {
    const DeviceTensor& permuted = required(k.outputs, "permuted");
    PermuteForward p;
    p.r = routing_common(k, required(k.inputs, "tokens"), permuted.shape.at(0));
    p.tokens = required(k.inputs, "tokens").data();
    p.permuted = permuted.data();
    const Workspace ws = workspace_of(routing_workspace_bytes(p.r.shape), k);
    p.r.workspace = ws->get();
    return [p, ws] { launch_permute_forward(p); };
  }
  const DeviceTensor& d_permuted = required(k.inputs, "d_permuted");
  PermuteBackward p;
  p.r = routing_common(k, d_permuted, d_permuted.shape.at(0));
  p.order_of_arrival = k.contract.order_of_arrival;
  p.slot_plan = slot_row_plan(k, p.r.shape);
  p.d_permuted = d_permuted.data();
  p.d_tokens = required(k.outputs, "d_tokens").data();
  const Workspace ws = workspace_of(routing_workspace_bytes(p.r.shape), k);
  p.r.workspace = ws->get();
  return [p, ws] { launch_permute_backward(p); };
}

BoundLaunch bind_unpermute(const KernelArgs& k) {
  const DeviceTensor* probs = optional(k.inputs, "probs");
  if (k.c.direction == Direction::kForward) {
    const DeviceTensor& permuted = required(k.inputs, "permuted");
    UnpermuteForward p;
    p.r = routing_common(k, permuted, permuted.shape.at(0));
    p.order_of_arrival = k.contract.order_of_arrival;
    p.slot_plan = slot_row_plan(k, p.r.shape);
    p.permuted = permuted.data();
    p.probs = data_or_null(probs);
    p.out = required(k.outputs, "out").data();
    const bool fp32_rows = p.order_of_arrival && probs && permuted.dtype != DType::kFP32;
    const Workspace ws = workspace_of(routing_workspace_bytes(p.r.shape, fp32_rows), k);
    p.r.workspace = ws->get();
    return [p, ws] { launch_unpermute_forward(p); };
  }
  const DeviceTensor& d_out = required(k.inputs, "d_out");
  const DeviceTensor& d_permuted = required(k.outputs, "d_permuted");
  UnpermuteBackward p;
  p.r = routing_common(k, d_out, d_permuted.shape.at(0));
  p.d_out = d_out.data();
  p.d_permuted = d_permuted.data();
  if (probs) {
    p.probs = probs->data();
    p.permuted = required(k.inputs, "permuted").data();
    p.d_probs = required(k.outputs, "d_probs").data();
    // Rule 7 has no plan for an empty row (the empty sum is +0) and rejects what it does not model;
    // over H == 1 there is no reduction (d_probs is the product).
    if (p.r.shape.N > 0 && p.r.shape.H > 1) p.plan = rule7_row_sum_plan(p.r.shape.H, p.r.shape.N);
  }
  const Workspace ws = workspace_of(routing_workspace_bytes(p.r.shape), k);
  p.r.workspace = ws->get();
  return [p, ws] { launch_unpermute_backward(p); };
}

// --- router_topk ------------------------------------------------------------------------------------

constexpr const char* kScoreSigmoid = "sigmoid";
constexpr const char* kScoreSqrtSoftplus = "sqrt_softplus";

int64_t k_attr(const Case& c) {
  const auto it = c.attrs.find("k");
  if (it != c.attrs.end()) {
    if (const int64_t* i = std::get_if<int64_t>(&it->second)) return *i;
    if (const double* d = std::get_if<double>(&it->second)) return static_cast<int64_t>(*d);
  }
  throw std::logic_error("router_topk: a case without the integer attribute k passed validate");
}

RouterScore score_attr(const Case& c) {
  const auto it = c.attrs.find("score");
  if (it == c.attrs.end()) return RouterScore::kSigmoid;
  const std::string* name = std::get_if<std::string>(&it->second);
  if (name && *name == kScoreSigmoid) return RouterScore::kSigmoid;
  if (name && *name == kScoreSqrtSoftplus) return RouterScore::kSqrtSoftplus;
  throw std::logic_error("router_topk: a score attribute other than sigmoid or sqrt_softplus passed validate");
}

// The fields every router launch shares: logits [T, E], the attributes, the slot sums' plan.
RouterCommon router_common(const KernelArgs& k) {
  const DeviceTensor& logits = required(k.inputs, "logits");
  const DeviceTensor* bias = optional(k.inputs, "bias");
  RouterCommon r;
  r.dtype = logits.dtype;
  r.T = logits.shape.at(0);
  r.E = logits.shape.at(1);
  r.k = k_attr(k.c);
  if (r.k > kRouterMaxSlots)
    throw RejectError("unmodelled", "router_topk: the slot sums are modelled for k <= " +
                                        std::to_string(kRouterMaxSlots) + " (rule 7's lane count is then P2(k)); got k = " +
                                        std::to_string(r.k));
  r.score = score_attr(k.c);
  // Megatron's `if scale:`: absent or 0 means none; any other value (NaN included) scales.
  const std::optional<double> scaling = k.c.float_attr("scaling");
  r.scaled = scaling.has_value() && *scaling != 0.0;
  r.scale = r.scaled ? static_cast<float>(*scaling) : 1.0f;
  // D and dD: rule 7, last-dim sums of the k slot values in a tensor of T rows.
  if (r.k > 1 && r.T > 0) r.plan = rule7_row_sum_plan(r.k, r.T);
  r.logits = logits.data();
  r.bias = static_cast<const float*>(data_or_null(bias));
  r.stream = k.stream;
  return r;
}

// probs and d_probs are fp32 when k > 1, else the logits' dtype (validate's OutputMetas agree).
void require_probs_dtype(const RouterCommon& r, const DeviceTensor& t, const char* name) {
  const DType expected = r.k > 1 ? DType::kFP32 : r.dtype;
  if (t.dtype != expected)
    throw std::logic_error(std::string("router_topk: ") + name + " of dtype " + std::string(dtype_name(t.dtype)) +
                           " where the megatron_eager kernels write " + std::string(dtype_name(expected)));
}

BoundLaunch bind_router_topk(const KernelArgs& k) {
  if (k.c.direction == Direction::kForward) {
    RouterForward p;
    p.r = router_common(k);
    const DeviceTensor& probs = required(k.outputs, "probs");
    require_probs_dtype(p.r, probs, "probs");
    p.probs = probs.data();
    p.routing_map = required(k.outputs, "routing_map").data();
    const Workspace ws = workspace_of(router_workspace_bytes(p.r.T, p.r.E, p.r.k), k);
    p.r.workspace = ws->get();
    return [p, ws] { launch_router_forward(p); };
  }
  RouterBackward p;
  p.r = router_common(k);
  p.gather_path = p.r.bias != nullptr;  // bias present: gather (dS = +0 + dG); absent: topk (-0 kept)
  const DeviceTensor& d_probs = required(k.inputs, "d_probs");
  require_probs_dtype(p.r, d_probs, "d_probs");
  p.topk_idx = static_cast<const int64_t*>(required(k.inputs, "topk_idx").data());
  p.d_probs = d_probs.data();
  p.d_logits = required(k.outputs, "d_logits").data();
  return [p] { launch_router_backward(p); };
}

// --- the kernels' paths (KernelRecord::paths; the tags of ops/router_topk.cpp, ops/routing_map.cpp) --

using Paths = std::vector<std::string>;

// The router (router_topk.cu): nothing on zero tokens; the forward's scores in 2, 4 or 8 registers
// a lane or a scratch row (forward_as); the normalization (k > 1) or none; the topk (no bias) or
// the gather path (bias); the score and the logits' dtype, template parameters.
const Paths kRouterPaths = {"rows=0", "k=1", "k>1", "E=1..64", "E=65..128", "E=129..256", "E>256", "bias=none",
                            "bias=zero", "bias=random", "score=sigmoid", "score=sqrt_softplus", "logits=bf16",
                            "logits=fp32"};

// The index (routing.cu build_index), which every launch with tokens builds: the flags in 16-byte
// vectors, 4-byte words or bytes (flag_load_of), rows of more than one group of 128 experts, one
// kernel for a map of one tile and at most 2048 experts, two (place summing the tile counts, in
// 16-byte loads where tiles % 4 == 0, the experts' totals carried across groups of 128) for
// other maps of at most 128 tiles and 32768 tile counts, three (a scan kernel between) for the
// rest, more than one tile of 128 tokens, and more than one pass of the three kernels' scan.
const Paths kIndexPaths = {"E%16=0",
                           "E%16=4|8|12",
                           "E%4!=0",
                           "E>128",
                           "index:one_kernel",
                           "index:two_kernels",
                           "index:two_kernels:tiles%4=0",
                           "index:two_kernels:E>128",
                           "index:three_kernels",
                           "T>128",
                           "tile_counts>16384"};
// copy_rows (permute's forward, unpermute's backward without probs): vectors by the row's bytes, a
// block per token for rows of at least 256 vectors.
const Paths kCopyPaths = {"row_bytes%16=0", "row_bytes%16=8", "row_bytes%8=4", "row_bytes%4=2",
                          "copy_rows:token_blocks"};
// The aligned sums: gather_sum in packets or single elements, slot_row_sum at H == 1.
const Paths kGatherPaths = {"row_bytes%16=0", "row_bytes%16!=0", "H=1"};
// The order-of-arrival atomics: 16-bit pairs where H is even, single elements otherwise; unpermute's
// with probs add fp32 products (into fp32 rows, rounded once, for 16-bit rows).
const Paths kAtomicPaths = {"H%2=0", "H%2=1"};
// unpermute's backward with probs (ProbsBackwardBody): d_probs' plans, and H == 1's products.
const Paths kProbsBackwardPaths = {"d_probs:vectorized", "d_probs:strided", "d_probs:H%8=4", "d_probs:block_tree",
                                   "d_probs:warp_tree", "H=1", "probs", "no_probs"};
// Every routing launch: the rows' dtype a template parameter; no routed pair moves nothing.
const Paths kRoutingPaths = {"map=all_padding", "dtype=bf16", "dtype=fp16", "dtype=fp32"};
// Contracts that take T = 0 (megatron_eager refuses it): the launchers return first.
const Paths kNoTokens = {"rows=0"};

// The lists joined, each path once.
Paths joined(std::initializer_list<Paths> lists) {
  Paths out;
  for (const Paths& list : lists)
    for (const std::string& path : list)
      if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
  return out;
}

}  // namespace

std::vector<KernelRecord> routing_kernels() {
  const Paths permute = joined({kIndexPaths, kCopyPaths, kGatherPaths, kRoutingPaths});
  const Paths permute_baseline = joined({kIndexPaths, kCopyPaths, kAtomicPaths, kRoutingPaths, kNoTokens});
  const Paths unpermute = joined({kIndexPaths, kGatherPaths, kCopyPaths, kProbsBackwardPaths, kRoutingPaths});
  const Paths unpermute_baseline =
      joined({kIndexPaths, kAtomicPaths, kCopyPaths, kProbsBackwardPaths, kRoutingPaths, kNoTokens});
  // Every contract's launches go into a staged batch's batched launches (routing.cu's bodies; a case
  // of a kernel without a batched twin runs its launches directly). CaseBatches.EachCaseGetsWhatItGetsAlone
  // holds an order-of-arrival baseline's batched cases to their runs alone where they have one
  // addend an output (ContractInfo::arrival_order_free), elsewhere to their shapes.
  const std::vector<Direction> both = {Direction::kForward, Direction::kBackward};
  return {
      {"router_topk", "megatron_eager", bind_router_topk, kRouterPaths},
      {"permute", "megatron_eager", bind_permute, permute, {}, both},
      {"permute", "paddle_aligned", bind_permute, joined({permute, kNoTokens}), {}, both},
      {"permute", "baseline", bind_permute, permute_baseline, {}, both},
      {"unpermute", "megatron_eager", bind_unpermute, unpermute, {}, both},
      {"unpermute", "paddle_aligned", bind_unpermute, joined({unpermute, kNoTokens}), {}, both},
      {"unpermute", "baseline", bind_unpermute, unpermute_baseline, {}, both},
  };
}

}  // namespace bitparity::gpu
