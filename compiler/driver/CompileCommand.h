//===- CompileCommand.h - `ingot compile` entry point -----------*- C++ -*-===//
//
// The interface between the user CLI (runtime/cli, which never sees MLIR) and the
// compiler. Deliberately free of MLIR and LLVM types.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "compiler/driver/CalibrationForward.h"

namespace ingot::compiler {

/// `--calib-tokens` when not given.
inline constexpr int64_t kDefaultCalibTokens = 4096;

/// What `ingot compile` was asked to do.
struct CompileOptions {
  /// Input: a GGUF checkpoint, a Hugging Face checkpoint directory, a Hugging Face config
  /// alone (a config.json, or a directory without weights; needs --dummy-weights or
  /// --random-weights), or an `ingot` dialect module (.mlir).
  std::string input;
  /// Output artifact path (.ingot).
  std::string output;
  /// Print the module after this stage of the pass pipeline (`--emit-mlir[=STAGE]`):
  /// "import", a stage's name (Pipeline.h, compilePipelineStages) or "final"; "" = none.
  /// Compiling the printed module with the flags of the later stages gives the artifact this
  /// compile gives.
  std::string emitMlir;
  /// Print the module after every pass to stderr (`--print-ir-after-all`).
  bool printIrAfterAll = false;
  /// Write an artifact without a weight blob; the runtime fills weights from the seed.
  bool dummyWeights = false;
  /// Fill the blob with seeded pseudo-random weights (for models given as .mlir or as a
  /// config alone).
  bool randomWeights = false;
  uint64_t seed = 0;
  /// Weight dtype for checkpoints: "f32", "bf16" or "f16". Unset: bf16, except that a
  /// config-only input takes its torch_dtype (bf16 when it has none).
  std::optional<std::string> dtype;
  /// KV cache element type for checkpoints: "f32" or "fp8" (E4M3 with per-block scales;
  /// the runtime's --kv-dtype overrides it).
  std::string kvDtype = "f32";
  /// Quantize linear weights: "" (no), "int4", "fp8", "nvfp4" or "mxfp4".
  std::string quant;
  /// Elements per int4 scale along K (32, 64 or 128), as given by `--quant-group`. Unset:
  /// a GPTQ / AWQ checkpoint's own group (its integers copied exactly), else 32. Set, even
  /// to 32, it is honoured: packed layers of another group are re-quantized.
  std::optional<int64_t> quantGroupSize;
  /// Weight-name patterns (globs, or substrings) that stay unquantized.
  std::vector<std::string> quantSkip;
  /// NVFP4 / MXFP4 block scales: "absmax" (from the block maximum) or "mse" (the scale
  /// near it with the least squared error).
  std::string quantScales = "absmax";
  /// A calibration text (`--calib`): 4-bit weights (int4, nvfp4, mxfp4) get activation-aware
  /// scales from running the unquantized model over it (compiler/driver/Calibration.h).
  /// Empty = none, and the artifact is exactly what it is without calibration.
  std::string calib;
  /// Most calibration tokens (`--calib-tokens`); unset = kDefaultCalibTokens. Optional so
  /// that giving it without `--calib` is refused even at the default value.
  std::optional<int64_t> calibTokens;
  /// What calibration searches (`--calib-search`): "all" (folded AWQ scales and
  /// activation-weighted block scales), "scale" (the former only) or "clip" (the latter);
  /// unset = "all".
  std::optional<std::string> calibSearch;
  /// > 0: also a draft program of the first N decoder layers and the head (self-speculation).
  int32_t draftLayers = 0;
  /// Tensor-parallel ranks (`--tp`): > 1 shards the model (docs/tensor-parallel.md).
  int32_t tensorParallel = 1;
  /// CUDA attention kernels (`--cuda-targets`): "all", "none", a comma-separated list of
  /// sm_XY[a|f] / compute_XY targets, or "" for the default ("all" where this build has
  /// NVRTC, else "none"). Compiled binaries are cached on disk (INGOT_KERNEL_CACHE).
  std::string cudaTargets;
  /// The forward pass `--calib` runs the unquantized model with (the compiler never links
  /// the runtime; the `ingot` tool passes the CPU backend's). Unset: --calib is refused.
  RecordLinearInputs calibrationForward;
  /// The command line as typed, recorded in the artifact's provenance.
  std::vector<std::string> commandLine;
};

/// Runs `ingot compile`; returns a process exit code. Diagnostics go to `err`.
int runCompile(const CompileOptions &options, std::ostream &out, std::ostream &err);

/// What `--emit-mlir=STAGE` may name: "import", every stage a compile can have (quantize
/// with --quant, shard with --tp), "final".
std::vector<std::string> compileStageNames();

} // namespace ingot::compiler
