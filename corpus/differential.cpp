#include "corpus/differential.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/rows.h"

namespace bitparity::corpus {
namespace {

using nlohmann::json;

std::string hex_bits(DType dtype, uint64_t bits) {
  static const char* kDigits = "0123456789abcdef";
  const int width = dtype_size(dtype) * 2;
  std::string s(static_cast<size_t>(width), '0');
  for (int d = width - 1; d >= 0; --d, bits >>= 4) s[static_cast<size_t>(d)] = kDigits[bits & 15];
  return "0x" + s;
}

std::string describe_side(const std::string& name, const Outcome& side) {
  if (!side.rejected()) return name + " returned outputs";
  if (side.reject_class == kBackendError) return name + " failed: " + side.message;
  if (side.reject_class == kDeviceFault) return name + " faulted: " + side.message;
  if (side.reject_class == kSanitizerHazard) return name + " was judged hazardous: " + side.message;
  return name + " rejected (" + side.reject_class + "): " + side.message;
}

DiffResult error_mismatch(const Case& c, const BackendPair& pair, const Outcome& a, const Outcome& b) {
  DiffResult r;
  r.verdict = DiffVerdict::kFinding;
  r.kind = kErrorMismatch;
  // Which side refuses, and why, separates distinct findings (a dtype one side lacks, a hidden size
  // one side rejects): "rejects:-/shape" is A computing while B rejects with class "shape".
  r.output = "rejects:" + (a.rejected() ? a.reject_class : std::string("-")) + "/" +
             (b.rejected() ? b.reject_class : std::string("-"));
  r.message = case_title(c) + " " + pair.name() + ": error mismatch\n" + describe_side(pair.a, a) + "\n" +
              describe_side(pair.b, b);
  return r;
}

// A double for JSON, which has no Inf or NaN: "inf", "-inf", "nan" as text.
json finite_or_text(double x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}


// ulps of the truth may be infinite (a non-finite side against a finite truth); JSON has no Inf.
json ulps_json(double ulps) { return std::isfinite(ulps) ? json(ulps) : json("inf"); }

}  // namespace

bool BackendPair::same_contract() const {
  const auto [kind_a, contract_a] = split_backend_name(a);
  const auto [kind_b, contract_b] = split_backend_name(b);
  return contract_a == contract_b;
}

bool BackendPair::every_contract() const {
  return split_backend_name(a).second == "*" && split_backend_name(b).second == "*";
}

bool is_differential_kind(std::string_view kind) {
  return kind == kBitMismatch || kind == kShapeMismatch || kind == kErrorMismatch || kind == kBackendError ||
         kind == kNondeterminism || kind == kDeviceFault || kind == kSanitizerHazard || kind == kUlpOverBudget;
}

namespace {

// A side's exception as its outcome: a RejectError a rejection of its class, a sanitizer hazard,
// a device fault, and anything else a backend error.
Outcome outcome_of_error(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const RejectError& e) {
    return Outcome{std::nullopt, e.error_class(), e.what()};
  } catch (const SanitizerHazard& e) {
    return Outcome{std::nullopt, std::string(kSanitizerHazard), e.what()};
  } catch (const DeviceFault& e) {
    return Outcome{std::nullopt, std::string(kDeviceFault), e.what()};
  } catch (const std::exception& e) {
    return Outcome{std::nullopt, std::string(kBackendError), e.what()};
  } catch (...) {
    return Outcome{std::nullopt, std::string(kBackendError), "an exception that is not a std::exception"};
  }
}

}  // namespace

Outcome run_side(const Registry& registry, const std::string& backend, const Case& c) {
  // A backend that cannot be used at all: run_outcome throws the registry's own message for it.
  const BackendKind* info = registry.backend(split_backend_name(backend).first);
  const bool usable = info && registry.impl(c.op, backend) &&
                      !(info->unavailable_reason && info->unavailable_reason().has_value());
  if (!usable) return run_outcome(registry, backend, c);
  try {
    return run_outcome(registry, backend, c);
  } catch (...) {
    return outcome_of_error(std::current_exception());
  }
}

Outcome side_outcome(BatchOutcome b) {
  if (b.error) return outcome_of_error(b.error);
  return Outcome{std::move(b.outputs), "", ""};
}

