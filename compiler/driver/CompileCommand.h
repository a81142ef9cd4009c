//===- CompileCommand.h - `ingot compile` entry point -----------*- C++ -*-===//
//
// The interface between the user CLI (runtime/cli, which never sees MLIR) and the
// compiler. Deliberately free of MLIR and LLVM types.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace ingot::compiler {

/// What `ingot compile` was asked to do.
struct CompileOptions {
  /// Input: a GGUF checkpoint, or an `ingot` dialect module (.mlir).
  std::string input;
  /// Output artifact path (.ingot).
  std::string output;
  /// Print the module that comes out of the pass pipeline instead of writing an artifact.
  bool emitMlir = false;
  /// Write an artifact without a weight blob; the runtime fills weights from the seed.
  bool dummyWeights = false;
  /// Fill the blob with seeded pseudo-random weights (for models given as .mlir only).
  bool randomWeights = false;
  uint64_t seed = 0;
  /// Weight dtype for checkpoints: "f32", "bf16" or "f16".
  std::string dtype = "bf16";
  /// Quantize linear weights: "" (no), "int4", "fp8", "nvfp4" or "mxfp4".
  std::string quant;
  /// Elements per int4 scale along K (32, 64 or 128).
  int64_t quantGroupSize = 32;
  /// Weight-name patterns (globs, or substrings) that stay unquantized.
  std::vector<std::string> quantSkip;
  /// NVFP4 / MXFP4 block scales: "absmax" (from the block maximum) or "mse" (the scale
  /// near it with the least squared error).
  std::string quantScales = "absmax";
  /// > 0: also a draft program of the first N decoder layers and the head (self-speculation).
  int32_t draftLayers = 0;
  /// The command line as typed, recorded in the artifact's provenance.
  std::vector<std::string> commandLine;
};

/// Runs `ingot compile`; returns a process exit code. Diagnostics go to `err`.
int runCompile(const CompileOptions &options, std::ostream &out, std::ostream &err);

} // namespace ingot::compiler
