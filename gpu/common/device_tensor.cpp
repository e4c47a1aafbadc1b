#include "gpu/common/device_tensor.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
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

// A device buffer a thread hands out as workspaces, several held at once (a staged batch holds the
// workspace of each case whose launches it collected until they are made): each taken at the next
// kBufferAlignment boundary after those held, all free again once the last is given back. Grown
// (the old buffer freed in the stream's order) only while nothing is held, to the most ever asked
// of it at once (at most kMaxBytes); a workspace that does not fit beside those held is
// not taken. Locked, because a workspace may be given back on another thread.
class WorkspaceArena {
 public:
  static constexpr size_t kMaxBytes = 2 * CaseTensors::kSharedCaseBytes;

  // Null where `bytes` does not fit beside what is held.
  unsigned char* take(size_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const size_t end = used_ + aligned_bytes(bytes);
    peak_ = std::min(kMaxBytes, std::max(peak_, end));
    if (held_ == 0 && peak_ > buffer_.bytes()) buffer_ = DeviceBuffer(std::min(kMaxBytes, std::max(peak_, 2 * buffer_.bytes())));
    if (end > buffer_.bytes()) return nullptr;
    unsigned char* p = static_cast<unsigned char*>(buffer_.get()) + used_;
    used_ = end;
    ++held_;
    return p;
  }
  void give_back() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (--held_ == 0) used_ = 0;
  }

 private:
  std::mutex mutex_;
  DeviceBuffer buffer_;
  size_t used_ = 0, peak_ = 0;
  int held_ = 0;
};

// The calling thread's arena for kernel workspaces (launch_workspace). Shared with the buffers it
// hands out, so that one released on another thread, or after this thread ended, finds it alive.
const std::shared_ptr<WorkspaceArena>& thread_workspace_arena() {
  thread_local const std::shared_ptr<WorkspaceArena> arena = std::make_shared<WorkspaceArena>();
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

// Takes the thread's arena for `total` bytes where a batch may lie in it; null otherwise.
unsigned char* take_shared(size_t total) {
  if (buffer_mode() == BufferMode::kSeparate || total > CaseTensors::kSharedCaseBytes || total == 0) return nullptr;
  return thread_arena().take(total);
}

// From the first case's first output to the last case's last output.
struct StagedRange {
  size_t outputs_begin = 0, outputs_end = 0;
};

// Lays the cases out in `shared`, one after another, each as a case alone lies (its inputs, then
// its outputs, each tensor on the boundary), with kGuardBytes of the fill after each case of a
// batch; one device map of views a case in `inputs` and `outputs`. Enqueues on the thread's stream
// the inputs' copy through the staging memory and the outputs' fill: a batch's in one copy of the
// whole range; a single case's fill with its inputs where its outputs are small, by a
// cudaMemsetAsync otherwise.
StagedRange stage_cases(unsigned char* shared, const std::vector<CaseBatchItem>& cases, int fill_byte,
                        std::vector<DeviceTensorMap>& inputs, std::vector<DeviceTensorMap>& outputs) {
  const bool batch = cases.size() > 1;
  const size_t total = CaseBatchTensors::staged_bytes(cases);
  unsigned char* staging = thread_staging().at_least(total);
  inputs.clear();
  inputs.resize(cases.size());
  outputs.clear();
  outputs.resize(cases.size());
  StagedRange range;
  size_t offset = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    for (const auto& [name, t] : *cases[i].inputs) {
      if (t.nbytes() > 0) std::memcpy(staging + offset, t.data(), t.nbytes());
      inputs[i].emplace(name, view_at(shared, offset, t.dtype(), t.shape(), t.nbytes()));
      offset += aligned_bytes(t.nbytes());
    }
    const size_t case_outputs = offset;
    if (i == 0) range.outputs_begin = offset;
    for (const auto& [name, meta] : *cases[i].metas) {
      outputs[i].emplace(name, view_at(shared, offset, meta.dtype, meta.shape, meta_bytes(meta)));
      offset += aligned_bytes(meta_bytes(meta));
    }
    range.outputs_end = offset;
    if (batch) {
      offset += CaseBatchTensors::kGuardBytes;
      std::memset(staging + case_outputs, fill_byte, offset - case_outputs);
    }
  }
  if (batch) {
    check_cuda(cudaMemcpyAsync(shared, staging, total, cudaMemcpyHostToDevice, cudaStreamPerThread),
               "cudaMemcpyAsync of a batch's inputs");
    return range;
  }
  const size_t inputs_end = range.outputs_begin;
  const size_t fill_bytes = range.outputs_end - range.outputs_begin;
  const bool fill_on_host = fill_bytes <= kFillWithInputsBytes;
  if (fill_on_host) std::memset(staging + range.outputs_begin, fill_byte, fill_bytes);
  const size_t copied = fill_on_host ? range.outputs_end : inputs_end;
  if (copied > 0)
    check_cuda(cudaMemcpyAsync(shared, staging, copied, cudaMemcpyHostToDevice, cudaStreamPerThread),
               "cudaMemcpyAsync of a case's inputs");
  if (!fill_on_host)
    check_cuda(cudaMemsetAsync(shared + range.outputs_begin, fill_byte, fill_bytes, cudaStreamPerThread),
               "cudaMemsetAsync of a case's outputs");
  return range;
}