std::vector<BackendPair> twin_pairs(const Registry& registry, const std::string& op, bool available_only) {
  std::vector<BackendPair> pairs;
  for (const std::string& impl : registry.impls_of(op)) {
    const auto [kind, contract] = split_backend_name(impl);
    if (kind == kReferenceKind) continue;
    const BackendKind* backend = registry.backend(kind);
    if (available_only && backend && backend->unavailable_reason && backend->unavailable_reason()) continue;
    // An order-of-arrival contract (atomics) differs from its reference whenever its additions
    // arrive in another order: paired where it names the cases that order cannot change
    // (arrival_order_free; classify skips the others as kArrivalOrder), else left out (its self
    // pair judges it; --pair still asks for it by name).
    const OpInfo* info = registry.op(op);
    const ContractInfo* contract_info = info ? info->contract(contract) : nullptr;
    if (contract_info && contract_info->order_of_arrival && !contract_info->arrival_order_free) continue;
    const std::string reference = std::string(kReferenceKind) + ":" + contract;
    if (registry.impl(op, reference)) pairs.push_back({impl, reference});
  }
  return pairs;
}

std::vector<BackendPair> self_pairs(const Registry& registry, const std::string& op, bool available_only) {
  std::vector<BackendPair> pairs;
  for (const std::string& impl : registry.impls_of(op)) {
    const std::string kind = split_backend_name(impl).first;
    if (kind == kReferenceKind) continue;
    const BackendKind* backend = registry.backend(kind);
    if (available_only && backend && backend->unavailable_reason && backend->unavailable_reason()) continue;
    pairs.push_back({impl, impl});
  }
  return pairs;
}

std::vector<BackendPair> reference_pairs(const Registry& registry, const std::string& op) {
  std::vector<std::string> refs;
  for (const std::string& impl : registry.impls_of(op))
    if (split_backend_name(impl).first == kReferenceKind) refs.push_back(impl);
  std::vector<BackendPair> pairs;
  for (size_t i = 0; i < refs.size(); ++i)
    for (size_t j = i + 1; j < refs.size(); ++j) pairs.push_back({refs[i], refs[j]});
  return pairs;
}

BackendPair parse_pair(const std::string& text, const std::string& field) {
  const size_t comma = text.find(',');
  if (comma == std::string::npos || text.find(',', comma + 1) != std::string::npos)
    throw ParseError(field,
                     "expected two backends A,B such as ref:C1,ref:C2 (see `bitparity list`); got '" + text + "'");
  BackendPair pair{text.substr(0, comma), text.substr(comma + 1)};
  split_backend_name(pair.a);  // both must read KIND:CONTRACT
  split_backend_name(pair.b);
  return pair;
}

std::string case_title(const Case& c) { return c.op + " " + std::string(direction_name(c.direction)); }

