// The op x contract x backend registry.
//
// An OpInfo describes one computation: its inputs and attributes per direction, the contracts
// under which it is defined, how to generate cases for it and how to make a case smaller. An
// implementation computes an op under one contract on one backend kind ("ref", "cuda"); the pair
// is named "ref:megatron_eager", "cuda:paddle_fused". Harnesses (properties, campaign, corpus
// replay, fuzzing, benchmarks) iterate this registry and never name an op themselves.
#pragma once

#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidcheck/Gen.h>

#include "core/case.h"
#include "core/tensor.h"

namespace bitparity {

struct TensorSpec {
  std::string name;
  std::string doc;
  bool optional = false;
  // Dimension 0 counts the op's independent rows (tokens): harnesses slice, refill and count rows
  // through the tensors that say so (inputs and outputs alike).
  bool rows_first = false;
  // Outputs only: reduced over a row in an order that the row count sets (rule 7's lane plan), so
  // invariant to the other rows' values but not to their number.
  bool row_count_dependent = false;
};

struct AttrSpec {
  std::string name;
  AttrType type;
  std::string doc;  // attributes are optional: absent means "not given" (Python's None)
};

// How a contract reads a float `clamp` attribute (spec OP-6). A trait, not arithmetic: each
// backend evaluates the gate itself.
enum class ClampGate {
  kNone,      // the op has no clamp
  kPositive,  // `clamp_value is not None and clamp_value > 0` (Megatron's fused functions, Paddle)
  kPresent,   // `clamp_value is not None` (Megatron's unfused glu(): a value <= 0 clamps everything)
};

// One output's elements under a contract's error bound (ContractInfo::error_bound): an element
// agrees when it is within `bound[i]` of `truth[i]`. A NaN truth asks for a NaN, an infinite truth
// for that infinity; an infinite bound accepts anything (a partial sum that may overflow); an
// infinite element is accepted where the interval reaches past the dtype's largest finite value on
// its side.
struct ElementBounds {
  std::vector<double> truth, bound;
};

struct ContractInfo {
  std::string name;
  std::string doc;
  std::string derived_from;  // "PyTorch 2.11, CUDA 13.0, sm_90", shown by `list` and reports
  ClampGate clamp_gate = ClampGate::kNone;
  // The result depends on the order in which atomic additions arrive (the unaligned baselines'
  // index_add_/scatter_add_): the reference fixes one order (ascending position), and a backend of
  // such a contract is judged by the determinism property (same case twice, same bits), which is
  // expected to find the order it depends on, not by bit equality with the reference.
  bool order_of_arrival = false;
  // Set for a contract whose order of operations is unknown (a library's GEMM, whose algorithm
  // NVIDIA chooses): its outputs are judged against the op's true value within an error bound
  // derived from the arithmetic, element by element, never bit for bit (finding kind
  // ulp_over_budget), and reports count such agreements apart from the bit-exact ones. Returns, per
  // output it covers, each element's truth and bound; `bound_doc` states the derivation.
  std::function<std::map<std::string, ElementBounds>(const Case&)> error_bound = {};
  std::string bound_doc = {};
  // The implementation picks its order from the whole shape (cuBLAS chooses an algorithm, a tile and
  // a split-K for each M, N and K), so a row's bits may change with the number of rows: the batch
  // invariance properties report where they do, minimized, as findings of the contract
  // (invariance_violation), and do not fail on them.
  bool order_depends_on_shape = false;
  // For an order_of_arrival contract: whether case c's bits are those of every order of arrival,
  // because no output element has more than one addend (a copy; a map of at most one slot a token).
  // The GPU tests hold such a case to the reference's bits, to its own bits run twice, from several
  // threads, at every ILP and alone where it runs in a batch, as for any other contract, and a
  // campaign's pair of its kernel with another side finds a difference there (corpus::classify
  // judges the others' by arrival_order_fixed and arrival_order_bound). Unset: no case is.
  std::function<bool(const Case&)> arrival_order_free = {};
  // For an order_of_arrival contract, on a case that arrival_order_free does not clear: per output,
  // which elements (row-major) have at most one addend, whose bits every order gives alike. A pair
  // of its kernel with another side that differs at such an element is a finding (corpus::classify);
  // differences elsewhere are judged by arrival_order_bound. Unset, or an output left out: no element.
  std::function<std::map<std::string, std::vector<bool>>(const Case&)> arrival_order_fixed = {};
  // For an order_of_arrival contract, on a case that arrival_order_free does not clear: per output,
  // each element's true value and the bound that every order of arrival keeps it within (core/
  // sum_bound.h; `bound_doc` states the derivation). A pair of its kernel with another side that
  // differs in bits is an arrival_order skip only where the sides of this contract are within it;
  // an element outside it is a finding (ulp_over_budget), so a sum of several addends that is wrong
  // by more than the bound is found too.
  // Unset, or an output left out: that output's differences are skips.
  std::function<std::map<std::string, ElementBounds>(const Case&)> arrival_order_bound = {};
};

// Whether case c's bits may depend on the order in which `contract`'s atomic additions arrive:
// an order_of_arrival contract, on a case its arrival_order_free does not clear.
inline bool arrival_order_matters(const ContractInfo& contract, const Case& c) {
  return contract.order_of_arrival && !(contract.arrival_order_free && contract.arrival_order_free(c));
}

// What a signature records about a case besides the op and the finding: coarse classes that
// separate distinct bugs ("rows=0", "scale=1d", "clamp<=0", "nan").
struct CaseClasses {
  std::string shape_class;         // part of a finding's signature
  std::string value_class;         // part of a finding's signature
  std::vector<std::string> tags;   // every edge class the case is in, for classify/tag and reports
};

// The shape and dtype of one output.
struct TensorMeta {
  Shape shape;
  DType dtype = DType::kFP32;
  bool operator==(const TensorMeta&) const = default;
};
using OutputMetas = std::map<std::string, TensorMeta>;

// A case that a contract must reject (OpInfo::error_inputs), and how.
struct ErrorInput {
  std::string name;                    // "scale_rank3": a GoogleTest name
  Case c;
  std::string error_class;             // the RejectError class: "shape", "dtype", "attr"
  std::string field;                   // a word the message must contain ("scale")
  std::vector<std::string> contracts;  // the contracts that must reject it; empty: every contract
};

// A large, realistic case for GPU tests and benchmarks (OpInfo::reference_inputs). Built on
// demand: a reference input may hold a gigabyte.
struct ReferenceInput {
  std::string name;                    // "rows16384_F1408": names GPU tests and benchmarks
  std::vector<std::string> contracts;  // the contracts it is meant for; empty: every contract
  std::function<Case()> make;
  // Benchmarks only: too large to also run the CPU reference on in every GPU test run.
  bool bench_only = false;
  // The bytes a kernel must move for this input, where that is not every input read once and every
  // output written once (a lookup that reads a few rows of a large table); 0: that default.
  size_t bytes = 0;
  // The floating-point operations one launch performs, for an op whose roofline is its arithmetic
  // (a GEMM: 2 M N K): benchmarks then report TFLOP/s against the device's peak beside the bytes;
  // 0: the op is judged by its bytes against the copy alone.
  double flops = 0;
};

// A scenario timed as a whole: cases of one op launched one after the other on one stream, as a
// model runs them (a MoE layer: one case an expert, each its own token count). Benchmarks time each
// scenario under every contract with a kernel record, as scenario/<name>/<op>_<direction>/<contract>:
// time per scenario, TFLOP/s where `flops` is given, and `counters` beside.
struct ReferenceScenario {
  std::string name;  // "glm45_air_T4096"
  size_t cases = 0;
  // Case i of `cases`: its attributes and its inputs' shapes and dtypes. Benchmarks upload the values
  // of integer and bool inputs (indices, masks) and fill floating inputs with random values on the
  // device, so that a scenario of gigabytes of weights needs no host values.
  std::function<Case(size_t i)> make;
  double flops = 0;  // of the whole scenario; 0: judged by time alone
  std::vector<std::pair<std::string, double>> counters;  // what describes it ("experts", 128)
};

struct OpInfo {
  std::string name;
  std::string doc;
  std::map<Direction, std::vector<TensorSpec>> inputs;   // the directions the op has
  std::map<Direction, std::vector<TensorSpec>> outputs;
  std::vector<AttrSpec> attrs;
  std::vector<ContractInfo> contracts;

