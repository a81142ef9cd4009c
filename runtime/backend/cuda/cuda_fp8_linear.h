// W8A8 FP8 linears on sm_90+: per-token E4M3 activations, the cuBLASLt FP8 GEMM, the scale
// epilogue (codegen/cuda/kernels/fp8_w8a8.cuh). Private to the CUDA backend's .cc files.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/cuda/cuda_backend_state.h"

namespace ingot {

/// The W8A8 operands of one fp8 linear step: its E4M3 codes [Np, Kp] with N and K rounded up
/// to CublasLt::kFp8Align (the artifact's codes themselves when no padding is needed).
struct Fp8LinearWeights {
  CUdeviceptr codes = 0;  ///< 0: the step is not W8A8
  int64_t padded_n = 0, padded_k = 0;
};

/// An activation slot whose buffers are quantized by the rms_norm or silu_mul that makes
/// them (codegen/cuda/kernels/fp8_producers.cuh) for their W8A8 consumers. Keyed by the
/// plan's slot: buffers sharing a slot never live at once, so neither do their codes.
struct Fp8ProducedInput {
  int32_t slot = -1;
  int64_t max_padded_k = 0;  ///< the widest codes row of the slot's quantized buffers
  DeviceMemory codes;        ///< E4M3 [rows_capacity, max_padded_k]
  DeviceMemory row_scales;   ///< f32 [rows_capacity]
};

/// A backend's W8A8 state (CudaBackendState::fp8_linear).
struct Fp8LinearState {
  /// Rows from which a W8A8 step runs W8A8; 0 = never (off, or not available here).
  int64_t min_rows = 0;
  /// The fp8 linear steps of the plan, and why W8A8 is off for them ("" when on).
  int fp8_steps = 0;
  std::string off_reason;
  LoadedKernel quantize, epilogue;
  std::vector<Fp8LinearWeights> steps;  ///< by program step
  std::vector<DeviceMemory> padded;     ///< weight copies padded to 16 x 16
  int64_t max_padded_k = 0, max_padded_n = 0;
  bool any_padded_n = false;  ///< some step needs the [rows, Np] accumulator scratch
  int32_t rows_capacity = 0;
  DeviceMemory x_codes;     ///< E4M3 [rows_capacity, max_padded_k]
  DeviceMemory row_scales;  ///< f32 [rows_capacity]
  DeviceMemory acc;         ///< f32 [rows_capacity, max_padded_n] (only with any_padded_n)
  /// Producer-side quantization (absent kernels: none, every linear quantizes its input).
  LoadedKernel rms_norm_quant, silu_mul_quant;
  std::vector<Fp8ProducedInput> produced;
  /// By program step: the index in `produced` that the step's output is quantized into (an
  /// rms_norm / silu_mul) or that its input's codes are read from (a W8A8 linear); -1 none.
  std::vector<int> produces, consumes;
};

/// Decides which fp8 linears of s.plan go W8A8 and readies their weights; after the weight
/// upload and kernel resolution. W8A8 needs: compute capability 9.0 or newer (cuBLASLt's
/// FP8 GEMM with the per-token activations this path makes; sm_89 and sm_80 stay
/// weight-only), `min_rows` > 0 (and $INGOT_CUDA_W8A8, when set, not "off"/"0"; a number
/// there replaces min_rows), and the artifact's ingot_fp8_quantize_rows and
/// ingot_fp8_scale_epilogue kernels (an older artifact runs weight-only). Weights whose N or
/// K is not a multiple of 16 get a zero-padded copy on the GPU.
Status prepareFp8Linears(CudaBackendState& s, int64_t min_rows);

/// Whether program step `step` runs W8A8 for a step of `rows` tokens.
bool usesW8a8(const CudaBackendState& s, size_t step, int64_t rows);

/// Whether rms_norm / silu_mul step `step` of a step of `rows` tokens runs its quantizing
/// variant (enqueueFp8RmsNorm / enqueueFp8SiluMul): its output feeds W8A8 linears that run
/// W8A8 at `rows`. The same rows make those linears read the codes (enqueueFp8Linear), so a
/// captured graph of any bucket holds the plan as a direct step does.
bool quantizesOutput(const CudaBackendState& s, size_t step, int64_t rows);

/// out [rows, dim] = rms_norm(x) * gamma, and its per-token E4M3 codes and scales into the
/// step's produced input; enqueued on s.stream. Errors name `where`.
Status enqueueFp8RmsNorm(CudaBackendState& s, size_t step, CUdeviceptr x, CUdeviceptr gamma,
                         CUdeviceptr out, int dim, float eps, int64_t rows,
                         const std::string& where);

/// out [rows, width] = silu(gate) * up, and its codes and scales, as enqueueFp8RmsNorm.
Status enqueueFp8SiluMul(CudaBackendState& s, size_t step, CUdeviceptr gate, CUdeviceptr up,
                         CUdeviceptr out, int width, int64_t rows, const std::string& where);

/// Grows the W8A8 buffers to `tokens` rows (with the step buffers; never inside a step).
Status ensureFp8LinearBuffers(CudaBackendState& s, int32_t tokens);

/// y [rows, N] f32 = x [rows, K] f32 . w^T (+ bias) for W8A8 step `step`: quantize x per row,
/// cuBLASLt FP8 GEMM, scale epilogue; enqueued on s.stream (capturable). Errors name `where`.
/// When x was quantized by its producer (quantizesOutput), its codes are read, not remade.
Status enqueueFp8Linear(CudaBackendState& s, size_t step, CUdeviceptr x, CUdeviceptr y,
                        int64_t rows, const std::string& where);

/// For CudaBackend::describe(): "W8A8 fp8 linears: 7 steps from 32 rows (0 padded weight
/// copies)", or "W8A8 fp8 linears: off, <why>"; "" for a model without fp8 linears.
std::string describeFp8Linears(const CudaBackendState& s);

}  // namespace ingot
