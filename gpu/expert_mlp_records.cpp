// The kernel records of expert_mlp: each contract's chain (ops/expert_mlp.h: its gemm contract and
// its activation contract) bound on the device from the other records, so that no arithmetic is
// written twice. The bind takes the chain's intermediates from one workspace (launch_workspace:
// the thread's own for a small case, zeroed as allocate's buffers were), binds each stage record on views of
// them, and returns one launch that pads (0 < M < 17 rows to 32, zero rows and zero probs), runs the
// stages in order on one stream, transposes where the backward's GEMMs need it, and copies the
// first M rows back. Host code.
#include <map>
#include <memory>
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
  std::shared_ptr<DeviceBuffer> memory;       // the intermediates' (launch_workspace), zeroed by the bind
  size_t used = 0;                            // bytes of it taken, each tensor on a 256-byte boundary
  std::map<std::string, DeviceTensor> owned;  // intermediates and padded copies: views of `memory`
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<BoundLaunch> steps;
};

// Bytes enough for every intermediate bind_expert_mlp may own (bf16 unless named): x_pad, out_pad,
// d_out_pad, d_x_pad and x_t of Mp x H; h and d_h of Mp x 2F; act, d_act and act_t of Mp x F; w2_t
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

  auto own = [&](const std::string& name, DType dtype, Shape shape) -> const DeviceTensor& {
    if (separate) return chain->owned[name] = allocate({std::move(shape), dtype}, 0);
    const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
    if (chain->used + bytes > chain->memory->bytes())
      throw std::logic_error("expert_mlp's chain: intermediate " + name + " past chain_bytes");
    auto* at = static_cast<unsigned char*>(chain->memory->get()) + chain->used;
    chain->used += aligned_bytes(bytes);
    return chain->owned[name] = {dtype, std::move(shape), bytes == 0 ? DeviceBuffer() : DeviceBuffer::view(at, bytes)};
  };
  // `t` with zero rows to Mp, filled in the launch; `t` itself where no row is added.
  auto padded = [&](const std::string& name, const DeviceTensor& t) -> const DeviceTensor& {
    if (Mp == M) return chain->owned[name] = view_of(t);
    Shape shape = t.shape;
    shape.at(0) = Mp;
    const DeviceTensor& p = own(name, t.dtype, shape);
    chain->steps.push_back([dst = p.data(), bytes = p.nbytes(), src = t.data(), used = t.nbytes(), stream] {
      zero_async(dst, bytes, stream);
      copy_async(dst, src, used, stream);
    });
    return p;
  };
  auto transposed = [&](const std::string& name, const DeviceTensor& t) -> const DeviceTensor& {
    const DeviceTensor& out = own(name, t.dtype, {t.shape.at(1), t.shape.at(0)});
    chain->steps.push_back([src = t.data(), rows = t.shape.at(0), cols = t.shape.at(1), dst = out.data(), stream] {
      launch_transpose16(src, rows, cols, dst, stream);
    });
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
    chain->steps.push_back([dst = out.data(), src = whole.data(), bytes = out.nbytes(), stream] {
      copy_async(dst, src, bytes, stream);
    });
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
    matmul(dp, transposed("w2_t", w2), d_act);
    matmul(transposed("act_t", a), dp, required(k.outputs, "d_w2"));
    const DeviceTensor& d_h = own("d_h", DType::kBF16, {Mp, 2 * F});
    act_in.emplace_back("g", &d_act);
    std::vector<std::pair<std::string, const DeviceTensor*>> act_out = {{"d_y", &d_h}};
    const DeviceTensor* d_scale = pp ? &own("d_scale", DType::kFP32, {Mp}) : nullptr;
    if (d_scale) act_out.emplace_back("d_scale", d_scale);
    stage(act, act_contract, Direction::kBackward, k.c.attrs, act_in, act_out);
    const DeviceTensor& d_x = rows_out("d_x", "d_x_pad", DType::kBF16, {Mp, H});
    matmul(d_h, transposed("w1_t", w1), d_x);
    slice_into("d_x", d_x);
    matmul(transposed("x_t", xp), d_h, required(k.outputs, "d_w1"));
    if (d_scale) {
      const DeviceTensor& d_probs = required(k.outputs, "d_probs");
      chain->steps.push_back([dst = d_probs.data(), src = d_scale->data(), bytes = d_probs.nbytes(), stream] {
        copy_async(dst, src, bytes, stream);
      });
    }
  }
  zero_async(chain->memory->get(), chain->used, stream);  // before any launch, as allocate's fill
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
