//===- W8a8KernelsSource.cpp - CUDA translation unit of the W8A8 FP8 helpers ---===//
#include "codegen/cuda/W8a8KernelsSource.h"

#include <sstream>

#include "codegen/cuda/AttentionKernelSource.h"

namespace ingot::codegen {

std::vector<std::string> w8a8KernelNames() {
  return {kFp8QuantizeRowsKernel, kFp8ScaleEpilogueKernel};
}

namespace {

/// The text of an embedded kernel header without its #pragma once and project includes
/// (the unit concatenates those headers itself).
std::string headerBody(const char *path) {
  std::string out = std::string("// ---- ") + path + "\n";
  std::istringstream in(embeddedKernelHeader(path));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("#pragma once", 0) != 0 && line.rfind("#include \"codegen/", 0) != 0)
      out += line + "\n";
  return out;
}

} // namespace

std::vector<std::string> fp8ProducerKernelNames() {
  return {kFp8RmsNormQuantKernel, kFp8SiluMulQuantKernel};
}

std::string fp8ProducersSource() {
  std::string src = "// W8A8 quantizing producers (assembled by codegen/cuda/W8a8KernelsSource).\n";
  src += headerBody("codegen/cuda/kernels/fused_ops.cuh");
  src += headerBody("codegen/cuda/kernels/e4m3.cuh");
  src += headerBody("codegen/cuda/kernels/fp8_w8a8.cuh");
  src += headerBody("codegen/cuda/kernels/fp8_producers.cuh");
  src += "// ---- entry points\n";
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
  src += headerBody("codegen/cuda/kernels/e4m3.cuh");
  src += headerBody("codegen/cuda/kernels/fp8_w8a8.cuh");
  src += "// ---- entry points\n";
  src += std::string("extern \"C\" __global__ void __launch_bounds__(ingot::w8a8::kW8a8Threads) ") +
         kFp8QuantizeRowsKernel +
         "(ingot::w8a8::QuantizeRowsParams p) {\n  ingot::w8a8::quantizeRows(p);\n}\n";
  src += std::string("extern \"C\" __global__ void __launch_bounds__(ingot::w8a8::kW8a8Threads) ") +
         kFp8ScaleEpilogueKernel +
         "(ingot::w8a8::ScaleEpilogueParams p) {\n  ingot::w8a8::scaleEpilogue(p);\n}\n";
  return src;
}

} // namespace ingot::codegen
