#include "peers/exec/exec_backend.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "core/case_json.h"
#include "core/error.h"
#include "core/json_strict.h"

namespace bitparity::peers {
namespace {

using nlohmann::json;

// The hello's "implements": op -> contracts, each checked against the registry.
std::vector<std::pair<std::string, std::string>> read_hello(const Registry& registry, const std::string& worker,
                                                            const std::string& line) {
  const std::string what = "worker " + worker + "'s hello";
  json hello;
  try {
    hello = parse_json_text(line, what);
  } catch (const ParseError& e) {
    throw std::runtime_error(std::string(e.what()) + " (a worker's first line must be {\"format\": \"" +
                             std::string(kWorkerFormat) + "\", \"implements\": {...}})");
  }
  try {
    const std::string format = get_string(hello, "format", "");
    if (format != kWorkerFormat)
      throw ParseError("format", "expected \"" + std::string(kWorkerFormat) + "\", got \"" + format.substr(0, 40) + "\"");
    std::vector<std::pair<std::string, std::string>> out;
    const json& implements = require_object(hello, "implements", "");
    for (const auto& [op_name, contracts] : implements.items()) {
      const std::string field = path_of("implements", op_name);
      const OpInfo* op = registry.op(op_name);
      if (!op) throw ParseError(field, "no op of that name in this binary (see `bitparity list`)");
      if (!contracts.is_array()) throw ParseError(field, "expected an array of contract names, got " + json_type(contracts));
      for (const json& contract : contracts) {
        if (!contract.is_string()) throw ParseError(field, "expected contract names (strings), got " + json_type(contract));
        if (!op->has_contract(contract.get<std::string>()))
          throw ParseError(field, op_name + " has no contract \"" + contract.get<std::string>().substr(0, 40) + "\"");
        out.emplace_back(op_name, contract.get<std::string>());
      }
    }
    if (out.empty()) throw ParseError("implements", "names no op and contract");
    return out;
  } catch (const ParseError& e) {
    throw std::runtime_error(what + ": " + e.what());
  }
}

// The worker's answer to request `id`: the outputs, or the RejectError / backend error it reports.
TensorMap read_answer(WorkerProcess& worker, const std::string& line, int64_t id) {
  const std::string& name = worker.options().name;
  json answer;
  try {
    answer = parse_json_text(line, "worker " + name + "'s answer");
    if (get_int(answer, "id", "") != id) throw ParseError("id", "expected " + std::to_string(id) + ", the request's id");
    if (answer.contains("outputs")) return tensors_from_json(require_object(answer, "outputs", ""), "outputs");
    if (answer.contains("reject")) {
      const json& reject = require_object(answer, "reject", "");
      throw RejectError(get_string(reject, "class", "reject"), get_string(reject, "message", "reject"));
    }
    if (answer.contains("error")) throw std::runtime_error("worker " + name + ": " + get_string(answer, "error", ""));
    throw ParseError("", "expected one of \"outputs\", \"reject\" or \"error\"");
  } catch (const ParseError& e) {
    // Out of protocol: what the worker writes next cannot be trusted to answer the next request.
    worker.reset();
    throw DeviceFault("worker " + name + " broke the protocol: " + e.what());
  }
}

// The workers of one kind; a call takes a free one for its duration.
struct Pool {
  std::vector<std::shared_ptr<WorkerProcess>> workers;
  std::vector<bool> busy;
  std::mutex mutex;
  std::condition_variable freed;

  class Taken {
   public:
    explicit Taken(Pool& pool) : pool_(pool) {
      std::unique_lock<std::mutex> lock(pool_.mutex);
      pool_.freed.wait(lock, [&] {
        for (size_t i = 0; i < pool_.busy.size(); ++i)
          if (!pool_.busy[i]) return index_ = i, true;
        return false;
      });
      pool_.busy[index_] = true;
    }
    ~Taken() {
      {
        const std::lock_guard<std::mutex> lock(pool_.mutex);
        pool_.busy[index_] = false;
      }
      pool_.freed.notify_one();
    }
    Taken(const Taken&) = delete;
    Taken& operator=(const Taken&) = delete;
    WorkerProcess& worker() const { return *pool_.workers[index_]; }

   private:
    Pool& pool_;
    size_t index_ = 0;
  };
};

}  // namespace

std::pair<std::string, std::string> parse_exec_spec(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw ParseError("--exec", "expected NAME=COMMAND (a backend kind and the command that starts its worker)");
  std::string name = spec.substr(0, eq);
  if (!valid_kind_name(name))
    throw ParseError("--exec", "the backend kind \"" + name.substr(0, 64) + "\" must match [a-z][a-z0-9_]*");
  return {std::move(name), spec.substr(eq + 1)};
}

std::shared_ptr<WorkerProcess> add_exec_backend(Registry& registry, const std::string& kind, WorkerOptions options) {
  std::vector<WorkerOptions> pool;
  pool.push_back(std::move(options));
  return add_exec_backend(registry, kind, std::move(pool)).front();
}

std::vector<std::shared_ptr<WorkerProcess>> add_exec_backend(Registry& registry, const std::string& kind,
                                                             std::vector<WorkerOptions> pool) {
  if (!valid_kind_name(kind)) throw std::runtime_error("backend kind \"" + kind + "\" must match [a-z][a-z0-9_]*");
  if (registry.backend(kind)) throw std::runtime_error("backend kind \"" + kind + "\" exists already; choose another name");
  if (pool.empty()) throw std::runtime_error("backend kind \"" + kind + "\": a pool of no workers");
  auto workers = std::make_shared<Pool>();
  std::vector<std::pair<std::string, std::string>> implemented;
  std::string command;
  for (WorkerOptions& options : pool) {
    if (options.name.empty()) options.name = kind;
    command.clear();
    for (const std::string& a : options.argv) command += (command.empty() ? "" : " ") + a;
    const std::string name = options.name;
    auto worker = std::make_shared<WorkerProcess>(std::move(options));
    std::string hello;
    try {
      hello = worker->start();
    } catch (const DeviceFault& e) {
      throw std::runtime_error(std::string(e.what()) + "\n(the command was: " + command + ")");
    }
    auto mine = read_hello(registry, name, hello);
    std::sort(mine.begin(), mine.end());
    if (workers->workers.empty()) {
      implemented = std::move(mine);
    } else if (mine != implemented) {
      throw std::runtime_error("worker " + name + " names other implementations in its hello than worker " +
                               workers->workers.front()->options().name + ": the workers of one kind must serve the same");
    }
    workers->workers.push_back(std::move(worker));
  }
  workers->busy.assign(workers->workers.size(), false);
  BackendKind backend{kind, "a worker process: " + command, [] { return std::optional<std::string>(); }};
  backend.concurrent_calls = static_cast<int>(workers->workers.size());
  if (workers->workers.size() > 1) backend.doc += " (" + std::to_string(workers->workers.size()) + " workers)";
  registry.add_backend(backend);
  auto next_id = std::make_shared<std::atomic<int64_t>>(1);
  for (const auto& [op, contract] : implemented) {
    registry.add_impl(op, kind, contract, [workers, next_id](const Case& c, const ContractInfo& info) {
      const int64_t id = next_id->fetch_add(1);
      json request = case_to_json(c);
      request["id"] = id;
      request["contract"] = info.name;
      const Pool::Taken taken(*workers);
      return read_answer(taken.worker(), taken.worker().request(request.dump()), id);
    });
  }
  return workers->workers;
}

}  // namespace bitparity::peers
