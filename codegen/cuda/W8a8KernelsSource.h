//===- W8a8KernelsSource.h - CUDA translation unit of the W8A8 FP8 helpers -*- C++ -*-===//
//
// The per-token E4M3 activation quantizer and the scale epilogue around the cuBLASLt FP8
// GEMM (kernels/fp8_w8a8.cuh) as one NVRTC translation unit, and their entry-point names.
// Plain C++ (no CUDA headers): the compiler, the backend and the tests share it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/kernels/fp8_w8a8.cuh"

namespace ingot::codegen {

/// Takes one w8a8::QuantizeRowsParams by value; grid (rows, 1, 1), block (kW8a8Threads, 1, 1).
inline constexpr const char *kFp8QuantizeRowsKernel = "ingot_fp8_quantize_rows";
/// Takes one w8a8::ScaleEpilogueParams by value; grid (w8a8::epilogueGridSize(rows * N), 1,
/// 1), block (kW8a8Threads, 1, 1).
inline constexpr const char *kFp8ScaleEpilogueKernel = "ingot_fp8_scale_epilogue";

/// Takes one w8a8::RmsNormQuantParams by value; grid (rows, 1, 1), block (kW8a8Threads, 1, 1).
inline constexpr const char *kFp8RmsNormQuantKernel = "ingot_fp8_rms_norm_quant";
/// Takes one w8a8::SiluMulQuantParams by value; grid (rows, 1, 1), block (kW8a8Threads, 1, 1).
inline constexpr const char *kFp8SiluMulQuantKernel = "ingot_fp8_silu_mul_quant";

/// Both entry points, in the order above.
std::vector<std::string> w8a8KernelNames();

/// The translation unit: the fp8_w8a8.cuh text and both extern "C" entry points.
std::string w8a8Source();

/// The quantizing producers (kernels/fp8_producers.cuh), in the order above.
std::vector<std::string> fp8ProducerKernelNames();

/// Their translation unit: fused_ops.cuh, fp8_w8a8.cuh and fp8_producers.cuh with both
/// entry points. A unit of its own: the fused math is built with fast-math division and
/// square roots, which the quantizer's unit must not contain (W8a8KernelsCompileTest).
std::string fp8ProducersSource();

} // namespace ingot::codegen
