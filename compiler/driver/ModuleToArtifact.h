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
#include <string>
#include <vector>

#include "compiler/artifact/ArtifactWriter.h"
#include "mlir/IR/BuiltinOps.h"

namespace ingot::compiler {

/// Where weight bytes come from.
enum class WeightSource {
  /// No blob: the runtime fills weights from `seed` (--dummy-weights).
  Dummy,
  /// Seeded pseudo-random bytes, written into the blob (--random-weights).
  Random,
};

struct LoweringOptions {
  WeightSource weights = WeightSource::Dummy;
  uint64_t seed = 0;
  Provenance provenance;
};

/// Fills `writer` from `module`. Emits MLIR diagnostics and fails on anything the
/// artifact cannot express (no serving-step function, an op without a step kind, a
/// region the bytecode emitter rejects).
mlir::LogicalResult lowerModuleToArtifact(mlir::ModuleOp module,
                                          const LoweringOptions &options,
                                          ArtifactWriter &writer);

} // namespace ingot::compiler
