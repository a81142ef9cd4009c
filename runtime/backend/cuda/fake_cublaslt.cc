// A fake libcublasLt (the entry points CublasLt resolves) for CPU tests of the CUDA backend:
// handles and descriptors are plain objects, the heuristic always offers one algorithm, and
// cublasLtMatmul records its problem shape and output pointer (no bf16 arithmetic: the fake
// GPU runs no kernels either, so its inputs hold nothing meaningful; an FP8 E4M3 matmul is
// computed on the host from its codes, so W8A8 tests check values). With a fill seed set, it
// writes pseudo-random f32 values into D, so a test can follow them through the copies; a
// matmul made while the fake libcuda captures a graph fills D when the graph is launched.
#include <cublasLt.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

struct FakeLayout {
  uint64_t rows, cols;
  int64_t ld;
  cudaDataType type;
};

/// E4M3FN code -> value (the NaN codes S.1111.111 read as NaN), as an FP8 GEMM reads them.
double e4m3Value(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::nan("");
  const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (code & 0x80) ? -mag : mag;
}

/// D = alpha * op(A) op(B) for E4M3 A and B and f32 D, column-major as cuBLASLt: op(A) is
/// A^T (A stored k x m), op(B) is B (k x n), the only FP8 layout cuBLASLt accepts ("TN").
void fp8Matmul(const FakeLayout& a, const uint8_t* A, const FakeLayout& b, const uint8_t* B,
               const FakeLayout& d, float* D, float alpha) {
  for (uint64_t n = 0; n < d.cols; ++n)
    for (uint64_t m = 0; m < d.rows; ++m) {
      double sum = 0;
      for (uint64_t k = 0; k < a.rows; ++k)
        sum += e4m3Value(A[m * a.ld + k]) * e4m3Value(B[n * b.ld + k]);
      D[n * d.ld + m] = static_cast<float>(alpha * sum);
    }
}

/// One FP8 matmul to run now or at a graph launch (its operands as cublasLtMatmul got them).
struct Fp8Product {
  FakeLayout a, b, d;
  const uint8_t *A, *B;
  float* D;
  float alpha;
};
void runFp8Product(void* arg) {
  const auto* p = static_cast<const Fp8Product*>(arg);
  fp8Matmul(p->a, p->A, p->b, p->B, p->d, p->D, p->alpha);
}
void releaseFp8Product(void* arg) { delete static_cast<Fp8Product*>(arg); }

std::mutex gMutex;
/// (rows, cols) of A, B and D of every matmul since the reset.
std::vector<std::vector<int64_t>> gCalls;
/// D of every matmul since the reset.
std::vector<void*> gOutputs;
/// A's element type of every matmul since the reset.
std::vector<int> gTypes;
/// 0: D is left alone; otherwise the seed of the values written into D.
uint64_t gFillSeed = 0;
/// Fills done since the reset (a fill's values depend on its index).
uint64_t gFills = 0;

/// One pending fill of D: rows * cols f32 values.
struct Fill {
  float* out;
  uint64_t count;
};

void runFill(void* arg) {
  auto* fill = static_cast<Fill*>(arg);
  uint64_t state;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    if (gFillSeed == 0) return;
    state = gFillSeed + 0x9e3779b97f4a7c15ull * ++gFills;
  }
  for (uint64_t i = 0; i < fill->count; ++i) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    fill->out[i] = static_cast<float>(static_cast<double>(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}
void releaseFill(void* arg) { delete static_cast<Fill*>(arg); }

}  // namespace

