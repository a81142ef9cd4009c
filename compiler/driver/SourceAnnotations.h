//===- SourceAnnotations.h - what an imported module records about its checkpoint -*- C++ -*-===//
//
// Attributes an imported module carries about the checkpoint it came from: which weights
// its integers can be copied from exactly (`source_quant`), and where the checkpoint is
// (kSourceAttr), so the module printed at any stage compiles again with its weights.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "compiler/driver/Calibration.h"
#include "compiler/driver/CompileCommand.h"
#include "compiler/driver/CompileUsage.h"
#include "compiler/import/ImportedModel.h"
#include "mlir/IR/BuiltinOps.h"

namespace ingot::compiler {

/// The module attribute naming the checkpoint a module was imported from: a dictionary of
/// path (absolute), format (gguf, hf or config), kv_dtype, dtype (when --dtype was given)
/// and, for a --calib compile, calib (its calibration; older modules say calibrated).
inline constexpr const char *kSourceAttr = "ingot.source";

/// Marks the weights whose checkpoint tensors are GGUF Q4_0 / Q4_1 blocks or GPTQ / AWQ
/// layers with the int4 scheme that holds them exactly (`source_quant`), so `--quant int4`
/// keeps their integers.
void annotateSourceQuantization(mlir::ModuleOp module, const importer::ImportedModel &model);

/// "GPTQ" / "AWQ" / "GGUF Q4" for a checkpoint holding such tensors (the first found),
/// and the group size of its GPTQ / AWQ layers (0 when none or when they differ).
std::pair<const char *, int64_t> sourceQuantization(const importer::ImportedModel &model);

/// Sets kSourceAttr on `module`, imported from options.input (of `kind`). A --calib compile
/// (`calibGroup` > 0: the group its 4-bit encoding used) also records its calibration
/// (`calib`: the text's absolute path, tokens, search, format and group), so that a stage's
/// module compiled again calibrates again and writes the same weights.
void stampSource(mlir::ModuleOp module, const CompileOptions &options, InputKind kind,
                 int64_t calibGroup);

/// A --calib compile's calibration, as its flags give it or a printed module records it
/// (kSourceAttr's calib): the text, the search (all, scale or clip), the 4-bit format
/// (int4, nvfp4, mxfp4), most tokens and the int4 group.
struct CalibrationSettings {
  std::string text, search, quant;
  int64_t tokens = 0, group = 0;
};

/// The calibration options of `settings` (less the forward pass, which the caller gives).
CalibrationOptions calibrationOptions(const CalibrationSettings &settings);

/// `calib` read back, or an error naming what it lacks.
StatusOr<CalibrationSettings> readCalibrationSettings(mlir::DictionaryAttr calib);

/// Why `module`, calibrated as `recorded`, cannot be compiled with `quant` (--quant, or
/// empty) and int4 `group`: another format or group, or nothing that quantizes (no --quant
/// and no quantized linear). Empty when it can.
std::string calibrationMismatch(mlir::ModuleOp module, const CalibrationSettings &recorded,
                                const std::string &quant, int64_t group);

} // namespace ingot::compiler
