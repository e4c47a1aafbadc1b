// The cublas contract's launcher: cuBLASLt opened at run time (gpu/cublas_lt.h).
#include "gpu/cublas_lt.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/runtime.h"

// A CUDA toolkit installed without cuBLAS's headers still builds everything else: cuda:cublas then
// fails on its first case with a message saying so (a backend error, never a skip).
#if !__has_include(<cublasLt.h>)
namespace bitparity::gpu {
namespace {
constexpr const char* kNoHeader = "bitparity was built without cuBLASLt's header (cublasLt.h): cuda:cublas is unavailable";
}  // namespace
void launch_gemm_cublas(const Gemm&) { throw std::runtime_error(kNoHeader); }
std::string cublas_gemm_algorithm(int64_t, int64_t, int64_t) { throw std::runtime_error(kNoHeader); }
std::string cublas_lt_description() { return kNoHeader; }
}  // namespace bitparity::gpu
#else

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace bitparity::gpu {
namespace {

// PyTorch's and Transformer Engine's cuBLASLt workspace on Hopper.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// The entry points bitparity calls, resolved from the opened library.
struct Lt {
  std::string file, error;  // error: why it could not be opened (then nothing else is set)
  size_t (*GetVersion)() = nullptr;
  const char* (*GetStatusString)(cublasStatus_t) = nullptr;  // may be absent
  cublasStatus_t (*Create)(cublasLtHandle_t*) = nullptr;
  cublasStatus_t (*Destroy)(cublasLtHandle_t) = nullptr;
  cublasStatus_t (*MatmulDescCreate)(cublasLtMatmulDesc_t*, cublasComputeType_t, cudaDataType_t) = nullptr;
  cublasStatus_t (*MatmulDescDestroy)(cublasLtMatmulDesc_t) = nullptr;
  cublasStatus_t (*MatmulDescSetAttribute)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*,
                                           size_t) = nullptr;
  cublasStatus_t (*MatrixLayoutCreate)(cublasLtMatrixLayout_t*, cudaDataType, uint64_t, uint64_t, int64_t) = nullptr;
  cublasStatus_t (*MatrixLayoutDestroy)(cublasLtMatrixLayout_t) = nullptr;
  cublasStatus_t (*PreferenceCreate)(cublasLtMatmulPreference_t*) = nullptr;
  cublasStatus_t (*PreferenceDestroy)(cublasLtMatmulPreference_t) = nullptr;
  cublasStatus_t (*PreferenceSetAttribute)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                           const void*, size_t) = nullptr;
  cublasStatus_t (*AlgoGetHeuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                     cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                     cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t*,
                                     int*) = nullptr;
  cublasStatus_t (*AlgoConfigGetAttribute)(const cublasLtMatmulAlgo_t*, cublasLtMatmulAlgoConfigAttributes_t, void*,
                                           size_t, size_t*) = nullptr;
  cublasStatus_t (*Matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
                           const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t,
                           void*, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t,
                           cudaStream_t) = nullptr;
  cublasLtHandle_t handle = nullptr;  // cuBLASLt's handles may be shared by threads
};

template <typename F>
void resolve(void* lib, const char* name, F& f, std::vector<std::string>& missing) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) missing.push_back(name);
}

std::vector<std::string> candidates() {
  if (const char* path = std::getenv("BITPARITY_CUBLASLT"); path && *path) return {path};
  return {"libcublasLt.so.13", "/usr/local/cuda/lib64/libcublasLt.so.13",
          "/usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13"};
}

