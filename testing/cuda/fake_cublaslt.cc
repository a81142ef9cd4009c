// A fake libcublasLt (the entry points CublasLt resolves) for CPU tests of the CUDA backend:
// handles and descriptors are plain objects, the heuristic always offers one algorithm, and
// cublasLtMatmul records its problem shape and output pointer (no bf16 arithmetic: the fake
// GPU runs no kernels either, so its inputs hold nothing meaningful; an FP8 E4M3 matmul is
// computed on the host from its codes, so W8A8 tests check values). With a fill seed set, it
// writes pseudo-random f32 values into D, so a test can follow them through the copies; a
// matmul made while the fake libcuda captures a graph fills D when the graph is launched.
//
// Executing mode (INGOT_FAKE_CUDA_EXECUTING, in libingot_cuda_emulated.so with the emulated
// driver): kernels run there, so every matmul is computed, bf16 and f32 as well as FP8, with
// the descriptor's transposes, alpha and beta (f32 products and sums, as CUBLAS_COMPUTE_32F;
// the order of the sums is not cuBLASLt's, so results differ from a GPU's by rounding).
#include <cublasLt.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#ifdef INGOT_FAKE_CUDA_EXECUTING
#include "testing/cuda/fake_libcuda.h"
#endif

namespace {

/// The descriptor attributes the fake honours.
struct FakeDesc {
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
};

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

/// Element `i` of a matrix of `type` as f32 (bf16, f16 widened exactly; E4M3 decoded).
inline float element(const void* data, cudaDataType type, uint64_t i) {
  switch (type) {
    case CUDA_R_32F: return static_cast<const float*>(data)[i];
    case CUDA_R_16BF: {
      const uint32_t bits = uint32_t{static_cast<const uint16_t*>(data)[i]} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case CUDA_R_8F_E4M3: return static_cast<float>(e4m3Value(static_cast<const uint8_t*>(data)[i]));
    default: return NAN;
  }
}

/// One general matmul, column-major as cuBLASLt: D = alpha op(A) op(B) + beta C (C = D).
struct Product {
  FakeLayout a, b, d;
  FakeDesc desc;
  const void *A, *B;
  float* D;
  float alpha, beta;
};
void runProduct(void* arg) {
  const Product& p = *static_cast<const Product*>(arg);
  const uint64_t M = p.d.rows, N = p.d.cols;
  const uint64_t K = p.desc.transa == CUBLAS_OP_N ? p.a.cols : p.a.rows;
  // op(A) row m and op(B) column n as contiguous f32 vectors of K.
  std::vector<float> bcols(N * K);
  for (uint64_t n = 0; n < N; ++n)
    for (uint64_t k = 0; k < K; ++k)
      bcols[n * K + k] = element(p.B, p.b.type, p.desc.transb == CUBLAS_OP_N ? n * p.b.ld + k
                                                                              : k * p.b.ld + n);
  auto rows = [&](uint64_t begin, uint64_t end) {
    std::vector<float> arow(K);
    for (uint64_t m = begin; m < end; ++m) {
      for (uint64_t k = 0; k < K; ++k)
        arow[k] = element(p.A, p.a.type, p.desc.transa == CUBLAS_OP_N ? k * p.a.ld + m
                                                                      : m * p.a.ld + k);
      for (uint64_t n = 0; n < N; ++n) {
        const float* bc = &bcols[n * K];
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        uint64_t k = 0;
        for (; k + 8 <= K; k += 8)
          for (int j = 0; j < 8; ++j) s[j] += arow[k + j] * bc[k + j];
        for (; k < K; ++k) s[0] += arow[k] * bc[k];
        const float dot = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
        float& out = p.D[n * p.d.ld + m];
        out = p.alpha * dot + (p.beta != 0.0f ? p.beta * out : 0.0f);
      }
    }
  };
  const unsigned threads = M * N * K >= (1u << 22) ? std::max(1u, std::thread::hardware_concurrency()) : 1u;
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(rows, M * t / threads, M * (t + 1) / threads);
  rows(0, M / threads);
  for (std::thread& t : pool) t.join();
}
void releaseProduct(void* arg) { delete static_cast<Product*>(arg); }

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
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new FakeDesc());
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<FakeDesc*>(desc);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attribute,
                                              const void* value, size_t bytes) {
  auto* d = reinterpret_cast<FakeDesc*>(desc);
  if (!d || !value) return CUBLAS_STATUS_INVALID_VALUE;
  if (attribute == CUBLASLT_MATMUL_DESC_TRANSA && bytes == sizeof(d->transa))
    std::memcpy(&d->transa, value, bytes);
  if (attribute == CUBLASLT_MATMUL_DESC_TRANSB && bytes == sizeof(d->transb))
    std::memcpy(&d->transb, value, bytes);
  if (attribute == CUBLASLT_MATMUL_DESC_EPILOGUE && bytes == sizeof(d->epilogue))
    std::memcpy(&d->epilogue, value, bytes);
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
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b,
                              const void* beta, const void*, cublasLtMatrixLayout_t, void* D,
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
#ifdef INGOT_FAKE_CUDA_EXECUTING
  // Built into the emulated driver's own library: every matmul computed, in stream order.
  static const DeferFn defer = fakeCudaDefer;
  const auto* fd = reinterpret_cast<const FakeDesc*>(desc);
  if (!fd || fd->epilogue != CUBLASLT_EPILOGUE_DEFAULT || ld->type != CUDA_R_32F ||
      la->type != lb->type)
    return CUBLAS_STATUS_NOT_SUPPORTED;  // what the backend never asks for
  auto* product = new Product{*la, *lb, *ld, *fd, A, B, static_cast<float*>(D),
                              *static_cast<const float*>(alpha),
                              beta ? *static_cast<const float*>(beta) : 0.0f};
  if (!defer(runProduct, product, releaseProduct)) {
    runProduct(product);
    releaseProduct(product);
  }
  return CUBLAS_STATUS_SUCCESS;
#else
  (void)desc;
  (void)beta;
  static const auto defer = reinterpret_cast<DeferFn>(::dlsym(RTLD_DEFAULT, "fakeCudaDefer"));
#endif
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
