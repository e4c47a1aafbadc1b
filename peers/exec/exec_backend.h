// `exec:` backends: a backend kind whose implementations run in a long-lived worker process that
// speaks `bitparity-case/1` over its standard input and output, one JSON document a line
// (README, "Backends in other processes"):
//
//   worker -> bitparity, once:  {"format": "bitparity-worker/1",
//                                "implements": {"swiglu": ["megatron_eager"], ...}}
//   bitparity -> worker:        a case ({"format": "bitparity-case/1", "op", "direction", "attrs",
//                                "inputs"}) plus "id" (an integer) and "contract"
//   worker -> bitparity:        {"id": N, "outputs": {NAME: tensor, ...}}
//                             | {"id": N, "reject": {"class": "shape", "message": "..."}}
//                             | {"id": N, "error": "..."}
//
// A worker whose hello says "batch": true (bitparity's own) also takes several cases of one op and
// contract in one request, and answers each as it would answer the case alone:
//
//   bitparity -> worker:        {"id": N, "contract": C, "batch": [case, case, ...]}
//   worker -> bitparity:        {"id": N, "results": [{"outputs": ...} | {"reject": ...} | {"error": ...}, ...]}
//                             | {"id": N, "error": "..."}   (the request itself was unreadable)
//
// A rejection is the contract refusing the input (compared with the other side's); an error is a
// `backend_error` finding; a worker that dies, hangs past the timeout, or answers out of protocol
// is a `device_fault` finding, and a fresh worker serves the next case.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/registry.h"
#include "peers/exec/worker_process.h"

namespace bitparity::peers {

inline constexpr std::string_view kWorkerFormat = "bitparity-worker/1";
// The inputs a batch request carries at most (a larger case goes alone).
inline constexpr size_t kWorkerBatchBytes = size_t{8} << 20;

// Starts the worker, reads its hello and adds the backend kind `kind` with one implementation per
// (op, contract) it names. The kind must be a new name ([a-z][a-z0-9_]*); every op and contract
// the worker names must exist in the registry. Errors (a worker that does not start, a malformed
// hello, an unknown op) throw std::runtime_error with a message naming the worker.
// Where the worker takes batch requests, each implementation also gets a batch path
// (Registry::add_batch_impl), which a campaign's --batch uses.
// Returns the worker, which the implementations share.
std::shared_ptr<WorkerProcess> add_exec_backend(Registry& registry, const std::string& kind, WorkerOptions options);

// The same kind served by a pool of workers (one per GPU of a node, `--devices N`): each call takes
// a free worker, so the kind runs as many calls at once as it has workers (its concurrent_calls).
// Every worker must name the same implementations in its hello. At least one worker.
std::vector<std::shared_ptr<WorkerProcess>> add_exec_backend(Registry& registry, const std::string& kind,
                                                             std::vector<WorkerOptions> pool);

// "NAME=COMMAND" as `--exec` takes it: the kind and the shell command (run by /bin/sh -c).
std::pair<std::string, std::string> parse_exec_spec(const std::string& spec);

}  // namespace bitparity::peers
