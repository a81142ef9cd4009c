// A fake libcublasLt (the entry points CublasLt resolves) for CPU tests of the CUDA backend:
// handles and descriptors are plain objects, the heuristic always offers one algorithm, and
// cublasLtMatmul records its problem shape and output pointer (no arithmetic: the fake GPU
// runs no kernels either, so its inputs hold nothing meaningful). With a fill seed set, it
// writes pseudo-random f32 values into D, so a test can follow them through the copies.
#include <cublasLt.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

struct FakeLayout {
  uint64_t rows, cols;
  int64_t ld;
};

std::mutex gMutex;
/// (rows, cols) of A, B and D of every matmul since the reset.
std::vector<std::vector<int64_t>> gCalls;
/// D of every matmul since the reset.
std::vector<void*> gOutputs;
/// 0: D is left alone; otherwise the seed of the values written into D.
uint64_t gFillSeed = 0;

}  // namespace

extern "C" {

void fakeCublasLtReset() {
  std::lock_guard<std::mutex> lock(gMutex);
  gCalls.clear();
  gOutputs.clear();
  gFillSeed = 0;
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
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new FakeLayout{rows, cols, ld});
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
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b,
                              const void*, const void*, cublasLtMatrixLayout_t, void* D,
                              cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t*, void*, size_t,
                              cudaStream_t) {
  if (!A || !B || !D || !a || !b || !d) return CUBLAS_STATUS_INVALID_VALUE;
  const auto* la = reinterpret_cast<const FakeLayout*>(a);
  const auto* lb = reinterpret_cast<const FakeLayout*>(b);
  const auto* ld = reinterpret_cast<const FakeLayout*>(d);
  std::lock_guard<std::mutex> lock(gMutex);
  gCalls.push_back({static_cast<int64_t>(la->rows), static_cast<int64_t>(la->cols),
                    static_cast<int64_t>(lb->rows), static_cast<int64_t>(lb->cols),
                    static_cast<int64_t>(ld->rows), static_cast<int64_t>(ld->cols)});
  gOutputs.push_back(D);
  if (gFillSeed != 0) {
    uint64_t state = gFillSeed + 0x9e3779b97f4a7c15ull * gOutputs.size();
    float* out = static_cast<float*>(D);
    for (uint64_t i = 0; i < ld->rows * ld->cols; ++i) {
      uint64_t z = (state += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      out[i] = static_cast<float>(static_cast<double>(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
