// The kernel records of expert_mlp: each contract's chain (ops/expert_mlp.h: its gemm contract and
// its activation contract) bound on the device from the other records, so that no arithmetic is
// written twice. The bind takes the chain's intermediates from one workspace (launch_workspace:
// the thread's own for a small case), binds each stage record on views of them, and returns one
// launch. It starts with one kernel launch of moves (gpu/expert_mlp_kernels.h): the inputs padded
// from 0 < M < 17 rows to 32 with zero rows and zero probs, the transposes of the inputs that the
// backward's GEMMs need and, the first time, a zero fill of every intermediate the stages write.
// Then the stages run in order on one stream, with the transpose of the activation between them
// in the backward, and one launch of moves copies the first M rows back. Host code.
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gpu/common/device_tensor.h"
#include "gpu/expert_mlp_kernels.h"
#include "gpu/records.h"
#include "gpu/register.h"
#include "ops/expert_mlp.h"
#include "ops/gemm.h"
#include "ops/swiglu_family.h"

namespace bitparity::gpu {
namespace {

DeviceTensor view_of(const DeviceTensor& t) { return {t.dtype, t.shape, DeviceBuffer::view(t.data(), t.nbytes())}; }

// A stage: another record bound on views of the chain's tensors. Held by the bound launch, so that
// everything its bind was handed outlives it.
struct Stage {
  Case c;
  ContractInfo contract;
  DeviceTensorMap inputs, outputs;
};

struct Chain {
  std::shared_ptr<DeviceBuffer> memory;       // the intermediates' (launch_workspace)
  size_t used = 0;                            // bytes of it taken, each tensor on a 256-byte boundary
  // Intermediates and padded copies: views of `memory` (allocations of their own under separate buffers).
  std::map<std::string, DeviceTensor> owned;
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<Move> first, last;              // the moves before the first stage and after the last
  std::vector<Move> zeros;                    // the stages' intermediates, zeroed before the first launch's stages
  bool zeroed = false;                        // whether a launch has run `zeros`
  std::vector<BoundLaunch> steps;             // the stages and the moves between them, in order
};

// Bytes enough for every intermediate bind_expert_mlp may own (bf16 unless named): x_pad, out_pad,
// d_out_pad and d_x_pad of Mp x H, x_t of H x Mp; h and d_h of Mp x 2F; act, d_act and act_t of Mp x F; w2_t
// of F x H and w1_t of 2F x H; probs_pad and d_scale of Mp fp32. One workspace for all of them, so
// that a small case costs no allocation a tensor.
size_t chain_bytes(int64_t Mp, int64_t H, int64_t F) {
  const auto bf16 = [](int64_t rows, int64_t cols) { return aligned_bytes(static_cast<size_t>(rows * cols) * 2); };
  return 5 * bf16(Mp, H) + 2 * bf16(Mp, 2 * F) + 3 * bf16(Mp, F) + bf16(F, H) + bf16(2 * F, H) +
         2 * aligned_bytes(static_cast<size_t>(Mp) * 4);
}

const KernelRecord& record_of(const std::string& op, const std::string& contract) {
  const KernelRecord* r = kernel_record(op, contract);
  if (!r) throw std::logic_error("expert_mlp's chain needs the CUDA record of " + op + " " + contract);
  return *r;
}

const ContractInfo& contract_of(const OpInfo& op, const std::string& contract) {
  const ContractInfo* c = op.contract(contract);
  if (!c) throw std::logic_error("expert_mlp's chain needs " + op.name + " " + contract);
  return *c;
}

BoundLaunch bind_expert_mlp(const KernelArgs& k, const ops::ExpertComposition& comp) {
  static const OpInfo gemm_op = ops::gemm(), scaled_op = ops::swiglu_scale(), plain_op = ops::swiglu();
  const DeviceTensor& x = required(k.inputs, "x");
  const DeviceTensor& w1 = required(k.inputs, "w1");
  const DeviceTensor& w2 = required(k.inputs, "w2");
  const DeviceTensor* probs = optional(k.inputs, "probs");
  const int64_t M = x.shape.at(0), H = x.shape.at(1), F = w1.shape.at(1) / 2, Mp = ops::expert_padded_rows(M);
  void* const stream = k.stream;
  auto chain = std::make_shared<Chain>();
  // Under separate buffers each intermediate is an allocation of its own, so that memcheck knows
  // its bounds.
  const bool separate = buffer_mode() == BufferMode::kSeparate;
  chain->memory = separate ? std::make_shared<DeviceBuffer>() : launch_workspace(chain_bytes(Mp, H, F), stream);

  // An intermediate of the chain: filled by the move `fill` before the first stage in every launch,
  // or, without one, zeroed once before the first launch's first stage, as allocate's buffers are
  // (the stages write it whole).
  auto own = [&](const std::string& name, DType dtype, Shape shape,
                 std::optional<Move> fill = std::nullopt) -> const DeviceTensor& {
    DeviceTensor t;
    if (separate) {
      t = allocate({std::move(shape), dtype}, 0);
    } else {
      const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
      if (chain->used + bytes > chain->memory->bytes())
        throw std::logic_error("expert_mlp's chain: intermediate " + name + " past chain_bytes");
      auto* at = static_cast<unsigned char*>(chain->memory->get()) + chain->used;
      chain->used += aligned_bytes(bytes);
      t = {dtype, std::move(shape), bytes == 0 ? DeviceBuffer() : DeviceBuffer::view(at, bytes)};
    }
    Move m = fill.value_or(Move{});
    m.dst = t.data();
    if (!fill) m.dst_bytes = t.nbytes();
    (fill ? chain->first : chain->zeros).push_back(m);
    return chain->owned[name] = std::move(t);
  };
  // The input `t` with zero rows to Mp; `t` itself where no row is added.
  auto padded = [&](const std::string& name, const DeviceTensor& t) -> const DeviceTensor& {
    if (Mp == M) return chain->owned[name] = view_of(t);
    Shape shape = t.shape;
    shape.at(0) = Mp;
    Move m;
    m.src = t.data();
    m.src_bytes = t.nbytes();
    m.dst_bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(t.dtype);
    return own(name, t.dtype, std::move(shape), m);
  };
  // The input `t` [rows, cols] transposed, with zero columns to `ld` (its rows where not given).
  auto transposed_input = [&](const std::string& name, const DeviceTensor& t, int64_t ld = -1) -> const DeviceTensor& {
    Move m;
    m.kind = Move::kTranspose;
    m.src = t.data();
    m.rows = t.shape.at(0);
    m.cols = t.shape.at(1);
    m.ld = ld < 0 ? m.rows : ld;
    return own(name, t.dtype, {m.cols, m.ld}, m);
  };
  // An intermediate transposed between the stages that write and read it.
  auto transposed = [&](const std::string& name, const DeviceTensor& t) -> const DeviceTensor& {
    const DeviceTensor& out = own(name, t.dtype, {t.shape.at(1), t.shape.at(0)});
    Move m;
    m.kind = Move::kTranspose;
    m.src = t.data();
    m.dst = out.data();
    m.rows = m.ld = t.shape.at(0);
    m.cols = t.shape.at(1);
    chain->steps.push_back([m, stream] { launch_moves({m}, stream); });
    return out;
  };
  auto stage = [&](const KernelRecord& record, const ContractInfo& contract, Direction direction, const Attrs& attrs,
                   const std::vector<std::pair<std::string, const DeviceTensor*>>& inputs,
                   const std::vector<std::pair<std::string, const DeviceTensor*>>& outputs) {
    auto s = std::make_unique<Stage>();
    s->c.op = record.op;
    s->c.direction = direction;
    s->c.attrs = attrs;
    s->contract = contract;
    for (const auto& [name, t] : inputs) s->inputs.emplace(name, view_of(*t));
    for (const auto& [name, t] : outputs) s->outputs.emplace(name, view_of(*t));
    chain->steps.push_back(record.bind(KernelArgs{s->c, s->contract, s->inputs, s->outputs, stream, k.ilp}));
    chain->stages.push_back(std::move(s));
  };
  // The first M rows of `whole` into the output `name`.
  auto slice_into = [&](const std::string& name, const DeviceTensor& whole) {
    const DeviceTensor& out = required(k.outputs, name);
    if (out.data() == whole.data()) return;
    Move m;
    m.src = whole.data();
    m.dst = out.data();
    m.src_bytes = m.dst_bytes = out.nbytes();
    chain->last.push_back(m);
  };
  // The output `name` itself where it has Mp rows, else a buffer of Mp rows to slice it from.
  auto rows_out = [&](const std::string& name, const std::string& buffer, DType dtype, Shape shape) -> const DeviceTensor& {
    if (Mp == M) return chain->owned[buffer] = view_of(required(k.outputs, name));
    return own(buffer, dtype, std::move(shape));
  };

  const KernelRecord& gemm = record_of("gemm", comp.gemm_contract);
  const ContractInfo& gemm_contract = contract_of(gemm_op, comp.gemm_contract);
  const OpInfo& act_op = probs ? scaled_op : plain_op;
  const KernelRecord& act = record_of(act_op.name, comp.activation_contract);
  const ContractInfo& act_contract = contract_of(act_op, comp.activation_contract);
  auto matmul = [&](const DeviceTensor& a, const DeviceTensor& b, const DeviceTensor& out) {
    stage(gemm, gemm_contract, Direction::kForward, {}, {{"a", &a}, {"b", &b}}, {{"out", &out}});
  };

  // Before the first stage: one launch of the moves in `first` (and, the first time, `zeros`), made
  // as the chain grows.
  chain->steps.push_back([c = chain.get(), stream] {
    if (c->zeroed) return launch_moves(c->first, stream);
    std::vector<Move> all = c->first;
    all.insert(all.end(), c->zeros.begin(), c->zeros.end());
    launch_moves(all, stream);
    c->zeroed = true;
  });
  const DeviceTensor& xp = padded("x_pad", x);
  const DeviceTensor* pp = probs ? &padded("probs_pad", *probs) : nullptr;
  const DeviceTensor& h = own("h", DType::kBF16, {Mp, 2 * F});
  const DeviceTensor& a = own("act", DType::kBF16, {Mp, F});
  matmul(xp, w1, h);
  std::vector<std::pair<std::string, const DeviceTensor*>> act_in = {{"y", &h}};
  if (pp) act_in.emplace_back("scale", pp);
  stage(act, act_contract, Direction::kForward, k.c.attrs, act_in, {{"out", &a}});

  if (k.c.direction == Direction::kForward) {
    const DeviceTensor& out = rows_out("out", "out_pad", DType::kBF16, {Mp, H});
    matmul(a, w2, out);
    slice_into("out", out);
  } else {
    const DeviceTensor& dp = padded("d_out_pad", required(k.inputs, "d_out"));
    const DeviceTensor& d_act = own("d_act", DType::kBF16, {Mp, F});
    matmul(dp, transposed_input("w2_t", w2), d_act);
    matmul(transposed("act_t", a), dp, required(k.outputs, "d_w2"));
    const DeviceTensor& d_h = own("d_h", DType::kBF16, {Mp, 2 * F});
    act_in.emplace_back("g", &d_act);
    std::vector<std::pair<std::string, const DeviceTensor*>> act_out = {{"d_y", &d_h}};
    const DeviceTensor* d_scale = pp ? &own("d_scale", DType::kFP32, {Mp}) : nullptr;
    if (d_scale) act_out.emplace_back("d_scale", d_scale);
    stage(act, act_contract, Direction::kBackward, k.c.attrs, act_in, act_out);
    const DeviceTensor& d_x = rows_out("d_x", "d_x_pad", DType::kBF16, {Mp, H});
    matmul(d_h, transposed_input("w1_t", w1), d_x);
    slice_into("d_x", d_x);
    matmul(transposed_input("x_t", x, Mp), d_h, required(k.outputs, "d_w1"));
    if (d_scale) slice_into("d_probs", *d_scale);
  }
  if (chain->first.size() + chain->zeros.size() > kMaxMoves || chain->last.size() > kMaxMoves)
    throw std::logic_error("expert_mlp's chain: more moves than one launch takes");
  chain->steps.push_back([c = chain.get(), stream] { launch_moves(c->last, stream); });
  return [chain] {
    for (const BoundLaunch& step : chain->steps) step();
  };
}

}  // namespace

std::vector<KernelRecord> expert_mlp_kernels() {
  std::vector<KernelRecord> out;
  for (const ops::ExpertComposition& comp : ops::expert_mlp_compositions())
    out.push_back({"expert_mlp", comp.contract,
                   [comp](const KernelArgs& k) { return bind_expert_mlp(k, comp); },
                   {"rows=0", "padded", "unpadded", "probs", "no_probs"}});
  return out;
}

}  // namespace bitparity::gpu