extern "C" {

void fakeCublasLtReset() {
  std::lock_guard<std::mutex> lock(gMutex);
  gCalls.clear();
  gOutputs.clear();
  gTypes.clear();
  gFillSeed = 0;
  gFills = 0;
}
/// Non-zero: every later matmul fills its f32 output with values drawn from `seed` and the
/// call's index (splitmix64, in [-1, 1)).
void fakeCublasLtSetFillSeed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(gMutex);
  gFillSeed = seed;
}
/// Call i's output pointer D (null past the end).
void* fakeCublasLtCallOutput(int i) {
  std::lock_guard<std::mutex> lock(gMutex);
  return i >= 0 && i < static_cast<int>(gOutputs.size()) ? gOutputs[i] : nullptr;
}
/// Call i's A element type (a cudaDataType; -1 past the end).
int fakeCublasLtCallType(int i) {
  std::lock_guard<std::mutex> lock(gMutex);
  return i >= 0 && i < static_cast<int>(gTypes.size()) ? gTypes[i] : -1;
}
int fakeCublasLtCallCount() {
  std::lock_guard<std::mutex> lock(gMutex);
  return static_cast<int>(gCalls.size());
}
/// Call i: rows and cols of A, B and D into shape[0..5].
void fakeCublasLtCall(int i, int64_t* shape) {
  std::lock_guard<std::mutex> lock(gMutex);
  for (int k = 0; k < 6; ++k) shape[k] = i < static_cast<int>(gCalls.size()) ? gCalls[i][k] : -1;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = reinterpret_cast<cublasLtHandle_t>(new int(0));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete reinterpret_cast<int*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}
size_t cublasLtGetVersion() { return 130000; }
const char* cublasLtGetStatusName(cublasStatus_t) { return "CUBLAS_STATUS_FAKE"; }
const char* cublasLtGetStatusString(cublasStatus_t) { return "fake cuBLASLt status"; }
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t,
                                        cudaDataType_t) {
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new int(0));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<int*>(desc);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t,
                                              const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new FakeLayout{rows, cols, ld, type});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<FakeLayout*>(layout);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new int(0));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete reinterpret_cast<int*>(pref);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                    cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t* results,
                                              int* returned) {
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(&results[0], 0, sizeof(results[0]));
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                       cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                       cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*,
                                       cublasLtMatmulHeuristicResult_t* result) {
  std::memset(result, 0, sizeof(*result));
  result->state = CUBLAS_STATUS_SUCCESS;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b,
                              const void*, const void*, cublasLtMatrixLayout_t, void* D,
                              cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t*, void*, size_t,
                              cudaStream_t) {
  if (!A || !B || !D || !a || !b || !d) return CUBLAS_STATUS_INVALID_VALUE;
  const auto* la = reinterpret_cast<const FakeLayout*>(a);
  const auto* lb = reinterpret_cast<const FakeLayout*>(b);
  const auto* ld = reinterpret_cast<const FakeLayout*>(d);
  {
    std::lock_guard<std::mutex> lock(gMutex);
    gCalls.push_back({static_cast<int64_t>(la->rows), static_cast<int64_t>(la->cols),
                      static_cast<int64_t>(lb->rows), static_cast<int64_t>(lb->cols),
                      static_cast<int64_t>(ld->rows), static_cast<int64_t>(ld->cols)});
    gOutputs.push_back(D);
    gTypes.push_back(static_cast<int>(la->type));
  }
  // The fake libcuda (when loaded) takes the work into the graph it is capturing.
  using DeferFn = int (*)(void (*)(void*), void*, void (*)(void*));
  static const auto defer = reinterpret_cast<DeferFn>(::dlsym(RTLD_DEFAULT, "fakeCudaDefer"));
  // FP8 (the W8A8 linears): computed on the host from the codes, at once or at the launch.
  if (la->type == CUDA_R_8F_E4M3 || lb->type == CUDA_R_8F_E4M3) {
    if (la->type != lb->type || ld->type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    auto* product = new Fp8Product{*la, *lb, *ld, static_cast<const uint8_t*>(A),
                                   static_cast<const uint8_t*>(B), static_cast<float*>(D),
                                   *static_cast<const float*>(alpha)};
    if (!defer || !defer(runFp8Product, product, releaseFp8Product)) {
      runFp8Product(product);
      releaseFp8Product(product);
    }
    return CUBLAS_STATUS_SUCCESS;
  }
  auto* fill = new Fill{static_cast<float*>(D), ld->rows * ld->cols};
  if (!defer || !defer(runFill, fill, releaseFill)) {
    runFill(fill);
    releaseFill(fill);
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