Lt open_library() {
  Lt lt;
  void* lib = nullptr;
  std::string tried;
  for (const std::string& file : candidates()) {
    lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      lt.file = file;
      break;
    }
    const char* why = dlerror();
    tried += "\n  " + file + ": " + (why ? why : "not found");
  }
  if (!lib) {
    lt.error = "cuBLASLt could not be opened (set BITPARITY_CUBLASLT to its file):" + tried;
    return lt;
  }
  std::vector<std::string> missing;
  resolve(lib, "cublasLtGetVersion", lt.GetVersion, missing);
  resolve(lib, "cublasLtCreate", lt.Create, missing);
  resolve(lib, "cublasLtDestroy", lt.Destroy, missing);
  resolve(lib, "cublasLtMatmulDescCreate", lt.MatmulDescCreate, missing);
  resolve(lib, "cublasLtMatmulDescDestroy", lt.MatmulDescDestroy, missing);
  resolve(lib, "cublasLtMatmulDescSetAttribute", lt.MatmulDescSetAttribute, missing);
  resolve(lib, "cublasLtMatrixLayoutCreate", lt.MatrixLayoutCreate, missing);
  resolve(lib, "cublasLtMatrixLayoutDestroy", lt.MatrixLayoutDestroy, missing);
  resolve(lib, "cublasLtMatmulPreferenceCreate", lt.PreferenceCreate, missing);
  resolve(lib, "cublasLtMatmulPreferenceDestroy", lt.PreferenceDestroy, missing);
  resolve(lib, "cublasLtMatmulPreferenceSetAttribute", lt.PreferenceSetAttribute, missing);
  resolve(lib, "cublasLtMatmulAlgoGetHeuristic", lt.AlgoGetHeuristic, missing);
  resolve(lib, "cublasLtMatmulAlgoConfigGetAttribute", lt.AlgoConfigGetAttribute, missing);
  resolve(lib, "cublasLtMatmul", lt.Matmul, missing);
  lt.GetStatusString = reinterpret_cast<const char* (*)(cublasStatus_t)>(dlsym(lib, "cublasLtGetStatusString"));
  if (!missing.empty()) {
    std::string names;
    for (const std::string& m : missing) names += " " + m;
    lt.error = lt.file + " lacks" + names;
  }
  return lt;
}

void check(const Lt& lt, cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const char* text = lt.GetStatusString ? lt.GetStatusString(status) : nullptr;
  throw CudaError(static_cast<int>(status),
                  what + ": cublasStatus " + std::to_string(static_cast<int>(status)) + (text ? std::string(" (") + text + ")" : ""));
}

// The library and its handle: opened and made once a process, and given back at exit (registered
// after the CUDA runtime's own teardown, so run before it).
Lt& library() {
  static Lt lt;
  static std::once_flag once;
  std::call_once(once, [] {
    lt = open_library();
    if (!lt.error.empty()) return;
    check(lt, lt.Create(&lt.handle), "cublasLtCreate");
    std::atexit([] { lt.Destroy(lt.handle); });
  });
  if (!lt.error.empty()) throw std::runtime_error(lt.error);
  return lt;
}

// The calling thread's workspace, made on its first product and freed when the thread ends: the
// threads of a campaign run products at once, each on its own stream, and a shared workspace would
// be written by two of them at a time (a split-K product keeps its partial sums there).
void* thread_workspace() {
  thread_local DeviceBuffer workspace(kWorkspaceBytes);
  return workspace.get();
}

