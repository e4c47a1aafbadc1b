#include "gpu/common/device_tensor.h"

#include <stdexcept>

namespace bitparity::gpu {

DeviceTensor upload(const Tensor& host) {
  DeviceTensor d{host.dtype(), host.shape(), DeviceBuffer(host.nbytes())};
  d.buffer.upload(host.data(), host.nbytes());
  return d;
}

Tensor download(const DeviceTensor& device) {
  Tensor host(device.dtype, device.shape);
  if (host.nbytes() != device.nbytes())
    throw std::logic_error("download: a device tensor of " + std::to_string(device.nbytes()) + " bytes for shape " +
                           shape_string(device.shape));
  device.buffer.download(host.data(), host.nbytes());
  return host;
}

DeviceTensorMap upload(const TensorMap& host) {
  DeviceTensorMap out;
  for (const auto& [name, t] : host) out.emplace(name, upload(t));
  return out;
}

TensorMap download(const DeviceTensorMap& device) {
  TensorMap out;
  for (const auto& [name, t] : device) out.emplace(name, download(t));
  return out;
}

DeviceTensor allocate(const TensorMeta& meta, int fill_byte) {
  DeviceTensor d{meta.dtype, meta.shape,
                 DeviceBuffer(static_cast<size_t>(shape_numel(meta.shape)) * dtype_size(meta.dtype))};
  d.buffer.fill_bytes(fill_byte);
  return d;
}

DeviceTensorMap allocate(const OutputMetas& metas, int fill_byte) {
  DeviceTensorMap out;
  for (const auto& [name, meta] : metas) out.emplace(name, allocate(meta, fill_byte));
  return out;
}

DeviceTensor clone(const DeviceTensor& device) {
  DeviceTensor d{device.dtype, device.shape, DeviceBuffer(device.nbytes())};
  d.buffer.copy_from(device.buffer);
  return d;
}

DeviceTensorMap clone(const DeviceTensorMap& device) {
  DeviceTensorMap out;
  for (const auto& [name, t] : device) out.emplace(name, clone(t));
  return out;
}

const DeviceTensor& required(const DeviceTensorMap& tensors, const std::string& name) {
  const auto it = tensors.find(name);
  if (it == tensors.end()) throw std::logic_error("kernel launch: no device tensor '" + name + "'");
  return it->second;
}

const DeviceTensor* optional(const DeviceTensorMap& tensors, const std::string& name) {
  const auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

size_t total_bytes(const DeviceTensorMap& tensors) {
  size_t bytes = 0;
  for (const auto& [name, t] : tensors) bytes += t.nbytes();
  return bytes;
}

}  // namespace bitparity::gpu
