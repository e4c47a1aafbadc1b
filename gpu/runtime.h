// The CUDA runtime as bitparity uses it: device discovery with a reason when there is none,
// device buffers that free themselves, and CUDA errors turned into exceptions with messages.
// No CUDA types in this header, so that host code compiled by g++ can include it.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

namespace bitparity::gpu {

// Empty when a CUDA device is usable; otherwise why not ("no CUDA device: ...").
std::optional<std::string> unavailable_reason();

// "NVIDIA H200 (sm_90), driver 13.0, runtime 13.0", or the reason there is none.
std::string device_description();

// A CUDA call or a kernel that failed: "swiglu megatron_forward launch: cudaErrorInvalidValue
// (invalid argument)". A fault inside a kernel is sticky: the process's CUDA context is unusable
// afterwards, so a campaign runs GPU cases in a worker it can restart (design.md).
class CudaError : public std::runtime_error {
 public:
  CudaError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }  // the cudaError_t value

 private:
  int code_;
};

// Whether a cudaError_t leaves the process's CUDA context unusable (a fault inside a kernel is
// sticky): cudaErrorIllegalAddress (700), cudaErrorLaunchTimeout (702), cudaErrorAssert (710) and
// cudaErrorHardwareStackError .. cudaErrorLaunchFailure (714-719). A worker stops on one.
bool sticky_error(int code);

// Throws CudaError("<what>: <error name> (<text>)") unless `err` (a cudaError_t) is success.
void check_cuda(int err, const std::string& what);

// After a launch: cudaGetLastError always; in checked mode also a synchronization of `stream`,
// so that a fault inside the kernel is reported here, against this launch, and not at some later
// call. Checked mode is on in builds without NDEBUG and wherever BITPARITY_CUDA_CHECKED=1 is set
// in the environment (the tests set it); benchmarks keep it off.
void check_launch(const char* what, void* stream);
bool checked_launches();
void set_checked_launches(bool on);

// Device memory of `bytes` bytes (cudaMalloc; none for 0 bytes), freed by the destructor.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  // A buffer that names `bytes` bytes at `ptr` owned by someone else, and frees nothing: how a record
  // that composes other records hands its own tensors to their binds.
  static DeviceBuffer view(void* ptr, size_t bytes);

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

  void upload(const void* host, size_t bytes);     // host -> device, synchronous
  void download(void* host, size_t bytes) const;   // device -> host, synchronous
  void fill_bytes(int value);                      // cudaMemset of the whole buffer
  void copy_from(const DeviceBuffer& other);       // device -> device, the whole of `other`

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool owned_ = true;
};

// cudaDeviceSynchronize, checked.
void synchronize();

}  // namespace bitparity::gpu
