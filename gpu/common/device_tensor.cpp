#include "gpu/common/device_tensor.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>

#include <cuda_runtime.h>

namespace bitparity::gpu {
namespace {

// The calling thread's pinned host memory through which a small case's tensors move: one copy
// each way, asynchronous, instead of a pageable copy a tensor. Kept and grown; freed with the thread.
class Staging {
 public:
  ~Staging() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  unsigned char* at_least(size_t bytes) {
    if (bytes > bytes_) {
      size_t grown = std::max(bytes_ * 2, size_t{1} << 16);
      while (grown < bytes) grown *= 2;
      void* p = nullptr;
      check_cuda(cudaMallocHost(&p, grown), "cudaMallocHost of " + std::to_string(grown) + " bytes (staging)");
      if (ptr_) cudaFreeHost(ptr_);
      ptr_ = p;
      bytes_ = grown;
    }
    return static_cast<unsigned char*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

Staging& thread_staging() {
  thread_local Staging staging;
  return staging;
}

// A device buffer a thread keeps for one holder at a time: grown (the old one freed in the stream's
// order, after the work that used it) only while nothing holds it. The flag is atomic because a
// launch workspace may be given back on another thread.
class Arena {
 public:
  // Null when something holds it.
  unsigned char* take(size_t bytes) {
    bool free = false;
    if (!held_.compare_exchange_strong(free, true)) return nullptr;
    try {
      if (bytes > buffer_.bytes()) buffer_ = DeviceBuffer(std::max(bytes, buffer_.bytes() * 2));
    } catch (...) {
      held_.store(false);
      throw;
    }
    return static_cast<unsigned char*>(buffer_.get());
  }
  void give_back() { held_.store(false); }

 private:
  DeviceBuffer buffer_;
  std::atomic<bool> held_{false};
};

// The calling thread's arena for small cases' tensors, held by one CaseTensors at a time.
Arena& thread_arena() {
  thread_local Arena arena;
  return arena;
}

// The calling thread's arena for kernel workspaces (launch_workspace). Shared with the buffers it
// hands out, so that one released on another thread, or after this thread ended, finds it alive.
const std::shared_ptr<Arena>& thread_workspace_arena() {
  thread_local const std::shared_ptr<Arena> arena = std::make_shared<Arena>();
  return arena;
}

// Outputs up to this size are filled in the staging memory and copied with the inputs; larger ones
// by a cudaMemsetAsync on the device.
constexpr size_t kFillWithInputsBytes = size_t{64} << 10;

size_t meta_bytes(const TensorMeta& meta) {
  return static_cast<size_t>(shape_numel(meta.shape)) * dtype_size(meta.dtype);
}

DeviceTensor view_at(unsigned char* shared, size_t offset, DType dtype, const Shape& shape, size_t bytes) {
  return {dtype, shape, bytes == 0 ? DeviceBuffer() : DeviceBuffer::view(shared + offset, bytes)};
}

}  // namespace

CaseTensors::CaseTensors(const TensorMap& inputs, const OutputMetas& metas, int fill_byte) {
  size_t total = 0;
  for (const auto& [name, t] : inputs) total += aligned_bytes(t.nbytes());
  const size_t inputs_end = total;
  for (const auto& [name, meta] : metas) total += aligned_bytes(meta_bytes(meta));
  if (buffer_mode() != BufferMode::kSeparate && total <= kSharedCaseBytes && total > 0)
    shared_ = thread_arena().take(total);
  if (!shared_) {
    inputs_ = upload(inputs);
    outputs_ = allocate(metas, fill_byte);
    return;
  }
  try {
    unsigned char* staging = thread_staging().at_least(total);
    size_t offset = 0;
    for (const auto& [name, t] : inputs) {
      if (t.nbytes() > 0) std::memcpy(staging + offset, t.data(), t.nbytes());
      inputs_.emplace(name, view_at(shared_, offset, t.dtype(), t.shape(), t.nbytes()));
      offset += aligned_bytes(t.nbytes());
    }
    outputs_begin_ = offset;
    for (const auto& [name, meta] : metas) {
      outputs_.emplace(name, view_at(shared_, offset, meta.dtype, meta.shape, meta_bytes(meta)));
      offset += aligned_bytes(meta_bytes(meta));
    }
    outputs_end_ = offset;
    const size_t fill_bytes = outputs_end_ - outputs_begin_;
    const bool fill_on_host = fill_bytes <= kFillWithInputsBytes;
    if (fill_on_host) std::memset(staging + outputs_begin_, fill_byte, fill_bytes);
    const size_t copied = fill_on_host ? outputs_end_ : inputs_end;
    if (copied > 0)
      check_cuda(cudaMemcpyAsync(shared_, staging, copied, cudaMemcpyHostToDevice, cudaStreamPerThread),
                 "cudaMemcpyAsync of a case's inputs");
    if (!fill_on_host)
      check_cuda(cudaMemsetAsync(shared_ + outputs_begin_, fill_byte, fill_bytes, cudaStreamPerThread),
                 "cudaMemsetAsync of a case's outputs");
  } catch (...) {
    thread_arena().give_back();
    throw;
  }
}

CaseTensors::~CaseTensors() {
  if (!shared_) return;
  // The next case's copies reuse the staging memory, and its kernels the arena: both wait for this
  // case's work (done already where its outputs were downloaded). No throw from a destructor.
  if (!settled_) cudaStreamSynchronize(cudaStreamPerThread);
  thread_arena().give_back();
}

TensorMap CaseTensors::download_outputs() const {
  if (!shared()) return download(outputs_);
  unsigned char* staging = thread_staging().at_least(outputs_end_);
  if (outputs_end_ > outputs_begin_)
    check_cuda(cudaMemcpyAsync(staging + outputs_begin_, shared_ + outputs_begin_, outputs_end_ - outputs_begin_,
                               cudaMemcpyDeviceToHost, cudaStreamPerThread),
               "cudaMemcpyAsync of a case's outputs");
  check_cuda(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize after a case");
  settled_ = true;
  TensorMap out;
  for (const auto& [name, t] : outputs_) {
    Tensor host(t.dtype, t.shape);
    if (host.nbytes() > 0) {
      const size_t offset = static_cast<size_t>(static_cast<const unsigned char*>(t.data()) - shared_);
      std::memcpy(host.data(), staging + offset, host.nbytes());
    }
    out.emplace(name, std::move(host));
  }
  return out;
}

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
  DeviceTensor d{meta.dtype, meta.shape, DeviceBuffer(meta_bytes(meta))};
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

std::shared_ptr<DeviceBuffer> launch_workspace(size_t bytes, void* stream) {
  if (bytes > 0 && bytes <= CaseTensors::kSharedCaseBytes && stream == thread_stream() &&
      buffer_mode() != BufferMode::kSeparate) {
    std::shared_ptr<Arena> arena = thread_workspace_arena();
    if (unsigned char* memory = arena->take(bytes)) {
      try {
        auto view = std::make_unique<DeviceBuffer>(DeviceBuffer::view(memory, bytes));
        return std::shared_ptr<DeviceBuffer>(view.release(), [arena](DeviceBuffer* b) {
          delete b;
          arena->give_back();
        });
      } catch (...) {
        arena->give_back();
        throw;
      }
    }
  }
  return std::make_shared<DeviceBuffer>(bytes);
}

}  // namespace bitparity::gpu
