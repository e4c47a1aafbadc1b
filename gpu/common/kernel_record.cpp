#include "gpu/common/kernel_record.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

#include "gpu/common/batch_launch.h"

namespace bitparity::gpu {

bool batched_launches() {
  static const bool on = [] {
    const char* env = std::getenv("BITPARITY_BATCHED_LAUNCHES");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return on;
}

Impl kernel_impl(KernelRecord record, Validate validate, int ilp) {
  if (!validate) throw std::logic_error("cuda:" + record.contract + " of " + record.op + ": the op has no validate");
  return [record = std::move(record), validate = std::move(validate), ilp](const Case& c,
                                                                            const ContractInfo& contract) {
    const OutputMetas metas = validate(c, contract);
    const CaseTensors tensors(c.inputs, metas);
    const BoundLaunch launch = record.bind({c, contract, tensors.inputs(), tensors.outputs(), thread_stream(), ilp});
    launch();
    return tensors.download_outputs();  // on the thread's stream: after the launch
  };
}

std::vector<BatchOutcome> run_batch(const KernelRecord& record, const Validate& validate, const ContractInfo& contract,
                                    const std::vector<const Case*>& cases, int ilp, BatchRunInfo* info) {
  std::vector<BatchOutcome> outcomes(cases.size());
  std::vector<OutputMetas> metas(cases.size());
  std::vector<size_t> valid;  // indices of the cases validate accepted
  std::vector<CaseBatchItem> items;
  for (size_t i = 0; i < cases.size(); ++i) {
    try {
      metas[i] = validate(*cases[i], contract);
      valid.push_back(i);
      items.push_back({&cases[i]->inputs, &metas[i]});
    } catch (...) {
      outcomes[i].error = std::current_exception();
    }
  }
  const CaseBatchTensors batch(items);
  if (info) *info = BatchRunInfo{batch.staged(), 0, 0};
  if (!batch.staged()) {
    const Impl alone = kernel_impl(record, validate, ilp);
    for (const size_t i : valid) {
      try {
        outcomes[i].outputs = alone(*cases[i], contract);
      } catch (...) {
        outcomes[i].error = std::current_exception();
      }
    }
    return outcomes;
  }
  // Bound and launched one case at a time. A bind's launch (and any workspace it holds) that
  // collected nothing is let go before the next bind: the workspaces follow one another in the
  // stream's order, as the cases' runs alone do. One that collected a launch is held until the
  // collected launches are made, so that what they use is not freed before they run.
  std::vector<bool> launched(valid.size(), false);
  std::vector<BoundLaunch> held;
  LaunchBatch collected;
  {
    // A batch is one op and direction (run_batch_impl): collected where its direction is listed.
    std::optional<CollectLaunches> collecting;
    if (!valid.empty() && record.collects(cases[valid.front()]->direction) && batched_launches())
      collecting.emplace(collected);
    for (size_t j = 0; j < valid.size(); ++j) {
      const size_t i = valid[j];
      const int64_t before = collected.items();
      BoundLaunch launch;
      try {
        launch = record.bind({*cases[i], contract, batch.inputs(j), batch.outputs(j), thread_stream(), ilp});
        collected.begin_case();
        launch();
        launched[j] = true;
      } catch (...) {
        outcomes[i].error = std::current_exception();
      }
      if (collected.items() > before) held.push_back(std::move(launch));
    }
  }
  bool replay = false;
  try {
    collected.launch_all();
    std::vector<TensorMap> outputs = batch.download_outputs();
    for (size_t j = 0; j < valid.size(); ++j)
      if (launched[j]) outcomes[valid[j]].outputs = std::move(outputs[j]);
  } catch (...) {
    // A batched launch, the batch's copy out or its synchronization failed: an error of some case's
    // kernels, which the batch cannot name. Where the context survives it, the launched cases run
    // again one at a time and each gets its own outcome; after a sticky fault nothing on this
    // context can run again, and each launched case gets the fault (as every case after it does
    // when cases run alone).
    const std::exception_ptr error = std::current_exception();
    try {
      throw;
    } catch (const CudaError& e) {
      replay = !sticky_error(e.code());
    } catch (...) {
    }
    if (!replay)
      for (size_t j = 0; j < valid.size(); ++j)
        if (launched[j]) outcomes[valid[j]].error = error;
  }
  if (info) info->collected = collected.items(), info->batched_launches = collected.launches();
  if (replay) {
    const Impl alone = kernel_impl(record, validate, ilp);
    for (size_t j = 0; j < valid.size(); ++j) {
      if (!launched[j]) continue;
      try {
        outcomes[valid[j]].outputs = alone(*cases[valid[j]], contract);
      } catch (...) {
        outcomes[valid[j]].error = std::current_exception();
      }
    }
  }
  return outcomes;
}

}  // namespace bitparity::gpu