// The descriptors of one row-major product, destroyed with it.
class Product {
 public:
  Product(Lt& lt, int64_t M, int64_t K, int64_t N) : lt_(lt) {
    check(lt, lt.MatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t none = CUBLAS_OP_N;
    check(lt, lt.MatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &none, sizeof none), "TRANSA");
    check(lt, lt.MatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none), "TRANSB");
    // Column-major: A = b^T is N x K (ld N), B = a^T is K x M (ld K), D = out^T is N x M (ld N).
    check(lt, lt.MatrixLayoutCreate(&a_, CUDA_R_16BF, static_cast<uint64_t>(N), static_cast<uint64_t>(K), N),
          "layout of b");
    check(lt, lt.MatrixLayoutCreate(&b_, CUDA_R_16BF, static_cast<uint64_t>(K), static_cast<uint64_t>(M), K),
          "layout of a");
    check(lt, lt.MatrixLayoutCreate(&d_, CUDA_R_16BF, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N),
          "layout of out");
    check(lt, lt.PreferenceCreate(&pref_), "cublasLtMatmulPreferenceCreate");
    const uint64_t workspace = kWorkspaceBytes;
    check(lt, lt.PreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace),
          "workspace preference");
    int found = 0;
    check(lt, lt.AlgoGetHeuristic(lt.handle, desc_, a_, b_, d_, d_, pref_, 1, &heuristic_, &found),
          "cublasLtMatmulAlgoGetHeuristic");
    if (found < 1)
      throw CudaError(static_cast<int>(CUBLAS_STATUS_NOT_SUPPORTED),
                      "cublasLtMatmulAlgoGetHeuristic: no algorithm for [" + std::to_string(M) + ", " +
                          std::to_string(K) + "] @ [" + std::to_string(K) + ", " + std::to_string(N) + "]");
  }
  ~Product() {
    if (pref_) lt_.PreferenceDestroy(pref_);
    for (cublasLtMatrixLayout_t l : {a_, b_, d_})
      if (l) lt_.MatrixLayoutDestroy(l);
    if (desc_) lt_.MatmulDescDestroy(desc_);
  }
  Product(const Product&) = delete;
  Product& operator=(const Product&) = delete;

  void run(const void* a, const void* b, void* out, cudaStream_t stream) {
    const float alpha = 1.0f, beta = 0.0f;
    check(lt_, lt_.Matmul(lt_.handle, desc_, &alpha, b, a_, a, b_, &beta, out, d_, out, d_, &heuristic_.algo,
                          thread_workspace(), kWorkspaceBytes, stream),
          "cublasLtMatmul");
  }

  std::string algorithm() const {
    std::string s;
    auto add = [&](const char* name, cublasLtMatmulAlgoConfigAttributes_t attr, size_t bytes) {
      uint64_t value = 0;  // little-endian: a narrower attribute lands in the low bytes
      size_t written = 0;
      if (lt_.AlgoConfigGetAttribute(&heuristic_.algo, attr, &value, bytes, &written) != CUBLAS_STATUS_SUCCESS) return;
      s += (s.empty() ? "" : " ") + std::string(name) + " " + std::to_string(value);
    };
    add("algo", CUBLASLT_ALGO_CONFIG_ID, sizeof(int32_t));
    add("tile", CUBLASLT_ALGO_CONFIG_TILE_ID, sizeof(uint32_t));
    add("stages", CUBLASLT_ALGO_CONFIG_STAGES_ID, sizeof(uint32_t));
    add("splitk", CUBLASLT_ALGO_CONFIG_SPLITK_NUM, sizeof(int32_t));
    add("reduction", CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, sizeof(uint32_t));
    add("swizzle", CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, sizeof(uint32_t));
    add("custom", CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, sizeof(uint32_t));
    add("inner", CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, sizeof(uint16_t));
    add("cluster", CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, sizeof(uint16_t));
    return s;
  }

 private:
  Lt& lt_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
};

}  // namespace

void launch_gemm_cublas(const Gemm& g) {
  if (g.M == 0 || g.N == 0) return;
  // cuBLASLt is not built with per-thread default streams: stream 0 would be the legacy stream,
  // which waits for every thread's work. The calling thread's stream, named.
  const auto stream = g.stream ? static_cast<cudaStream_t>(g.stream) : cudaStreamPerThread;
  if (g.K == 0) {
    check_cuda(cudaMemsetAsync(g.out, 0, static_cast<size_t>(g.M * g.N) * 2, stream), "gemm cublas: K = 0");
    return;
  }
  Product product(library(), g.M, g.K, g.N);
  product.run(g.a, g.b, g.out, stream);
  check_launch("gemm cublas", g.stream);
}

std::string cublas_gemm_algorithm(int64_t M, int64_t K, int64_t N) {
  if (M <= 0 || K <= 0 || N <= 0) throw std::invalid_argument("cublas_gemm_algorithm: M, K and N must be positive");
  return Product(library(), M, K, N).algorithm();
}

std::string cublas_lt_description() {
  try {
    const Lt& lt = library();
    return lt.file + " " + std::to_string(lt.GetVersion());
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace bitparity::gpu

#endif  // __has_include(<cublasLt.h>)
