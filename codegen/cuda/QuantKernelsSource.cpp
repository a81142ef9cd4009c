//===- QuantKernelsSource.cpp - CUDA translation units of the quantized GEMV/GEMM kernels ===//
#include "codegen/cuda/QuantKernelsSource.h"

#include <sstream>

#include "codegen/cuda/AttentionKernelSource.h"

namespace ingot::codegen {
namespace {

using quantgemv::Format;
using quantgemv::ScaleType;

const char *scaleTypeName(ScaleType t) {
  switch (t) {
  case ScaleType::kF16: return "f16";
  case ScaleType::kBF16: return "bf16";
  case ScaleType::kF32: return "f32";
  }
  return "unknown";
}

const char *formatEnumerator(Format f) {
  switch (f) {
  case Format::kInt4Min: return "kInt4Min";
  case Format::kInt4Zero: return "kInt4Zero";
  case Format::kFp8: return "kFp8";
  case Format::kNvfp4: return "kNvfp4";
  case Format::kMxfp4: return "kMxfp4";
  }
  return "unknown";
}

const char *scaleEnumerator(ScaleType t) {
  switch (t) {
  case ScaleType::kF16: return "kF16";
  case ScaleType::kBF16: return "kBF16";
  case ScaleType::kF32: return "kF32";
  }
  return "unknown";
}

} // namespace

const std::vector<QuantGemvKernel> &allQuantGemvKernels() {
  static const std::vector<QuantGemvKernel> kernels = [] {
    std::vector<QuantGemvKernel> k;
    for (Format f : {Format::kInt4Min, Format::kInt4Zero})
      for (ScaleType t : {ScaleType::kF16, ScaleType::kBF16, ScaleType::kF32})
        k.push_back({f, t});
    for (Format f : {Format::kFp8, Format::kNvfp4, Format::kMxfp4})
      k.push_back({f, ScaleType::kF16});
    return k;
  }();
  return kernels;
}

const char *quantFormatName(Format format) {
  switch (format) {
  case Format::kInt4Min: return "int4min";
  case Format::kInt4Zero: return "int4zero";
  case Format::kFp8: return "fp8";
  case Format::kNvfp4: return "nvfp4";
  case Format::kMxfp4: return "mxfp4";
  }
  return "unknown";
}

std::string quantGemvKernelName(const QuantGemvKernel &kernel) {
  std::string name = std::string("ingot_quant_gemv_") + quantFormatName(kernel.format);
  if (kernel.isInt4())
    name += std::string("_") + scaleTypeName(kernel.scaleType);
  return name;
}

std::string quantGemmKernelName(const QuantGemvKernel &kernel) {
  std::string name = quantGemvKernelName(kernel);
  return name.replace(0, std::string("ingot_quant_gemv").size(), "ingot_quant_gemm");
}

std::string quantGemvSource(const std::vector<QuantGemvKernel> &kernels) {
  std::string src = "// Quantized GEMV and GEMM kernels (assembled by "
                    "codegen/cuda/QuantKernelsSource).\n";
  // The headers in include order; their #include lines of each other are dropped.
  for (const char *header : {"codegen/cuda/kernels/e4m3.cuh", "codegen/cuda/kernels/quant_gemv.cuh",
                             "codegen/cuda/kernels/quant_gemm.cuh"})
    src += inlinedKernelHeader(header);
  src += generatedSection("entry points");
  for (const QuantGemvKernel &k : kernels.empty() ? allQuantGemvKernels() : kernels) {
    // An int4 entry point traps when launched with another scale type than its own.
    const std::string guard =
        k.isInt4() ? std::string("  if (p.scale_type != static_cast<int>(ingot::quantgemv::"
                                 "ScaleType::") +
                         scaleEnumerator(k.scaleType) + ")) __trap();\n"
                   : std::string();
    const std::string tmpl = std::string("<ingot::quantgemv::Format::") +
                             formatEnumerator(k.format) + ", ingot::quantgemv::ScaleType::" +
                             scaleEnumerator(k.isInt4() ? k.scaleType : ScaleType::kF16) + ">";
    src += "extern \"C\" __global__ void __launch_bounds__(ingot::quantgemv::kQuantThreads) " +
           quantGemvKernelName(k) + "(ingot::quantgemv::QuantGemvParams p) {\n" + guard +
           "  ingot::quantgemv::quantGemv" + tmpl + "(p);\n}\n";
    src += "extern \"C\" __global__ void __launch_bounds__(ingot::quantgemm::kGemmThreads) " +
           quantGemmKernelName(k) + "(ingot::quantgemv::QuantGemvParams p) {\n" + guard +
           "  ingot::quantgemm::quantGemm" + tmpl + "(p);\n}\n";
  }
  return src;
}

} // namespace ingot::codegen
