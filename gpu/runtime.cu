#include "gpu/runtime.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include <cuda_runtime.h>

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
  check_cuda(cudaGetLastError(), std::string(what) + " launch");
  if (checked_launches())
    check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), std::string(what) + " execution");
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) check_cuda(cudaMalloc(&ptr_, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
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
      owned_(std::exchange(other.owned_, true)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ && owned_) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    owned_ = std::exchange(other.owned_, true);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ && owned_) cudaFree(ptr_);  // no throw from a destructor; a sticky fault was reported already
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

}  // namespace bitparity::gpu
