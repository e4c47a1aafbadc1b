#include "peers/exec/exec_backend.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "core/case_json.h"
#include "core/error.h"
#include "core/json_strict.h"

namespace bitparity::peers {
namespace {

using nlohmann::json;

struct Hello {
  std::vector<std::pair<std::string, std::string>> implements;  // op, contract
  bool batch = false;  // takes batch requests
};

// The hello's "implements": op -> contracts, each checked against the registry; its "batch"
// (optional, a bool).
Hello read_hello(const Registry& registry, const std::string& worker, const std::string& line) {
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
      const OpInfo* op = registry.op(op_name);
      if (!op) throw ParseError("implements", "no op " + excerpt(op_name) + " in this binary (see `bitparity list`)");
      const std::string field = path_of("implements", op_name);
      if (!contracts.is_array()) throw ParseError(field, "expected an array of contract names, got " + json_type(contracts));
      for (const json& contract : contracts) {
        if (!contract.is_string()) throw ParseError(field, "expected contract names (strings), got " + json_type(contract));
        if (!op->has_contract(contract.get<std::string>()))
          throw ParseError(field, op_name + " has no contract " + excerpt(contract.get<std::string>()));
        if (std::find(out.begin(), out.end(), std::pair(op_name, contract.get<std::string>())) != out.end())
          throw ParseError(field, "names " + contract.get<std::string>() + " twice");
        out.emplace_back(op_name, contract.get<std::string>());
      }
    }
    if (out.empty()) throw ParseError("implements", "names no op and contract");
    const bool batch = hello.contains("batch") && get_bool(hello, "batch", "");
    return {out, batch};
  } catch (const ParseError& e) {
    throw std::runtime_error(what + ": " + e.what());
  }
}

// One case's answer (a single request's answer, or an element of a batch's "results"): the
// outputs, or the RejectError / backend error it reports. ParseError when it is none of them.
TensorMap outputs_of(const std::string& worker, const json& answer, const std::string& field,
                     const std::vector<TensorSpec>& declared) {
  if (answer.contains("outputs")) {
    // Only the op's own outputs: a name the op does not have would reach a finding, and the
    // corpus entry's signature, which no reader of the corpus accepts.
    const json& outputs = require_object(answer, "outputs", field);
    for (const auto& item : outputs.items()) {
      const std::string& name = item.key();
      if (std::none_of(declared.begin(), declared.end(), [&](const TensorSpec& s) { return s.name == name; }))
        throw ParseError(path_of(field, "outputs"), "the op has no output " + excerpt(name));
    }
    return tensors_from_json(outputs, path_of(field, "outputs"));
  }
  if (answer.contains("reject")) {
    const json& reject = require_object(answer, "reject", field);
    // The class goes into findings' signatures, which are '|'-separated and free of control
    // characters: it is a name like the op's own classes (shape, dtype, attr, ...), and no outcome
    // that harnesses count as a finding (device_fault).
    const std::string error_class = get_string(reject, "class", path_of(field, "reject"));
    if (!valid_reject_class(error_class))
      throw ParseError(path_of(path_of(field, "reject"), "class"),
                       std::string("expected ") + kRejectClassRule + ", got " + excerpt(error_class));
    throw RejectError(error_class, printable(get_string(reject, "message", path_of(field, "reject"))));
  }
  if (answer.contains("error")) throw std::runtime_error("worker " + worker + ": " + printable(get_string(answer, "error", field)));
  throw ParseError(field, "expected one of \"outputs\", \"reject\" or \"error\"");
}

// The worker's answer line to request `id`, parsed and its id checked; out of protocol: the
// worker reset (what it writes next cannot be trusted to answer the next request) and DeviceFault.
json answer_to(WorkerProcess& worker, const std::string& line, int64_t id) {
  try {
    json answer = parse_json_text(line, "worker " + worker.options().name + "'s answer");
    if (get_int(answer, "id", "") != id) throw ParseError("id", "expected " + std::to_string(id) + ", the request's id");
    return answer;
  } catch (const ParseError& e) {
    worker.reset();
    throw DeviceFault("worker " + worker.options().name + " broke the protocol: " + e.what());
  }
}

// The worker's answer to request `id`: the outputs, or the RejectError / backend error it reports.
TensorMap read_answer(WorkerProcess& worker, const std::string& line, int64_t id,
                      const std::vector<TensorSpec>& declared) {
  const json answer = answer_to(worker, line, id);
  try {
    return outputs_of(worker.options().name, answer, "", declared);
  } catch (const ParseError& e) {
    worker.reset();
    throw DeviceFault("worker " + worker.options().name + " broke the protocol: " + e.what());
  }
}

