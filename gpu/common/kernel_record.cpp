#include "gpu/common/kernel_record.h"

#include <stdexcept>
#include <utility>

namespace bitparity::gpu {

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

}  // namespace bitparity::gpu