namespace {

DiffResult classify_outcomes(const Case& c, const BackendPair& pair, const Outcome& a, const Outcome& b,
                             const CompareOptions& options) {
  DiffResult r;
  // A side that failed rather than answered: a device fault outranks a backend error (the process
  // is gone, whatever the other side did). Which side failed separates the findings: the output is
  // "fault:a", "error:b", "error:both", ...
  for (const auto& [kind, prefix, title] : {std::tuple{kDeviceFault, "fault:", ": device fault\n"},
                                            std::tuple{kSanitizerHazard, "hazard:", ": sanitizer hazard\n"},
                                            std::tuple{kBackendError, "error:", ": backend error\n"}}) {
    const bool a_failed = a.rejected() && a.reject_class == kind;
    const bool b_failed = b.rejected() && b.reject_class == kind;
    if (!a_failed && !b_failed) continue;
    r.verdict = DiffVerdict::kFinding;
    r.kind = kind;
    r.output = std::string(prefix) + (a_failed && b_failed ? "both" : a_failed ? "a" : "b");
    r.message = case_title(c) + " " + pair.name() + title + describe_side(pair.a, a) + "\n" + describe_side(pair.b, b);
    return r;
  }
  if ((a.rejected() && a.reject_class == kUnmodelled) || (b.rejected() && b.reject_class == kUnmodelled)) {
    r.verdict = DiffVerdict::kSkip;
    r.kind = kUnmodelled;
    r.message = describe_side(pair.a, a) + "\n" + describe_side(pair.b, b);
    return r;
  }
  if (a.rejected() && b.rejected() && a.reject_class == b.reject_class) {
    r.message = case_title(c) + " " + pair.name() + ": both reject (" + a.reject_class + ")";
    return r;
  }
  if (a.rejected() || b.rejected()) return error_mismatch(c, pair, a, b);

  r.comparison = compare_outputs(*a.outputs, *b.outputs, options);
  r.message = format_comparison(*r.comparison, case_title(c), pair.a, pair.b);
  if (r.comparison->verdict == Verdict::kIdentical) return r;
  r.verdict = DiffVerdict::kFinding;
  r.kind = verdict_name(r.comparison->verdict);
  r.output = r.comparison->first_difference()->name;
  return r;
}

// The contract of either side that carries an error bound (the first side's first), or nullptr.
const ContractInfo* bounded_contract(const Registry& registry, const Case& c, const BackendPair& pair) {
  const OpInfo* op = registry.op(c.op);
  if (!op || pair.twice()) return nullptr;
  for (const std::string& backend : {pair.a, pair.b}) {
    const ContractInfo* contract = op->contract(split_backend_name(backend).second);
    if (contract && contract->error_bound) return contract;
  }
  return nullptr;
}

std::string format_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

// The contract of either side, two different sides, whose order of arrival decides the case's bits
// (arrival_order_matters) on a side other than the reference (which fixes one order), or nullptr.
// One backend twice is not judged by it: there every difference is nondeterminism.
const ContractInfo* arrival_decides(const Registry& registry, const Case& c, const BackendPair& pair) {
  const OpInfo* op = registry.op(c.op);
  if (!op || pair.twice()) return nullptr;
  for (const std::string& backend : {pair.a, pair.b}) {
    const auto [kind, name] = split_backend_name(backend);
    if (kind == kReferenceKind) continue;
    const ContractInfo* contract = op->contract(name);
    if (contract && arrival_order_matters(*contract, c)) return contract;
  }
  return nullptr;
}

// The first element of `contract`'s arrival_order_fixed where the two sides' bits differ (NaN
// against NaN agrees unless strict_nan, as compare_outputs has it), with its output, or nothing. A
// mask of another size than its output is an error of the op's spec (std::logic_error).
std::optional<std::pair<std::string, ElementMismatch>> one_addend_difference(const ContractInfo& contract,
                                                                             const Case& c, const Outcome& a,
                                                                             const Outcome& b,
                                                                             const CompareOptions& options) {
  if (!contract.arrival_order_fixed || !a.outputs || !b.outputs) return std::nullopt;
  for (const auto& [name, one] : contract.arrival_order_fixed(c)) {
    const auto x = a.outputs->find(name), y = b.outputs->find(name);
    if (x == a.outputs->end() || y == b.outputs->end()) continue;
    const Tensor& ta = x->second;
    const Tensor& tb = y->second;
    if (ta.dtype() != tb.dtype() || ta.shape() != tb.shape()) continue;  // compare_outputs' shape mismatch
    if (static_cast<size_t>(ta.numel()) != one.size())
      throw std::logic_error(contract.name + ": arrival_order_fixed gives " + name + " a mask of " +
                             std::to_string(one.size()) + " elements, the output has " + std::to_string(ta.numel()));
    for (int64_t i = 0; i < ta.numel(); ++i) {
      const uint64_t u = ta.bits(i), v = tb.bits(i);
      if (!one[static_cast<size_t>(i)] || bits_equal(ta.dtype(), u, v, options.strict_nan)) continue;
      const std::optional<uint64_t> ulps = is_floating(ta.dtype()) ? ulp_distance(ta.dtype(), u, v) : std::nullopt;
      return std::pair{name, ElementMismatch{i, unravel(i, ta.shape()), u, v, ulps}};
    }
  }
  return std::nullopt;
}

// The first element, of an output that differs in bits and that `bounds` covers, that a side has
// outside its bound (each side, or only the sides of contract `only` where it is given): r becomes
// that kUlpOverBudget finding (`what` names whose bound it is), and the answer is true. Outputs
// `bounds` leaves out are not looked at.
bool outside_bound(const std::map<std::string, ElementBounds>& bounds, const std::string& what, const Case& c,
                   const BackendPair& pair, const Outcome& a, const Outcome& b, DiffResult& r,
                   const std::string& only = "") {
  for (const OutputComparison& o : r.comparison->outputs) {
    const auto covered = bounds.find(o.name);
    if (!o.mismatches || covered == bounds.end()) continue;
    for (const auto& [backend, side] : {std::pair{pair.a, &a}, std::pair{pair.b, &b}}) {
      if (!only.empty() && split_backend_name(backend).second != only) continue;
      const Tensor& t = side->outputs->at(o.name);
      const BoundCheck check = check_bound(t, covered->second);
      if (!check.outside) continue;
      const auto i = *check.first;
      r.verdict = DiffVerdict::kFinding;
      r.kind = kUlpOverBudget;
      r.output = o.name;
      r.excess = BoundExcess{o.name,
                             backend,
                             check.outside,
                             i,
                             check.position,
                             a.outputs->at(o.name).bits(i),
                             b.outputs->at(o.name).bits(i),
                             check.value,
                             check.truth,
                             check.bound};
      r.message = case_title(c) + " " + pair.name() + ": outside " + what + "\n" + std::to_string(check.outside) +
                  " / " + std::to_string(o.numel) + " elements of " + o.name + " from " + backend +
                  " beyond the bound; first at " + o.name + position_string(check.position) + ": " +
                  format_number(check.value) + ", true value " + format_number(check.truth) + ", bound " +
                  format_number(check.bound) + "\n" + r.message;
      return true;
    }
  }
  return false;
}

// A bit mismatch judged by `contract`'s error bound: every output that differs in bits and that the
// bound covers, both sides; an output the bound does not cover stays a bit mismatch.
void judge_by_bound(const ContractInfo& contract, const Case& c, const BackendPair& pair, const Outcome& a,
                    const Outcome& b, DiffResult& r) {
  const std::map<std::string, ElementBounds> bounds = contract.error_bound(c);
  for (const OutputComparison& o : r.comparison->outputs)
    if (o.mismatches && !bounds.contains(o.name)) {  // an output that differs outside the bound's cover
      r.bounded = false;
      r.output = o.name;
      return;
    }
  if (outside_bound(bounds, "the error bound of contract " + contract.name, c, pair, a, b, r)) return;
  r.verdict = DiffVerdict::kAgree;
  r.kind.clear();
  r.output.clear();
  r.message = case_title(c) + " " + pair.name() + ": within the error bound of contract " + contract.name +
              " (bits differ)\n" + r.message;
}

}  // namespace

