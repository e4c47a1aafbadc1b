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

std::pair<std::string, std::string> split_backend_name(const std::string& name) {
  const size_t colon = name.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == name.size() ||
      name.find(':', colon + 1) != std::string::npos)
    throw ParseError("backend", "expected KIND:CONTRACT such as ref:megatron_eager; got '" + name + "'");
  return {name.substr(0, colon), name.substr(colon + 1)};
}

TensorMap run_impl(const Registry& registry, const std::string& backend_contract, const Case& c) {
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
  if (info->validate) info->validate(c, *contract_info);
  return (*impl)(c, *contract_info);
}

}  // namespace bitparity
