//===- Fusion.h - undoing ingot-fuse-elementwise -----------------*- C++ -*-===//
#pragma once

#include "mlir/IR/Operation.h"

namespace ingot::compiler {

/// Rewrites every fused op under `root` back into the ops ingot-fuse-elementwise made it
/// from (add_rms_norm -> add + rms_norm, rope_kv_write -> rope + rope + kv_write, gated_linear ->
/// linear + linear + silu_mul / gelu_mul), at the
/// fused op's place. Passes that recognise the unfused Llama shapes (the tensor-parallel
/// split) run it first, so a module printed after `fuse` can still be sharded; fusion runs
/// again after them.
void unfuseElementwise(mlir::Operation *root);

} // namespace ingot::compiler