  // The input checks of a contract, which every backend's run goes through (run_impl calls it
  // before the implementation): a RejectError whose message names the field ("scale must have
  // shape [rows] or [rows, 1]; got [3, 2]"). Returns the shape and dtype of every output the
  // contract returns for the case. Checks only, never arithmetic.
  std::function<OutputMetas(const Case&, const ContractInfo&)> validate;

  // Sample inputs: random cases of every edge class the op has, for one direction.
  std::function<rc::Gen<Case>(Direction)> generate;
  // The tags (CaseClasses::tags) that the generator must reach in a few hundred cases.
  std::function<std::vector<std::string>(Direction)> required_tags;
  std::function<CaseClasses(const Case&)> classes;
  // Error inputs: cases that contracts must reject, with the class and the field named.
  std::function<std::vector<ErrorInput>(Direction)> error_inputs;
  // Reference inputs: large realistic shapes for GPU tests and benchmarks.
  std::function<std::vector<ReferenceInput>(Direction)> reference_inputs;
  // Benchmarks only: the realistic sequences of cases the op runs in a model, timed as one.
  std::function<std::vector<ReferenceScenario>(Direction)> reference_scenarios;
  // The case restricted to rows [r0, r0 + n) of its rows-first inputs, for ops whose other inputs
  // are indexed through the rows (a permute's [T*k, H] tensors, selected through the routing map).
  // Absent: every rows-first input is cut and the other inputs are kept.
  std::function<Case(const Case&, int64_t r0, int64_t n)> take_rows;
  // Strictly smaller variants of a case's shape, most aggressive first (shrinking).
  std::function<std::vector<Case>(const Case&)> shrink_shape;
  // The true value of every output element (fp64, MPFR where fp64 is not enough), for
  // arbitration. Absent outputs have no oracle.
  std::function<std::map<std::string, std::vector<double>>(const Case&)> oracle;

