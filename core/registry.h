// The op x contract x backend registry.
//
// An OpInfo describes one computation: its inputs and attributes per direction, the contracts
// under which it is defined, how to generate cases for it and how to make a case smaller. An
// implementation computes an op under one contract on one backend kind ("ref", "cuda"); the pair
// is named "ref:megatron_eager", "cuda:paddle_fused". Harnesses (properties, campaign, corpus
// replay, fuzzing, benchmarks) iterate this registry and never name an op themselves.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <rapidcheck/Gen.h>

#include "core/case.h"

namespace bitparity {

struct TensorSpec {
  std::string name;
  std::string doc;
  bool optional = false;
  // Dimension 0 counts the op's independent rows (tokens): harnesses slice, refill and count rows
  // through the inputs that say so.
  bool rows_first = false;
};

struct AttrSpec {
  std::string name;
  AttrType type;
  std::string doc;  // attributes are optional: absent means "not given" (Python's None)
};

struct ContractInfo {
  std::string name;
  std::string doc;
  std::string derived_from;  // "PyTorch 2.11, CUDA 13.0, sm_90", shown by `list` and reports
};

// What a signature records about a case besides the op and the finding: coarse classes that
// separate distinct bugs ("rows=0", "scale=1d", "clamp<=0", "nan").
struct CaseClasses {
  std::string shape_class;         // part of a finding's signature
  std::string value_class;         // part of a finding's signature
  std::vector<std::string> tags;   // every edge class the case is in, for classify/tag and reports
};

struct OpInfo {
  std::string name;
  std::string doc;
  std::map<Direction, std::vector<TensorSpec>> inputs;   // the directions the op has
  std::map<Direction, std::vector<TensorSpec>> outputs;
  std::vector<AttrSpec> attrs;
  std::vector<ContractInfo> contracts;

  // Random cases of every edge class the op has, for one direction.
  std::function<rc::Gen<Case>(Direction)> generate;
  // Strictly smaller variants of a case's shape, most aggressive first (shrinking).
  std::function<std::vector<Case>(const Case&)> shrink_shape;
  std::function<CaseClasses(const Case&)> classes;
  // The true value of every output element (fp64, MPFR where fp64 is not enough), for
  // arbitration. Absent outputs have no oracle.
  std::function<std::map<std::string, std::vector<double>>(const Case&)> oracle;

  const AttrSpec* attr(const std::string& attr_name) const;
  bool has_contract(const std::string& contract) const;
};

// Computes every output of the op for the case, or throws RejectError.
using Impl = std::function<TensorMap(const Case&)>;

struct BackendKind {
  std::string name;  // "ref", "cuda"
  std::string doc;
  // Empty when the backend can run here; otherwise why not ("no CUDA device: ...").
  std::function<std::optional<std::string>()> unavailable_reason;
};

class Registry {
 public:
  void add_op(OpInfo op);
  void add_backend(BackendKind backend);
  void add_impl(const std::string& op, const std::string& backend, const std::string& contract, Impl impl);

  const OpInfo* op(const std::string& name) const;
  const BackendKind* backend(const std::string& name) const;
  // "ref:megatron_eager" -> its implementation of `op`; nullptr when there is none.
  const Impl* impl(const std::string& op, const std::string& backend_contract) const;
  // "kind:contract" names of every implementation of `op`.
  std::vector<std::string> impls_of(const std::string& op) const;

  const std::vector<OpInfo>& ops() const { return ops_; }
  const std::vector<BackendKind>& backends() const { return backends_; }

 private:
  std::vector<OpInfo> ops_;
  std::vector<BackendKind> backends_;
  std::map<std::pair<std::string, std::string>, Impl> impls_;  // (op, "kind:contract")
};

// Splits "ref:megatron_eager" into its kind and contract; throws ParseError on another form.
std::pair<std::string, std::string> split_backend_name(const std::string& name);

// Runs `backend_contract` on the case after checking that it is available and implements the op.
// Throws RejectError for inputs the contract refuses and std::runtime_error for unknown names.
TensorMap run_impl(const Registry& registry, const std::string& backend_contract, const Case& c);

}  // namespace bitparity
