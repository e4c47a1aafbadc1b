#include "core/registry.h"

#include <stdexcept>

#include "core/error.h"

namespace bitparity {

const AttrSpec* OpInfo::attr(const std::string& attr_name) const {
  for (const AttrSpec& a : attrs)
    if (a.name == attr_name) return &a;
  return nullptr;
}

const ContractInfo* OpInfo::contract(const std::string& contract_name) const {
  for (const ContractInfo& c : contracts)
    if (c.name == contract_name) return &c;
  return nullptr;
}

namespace {
const std::vector<TensorSpec>& specs_of(const std::map<Direction, std::vector<TensorSpec>>& specs, Direction d) {
  static const std::vector<TensorSpec> kNone;
  auto it = specs.find(d);
  return it == specs.end() ? kNone : it->second;
}
}  // namespace

const std::vector<TensorSpec>& OpInfo::input_specs(Direction d) const { return specs_of(inputs, d); }
const std::vector<TensorSpec>& OpInfo::output_specs(Direction d) const { return specs_of(outputs, d); }

void Registry::add_op(OpInfo op) {
  if (this->op(op.name)) throw std::logic_error("op registered twice: " + op.name);
  ops_.push_back(std::move(op));
}

void Registry::add_backend(BackendKind backend) {
  if (this->backend(backend.name)) throw std::logic_error("backend registered twice: " + backend.name);
  backends_.push_back(std::move(backend));
}

void Registry::add_impl(const std::string& op, const std::string& backend, const std::string& contract, Impl impl) {
  const OpInfo* info = this->op(op);
  if (!info) throw std::logic_error("implementation of an unregistered op: " + op);
  if (!info->has_contract(contract)) throw std::logic_error(op + " has no contract " + contract);
  if (!this->backend(backend)) throw std::logic_error("unregistered backend kind: " + backend);
  impls_[{op, backend + ":" + contract}] = std::move(impl);
  batch_impls_.erase({op, backend + ":" + contract});  // a batch path belongs to the implementation it was added beside
}

void Registry::add_impls(const std::string& backend, const std::vector<ImplEntry>& entries) {
  for (const ImplEntry& e : entries) add_impl(e.op, backend, e.contract, e.impl);
}

const OpInfo* Registry::op(const std::string& name) const {
  for (const OpInfo& o : ops_)
    if (o.name == name) return &o;
  return nullptr;
}

const BackendKind* Registry::backend(const std::string& name) const {
  for (const BackendKind& b : backends_)
    if (b.name == name) return &b;
  return nullptr;
}

void Registry::add_batch_impl(const std::string& op, const std::string& backend, const std::string& contract,
                              BatchImpl impl) {
  const std::string name = backend + ":" + contract;
  if (!this->impl(op, name)) throw std::logic_error("a batch path of " + name + " for " + op + ", which has no implementation");
  batch_impls_[{op, name}] = std::move(impl);
}

const BatchImpl* Registry::batch_impl(const std::string& op, const std::string& backend_contract) const {
  auto it = batch_impls_.find({op, backend_contract});
  return it == batch_impls_.end() ? nullptr : &it->second;
}

const Impl* Registry::impl(const std::string& op, const std::string& backend_contract) const {
  auto it = impls_.find({op, backend_contract});
  return it == impls_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::impls_of(const std::string& op) const {
  std::vector<std::string> names;
  for (const auto& [key, impl] : impls_)
    if (key.first == op) names.push_back(key.second);
  return names;
}

bool valid_kind_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxKindNameLength || name[0] < 'a' || name[0] > 'z') return false;
  for (char ch : name)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) return false;
  return true;
}

bool valid_reject_class(std::string_view name) {
  return valid_kind_name(name) && name != "backend_error" && name != "device_fault" && name != "sanitizer_hazard";
}

std::pair<std::string, std::string> split_backend_name(const std::string& name) {
  const size_t colon = name.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == name.size() ||
      name.find(':', colon + 1) != std::string::npos)
    throw ParseError("backend", "expected KIND:CONTRACT such as ref:megatron_eager; got '" + name + "'");
  return {name.substr(0, colon), name.substr(colon + 1)};
}