  const AttrSpec* attr(const std::string& attr_name) const;
  const ContractInfo* contract(const std::string& contract_name) const;  // nullptr when absent
  bool has_contract(const std::string& contract_name) const { return contract(contract_name) != nullptr; }
  // The specs of the direction's inputs or outputs; empty when the op lacks the direction.
  const std::vector<TensorSpec>& input_specs(Direction d) const;
  const std::vector<TensorSpec>& output_specs(Direction d) const;
};

// Computes every output of the op for a case that the op's validate accepted under `contract`,
// or throws RejectError (a reference's "unmodelled").
using Impl = std::function<TensorMap(const Case&, const ContractInfo& contract)>;

// What a batch implementation gives one case of several: its outputs, or the exception that the
// case's run alone would have thrown (a RejectError, a device error), for the caller to rethrow and
// judge as it judges a single run.
struct BatchOutcome {
  TensorMap outputs;
  std::exception_ptr error;
};

// Runs several cases of one op and direction, each of which the op's validate accepted under
// `contract`, in one call where the backend gains by it (bitparity's CUDA kernels: one copy in,
// every case's launches, one copy out, one synchronization): one outcome a case, in the cases'
// order, each the Impl's on that case alone.
using BatchImpl = std::function<std::vector<BatchOutcome>(const std::vector<const Case*>& cases, const ContractInfo& contract)>;

struct BackendKind {
  std::string name;  // "ref", "cuda"
  std::string doc;
  // Empty when the backend can run here; otherwise why not ("no CUDA device: ...").
  std::function<std::optional<std::string>()> unavailable_reason;
  // How many of this kind's calls may run at once from the threads of one process: 1 for a kind
  // that holds one worker process or code we cannot vouch for (the default); N for a pool of N
  // workers (`--devices N`); kAnyNumberOfCalls for the CPU reference and bitparity's CUDA kernels.
  int concurrent_calls = 1;
};
inline constexpr int kAnyNumberOfCalls = 0;

// One contract of one op on one backend, as a backend's module lists them for the composition
// root (ops/builtin.cpp).
struct ImplEntry {
  std::string op, contract;
  Impl impl;
};

class Registry {
 public:
  void add_op(OpInfo op);
  void add_backend(BackendKind backend);
  void add_impl(const std::string& op, const std::string& backend, const std::string& contract, Impl impl);
  void add_impls(const std::string& backend, const std::vector<ImplEntry>& entries);
  // A batch path beside an implementation already added (add_impl); adding the implementation
  // again drops it.
  void add_batch_impl(const std::string& op, const std::string& backend, const std::string& contract, BatchImpl impl);

