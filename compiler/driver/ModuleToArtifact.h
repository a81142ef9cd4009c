//===- ModuleToArtifact.h - lower a compiled module to an artifact -*- C++ -*-===//
//
// Reads only the module that comes out of the pass pipeline: the model config from the
// module's `ingot.model` dictionary, tensors from `ingot.weight` ops, program steps from
// the serving-step function's ops in order, and attention variants from the regions of
// `ingot.attention` (lowered to CPU bytecode).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/artifact/artifact_writer.h"
#include "compiler/import/ImportedModel.h"
#include "compiler/quant/WeightEncoders.h"
#include "mlir/IR/BuiltinOps.h"

namespace ingot::compiler {

/// Where weight bytes come from.
enum class WeightSource {
  /// No blob: the runtime fills weights from `seed` (--dummy-weights).
  Dummy,
  /// Seeded pseudo-random bytes, written into the blob (--random-weights).
  Random,
  /// The imported checkpoint's tensors, streamed one at a time (weight handle = index).
  Checkpoint,
};

struct LoweringOptions {
  WeightSource weights = WeightSource::Dummy;
  uint64_t seed = 0;
  /// The checkpoint for WeightSource::Checkpoint; it also supplies the tokenizer.
  const importer::ImportedModel *checkpoint = nullptr;
  /// How quantized weights' NVFP4 / MXFP4 block scales are chosen.
  quant::ScaleChoice quantScales = quant::ScaleChoice::Absmax;
  /// `--calib`: per weight name, input-channel weights for activation-aware block scales
  /// (see QuantizedTensors); null = none. Must outlive the writer's write().
  const std::map<std::string, std::vector<float>> *quantColumnImportance = nullptr;
  /// Called after each checkpoint tensor is written, with (tensors done, total).
  std::function<void(size_t, size_t)> onTensorWritten;
  Provenance provenance;
};

/// What lowering found that the compile summary reports.
struct LoweringReport {
  /// Linear weights quantized from checkpoint tensors, and how many of them copy GGUF
  /// Q4_0 / Q4_1 blocks exactly.
  size_t quantizedWeights = 0;
  size_t exactQuantizedWeights = 0;
};

/// Fills `writer` from `module`. Emits MLIR diagnostics and fails on anything the
/// artifact cannot express (no serving-step function, an op without a step kind, a
/// region the bytecode emitter rejects). Weights with an `#ingot.encoding` are quantized
/// from their checkpoint tensor while the writer writes them.
mlir::LogicalResult lowerModuleToArtifact(mlir::ModuleOp module,
                                          const LoweringOptions &options,
                                          ArtifactWriter &writer,
                                          LoweringReport *report = nullptr);

} // namespace ingot::compiler
