// A CUDA worker that faults on the device on purpose: it serves the toy registry's `ref`
// implementations (testing/toy_op.h), except that before a case whose input x holds 3.0 it runs a
// kernel that breaks the way a faulty kernel does, and then stops as `bitparity worker --kind cuda`
// stops after a sticky error (gpu::sticky_error). cuda_fault_test runs campaigns through it.
//
//   cuda_fault_worker MODE   MODE: illegal_address (a store through a bad device pointer: 700),
//                            trap (a kernel that executes `trap`: 719), hang (a kernel that spins
//                            until the campaign's timeout kills the worker), race (a shared-memory
//                            read without its barrier: racecheck's hazard, no fault), out_of_bounds
//                            (a read one element past a buffer: memcheck's error, no fault alone)
#include <cstdint>
#include <iostream>
#include <string>

#include "gpu/runtime.h"
#include "peers/exec/serve.h"
#include "testing/toy_op.h"

void plant_cuda_fault(const std::string& mode);  // cuda_fault_kernels.cu

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "none";
  if (const auto why = bitparity::gpu::unavailable_reason()) {
    std::cerr << "cuda_fault_worker: " << *why << std::endl;
    return 2;
  }
  const bitparity::Registry registry = bitparity::testing::make_fake_registry();
  const auto before_case = [&mode](const bitparity::Case& c, const std::string&) {
    const bitparity::Tensor* x = c.input("x");
    bool three = false;
    for (int64_t i = 0; x && i < x->numel(); ++i) three = three || x->f32(i) == 3.0f;
    if (three) plant_cuda_fault(mode);
  };
  const auto is_fatal = [](const std::exception& e) {
    const auto* cuda = dynamic_cast<const bitparity::gpu::CudaError*>(&e);
    return cuda && bitparity::gpu::sticky_error(cuda->code());
  };
  return bitparity::peers::serve_worker(registry, "ref", std::cin, std::cout, before_case, is_fatal);
}
