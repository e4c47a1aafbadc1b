// The kernel records of the gemm op (spec OP-10): fixed_order binds bitparity's tensor-core GEMM
// (gpu/gemm_kernels.h) to device tensors, cublas binds NVIDIA's cuBLASLt (gpu/cublas_lt.h). The
// op's validate has checked the dtypes and the inner dimension and fixed out's shape.
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/common/device_tensor.h"
#include "gpu/cublas_lt.h"
#include "gpu/gemm_kernels.h"
#include "gpu/records.h"

namespace bitparity::gpu {
namespace {

Gemm bind_gemm(const KernelArgs& k) {
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
  return g;
}

BoundLaunch bind_fixed_order(const KernelArgs& k) {
  const Gemm g = bind_gemm(k);
  return [g] { launch_gemm_fixed_order(g); };
}

BoundLaunch bind_cublas(const KernelArgs& k) {
  const Gemm g = bind_gemm(k);
  return [g] { launch_gemm_cublas(g); };
}

}  // namespace

std::vector<KernelRecord> gemm_kernels() {
  // The kernel's paths (ops/gemm.cpp's tags): nothing launched for M = 0; K = 0 (no step, +0
  // written); a partial last chunk; 16-byte or single-element loads; the three tile configurations.
  const std::vector<std::string> paths = {"rows=0",   "K=0",         "K%16!=0",      "loads=16B",
                                          "loads=2B", "tiles=small", "tiles=medium", "tiles=large"};
  // cuBLASLt's own paths are NVIDIA's: bitparity's are the two it takes before calling it.
  auto algorithm = [](const Case& c) -> std::string {
    const int64_t M = c.input("a")->dim(0), K = c.input("a")->dim(1), N = c.input("b")->dim(1);
    if (M == 0 || K == 0 || N == 0) return "no call";
    return cublas_gemm_algorithm(M, K, N);
  };
  return {{"gemm", "fixed_order", bind_fixed_order, paths},
          {"gemm", "cublas", bind_cublas, {"rows=0", "K=0"}, algorithm}};
}

}  // namespace bitparity::gpu