  const OpInfo* op(const std::string& name) const;
  const BackendKind* backend(const std::string& name) const;
  // "ref:megatron_eager" -> its implementation of `op`; nullptr when there is none.
  const Impl* impl(const std::string& op, const std::string& backend_contract) const;
  // The batch path of "kind:contract" for `op`; nullptr when it has none (its cases run one at a time).
  const BatchImpl* batch_impl(const std::string& op, const std::string& backend_contract) const;
  // "kind:contract" names of every implementation of `op`.
  std::vector<std::string> impls_of(const std::string& op) const;

  const std::vector<OpInfo>& ops() const { return ops_; }
  const std::vector<BackendKind>& backends() const { return backends_; }

 private:
  std::vector<OpInfo> ops_;
  std::vector<BackendKind> backends_;
  std::map<std::pair<std::string, std::string>, Impl> impls_;  // (op, "kind:contract")
  std::map<std::pair<std::string, std::string>, BatchImpl> batch_impls_;
};

// A backend kind that a worker or a plug-in names: [a-z][a-z0-9_]*, at most kMaxKindNameLength
// characters.
inline constexpr size_t kMaxKindNameLength = 64;
bool valid_kind_name(std::string_view name);

// A rejection class that a worker or a plug-in may give (RejectError::error_class): a name as
// valid_kind_name has it, and none of the outcomes that bitparity gives itself ("backend_error",
// "device_fault", "sanitizer_hazard": corpus/differential.h), which harnesses count as findings, so
// that a rejection cannot pass itself off as one. The message for a class that is not.
bool valid_reject_class(std::string_view name);
inline constexpr const char* kRejectClassRule =
    "a name of at most 64 characters matching [a-z][a-z0-9_]* (such as \"shape\"), and not backend_error, "
    "device_fault or sanitizer_hazard";

// Splits "ref:megatron_eager" into its kind and contract; throws ParseError on another form.
std::pair<std::string, std::string> split_backend_name(const std::string& name);

// Runs `backend_contract` on the case after checking that it is available and implements the op,
// that the required inputs are present, and the op's validate. Throws RejectError for inputs the
// contract refuses and std::runtime_error for unknown names.
TensorMap run_impl(const Registry& registry, const std::string& backend_contract, const Case& c);

// run_impl on several cases of one op and direction (std::logic_error otherwise): each case's
// outcome is its run_impl's (its outputs, or the exception run_impl throws on it), the cases that
// pass run_impl's checks going through the backend's batch path in one call where it has one, one
// call a case otherwise.
std::vector<BatchOutcome> run_batch_impl(const Registry& registry, const std::string& backend_contract,
                                         const std::vector<const Case*>& cases);

// The registry a harness executable iterates: builtin_registry() in the shipped test programs, a
// test-only registry (a toy op) in the programs that prove the harnesses generic. Defined by
// exactly one object linked into the program (ops/harness_registry.cpp or a test's own).
const Registry& harness_registry();

}  // namespace bitparity
