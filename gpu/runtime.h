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

// Streams. bitparity builds its CUDA code with CUDA_API_PER_THREAD_DEFAULT_STREAM (gpu/CMakeLists.txt,
// public to what links it): a launch or copy that names no stream (nullptr) goes on the calling thread's own
// default stream, so that the threads of a campaign (`--jobs`) run their cases on the device at once
// and a synchronization waits for the calling thread's work only.

// How device memory is taken. kPooled (the default): stream-ordered, cudaMallocAsync from the
// device's default pool, which keeps freed memory for the next buffer, and cudaFreeAsync, neither
// of which waits for the device (cudaFree waits for every stream of the process, which would
// serialize a campaign's threads); a small case's tensors lie in the thread's device arena
// (CaseTensors, gpu/common/device_tensor.h).
// kSeparate (BITPARITY_CUDA_BUFFERS=separate in the environment; the --sanitizer workers and
// scripts/gpu_check.sh's sanitizer runs set it): cudaMalloc and cudaFree, one allocation a tensor,
// so that compute-sanitizer's memcheck knows each tensor's bounds and flags a read one past its end.
enum class BufferMode { kPooled, kSeparate };
BufferMode buffer_mode();
void set_buffer_mode(BufferMode mode);  // for tests; a buffer made before keeps its kind

// The boundary every device buffer starts on, as cudaMalloc's do (the kernels' vector paths rely on
// it), and the size of a region rounded up to it: regions carved one after another from one buffer
// (a case's tensors, a kernel's workspace) each start on the boundary too.
constexpr size_t kBufferAlignment = 256;
constexpr size_t aligned_bytes(size_t bytes) { return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment; }

// Device memory of `bytes` bytes (none for 0 bytes), freed by the destructor, taken as
// buffer_mode() says. A pooled buffer is made and freed in the order of the calling thread's
// stream, so it is used and destroyed on the thread that made it, or after a synchronization.
// Every buffer starts on a kBufferAlignment boundary.
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
  bool pooled_ = false;  // cudaFreeAsync, else cudaFree
};

// cudaDeviceSynchronize, checked.
void synchronize();

// How a host thread waits for the device at a synchronization. A campaign's jobs wait at one
// synchronization a batch, while other jobs and the generator processes want the same cores.
// BITPARITY_CUDA_SCHEDULE in the environment picks it:
//   spin      cudaDeviceScheduleSpin: the thread spins until the device is done;
//   yield     cudaDeviceScheduleYield: it spins, yielding its core between polls;
//   blocking  cudaDeviceScheduleBlockingSync: it sleeps until the device wakes it.
// Unset, empty or "auto" leaves CUDA's own choice (a process with fewer contexts than cores spins).
// The variable is read at the process's first device buffer and applied to the current device (a
// worker of --devices has one). Other text makes that buffer, and every later one, fail with
// std::invalid_argument naming the variable (in a campaign, a backend_error on every case of the
// device). bench/NOTES.md (2026-12-07, fifteenth entry) says what it is there to measure.
enum class Schedule { kAuto, kSpin, kYield, kBlocking };

// The setting `text` names (nullptr: unset); std::invalid_argument for any other text.
Schedule schedule_from_text(const char* text);

// Sets the current device's schedule (cudaSetDeviceFlags; kAuto: cudaDeviceScheduleAuto) and
// reads it back (cudaGetDeviceFlags).
void set_device_schedule(Schedule schedule);
Schedule device_schedule();

// The calling thread's stream (cudaStreamPerThread), as a void*: what a record's bind is given.
void* thread_stream();

}  // namespace bitparity::gpu