// Copies the outputs' range of the arena into the staging memory at the same offsets and
// synchronizes the thread's stream; the staging memory.
const unsigned char* download_staged(unsigned char* shared, const StagedRange& range) {
  unsigned char* staging = thread_staging().at_least(range.outputs_end);
  if (range.outputs_end > range.outputs_begin)
    check_cuda(cudaMemcpyAsync(staging + range.outputs_begin, shared + range.outputs_begin,
                               range.outputs_end - range.outputs_begin, cudaMemcpyDeviceToHost, cudaStreamPerThread),
               "cudaMemcpyAsync of a case's outputs");
  check_cuda(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize after a case");
  return staging;
}

// Host tensors of `outputs` (views into `shared`) from the staging memory that download_staged filled.
TensorMap host_outputs(const unsigned char* shared, const unsigned char* staging, const DeviceTensorMap& outputs) {
  TensorMap out;
  for (const auto& [name, t] : outputs) {
    Tensor host(t.dtype, t.shape);
    if (host.nbytes() > 0) {
      const size_t offset = static_cast<size_t>(static_cast<const unsigned char*>(t.data()) - shared);
      std::memcpy(host.data(), staging + offset, host.nbytes());
    }
    out.emplace(name, std::move(host));
  }
  return out;
}

// The next user's copies reuse the staging memory, and its kernels the arena: both wait for this
// holder's work (done already where its outputs were downloaded). No throw: called from destructors.
void release_shared(bool settled) {
  if (!settled) cudaStreamSynchronize(cudaStreamPerThread);
  thread_arena().give_back();
}

}  // namespace

size_t CaseBatchTensors::staged_bytes(const std::vector<CaseBatchItem>& cases) {
  size_t total = 0;
  for (const CaseBatchItem& c : cases) {
    for (const auto& [name, t] : *c.inputs) total += aligned_bytes(t.nbytes());
    for (const auto& [name, meta] : *c.metas) total += aligned_bytes(meta_bytes(meta));
    if (cases.size() > 1) total += kGuardBytes;
  }
  return total;
}

CaseTensors::CaseTensors(const TensorMap& inputs, const OutputMetas& metas, int fill_byte) {
  const std::vector<CaseBatchItem> one = {{&inputs, &metas}};
  shared_ = take_shared(CaseBatchTensors::staged_bytes(one));
  if (!shared_) {
    inputs_ = upload(inputs);
    outputs_ = allocate(metas, fill_byte);
    return;
  }
  try {
    std::vector<DeviceTensorMap> in, out;
    const StagedRange range = stage_cases(shared_, one, fill_byte, in, out);
    outputs_begin_ = range.outputs_begin;
    outputs_end_ = range.outputs_end;
    inputs_ = std::move(in[0]);
    outputs_ = std::move(out[0]);
  } catch (...) {
    release_shared(false);  // a copy already enqueued may still read the staging memory
    throw;
  }
}

CaseTensors::~CaseTensors() {
  if (shared_) release_shared(settled_);
}

TensorMap CaseTensors::download_outputs() const {
  if (!shared()) return download(outputs_);
  const unsigned char* staging = download_staged(shared_, {outputs_begin_, outputs_end_});
  settled_ = true;
  return host_outputs(shared_, staging, outputs_);
}

CaseBatchTensors::CaseBatchTensors(const std::vector<CaseBatchItem>& cases, int fill_byte) {
  shared_ = take_shared(CaseBatchTensors::staged_bytes(cases));
  if (!shared_) return;
  try {
    const StagedRange range = stage_cases(shared_, cases, fill_byte, inputs_, outputs_);
    outputs_begin_ = range.outputs_begin;
    outputs_end_ = range.outputs_end;
  } catch (...) {
    release_shared(false);  // a copy already enqueued may still read the staging memory
    shared_ = nullptr;
    throw;
  }
}

CaseBatchTensors::~CaseBatchTensors() {
  if (shared_) release_shared(settled_);
}

std::vector<TensorMap> CaseBatchTensors::download_outputs() const {
  std::vector<TensorMap> out;
  if (!staged()) return out;
  const unsigned char* staging = download_staged(shared_, {outputs_begin_, outputs_end_});
  settled_ = true;
  out.reserve(outputs_.size());
  for (const DeviceTensorMap& o : outputs_) out.push_back(host_outputs(shared_, staging, o));
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
    std::shared_ptr<WorkspaceArena> arena = thread_workspace_arena();
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
