//===- W8a8KernelsSource.cpp - CUDA translation unit of the W8A8 FP8 helpers ---===//
#include "codegen/cuda/W8a8KernelsSource.h"

#include "codegen/cuda/AttentionKernelSource.h"

namespace ingot::codegen {

std::vector<std::string> w8a8KernelNames() {
  return {kFp8QuantizeRowsKernel, kFp8ScaleEpilogueKernel};
}

std::vector<std::string> fp8ProducerKernelNames() {
  return {kFp8RmsNormQuantKernel, kFp8SiluMulQuantKernel};
}

std::string fp8ProducersSource() {
  std::string src = "// W8A8 quantizing producers (assembled by codegen/cuda/W8a8KernelsSource).\n";
  src += inlinedKernelHeader("codegen/cuda/kernels/fused_ops.cuh");
  src += inlinedKernelHeader("codegen/cuda/kernels/e4m3.cuh");
  src += inlinedKernelHeader("codegen/cuda/kernels/fp8_w8a8.cuh");
  src += inlinedKernelHeader("codegen/cuda/kernels/fp8_producers.cuh");
  src += generatedSection("entry points");
  src += std::string("extern \"C\" __global__ void __launch_bounds__(ingot::w8a8::kW8a8Threads) ") +
         kFp8RmsNormQuantKernel +
         "(ingot::w8a8::RmsNormQuantParams p) {\n  ingot::w8a8::rmsNormQuant(p);\n}\n";
  src += std::string("extern \"C\" __global__ void __launch_bounds__(ingot::w8a8::kW8a8Threads) ") +
         kFp8SiluMulQuantKernel +
         "(ingot::w8a8::SiluMulQuantParams p) {\n  ingot::w8a8::siluMulQuant(p);\n}\n";
  return src;
}

std::string w8a8Source() {
  std::string src = "// W8A8 FP8 helper kernels (assembled by codegen/cuda/W8a8KernelsSource).\n";
  src += inlinedKernelHeader("codegen/cuda/kernels/e4m3.cuh");
  src += inlinedKernelHeader("codegen/cuda/kernels/fp8_w8a8.cuh");
  src += generatedSection("entry points");
  src += std::string("extern \"C\" __global__ void __launch_bounds__(ingot::w8a8::kW8a8Threads) ") +
         kFp8QuantizeRowsKernel +
         "(ingot::w8a8::QuantizeRowsParams p) {\n  ingot::w8a8::quantizeRows(p);\n}\n";
  src += std::string("extern \"C\" __global__ void __launch_bounds__(ingot::w8a8::kW8a8Threads) ") +
         kFp8ScaleEpilogueKernel +
         "(ingot::w8a8::ScaleEpilogueParams p) {\n  ingot::w8a8::scaleEpilogue(p);\n}\n";
  return src;
}

} // namespace ingot::codegen
