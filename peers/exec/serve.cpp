#include "peers/exec/serve.h"

#include <iostream>
#include <stdexcept>

#include "core/case_json.h"
#include "core/error.h"
#include "core/json_strict.h"
#include "peers/exec/exec_backend.h"

namespace bitparity::peers {

using nlohmann::json;

int serve_worker(const Registry& registry, const std::string& kind, std::istream& in, std::ostream& out,
                 const BeforeCase& before_case, const IsFatal& is_fatal) {
  json implements = json::object();
  for (const OpInfo& op : registry.ops())
    for (const std::string& impl : registry.impls_of(op.name)) {
      const auto [impl_kind, contract] = split_backend_name(impl);
      if (impl_kind == kind) implements[op.name].push_back(contract);
    }
  if (implements.empty()) throw std::runtime_error("backend kind \"" + kind + "\" has no implementation in this binary");
  out << json{{"format", kWorkerFormat}, {"implements", implements}}.dump() << std::endl;

  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    int64_t id = 0;
    json answer;
    try {
      json request = parse_json_text(line, "request");
      id = get_int(request, "id", "");
      const std::string contract = get_string(request, "contract", "");
      request.erase("id");
      request.erase("contract");
      const Case c = case_from_json(request, registry);
      if (before_case) before_case(c, contract);
      answer = {{"id", id}, {"outputs", tensors_to_json(run_impl(registry, kind + ":" + contract, c))}};
    } catch (const RejectError& e) {
      answer = {{"id", id}, {"reject", {{"class", e.error_class()}, {"message", e.what()}}}};
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
