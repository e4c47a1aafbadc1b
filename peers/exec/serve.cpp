#include "peers/exec/serve.h"

#include <exception>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <vector>

#include "core/case_json.h"
#include "core/error.h"
#include "core/json_strict.h"
#include "peers/exec/exec_backend.h"

namespace bitparity::peers {

using nlohmann::json;

namespace {

// What the worker answers for one case's outcome: its outputs, or its rejection or error; nullopt
// for an error that left this process unable to compute more (is_fatal).
std::optional<json> answer_of(const BatchOutcome& outcome, const IsFatal& is_fatal, std::string* fatal_message) {
  if (!outcome.error) return json{{"outputs", tensors_to_json(outcome.outputs)}};
  try {
    std::rethrow_exception(outcome.error);
  } catch (const RejectError& e) {
    return json{{"reject", {{"class", e.error_class()}, {"message", e.what()}}}};
  } catch (const std::exception& e) {
    if (is_fatal && is_fatal(e)) {
      *fatal_message = e.what();
      return std::nullopt;
    }
    return json{{"error", e.what()}};
  } catch (...) {
    return json{{"error", "a non-standard exception"}};
  }
}

}  // namespace

int serve_worker(const Registry& registry, const std::string& kind, std::istream& in, std::ostream& out,
                 const BeforeCase& before_case, const IsFatal& is_fatal) {
  json implements = json::object();
  for (const OpInfo& op : registry.ops())
    for (const std::string& impl : registry.impls_of(op.name)) {
      const auto [impl_kind, contract] = split_backend_name(impl);
      if (impl_kind == kind) implements[op.name].push_back(contract);
    }
  if (implements.empty()) throw std::runtime_error("backend kind \"" + kind + "\" has no implementation in this binary");
  out << json{{"format", kWorkerFormat}, {"implements", implements}, {"batch", true}}.dump() << std::endl;

  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    int64_t id = 0;
    bool batch = false;
    json answer;
    try {
      json request = parse_json_text(line, "request");
      id = get_int(request, "id", "");
      const std::string contract = get_string(request, "contract", "");
      request.erase("id");
      request.erase("contract");
      batch = request.contains("batch");
      if (batch) {
        // Several cases of one op and contract: each case's answer in "results", in order, each
        // what the case alone would get (run_batch_impl).
        const json& list = require_array(request, "batch", "");
        std::vector<Case> cases;
        cases.reserve(list.size());
        for (size_t i = 0; i < list.size(); ++i) {
          if (!list[i].is_object()) throw ParseError(path_of("batch", std::to_string(i)), "expected a case, got " + json_type(list[i]));
          cases.push_back(case_from_json(list[i], registry));
        }
        std::vector<const Case*> pointers;
        for (const Case& c : cases) {
          if (before_case) before_case(c, contract);
          pointers.push_back(&c);
        }
        json results = json::array();
        std::string fatal;
        for (const BatchOutcome& outcome : run_batch_impl(registry, kind + ":" + contract, pointers)) {
          std::optional<json> result = answer_of(outcome, is_fatal, &fatal);
          if (!result) {
            std::cerr << "bitparity worker: stopping, this process cannot compute more: " << fatal << std::endl;
            return kWorkerExitFatal;
          }
          results.push_back(std::move(*result));
        }
        answer = {{"id", id}, {"results", std::move(results)}};
        out << answer.dump() << std::endl;
        continue;
      }
      const Case c = case_from_json(request, registry);
      if (before_case) before_case(c, contract);
      answer = {{"id", id}, {"outputs", tensors_to_json(run_impl(registry, kind + ":" + contract, c))}};
    } catch (const RejectError& e) {
      // A batch's cases are answered in "results"; a rejection of the request itself is an error.
      if (batch) answer = {{"id", id}, {"error", e.what()}};
      else answer = {{"id", id}, {"reject", {{"class", e.error_class()}, {"message", e.what()}}}};
    } catch (const std::exception& e) {
      if (is_fatal && is_fatal(e)) {
        std::cerr << "bitparity worker: stopping, this process cannot compute more: " << e.what() << std::endl;
        return kWorkerExitFatal;
      }
      answer = {{"id", id}, {"error", e.what()}};
    }
    out << answer.dump() << std::endl;
  }
  return 0;
}

}  // namespace bitparity::peers
