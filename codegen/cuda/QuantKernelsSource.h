//===- QuantKernelsSource.h - CUDA translation units of the quantized GEMV/GEMM kernels -*- C++ -*-===//
//
// The fused dequantize-GEMV kernels (kernels/quant_gemv.cuh) and tensor-core GEMMs
// (kernels/quant_gemm.cuh) as NVRTC translation units with one extern "C" GEMV and one GEMM
// entry point per (weight format, int4 scale type), and their names. Plain C++ (no CUDA headers): the compiler, the backend and the tests share it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/kernels/quant_gemm.cuh"

namespace ingot::codegen {

/// One entry point: a weight format and, for int4, the element type of its scales and
/// zeros/mins (ignored for fp8, nvfp4 and mxfp4, which have one entry point each).
struct QuantGemvKernel {
  quantgemv::Format format = quantgemv::Format::kInt4Min;
  quantgemv::ScaleType scaleType = quantgemv::ScaleType::kF16;
  bool operator==(const QuantGemvKernel &o) const {
    return format == o.format && (!isInt4() || scaleType == o.scaleType);
  }
  bool isInt4() const {
    return format == quantgemv::Format::kInt4Min || format == quantgemv::Format::kInt4Zero;
  }
};

/// Every entry point: int4min and int4zero with f16, bf16 and f32 scales, fp8, nvfp4, mxfp4.
const std::vector<QuantGemvKernel> &allQuantGemvKernels();

/// The entry point's name: "ingot_quant_gemv_<int4min|int4zero>_<f16|bf16|f32>",
/// "ingot_quant_gemv_fp8", "ingot_quant_gemv_nvfp4", "ingot_quant_gemv_mxfp4". Each takes
/// one quantgemv::QuantGemvParams by value; launch grid (quantgemv::quantGemvGridSize(N) =
/// ceil(N / 4): one warp per row, 1, 1), block (kQuantThreads = 128, 1, 1), no dynamic shared memory. An
/// int4 entry point traps when params.scale_type is not its own scale type.
std::string quantGemvKernelName(const QuantGemvKernel &kernel);

/// The tensor-core GEMM of the same (format, scale type): "ingot_quant_gemm_<...>" with the
/// GEMV name's suffix. Same QuantGemvParams; launch grid (quantgemm::quantGemmGridX(N),
/// quantGemmGridY(T), 1) (128 outputs x 64 tokens per CTA), block (kGemmThreads = 256, 1, 1),
/// static shared memory only (kernels/quant_gemm.cuh). Traps on a foreign scale type too.
std::string quantGemmKernelName(const QuantGemvKernel &kernel);

/// The name of the weight format alone ("int4min", "int4zero", "fp8", "nvfp4", "mxfp4").
const char *quantFormatName(quantgemv::Format format);

/// The translation unit: the quant_gemv.cuh and quant_gemm.cuh text and, for each of
/// `kernels` (every one when empty), its GEMV and its GEMM entry point.
std::string quantGemvSource(const std::vector<QuantGemvKernel> &kernels = {});

} // namespace ingot::codegen
