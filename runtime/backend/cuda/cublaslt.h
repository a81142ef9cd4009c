// CublasLt: the GEMMs of the CUDA backend through cuBLASLt, opened with dlopen at run time.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace ingot {

/// One cuBLASLt entry point CublasLt resolves: its member name and the exported symbol.
struct CublasLtEntryPoint {
  const char* member;  // e.g. "matmul"
  const char* symbol;  // e.g. "cublasLtMatmul"
};

/// cuBLASLt without a link-time dependency: a runtime built here starts where the library
/// is absent, and a GPU machine may bring it from pip (nvidia-cublas) through
/// $INGOT_CUBLASLT_LIBRARY. One instance serves one context; calls are thread-safe.
class CublasLt {
 public:
  /// Workspace gemmBf16 may use: enough for the split-K and stream-K kernels cuBLASLt picks
  /// for decode-shaped GEMMs on Hopper (NVIDIA recommends 32 MiB there).
  static constexpr size_t kWorkspaceBytes = 32u << 20;

  /// Opens $INGOT_CUBLASLT_LIBRARY, else libcublasLt.so.13, else libcublasLt.so.12 (dlopen,
  /// no link-time dependency) and creates a handle. Needs a current context. Built against
  /// cuBLASLt 13's header; 12 exports the same entry points, enum values and structs used here.
  static StatusOr<std::unique_ptr<CublasLt>> load();
  /// Every (member, symbol) pair load() resolves (for a check against a real library).
  static const std::vector<CublasLtEntryPoint>& entryPoints();
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  /// y [T, N] f32 row-major = x [T, K] bf16 row-major . w [N, K]^T bf16 row-major, f32
  /// accumulation (CUBLAS_COMPUTE_32F), on `stream` with `workspace` (kWorkspaceBytes).
  /// Algorithm from cublasLtMatmulAlgoGetHeuristic, chosen once per (N, K, T rounded up to
  /// a power of two) and cached; errors name the call, the cuBLASLt status and the shape.
  /// Capturable in a CUDA graph (no allocation, no sync inside).
  Status gemmBf16(CUstream stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y,
                  int64_t T, int64_t N, int64_t K, CUdeviceptr workspace);

  /// K and N of gemmFp8 are multiples of this: cuBLASLt's FP8 kernels want 16-byte aligned
  /// leading dimensions (16 one-byte codes) and 16-multiple dimensions for their tiles.
  static constexpr int64_t kFp8Align = 16;

  /// y [T, N] f32 row-major = x [T, K] E4M3 row-major . w [N, K]^T E4M3 row-major with unit
  /// scales and f32 accumulation (fast accumulation off): the W8A8 GEMM, whose caller applies
  /// the per-token and per-channel scales (kernels/fp8_w8a8.cuh). cuBLASLt's FP8 layout rule
  /// is met as gemmBf16 lays out its operands: A = w transposed, B = x ("TN"). N and K must be
  /// multiples of kFp8Align (pad the codes with zeros) and the pointers 16-byte aligned, else
  /// an error saying so. Same heuristic cache and capture rules as gemmBf16; FP8 kernels exist
  /// on sm_89 and newer only (cuBLASLt's error otherwise).
  Status gemmFp8(CUstream stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, int64_t T,
                 int64_t N, int64_t K, CUdeviceptr workspace);

  /// The library load() opened ("libcublasLt.so.13" or the $INGOT_CUBLASLT_LIBRARY path).
  const std::string& library() const { return libraryName_; }
  /// cublasLtGetVersion(), e.g. 130001.
  size_t version() const;
  /// Heuristic queries made so far (each new (N, K, T bucket, alignment) makes one).
  int heuristicQueries() const;

 private:
  struct Api;    // the resolved entry points
  struct Plans;  // descriptors and algorithms per shape
  CublasLt();
  /// "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not supported)".
  std::string describe(int status) const;
  /// gemmBf16 and gemmFp8: bf16 or E4M3 inputs.
  Status gemm(CUstream stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, int64_t T, int64_t N,
              int64_t K, CUdeviceptr workspace, bool fp8);

  std::unique_ptr<Api> api_;
  std::unique_ptr<Plans> plans_;
  void* library_ = nullptr;
  std::string libraryName_;
  void* handle_ = nullptr;  // cublasLtHandle_t
  mutable std::mutex mutex_;  // guards plans_
};

}  // namespace ingot
