// CublasLt: the GEMMs of the CUDA backend through cuBLASLt, opened with dlopen at run time.
#include "runtime/backend/cuda/cublaslt.h"

#include "runtime/backend/cuda/cuda_driver.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <tuple>
#include <type_traits>

namespace ingot {
namespace {

// (member, symbol) of every cuBLASLt function the wrapper calls; cublasLt.h declares them
// under their exported names.
#define INGOT_CUBLASLT_ENTRY_POINTS(X)                          \
  X(create, cublasLtCreate)                                     \
  X(destroy, cublasLtDestroy)                                   \
  X(getVersion, cublasLtGetVersion)                             \
  X(getStatusName, cublasLtGetStatusName)                       \
  X(getStatusString, cublasLtGetStatusString)                   \
  X(matmulDescCreate, cublasLtMatmulDescCreate)                 \
  X(matmulDescDestroy, cublasLtMatmulDescDestroy)               \
  X(matmulDescSetAttribute, cublasLtMatmulDescSetAttribute)     \
  X(matrixLayoutCreate, cublasLtMatrixLayoutCreate)             \
  X(matrixLayoutDestroy, cublasLtMatrixLayoutDestroy)           \
  X(preferenceCreate, cublasLtMatmulPreferenceCreate)           \
  X(preferenceDestroy, cublasLtMatmulPreferenceDestroy)         \
  X(preferenceSetAttribute, cublasLtMatmulPreferenceSetAttribute) \
  X(algoGetHeuristic, cublasLtMatmulAlgoGetHeuristic)           \
  X(algoCheck, cublasLtMatmulAlgoCheck)                         \
  X(matmul, cublasLtMatmul)

/// Largest pointer alignment cuBLASLt's heuristics distinguish (its default assumption).
constexpr unsigned kMaxAlignment = 256;

/// (N, K, T or its bucket, pointer alignment in bytes, input element type).
using ShapeKey = std::tuple<int64_t, int64_t, int64_t, unsigned, int>;

int64_t roundUpToPowerOfTwo(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace

struct CublasLt::Api {
#define INGOT_CUBLASLT_MEMBER(member, api) decltype(&::api) member = nullptr;
  INGOT_CUBLASLT_ENTRY_POINTS(INGOT_CUBLASLT_MEMBER)
#undef INGOT_CUBLASLT_MEMBER
};

/// The matrix layouts of one exact problem (the matmul descriptor is shared), and the
/// algorithm to run it with.
struct GemmPlan {
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct CublasLt::Plans {
  // f32 compute and scale, A transposed ("TN", which FP8 requires): bf16 or E4M3 inputs
  // (their types are the layouts'), f32 output, unit A/B scales.
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  std::map<ShapeKey, cublasLtMatmulAlgo_t> bucketAlgos;  // (N, K, T bucket, alignment, type)
  std::map<ShapeKey, GemmPlan> exact;                    // (N, K, T, alignment, type)
  int heuristicQueries = 0;
};

const std::vector<CublasLtEntryPoint>& CublasLt::entryPoints() {
#define INGOT_CUBLASLT_ENTRY(member, api) {#member, #api},
  static const std::vector<CublasLtEntryPoint> table = {
      INGOT_CUBLASLT_ENTRY_POINTS(INGOT_CUBLASLT_ENTRY)};
#undef INGOT_CUBLASLT_ENTRY
  return table;
}

CublasLt::CublasLt() : api_(new Api()), plans_(new Plans()) {}

StatusOr<std::unique_ptr<CublasLt>> CublasLt::load() {
  std::vector<std::string> candidates = {"libcublasLt.so.13", "libcublasLt.so.12"};
  const char* env = std::getenv("INGOT_CUBLASLT_LIBRARY");
  if (env && *env) candidates = {env};
  // The emulated CUDA stack brings its own (computing) cuBLASLt.
  if (StatusOr<std::string> emulated = emulatedCudaLibrary(); emulated.ok()) candidates = {*emulated};
  void* library = nullptr;
  std::string name, tried;
  for (const std::string& candidate : candidates) {
    library = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library) {
      name = candidate;
      break;
    }
    const char* why = ::dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : candidate + ": not found");
  }
  if (!library)
    return notFound("cuBLASLt not found (" + tried +
                    "); install it or set INGOT_CUBLASLT_LIBRARY to libcublasLt.so's path");

  std::unique_ptr<CublasLt> lt(new CublasLt());
  lt->library_ = library;
  lt->libraryName_ = name;
  Api& api = *lt->api_;
#define INGOT_CUBLASLT_RESOLVE(member, symbol)                                         \
  api.member = reinterpret_cast<decltype(api.member)>(::dlsym(library, #symbol));      \
  if (!api.member) return unimplemented(name + " has no " #symbol " (cuBLASLt too old?)");
  INGOT_CUBLASLT_ENTRY_POINTS(INGOT_CUBLASLT_RESOLVE)
#undef INGOT_CUBLASLT_RESOLVE

  auto check = [&](const char* call, cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? okStatus()
                                      : internalError(std::string(call) + ": " + lt->describe(s));
  };
  cublasLtHandle_t handle = nullptr;
  INGOT_RETURN_IF_ERROR(check("cublasLtCreate", api.create(&handle)));
  lt->handle_ = handle;
  Plans& p = *lt->plans_;
  INGOT_RETURN_IF_ERROR(check("cublasLtMatmulDescCreate",
                              api.matmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)));
  // Row-major y = x w^T is column-major y^T = w^T' x': A = w (K x N, ld K) transposed,
  // B = x (K x T, ld K), C = D = y (N x T, ld N).
  cublasOperation_t transA = CUBLAS_OP_T, transB = CUBLAS_OP_N;
  INGOT_RETURN_IF_ERROR(check("cublasLtMatmulDescSetAttribute(TRANSA)",
                              api.matmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                         &transA, sizeof(transA))));
  INGOT_RETURN_IF_ERROR(check("cublasLtMatmulDescSetAttribute(TRANSB)",
                              api.matmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                         &transB, sizeof(transB))));
  INGOT_RETURN_IF_ERROR(check("cublasLtMatmulPreferenceCreate", api.preferenceCreate(&p.preference)));
  uint64_t workspace = kWorkspaceBytes;
  INGOT_RETURN_IF_ERROR(check(
      "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)",
      api.preferenceSetAttribute(p.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                 &workspace, sizeof(workspace))));
  return lt;
}

CublasLt::~CublasLt() {
  Api& api = *api_;
  for (auto& [key, plan] : plans_->exact) {
    if (plan.a) api.matrixLayoutDestroy(plan.a);
    if (plan.b) api.matrixLayoutDestroy(plan.b);
    if (plan.c) api.matrixLayoutDestroy(plan.c);
  }
  if (plans_->preference) api.preferenceDestroy(plans_->preference);
  if (plans_->desc) api.matmulDescDestroy(plans_->desc);
  if (handle_) api.destroy(static_cast<cublasLtHandle_t>(handle_));
  // The library stays mapped: CUDA libraries keep process-wide state (kernel images
  // registered with the context) that unloading mid-process would leave dangling.
}

std::string CublasLt::describe(int status) const {
  auto s = static_cast<cublasStatus_t>(status);
  const char* name = api_->getStatusName ? api_->getStatusName(s) : nullptr;
  const char* text = api_->getStatusString ? api_->getStatusString(s) : nullptr;
  return (name ? std::string(name) : "cuBLAS status " + std::to_string(status)) +
         (text ? std::string(" (") + text + ")" : "");
}

size_t CublasLt::version() const { return api_->getVersion(); }

int CublasLt::heuristicQueries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_->heuristicQueries;
}

Status CublasLt::gemmBf16(CUstream stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y,
                          int64_t T, int64_t N, int64_t K, CUdeviceptr workspace) {
  return gemm(stream, x, w, y, T, N, K, workspace, /*fp8=*/false);
}

Status CublasLt::gemmFp8(CUstream stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y,
                         int64_t T, int64_t N, int64_t K, CUdeviceptr workspace) {
  if (N % kFp8Align != 0 || K % kFp8Align != 0)
    return invalidArgument("gemmFp8: N = " + std::to_string(N) + " and K = " + std::to_string(K) +
                           " must be multiples of " + std::to_string(kFp8Align) +
                           " (cuBLASLt's FP8 layout rule): pad the weight and activation codes");
  if ((x | w | y) & 15)
    return invalidArgument("gemmFp8: x, w and y must be 16-byte aligned device pointers");
  return gemm(stream, x, w, y, T, N, K, workspace, /*fp8=*/true);
}

Status CublasLt::gemm(CUstream stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, int64_t T,
                      int64_t N, int64_t K, CUdeviceptr workspace, bool fp8) {
  const char* fn = fp8 ? "gemmFp8" : "gemmBf16";
  const char* in = fp8 ? "e4m3" : "bf16";
  const std::string shape = "y[" + std::to_string(T) + ", " + std::to_string(N) + "] f32 = x[" +
                            std::to_string(T) + ", " + std::to_string(K) + "] " + in + " . w[" +
                            std::to_string(N) + ", " + std::to_string(K) + "]^T " + in;
  if (T < 0 || N <= 0 || K <= 0)
    return invalidArgument(std::string(fn) + ": bad shape " + shape + " (N, K > 0 and T >= 0)");
  if (T == 0) return okStatus();
  if (!x || !w || !y || !workspace)
    return invalidArgument(std::string(fn) + ": " + (!x ? "x" : !w ? "w" : !y ? "y" : "workspace") +
                           " is a null device pointer, for " + shape);
  const cudaDataType_t inType = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  // The heuristics may pick vectorized kernels for aligned pointers; tell them what we have.
  unsigned alignment = kMaxAlignment;
  while (alignment > 1 && ((x | w | y) & (alignment - 1))) alignment >>= 1;

  Api& api = *api_;
  Plans& p = *plans_;
  const GemmPlan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto failure = [&](const char* call, cublasStatus_t s) {
      return internalError(std::string(call) + ": " + describe(s) + " for " + shape);
    };
    auto layouts = [&](int64_t t, GemmPlan& g) -> Status {
      cublasStatus_t s = api.matrixLayoutCreate(&g.a, inType, K, N, K);
      if (s == CUBLAS_STATUS_SUCCESS) s = api.matrixLayoutCreate(&g.b, inType, K, t, K);
      if (s == CUBLAS_STATUS_SUCCESS) s = api.matrixLayoutCreate(&g.c, CUDA_R_32F, N, t, N);
      return s == CUBLAS_STATUS_SUCCESS ? okStatus() : failure("cublasLtMatrixLayoutCreate", s);
    };
    auto destroy = [&](GemmPlan& g) {
      if (g.a) api.matrixLayoutDestroy(g.a);
      if (g.b) api.matrixLayoutDestroy(g.b);
      if (g.c) api.matrixLayoutDestroy(g.c);
      g = GemmPlan{};
    };
    // The best algorithm the heuristics know for layouts `g`.
    auto heuristic = [&](const GemmPlan& g, cublasLtMatmulAlgo_t* algo) -> Status {
      uint32_t bytes = alignment;
      for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
        cublasStatus_t s = api.preferenceSetAttribute(p.preference, attr, &bytes, sizeof(bytes));
        if (s != CUBLAS_STATUS_SUCCESS) return failure("cublasLtMatmulPreferenceSetAttribute", s);
      }
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      ++p.heuristicQueries;
      cublasStatus_t s = api.algoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p.desc, g.a,
                                              g.b, g.c, g.c, p.preference, 1, &result, &found);
      if (s != CUBLAS_STATUS_SUCCESS) return failure("cublasLtMatmulAlgoGetHeuristic", s);
      if (found == 0 || result.state != CUBLAS_STATUS_SUCCESS)
        return failure("cublasLtMatmulAlgoGetHeuristic (no algorithm)",
                       found ? result.state : CUBLAS_STATUS_NOT_SUPPORTED);
      *algo = result.algo;
      return okStatus();
    };

    const ShapeKey exactKey{N, K, T, alignment, static_cast<int>(inType)};
    auto it = p.exact.find(exactKey);
    if (it == p.exact.end()) {
      GemmPlan g;
      Status built = layouts(T, g);
      const int64_t bucket = roundUpToPowerOfTwo(T);
      const ShapeKey bucketKey{N, K, bucket, alignment, static_cast<int>(inType)};
      if (built.ok() && !p.bucketAlgos.count(bucketKey)) {
        GemmPlan b;  // the bucket's own layouts, only for the query
        built = bucket == T ? heuristic(g, &p.bucketAlgos[bucketKey]) : layouts(bucket, b);
        if (built.ok() && bucket != T) built = heuristic(b, &p.bucketAlgos[bucketKey]);
        if (!built.ok()) p.bucketAlgos.erase(bucketKey);
        destroy(b);
      }
      if (built.ok()) {
        // The bucket's algorithm serves T when cuBLASLt confirms it does (it nearly always
        // does); otherwise this exact shape gets its own query.
        g.algo = p.bucketAlgos[bucketKey];
        cublasLtMatmulHeuristicResult_t check{};
        cublasStatus_t s = api.algoCheck(static_cast<cublasLtHandle_t>(handle_), p.desc, g.a,
                                         g.b, g.c, g.c, &g.algo, &check);
        if (s != CUBLAS_STATUS_SUCCESS || check.workspaceSize > kWorkspaceBytes)
          built = heuristic(g, &g.algo);
      }
      if (!built.ok()) {
        destroy(g);
        return built;
      }
      it = p.exact.emplace(exactKey, g).first;
    }
    plan = &it->second;  // map nodes are stable; entries live until destruction
  }

  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t s = api.matmul(
      static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, reinterpret_cast<const void*>(w),
      plan->a, reinterpret_cast<const void*>(x), plan->b, &beta, reinterpret_cast<const void*>(y),
      plan->c, reinterpret_cast<void*>(y), plan->c, &plan->algo,
      reinterpret_cast<void*>(workspace), kWorkspaceBytes, reinterpret_cast<cudaStream_t>(stream));
  if (s != CUBLAS_STATUS_SUCCESS)
    return internalError("cublasLtMatmul: " + describe(s) + " for " + shape);
  return okStatus();
}

}  // namespace ingot