DiffResult classify(const Registry& registry, const Case& c, const BackendPair& pair, const Outcome& a,
                    const Outcome& b, const CompareOptions& options) {
  DiffResult r = classify_outcomes(c, pair, a, b, options);
  if (r.verdict == DiffVerdict::kFinding && r.kind == verdict_name(Verdict::kBitMismatch)) {
    if (const ContractInfo* contract = bounded_contract(registry, c, pair)) {
      r.bounded = true;
      judge_by_bound(*contract, c, pair, a, b, r);
    } else if (const ContractInfo* atomic = arrival_decides(registry, c, pair)) {
      if (const auto one = one_addend_difference(*atomic, c, a, b, options)) {
        r.output = one->first;  // a finding: no order gives those bits
        r.one_addend = one->second;
        r.message = case_title(c) + " " + pair.name() + ": " + one->first + position_string(one->second.position) +
                    " differs (" + hex_bits(a.outputs->at(one->first).dtype(), one->second.a_bits) + " against " +
                    hex_bits(a.outputs->at(one->first).dtype(), one->second.b_bits) +
                    "), an element of one addend, whose bits every order of arrival gives alike\n" + r.message;
      } else if (atomic->arrival_order_bound &&  // on its own sides: another contract rounds otherwise
                 outside_bound(atomic->arrival_order_bound(c),
                               "the bound every order of arrival of contract " + atomic->name + " keeps", c, pair, a, b,
                               r, atomic->name)) {
        r.bounded = true;  // no order of arrival gives that value
      } else {
        r.verdict = DiffVerdict::kSkip;
        r.kind = kArrivalOrder;
        r.output.clear();
        r.message = case_title(c) + " " + pair.name() + ": " + atomic->name +
                    " adds in the order its additions arrive, which decides these bits" +
                    (atomic->arrival_order_bound ? " (within the bound every order keeps)" : "") + "\n" +
                    r.message;
      }
    }
  }
  // One backend twice: a backend error, a device fault or a hazard is still that, any other difference is nondeterminism (the
  // output names what differed: an output, or "rejects:a/b" when only one run rejected).
  if (pair.twice() && r.verdict == DiffVerdict::kFinding && r.kind != kBackendError && r.kind != kDeviceFault &&
      r.kind != kSanitizerHazard) {
    r.message = "nondeterminism: two runs of " + pair.a + " differ (" + r.kind + ")\n" + r.message;
    r.kind = kNondeterminism;
  }
  return r;
}

