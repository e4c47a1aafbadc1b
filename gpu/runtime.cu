#include "gpu/runtime.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include <cuda_runtime.h>

#include "gpu/common/batch_launch.h"

namespace bitparity::gpu {
namespace {

bool checked_from_environment() {
#ifndef NDEBUG
  return true;
#else
  const char* env = std::getenv("BITPARITY_CUDA_CHECKED");
  return env != nullptr && std::strcmp(env, "1") == 0;
#endif
}

bool& checked_flag() {
  static bool checked = checked_from_environment();
  return checked;
}

}  // namespace

bool sticky_error(int code) {
  return code == cudaErrorIllegalAddress || code == cudaErrorLaunchTimeout || code == cudaErrorAssert ||
         (code >= cudaErrorHardwareStackError && code <= cudaErrorLaunchFailure);
}

std::optional<std::string> unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(err);
  if (count == 0) return std::string("no CUDA device: cudaGetDeviceCount found none");
  return std::nullopt;
}

std::string device_description() {
  if (auto why = unavailable_reason()) return *why;
  int device = 0, driver = 0, runtime = 0;
  cudaGetDevice(&device);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + "), driver " +
         version(driver) + ", runtime " + version(runtime);
}

void check_cuda(int err, const std::string& what) {
  if (err == cudaSuccess) return;
  const auto e = static_cast<cudaError_t>(err);
  // A failed API call (a cudaMalloc too large) also leaves its error as the runtime's "last
  // error"; reported here, it is consumed, so that the next launch's cudaGetLastError does not
  // report it a second time against an innocent kernel.
  cudaGetLastError();
  throw CudaError(err, what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

bool checked_launches() { return checked_flag(); }
void set_checked_launches(bool on) { checked_flag() = on; }

void check_launch(const char* what, void* stream) {
  const cudaError_t err = cudaGetLastError();  // read first: a launch's error is not left for a later one
  if (const LaunchBatch* batch = collecting_launches()) batch->note_direct_launch(what);
  if (err != cudaSuccess) check_cuda(err, std::string(what) + " launch");
  if (checked_launches())
    check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), std::string(what) + " execution");
}

namespace {

// The current device's default pool, told once per device to keep what is freed (its release
// threshold is 0 by default, which hands memory back to the driver at every synchronization and
// makes the next allocation a driver call again).
cudaMemPool_t pool_of_current_device() {
  static std::mutex mutex;
  static std::map<int, cudaMemPool_t> pools;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = pools.find(device); it != pools.end()) return it->second;
  cudaMemPool_t pool = nullptr;
  check_cuda(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
  uint64_t keep = UINT64_MAX;
  check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
             "cudaMemPoolSetAttribute(release threshold)");
  pools.emplace(device, pool);
  return pool;
}

BufferMode mode_from_environment() {
  const char* env = std::getenv("BITPARITY_CUDA_BUFFERS");
  return env != nullptr && std::strcmp(env, "separate") == 0 ? BufferMode::kSeparate : BufferMode::kPooled;
}

std::atomic<BufferMode>& mode_flag() {
  static std::atomic<BufferMode> mode{mode_from_environment()};
  return mode;
}

void release(void* ptr, bool pooled) {
  // No throw: called from destructors; a sticky fault was reported already.
  if (pooled)
    cudaFreeAsync(ptr, cudaStreamPerThread);
  else
    cudaFree(ptr);
}

}  // namespace

Schedule schedule_from_text(const char* text) {
  if (text == nullptr || *text == '\0' || std::strcmp(text, "auto") == 0) return Schedule::kAuto;
  if (std::strcmp(text, "spin") == 0) return Schedule::kSpin;
  if (std::strcmp(text, "yield") == 0) return Schedule::kYield;
  if (std::strcmp(text, "blocking") == 0) return Schedule::kBlocking;
  throw std::invalid_argument(std::string("BITPARITY_CUDA_SCHEDULE=") + text +
                              ": expected spin, yield, blocking or auto (or unset)");
}

void set_device_schedule(Schedule schedule) {
  const unsigned flag = schedule == Schedule::kSpin       ? cudaDeviceScheduleSpin
                        : schedule == Schedule::kYield    ? cudaDeviceScheduleYield
                        : schedule == Schedule::kBlocking ? cudaDeviceScheduleBlockingSync
                                                          : cudaDeviceScheduleAuto;
  check_cuda(cudaSetDeviceFlags(flag), "cudaSetDeviceFlags");
}