// The worker's answer to batch request `id` of `n` cases: each case's outcome, in order. An
// "error" for the whole batch (a request the worker could not read) throws std::runtime_error.
std::vector<BatchOutcome> read_batch_answer(WorkerProcess& worker, const std::string& line, int64_t id, size_t n,
                                            const std::vector<TensorSpec>& declared) {
  const json answer = answer_to(worker, line, id);
  const std::string& name = worker.options().name;
  std::vector<BatchOutcome> out(n);
  try {
    if (!answer.contains("results") && answer.contains("error"))
      throw std::runtime_error("worker " + name + ": " + get_string(answer, "error", ""));
    const json& results = require_array(answer, "results", "");
    if (results.size() != n)
      throw ParseError("results", "expected " + std::to_string(n) + " answers, one a case of the batch, got " +
                                      std::to_string(results.size()));
    for (size_t i = 0; i < n; ++i) {
      const std::string field = path_of("results", std::to_string(i));
      if (!results[i].is_object()) throw ParseError(field, "expected an object, got " + json_type(results[i]));
      try {
        out[i].outputs = outputs_of(name, results[i], field, declared);
      } catch (const ParseError&) {
        throw;
      } catch (...) {
        out[i].error = std::current_exception();
      }
    }
  } catch (const ParseError& e) {
    worker.reset();
    throw DeviceFault("worker " + name + " broke the protocol: " + e.what());
  }
  return out;
}

// The bytes of a case's inputs: a batch request holds at most kWorkerBatchBytes of them (a case
// larger than that goes alone), so that no request or answer line nears the line limit.
size_t input_bytes(const Case& c) {
  size_t bytes = 0;
  for (const auto& [name, t] : c.inputs) bytes += t.nbytes();
  return bytes;
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
  bool batch = true;  // every worker of the pool takes batch requests
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
    Hello mine = read_hello(registry, name, hello);
    std::sort(mine.implements.begin(), mine.implements.end());
    if (workers->workers.empty()) {
      implemented = std::move(mine.implements);
      batch = mine.batch;
    } else if (mine.implements != implemented) {
      throw std::runtime_error("worker " + name + " names other implementations in its hello than worker " +
                               workers->workers.front()->options().name + ": the workers of one kind must serve the same");
    } else {
      batch = batch && mine.batch;
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
    const std::map<Direction, std::vector<TensorSpec>> outputs = registry.op(op)->outputs;  // read_hello checked the op
    registry.add_impl(op, kind, contract, [workers, next_id, outputs](const Case& c, const ContractInfo& info) {
      const int64_t id = next_id->fetch_add(1);
      json request = case_to_json(c);
      request["id"] = id;
      request["contract"] = info.name;
      const Pool::Taken taken(*workers);
      return read_answer(taken.worker(), taken.worker().request(request.dump()), id, outputs.at(c.direction));
    });
    if (!batch) continue;
    // Batch requests of consecutive cases, each within kWorkerBatchBytes of inputs (one case at
    // least). A fault (the worker dies, hangs, answers out of protocol, or its sanitizer reports)
    // is the whole batch's: it throws, and the campaign runs the batch's cases alone, each in
    // turn, so that the case that caused it is the one that meets it. A batch request has one
    // case's time (request_seconds), so that a hang costs one timeout, not one a case; a batch of
    // slow cases that runs out of it is run again case by case, each with that time.
    registry.add_batch_impl(op, kind, contract, [workers, next_id, outputs](const std::vector<const Case*>& cases,
                                                                            const ContractInfo& info) {
      std::vector<BatchOutcome> out;
      out.reserve(cases.size());
      for (size_t first = 0; first < cases.size();) {
        size_t last = first + 1, bytes = input_bytes(*cases[first]);
        while (last < cases.size() && bytes + input_bytes(*cases[last]) <= kWorkerBatchBytes)
          bytes += input_bytes(*cases[last++]);
        const int64_t id = next_id->fetch_add(1);
        json list = json::array();
        for (size_t i = first; i < last; ++i) list.push_back(case_to_json(*cases[i]));
        const json request = {{"id", id}, {"contract", info.name}, {"batch", std::move(list)}};
        const Pool::Taken taken(*workers);
        for (BatchOutcome& o : read_batch_answer(taken.worker(), taken.worker().request(request.dump()), id, last - first,
                                                 outputs.at(cases.front()->direction)))
          out.push_back(std::move(o));
        first = last;
      }
      return out;
    });
  }
  return workers->workers;
}

}  // namespace bitparity::peers
