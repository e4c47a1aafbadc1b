#include "gpu/math/capture_math.h"

#include <cuda_runtime_api.h>

#include <exception>
#include <vector>

#include "gpu/math/cuda_buffer.h"
#include "gpu/math/device_info.h"
#include "gpu/math/math_kernels.h"
#include "reference/math/device_sample.h"
#include "reference/math/ex2_tables.h"

namespace bitparity::gpu::math {

namespace rm = ref::math;

int capture_math(const std::string& out_path, std::string* error) {
  rm::Ex2Tables tables;
  if (!read_device_metadata(&tables.meta, error)) return 1;
  DeviceBuffer<float> tp, tn;
  if (!tp.allocate(rm::kEx2TableSize, error) || !tn.allocate(rm::kEx2TableSize, error)) return 1;
  if (!cuda_ok(launch_ex2_tables(tp.get(), tn.get(), nullptr), "ex2 table kernel launch", error)) return 1;
  if (!cuda_ok(cudaDeviceSynchronize(), "ex2 table kernel", error)) return 1;
  tables.tp.resize(rm::kEx2TableSize);
  tables.tn.resize(rm::kEx2TableSize);
  const size_t bytes = rm::kEx2TableSize * sizeof(float);
  if (!cuda_ok(cudaMemcpy(tables.tp.data(), tp.get(), bytes, cudaMemcpyDeviceToHost), "copy TP", error) ||
      !cuda_ok(cudaMemcpy(tables.tn.data(), tn.get(), bytes, cudaMemcpyDeviceToHost), "copy TN", error)) {
    return 1;
  }
  try {
    rm::write_ex2_tables_file(out_path, tables);
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return 1;
  }
  return 0;
}

int capture_math_sample(const std::string& out_path, std::string* error) {
  rm::DeviceSample sample;
  if (!read_device_metadata(&sample.device, error)) return 1;
  sample.spec = rm::default_sample_input_spec();
  const std::vector<uint32_t> inputs = rm::sample_inputs(sample.spec);
  const auto n = static_cast<uint32_t>(inputs.size());
  DeviceBuffer<uint32_t> d_x;
  DeviceBuffer<float> d_out;
  if (!d_x.allocate(n, error) || !d_out.allocate(size_t(n) * kDeviceFunctionCount, error)) return 1;
  if (!cuda_ok(cudaMemcpy(d_x.get(), inputs.data(), size_t(n) * 4, cudaMemcpyHostToDevice), "copy inputs", error)) {
    return 1;
  }
  if (!cuda_ok(launch_math_list(d_x.get(), n, d_out.get(), nullptr), "math kernel launch", error)) return 1;
  std::vector<uint32_t> out(size_t(n) * kDeviceFunctionCount);
  if (!cuda_ok(cudaMemcpy(out.data(), d_out.get(), out.size() * 4, cudaMemcpyDeviceToHost), "math kernel", error)) {
    return 1;
  }
  for (int k = 0; k < rm::kSampleFunctionCount; ++k) {
    sample.outputs[k].assign(out.begin() + size_t(k) * n, out.begin() + size_t(k + 1) * n);
  }
  try {
    rm::write_device_sample_file(out_path, sample);
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return 1;
  }
  return 0;
}

}  // namespace bitparity::gpu::math