Schedule device_schedule() {
  unsigned flags = 0;
  check_cuda(cudaGetDeviceFlags(&flags), "cudaGetDeviceFlags");
  switch (flags & cudaDeviceScheduleMask) {
    case cudaDeviceScheduleSpin: return Schedule::kSpin;
    case cudaDeviceScheduleYield: return Schedule::kYield;
    case cudaDeviceScheduleBlockingSync: return Schedule::kBlocking;
    default: return Schedule::kAuto;
  }
}

namespace {

// BITPARITY_CUDA_SCHEDULE, applied once a process (runtime.h). A bad value throws here and, the
// static's initialization not having completed, again at the next buffer.
void apply_schedule_from_environment() {
  static const bool applied = [] {
    const Schedule s = schedule_from_text(std::getenv("BITPARITY_CUDA_SCHEDULE"));
    if (s != Schedule::kAuto) set_device_schedule(s);
    return true;
  }();
  (void)applied;
}

}  // namespace

BufferMode buffer_mode() { return mode_flag().load(std::memory_order_relaxed); }
void set_buffer_mode(BufferMode mode) { mode_flag().store(mode, std::memory_order_relaxed); }

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  apply_schedule_from_environment();
  if (buffer_mode() == BufferMode::kSeparate) {
    check_cuda(cudaMalloc(&ptr_, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
    return;
  }
  pooled_ = true;
  const std::string what = "cudaMallocAsync of " + std::to_string(bytes) + " bytes";
  cudaMemPool_t pool = pool_of_current_device();
  cudaError_t err = cudaMallocFromPoolAsync(&ptr_, bytes, pool, cudaStreamPerThread);
  if (err == cudaErrorMemoryAllocation) {
    // What the pool keeps may be what is missing: wait for this thread's frees, give the
    // pool's unused memory back to the device and try once more.
    cudaGetLastError();
    check_cuda(cudaStreamSynchronize(cudaStreamPerThread), what);
    check_cuda(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
    err = cudaMallocFromPoolAsync(&ptr_, bytes, pool, cudaStreamPerThread);
  }
  if (err != cudaSuccess) ptr_ = nullptr;
  check_cuda(err, what);
  if (reinterpret_cast<uintptr_t>(ptr_) % kBufferAlignment != 0) {
    release(ptr_, true);
    ptr_ = nullptr;
    throw CudaError(cudaErrorMemoryAllocation, what + ": the pool gave an address off the 256-byte boundary");
  }
}

DeviceBuffer DeviceBuffer::view(void* ptr, size_t bytes) {
  DeviceBuffer b;
  b.ptr_ = ptr;
  b.bytes_ = bytes;
  b.owned_ = false;
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)),
      owned_(std::exchange(other.owned_, true)), pooled_(std::exchange(other.pooled_, false)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ && owned_) release(ptr_, pooled_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    owned_ = std::exchange(other.owned_, true);
    pooled_ = std::exchange(other.pooled_, false);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ && owned_) release(ptr_, pooled_);
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  if (bytes > bytes_) throw std::invalid_argument("DeviceBuffer::upload: more bytes than the buffer holds");
  if (bytes > 0) check_cuda(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  if (bytes > bytes_) throw std::invalid_argument("DeviceBuffer::download: more bytes than the buffer holds");
  if (bytes > 0) check_cuda(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
}

void DeviceBuffer::fill_bytes(int value) {
  if (bytes_ > 0) check_cuda(cudaMemset(ptr_, value, bytes_), "cudaMemset");
}

void DeviceBuffer::copy_from(const DeviceBuffer& other) {
  if (other.bytes_ > bytes_) throw std::invalid_argument("DeviceBuffer::copy_from: more bytes than the buffer holds");
  if (other.bytes_ > 0)
    check_cuda(cudaMemcpy(ptr_, other.ptr_, other.bytes_, cudaMemcpyDeviceToDevice), "cudaMemcpy on the device");
}

void synchronize() { check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

void* thread_stream() { return static_cast<void*>(cudaStreamPerThread); }

}  // namespace bitparity::gpu