namespace {

// run_impl's checks of one case: the backend is known, available and implements the op under a
// contract the op has, the direction exists, every required input is present, and the op's
// validate accepts the case. The implementation and the contract, or the exception run_impl throws.
std::pair<const Impl*, const ContractInfo*> checked(const Registry& registry, const std::string& backend_contract,
                                                    const Case& c) {
  const auto [kind, contract] = split_backend_name(backend_contract);
  const BackendKind* backend = registry.backend(kind);
  if (!backend) throw std::runtime_error("unknown backend kind '" + kind + "' (see `bitparity list`)");
  if (backend->unavailable_reason)
    if (auto why = backend->unavailable_reason()) throw std::runtime_error(kind + " is unavailable: " + *why);
  const OpInfo* info = registry.op(c.op);
  if (!info) throw std::runtime_error("unknown op '" + c.op + "'");
  const ContractInfo* contract_info = info->contract(contract);
  if (!contract_info) throw std::runtime_error(c.op + " has no contract '" + contract + "' (see `bitparity list`)");
  const Impl* impl = registry.impl(c.op, backend_contract);
  if (!impl) throw std::runtime_error(backend_contract + " does not implement " + c.op);
  // Implementations may rely on every required input being present (the parser checks it for
  // documents; generated, decoded and shrunk cases are checked here).
  auto specs = info->inputs.find(c.direction);
  if (specs == info->inputs.end())
    throw RejectError("shape", c.op + " has no " + std::string(direction_name(c.direction)) + " direction");
  for (const TensorSpec& s : specs->second)
    if (!s.optional && !c.input(s.name)) throw RejectError("shape", c.op + ": missing required input " + s.name);
  if (info->validate) {
    // Outputs are held to the limits a file's inputs are held to (check_shape_limits): empty inputs
    // with large dims must not make an implementation allocate or loop over 2^28 output elements.
    for (const auto& [name, meta] : info->validate(c, *contract_info)) {
      try {
        check_shape_limits(meta.shape);
      } catch (const std::invalid_argument& e) {
        throw RejectError("shape", c.op + ": output " + name + ": " + e.what());
      }
    }
  }
  return {impl, contract_info};
}

}  // namespace

TensorMap run_impl(const Registry& registry, const std::string& backend_contract, const Case& c) {
  const auto [impl, contract] = checked(registry, backend_contract, c);
  return (*impl)(c, *contract);
}

std::vector<BatchOutcome> run_batch_impl(const Registry& registry, const std::string& backend_contract,
                                         const std::vector<const Case*>& cases) {
  std::vector<BatchOutcome> outcomes(cases.size());
  std::vector<const Case*> accepted;
  std::vector<size_t> at;  // accepted[j] is cases[at[j]]
  const ContractInfo* contract = nullptr;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i]->op != cases.front()->op || cases[i]->direction != cases.front()->direction)
      throw std::logic_error("run_batch_impl: a batch of more than one op and direction");
    try {
      const auto [impl, info] = checked(registry, backend_contract, *cases[i]);
      contract = info;
      accepted.push_back(cases[i]);
      at.push_back(i);
    } catch (...) {
      outcomes[i].error = std::current_exception();
    }
  }
  if (accepted.empty()) return outcomes;
  const BatchImpl* batch = registry.batch_impl(cases.front()->op, backend_contract);
  if (!batch) {
    const Impl& impl = *registry.impl(cases.front()->op, backend_contract);
    for (size_t j = 0; j < accepted.size(); ++j) {
      try {
        outcomes[at[j]].outputs = impl(*accepted[j], *contract);
      } catch (...) {
        outcomes[at[j]].error = std::current_exception();
      }
    }
    return outcomes;
  }
  std::vector<BatchOutcome> results = (*batch)(accepted, *contract);
  if (results.size() != accepted.size())
    throw std::logic_error(backend_contract + "'s batch path gave " + std::to_string(results.size()) + " outcomes for " +
                           std::to_string(accepted.size()) + " cases");
  for (size_t j = 0; j < accepted.size(); ++j) outcomes[at[j]] = std::move(results[j]);
  return outcomes;
}

}  // namespace bitparity