DiffResult diff_rows(const Registry& registry, const Case& c, const std::string& backend, const RowCut& cut,
                     const CompareOptions& options) {
  const OpInfo* op = registry.op(c.op);
  if (!op) throw std::runtime_error("unknown op " + c.op);
  const Case part = cut_rows(*op, c, cut.first, cut.count);
  const Outcome whole = run_side(registry, backend, c), alone = run_side(registry, backend, part);
  const std::string rows = "rows [" + std::to_string(cut.first) + ", " + std::to_string(cut.first + cut.count) + ")";
  DiffResult r;
  if (whole.rejected() || alone.rejected()) {
    if (!whole.rejected()) {
      r.verdict = DiffVerdict::kFinding;
      r.kind = kInvarianceViolation;
      r.message = case_title(c) + " " + backend + ": " + rows + " alone are refused (" + alone.reject_class + ": " +
                  alone.message + ") while the whole case computes";
    }
    return r;
  }
  const int64_t total = row_count(*op, c);
  TensorMap in_whole, by_themselves;
  for (const TensorSpec& spec : op->output_specs(c.direction)) {
    if (!spec.rows_first || spec.row_count_dependent) continue;
    auto w = whole.outputs->find(spec.name);
    auto a = alone.outputs->find(spec.name);
    if (w == whole.outputs->end() || a == alone.outputs->end() || w->second.rank() == 0 || w->second.dim(0) != total)
      continue;
    in_whole[spec.name] = tensor_rows(w->second, cut.first, cut.count);
    by_themselves[spec.name] = a->second;
  }
  Comparison cmp = compare_outputs(in_whole, by_themselves, options);
  if (cmp.verdict == Verdict::kIdentical) return r;
  r.verdict = DiffVerdict::kFinding;
  r.kind = kInvarianceViolation;
  if (const OutputComparison* first = cmp.first_difference()) r.output = first->name;
  r.message = format_comparison(cmp, case_title(c) + " " + rows + " of " + std::to_string(total),
                                backend + " (whole case)", backend + " (rows alone)");
  r.comparison = std::move(cmp);
  return r;
}

DiffResult diff_case(const Registry& registry, const Case& c, const BackendPair& pair, const CompareOptions& options) {
  return classify(registry, c, pair, run_side(registry, pair.a, c), run_side(registry, pair.b, c), options);
}

std::string finding_signature(const OpInfo& op, const Case& c, const BackendPair& pair, const DiffResult& result) {
  // The pair is unordered: ref:a vs ref:b and ref:b vs ref:a show one divergence.
  const std::string first = std::min(pair.a, pair.b), second = std::max(pair.a, pair.b);
  const CaseClasses classes = op.classes ? op.classes(c) : CaseClasses{};
  return c.op + "|" + std::string(direction_name(c.direction)) + "|" + first + "|" + second + "|" + result.kind + "|" +
         (result.output.empty() ? "-" : result.output) + "|" + classes.shape_class + "|" + classes.value_class;
}

