// The worker side of the exec protocol (exec_backend.h): `bitparity worker --kind KIND` serves
// every implementation of one backend kind of this binary to another bitparity process. A campaign
// uses it to run GPU cases in a process it can restart, and it is the protocol's reference worker.
#pragma once

#include <functional>
#include <istream>
#include <ostream>
#include <string>

#include "core/registry.h"

namespace bitparity::peers {

// Called with each request's case before it runs (tests plant faults here); may not return.
using BeforeCase = std::function<void(const Case&, const std::string& contract)>;
// Whether an implementation's exception left this process unable to compute anything more (a
// fault inside a CUDA kernel leaves the context unusable): the worker then stops without answering,
// so that the client records a device_fault against this case and starts a fresh worker, instead
// of every later case failing in its place.
using IsFatal = std::function<bool(const std::exception&)>;

// The exit status of a worker that stopped on a fatal error.
inline constexpr int kWorkerExitFatal = 3;

// Writes the hello, then answers each request line until the input ends. A line that is not a
// request gets an "error" answer naming what is wrong (with its id when it has one, else 0), so a
// client sees its own protocol errors. Returns 0 at the end of the input, kWorkerExitFatal after a
// fatal error (its message on stderr). Throws
// std::runtime_error when `kind` has no implementation in the registry.
int serve_worker(const Registry& registry, const std::string& kind, std::istream& in, std::ostream& out,
                 const BeforeCase& before_case = {}, const IsFatal& is_fatal = {});

}  // namespace bitparity::peers
