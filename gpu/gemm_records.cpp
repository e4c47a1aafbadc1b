// The kernel record of the gemm op (spec OP-10): fixed_order binds bitparity's tensor-core GEMM
// (gpu/gemm_kernels.h) to device tensors. The op's validate has checked the dtypes and the inner
// dimension and fixed out's shape.
#include <string>
#include <vector>

#include "gpu/common/device_tensor.h"
#include "gpu/gemm_kernels.h"
#include "gpu/records.h"

namespace bitparity::gpu {
namespace {

BoundLaunch bind_fixed_order(const KernelArgs& k) {
  const DeviceTensor& a = required(k.inputs, "a");
  const DeviceTensor& b = required(k.inputs, "b");
  Gemm g;
  g.M = a.shape.at(0);
  g.K = a.shape.at(1);
  g.N = b.shape.at(1);
  g.a = a.data();
  g.b = b.data();
  g.out = required(k.outputs, "out").data();
  g.stream = k.stream;
  g.ilp = k.ilp;
  return [g] { launch_gemm_fixed_order(g); };
}

}  // namespace

std::vector<KernelRecord> gemm_kernels() {
  // The kernel's paths (ops/gemm.cpp's tags): nothing launched for M = 0; K = 0 (no step, +0
  // written); a partial last chunk; 16-byte or single-element loads; the three tile configurations.
  const std::vector<std::string> paths = {"rows=0",   "K=0",         "K%16!=0",      "loads=16B",
                                          "loads=2B", "tiles=small", "tiles=medium", "tiles=large"};
  return {{"gemm", "fixed_order", bind_fixed_order, paths}};
}

}  // namespace bitparity::gpu
