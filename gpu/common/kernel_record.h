// A CUDA contract as a kernel record: (op, contract, a launch on device tensors). The record binds
// a launch to device inputs, preallocated device outputs, a stream and an ILP; one generic wrapper
// (kernel_impl) makes it a registry Impl (validate, upload the inputs, allocate the outputs from
// the op's OutputMetas with a poison pattern, launch, download), and the benchmarks time the bound
// launch on inputs uploaded once. No op writes host <-> device glue of its own. Host code.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "core/case.h"
#include "core/registry.h"
#include "gpu/common/device_tensor.h"
#include "gpu/common/ilp.h"

namespace bitparity::gpu {

// What a record's bind reads. The inputs are the case's (every required one present, validate
// passed); the outputs are allocated, one per OutputMetas entry, and the launch must write every
// element of them (the wrapper fills them with kPoisonByte first).
struct KernelArgs {
  const Case& c;  // the direction and attributes; the tensors are the device ones below (a
                  // benchmark's case may have dropped its host inputs once uploaded)
  const ContractInfo& contract;
  const DeviceTensorMap& inputs;
  const DeviceTensorMap& outputs;
  void* stream = nullptr;  // a cudaStream_t; nullptr is the calling thread's default stream (gpu/runtime.h)
  int ilp = kIlpDefault;
};

// The launch a bind returns: enqueues the kernels on the bound stream, every argument fixed, so
// that a benchmark times the launch alone.
using BoundLaunch = std::function<void()>;

struct KernelRecord {
  std::string op, contract;
  // Reads the shapes and attributes and prepares the launch; throws RejectError for what the
  // contract's arithmetic does not model ("unmodelled") and never checks inputs otherwise (the
  // op's validate did).
  std::function<BoundLaunch(const KernelArgs&)> bind;
  // The code paths of the record's kernels that the case's shape or attributes select (a vector
  // width from the row's bytes, a partial-vector tail, a small- or large-grid variant, a ring's
  // fill, an early return), each the name of a tag that the op's classes() emits for a case whose
  // launch takes that path. A path belongs to the directions whose cases carry its tag; the
  // generator must reach it in at least 1 case in 100 at a small and at a large RapidCheck size
  // (gpu/tests/kernel_paths_test.cpp), so that a path no test reaches fails by name. Defaulted,
  // so that a record's initializer may leave it out.
  std::vector<std::string> paths = {};
  // What the launch does on a case where a library decides it (cuBLAS's algorithm for the shape),
  // which findings about the record quote; empty when there is nothing to say.
  std::function<std::string(const Case&)> describe = {};
  // The directions whose launches run_batch collects into batched launches
  // (gpu/common/batch_launch.h): those whose launcher makes a launch through a batchable helper
  // (launch_row_chunks, a body's launch) and no plain launch of the same case after it (a case that
  // needs one runs under LaunchDirectly). A record that launches a
  // batchable kernel between plain ones (expert_mlp's GEMMs around SwiGLU) lists none; a plain
  // launch after a collected one throws, and the GPU tests hold each listed direction's staged
  // batches to collecting and every other to collecting nothing.
  std::vector<Direction> collect_launches = {};

  bool collects(Direction d) const {
    return std::find(collect_launches.begin(), collect_launches.end(), d) != collect_launches.end();
  }
};

using Validate = std::function<OutputMetas(const Case&, const ContractInfo&)>;

// The Impl of a record: validate (for the OutputMetas), upload every input, allocate the outputs
// poisoned, bind and launch at `ilp` on the calling thread's stream, download. Calls from several
// threads run at once, each on its own stream and its own buffers.
Impl kernel_impl(KernelRecord record, Validate validate, int ilp = kIlpDefault);

// False where BITPARITY_BATCHED_LAUNCHES=0 is in the environment: run_batch then collects no
// launches (each case of a staged batch launches its own kernels), so that a campaign can measure
// what the batched launches gain.
bool batched_launches();

// What run_batch did with a batch: whether its cases were staged together, and how many of their
// launches were collected into batched launches (gpu/common/batch_launch.h), in how many.
struct BatchRunInfo {
  bool staged = false;
  int64_t collected = 0;
  int64_t batched_launches = 0;
};

// Runs several cases of one record in one round trip where they are small: each case validated,
// every valid case's tensors staged together (CaseBatchTensors: one copy in), each bound and
// launched in the cases' order on the calling thread's stream, the launches of kernels that a
// batched launch can run collected and launched together once every case is bound (a launch for
// each such kernel instead of one a case), then one copy out and one synchronization for all. A
// case's outcome is the bytes or the error of its run alone through kernel_impl: each case lies as
// it lies alone, apart from the others behind a poisoned guard, and each of its elements is
// computed by the code that computes it alone. A batch that cannot be staged together runs case by
// case; `info`, where given, says which, and what was collected. A failure of a batched launch, the
// copy out or the synchronization (an error inside some case's kernels) runs the launched cases
// again one at a time, so that each gets its own outcome, except after a sticky fault
// (gpu/runtime.h), which leaves nothing on the context able to run: then each launched case gets
// the fault.
std::vector<BatchOutcome> run_batch(const KernelRecord& record, const Validate& validate, const ContractInfo& contract,
                                    const std::vector<const Case*>& cases, int ilp = kIlpDefault,
                                    BatchRunInfo* info = nullptr);

}  // namespace bitparity::gpu
