// Tensors in device memory, the host <-> device counterpart of core/tensor.h (CUTLASS's HostTensor
// is the model): a dtype, a shape and a buffer that frees itself; upload and download of single
// tensors and of name -> tensor maps; outputs allocated from an op's OutputMetas and filled with a
// poison pattern, so that an element a kernel forgets to write shows as a mismatch instead of
// passing as the zero a fresh allocation may hold. Host code, no CUDA types.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/registry.h"
#include "core/tensor.h"
#include "gpu/runtime.h"

namespace bitparity::gpu {

struct DeviceTensor {
  DType dtype = DType::kFP32;
  Shape shape;
  DeviceBuffer buffer;  // row-major, contiguous; no allocation for an empty tensor

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return buffer.bytes(); }
  void* data() const { return buffer.get(); }
};
using DeviceTensorMap = std::map<std::string, DeviceTensor>;

DeviceTensor upload(const Tensor& host);
Tensor download(const DeviceTensor& device);
DeviceTensorMap upload(const TensorMap& host);
TensorMap download(const DeviceTensorMap& device);

// A device tensor of `meta`'s shape and dtype, every byte `fill_byte`.
DeviceTensor allocate(const TensorMeta& meta, int fill_byte = kPoisonByte);
DeviceTensorMap allocate(const OutputMetas& metas, int fill_byte = kPoisonByte);

// A copy in fresh device memory (device to device).
DeviceTensor clone(const DeviceTensor& device);
DeviceTensorMap clone(const DeviceTensorMap& device);

// A case's tensors on the device, as kernel_impl makes them: the inputs uploaded, the outputs of
// `metas` allocated and filled with `fill_byte`. A small case (at most kSharedCaseBytes in all)
// lies in the calling thread's device arena (kept from case to case, grown when a case needs more),
// each tensor on a 256-byte boundary, and moves through the thread's pinned staging memory in one
// copy each way, the outputs' fill travelling with the inputs when it is small: two copies and a
// synchronization a case, no allocation. A larger case, a case made while the thread's arena is
// held by another, or any case under BufferMode::kSeparate, gets a buffer a tensor. Used and
// destroyed on the thread that made it.
class CaseTensors {
 public:
  static constexpr size_t kSharedCaseBytes = size_t{8} << 20;

  CaseTensors(const TensorMap& inputs, const OutputMetas& metas, int fill_byte = kPoisonByte);
  ~CaseTensors();
  CaseTensors(const CaseTensors&) = delete;
  CaseTensors& operator=(const CaseTensors&) = delete;
  const DeviceTensorMap& inputs() const { return inputs_; }
  const DeviceTensorMap& outputs() const { return outputs_; }
  bool shared() const { return shared_ != nullptr; }
  // The outputs on the host, after the work enqueued on the calling thread's stream.
  TensorMap download_outputs() const;

 private:
  unsigned char* shared_ = nullptr;  // the thread's arena, held by this case; null otherwise
  mutable bool settled_ = false;     // the thread's stream synchronized after this case's work
  size_t outputs_begin_ = 0, outputs_end_ = 0;  // the outputs' byte range in it
  DeviceTensorMap inputs_, outputs_;  // views into the arena for a small case
};

// Several small cases' tensors on the device at once, as run_batch (gpu/common/kernel_record.h)
// stages them: one case after another in the calling thread's arena, each laid out as CaseTensors
// lays out a case alone (its inputs, then its outputs poisoned), with kGuardBytes of poison after
// each case, so that a kernel that reads or writes a little past its case's tensors meets poison,
// as alone it meets unused memory, and not the next case's tensors. One copy in for the whole
// batch, and one copy out and one synchronization for all (download_outputs). Staged only where the
// whole batch fits kSharedCaseBytes, the arena is free and the buffer mode is pooled; otherwise
// staged() is false, the batch holds nothing, and its cases are run one at a time through
// CaseTensors. Used and destroyed on the thread that made it.
struct CaseBatchItem {
  const TensorMap* inputs = nullptr;
  const OutputMetas* metas = nullptr;
};

class CaseBatchTensors {
 public:
  static constexpr size_t kGuardBytes = 4096;
  // The bytes the cases take in the arena: each tensor on the 256-byte boundary, and a guard after
  // each case of a batch of several. Staged together only where this is at most kSharedCaseBytes.
  static size_t staged_bytes(const std::vector<CaseBatchItem>& cases);

  explicit CaseBatchTensors(const std::vector<CaseBatchItem>& cases, int fill_byte = kPoisonByte);
  ~CaseBatchTensors();
  CaseBatchTensors(const CaseBatchTensors&) = delete;
  CaseBatchTensors& operator=(const CaseBatchTensors&) = delete;
  bool staged() const { return shared_ != nullptr; }
  size_t size() const { return inputs_.size(); }  // 0 when not staged
  const DeviceTensorMap& inputs(size_t i) const { return inputs_.at(i); }
  const DeviceTensorMap& outputs(size_t i) const { return outputs_.at(i); }
  // Every case's outputs on the host, in the cases' order, after the work enqueued on the calling
  // thread's stream: one copy and one synchronization.
  std::vector<TensorMap> download_outputs() const;

 private:
  unsigned char* shared_ = nullptr;
  mutable bool settled_ = false;
  size_t outputs_begin_ = 0, outputs_end_ = 0;
  std::vector<DeviceTensorMap> inputs_, outputs_;
};

// The tensor `name` of a map: `required` throws std::logic_error naming it when absent (validate
// guarantees the presence of required inputs and of every output); `optional` gives nullptr.
const DeviceTensor& required(const DeviceTensorMap& tensors, const std::string& name);
const DeviceTensor* optional(const DeviceTensorMap& tensors, const std::string& name);

// Bytes of every tensor of a map: what a kernel that reads (or writes) each element once moves.
size_t total_bytes(const DeviceTensorMap& tensors);

// A kernel's scratch memory for the launches of one bind: a view of a buffer the calling thread
// keeps (kept from case to case, grown when a launch needs more, no allocation a case) where
// `stream` is the thread's stream (thread_stream(), which orders every use of it), the bytes are at
// most CaseTensors::kSharedCaseBytes and fit beside the thread's other workspaces still held (a
// staged batch holds one a case until its collected launches are made: each its own range of the
// buffer); else a buffer of its own (and always under BufferMode::kSeparate, so that memcheck knows
// its bounds). The range is held until the returned pointer's last copy is gone; the buffer is
// reused from its start once no range of it is held.
std::shared_ptr<DeviceBuffer> launch_workspace(size_t bytes, void* stream);

}  // namespace bitparity::gpu