std::optional<SignatureFields> parse_signature(const std::string& signature) {
  std::vector<std::string> f;
  for (size_t at = 0;;) {
    const size_t bar = signature.find('|', at);
    f.push_back(signature.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
    if (bar == std::string::npos) break;
    at = bar + 1;
  }
  if (f.size() != 8) return std::nullopt;
  return SignatureFields{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]};
}

json first_mismatch_json(const DiffResult& result) {
  if (!result.comparison) return nullptr;
  if (result.one_addend) {  // the element of one addend that makes the finding, not the first that differs
    const auto it = std::find_if(result.comparison->outputs.begin(), result.comparison->outputs.end(),
                                 [&](const OutputComparison& o) { return o.name == result.output; });
    const DType dtype = it == result.comparison->outputs.end() ? DType::kFP32 : it->dtype;
    const ElementMismatch& m = *result.one_addend;
    return {{"index", m.index},
            {"position", m.position},
            {"a_bits", hex_bits(dtype, m.a_bits)},
            {"b_bits", hex_bits(dtype, m.b_bits)},
            {"ulps", m.ulps ? json(*m.ulps) : json(nullptr)}};
  }
  if (result.excess) {  // the element beyond the bound, not the first that differs in bits
    const BoundExcess& e = *result.excess;
    const auto it = std::find_if(result.comparison->outputs.begin(), result.comparison->outputs.end(),
                                 [&](const OutputComparison& o) { return o.name == e.output; });
    const DType dtype = it == result.comparison->outputs.end() ? DType::kFP32 : it->dtype;
    const std::optional<uint64_t> ulps = ulp_distance(dtype, e.a_bits, e.b_bits);
    return {{"index", e.index},
            {"position", e.position},
            {"a_bits", hex_bits(dtype, e.a_bits)},
            {"b_bits", hex_bits(dtype, e.b_bits)},
            {"ulps", ulps ? json(*ulps) : json(nullptr)},
            {"bound", {{"backend", e.backend},
                       {"outside", e.outside},
                       {"value", finite_or_text(e.value)},
                       {"truth", finite_or_text(e.truth)},
                       {"bound", finite_or_text(e.bound)}}}};
  }
  const OutputComparison* d = result.comparison->first_difference();
  if (!d || !d->first) return nullptr;
  const ElementMismatch& m = *d->first;
  return {{"index", m.index},
          {"position", m.position},
          {"a_bits", hex_bits(d->dtype, m.a_bits)},
          {"b_bits", hex_bits(d->dtype, m.b_bits)},
          {"ulps", m.ulps ? json(*m.ulps) : json(nullptr)}};
}

json arbitration_json(const OpInfo& op, const Case& c, const BackendPair& pair, const DiffResult& result) {
  if (!op.oracle || !result.comparison) return nullptr;
  const OutputComparison* d = result.comparison->first_difference();
  if (result.one_addend) {  // the element of one addend that makes the finding
    const auto it = std::find_if(result.comparison->outputs.begin(), result.comparison->outputs.end(),
                                 [&](const OutputComparison& o) { return o.name == result.output; });
    d = it == result.comparison->outputs.end() ? nullptr : &*it;
  }
  if (!d || !d->first || !is_floating(d->dtype)) return nullptr;
  const ElementMismatch& first = result.one_addend ? *result.one_addend : *d->first;
  std::map<std::string, std::vector<double>> truths;
  try {
    truths = op.oracle(c);
  } catch (const std::exception&) {
    return nullptr;  // an oracle that cannot handle the case arbitrates nothing
  }
  auto it = truths.find(d->name);
  if (it == truths.end() || first.index >= static_cast<int64_t>(it->second.size())) return nullptr;
  const Arbitration arb = arbitrate(d->dtype, first.a_bits, first.b_bits, it->second[static_cast<size_t>(first.index)]);
  const std::string closer = arb.closer == "a" ? pair.a : arb.closer == "b" ? pair.b : "tie";
  return {{"truth", finite_or_text(arb.truth)},
          {"a_ulps", ulps_json(arb.a_ulps)},
          {"b_ulps", ulps_json(arb.b_ulps)},
          {"closer", closer}};
}

}  // namespace bitparity::corpus
