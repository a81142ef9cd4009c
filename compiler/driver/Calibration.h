//===- Calibration.h - activation-aware 4-bit quantization (`--calib FILE`) -*- C++ -*-===//
//
// `ingot compile --quant nvfp4|mxfp4|int4 --calib FILE`: the unquantized model is compiled
// to a temporary artifact and run by the runtime's CpuBackend over the calibration text,
// with an observer that records each linear layer's input-channel statistics. From them:
//  - AWQ-style per-input-channel scales s (quant/ActivationAwareScales), folded into the op
//    before each linear so the model stays the same function in full precision:
//      input_layernorm gamma / s      -> q_proj, k_proj, v_proj columns * s
//      post_attention_layernorm / s   -> gate_proj, up_proj columns * s
//      v_proj rows (and bias) / s     -> o_proj columns * s, one s per KV-head channel
//                                        (the query heads of a group share it: GQA)
//      up_proj rows / s               -> down_proj columns * s
//  - per-column importance E[x^2] / s^2 that the encoders use to choose each block's scale
//    or int4 clip range by activation-weighted error.
// The result is a folded copy of the checkpoint (same tensors, some read through a fold)
// plus the importance per weight; the ordinary write path then quantizes it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/driver/CalibrationForward.h"
#include "compiler/import/ImportedModel.h"
#include "compiler/quant/WeightEncoders.h"
#include "core/base/status.h"

namespace ingot::compiler {

struct CalibrationOptions {
  /// UTF-8 calibration text; it should not be the text the model is evaluated on.
  std::string textPath;
  /// Runs the unquantized model and records linear inputs (the runtime's CPU backend in
  /// the `ingot` tool). Required.
  RecordLinearInputs recordInputs;
  /// How the weights will be quantized.
  quant::WeightEncoding encoding = quant::WeightEncoding::Nvfp4;
  int64_t group = 32;
  /// Most calibration tokens used, fed in independent chunks from an empty KV cache.
  int64_t maxTokens = 4096;
  int64_t chunkTokens = 512;
  /// Activation rows kept per layer input for the output-error search.
  int64_t sampleRows = 128;
  /// The two halves, each switchable to measure what it buys: AWQ scales (folded), and
  /// activation-weighted block scales / int4 clipping.
  bool searchScales = true;
  bool weightedBlocks = true;
  /// Worker threads for the forward pass and the search (at most 8); 0 = all cores.
  int numThreads = 0;
  /// Where the temporary unquantized artifact goes (removed afterwards); empty = $TMPDIR,
  /// else /tmp. It is as large as the unquantized artifact.
  std::string tempDir;
};

/// How one checkpoint tensor is changed by folding, applied to its f32 values.
struct TensorFold {
  /// [k]: column c of a [n, k] matrix is multiplied by columnScale[c].
  std::vector<float> columnScale;
  /// [n]: row r (or element r of a vector: a norm gamma, a bias) is divided by rowDivisor[r].
  std::vector<float> rowDivisor;
};

/// Folds by tensor name.
using FoldPlan = std::map<std::string, TensorFold>;

/// One decoder layer's input-channel scales (each > 0; an empty vector = no scaling).
struct LayerScales {
  /// [hidden]: q/k/v_proj columns * s, input_layernorm gamma / s.
  std::vector<float> attentionInput;
  /// [hidden]: gate/up_proj columns * s, post_attention_layernorm gamma / s.
  std::vector<float> mlpInput;
  /// [kv_heads * head_dim]: v_proj rows (and bias) / s, o_proj columns of every query
  /// head of the KV head's group * s.
  std::vector<float> value;
  /// [intermediate]: up_proj rows / s, down_proj columns * s.
  std::vector<float> mlpHidden;
};

/// Adds the folds of `scales` for decoder layer `layer` of `model` to `plan`. Fails when a
/// tensor is missing or a scale vector has the wrong length.
Status addLayerFolds(const importer::ImportedModel &model, int32_t layer, const LayerScales &scales,
                     FoldPlan &plan);

struct CalibrationResult {
  /// The checkpoint with every folded tensor read through its fold (GGUF Q4 sources of
  /// folded tensors are no longer copied exactly).
  importer::ImportedModel model;
  /// Per quantized weight (by name): column weights for the encoders, E[x^2] / s^2.
  std::map<std::string, std::vector<float>> columnImportance;
  FoldPlan folds;
  int64_t tokens = 0;
  /// Scale groups searched, their alphas, and the sampled output error summed over them
  /// with the chosen scales and without.
  std::vector<float> alphas;
  double error = 0.0, unscaledError = 0.0;
  double forwardSeconds = 0.0, searchSeconds = 0.0;
};

/// Runs the calibration described above on `model` (a Llama/Qwen2-layout checkpoint).
/// Errors name the file or tensor: an unreadable or too short text, a checkpoint without
/// a tokenizer or without the tensors a fold needs.
StatusOr<CalibrationResult> calibrateCheckpoint(const importer::ImportedModel &model,
                                                const CalibrationOptions &options);

/// A copy of `model` whose tensors named in `folds` are read (readF32) and written
/// (produce, in their dtype) with the fold applied. Fails when a fold does not fit its
/// tensor's shape or the tensor cannot be read as f32.
StatusOr<importer::ImportedModel> foldCheckpoint(const importer::ImportedModel &model,
                                                 const FoldPlan &folds);

/// Writes `model` unquantized to an artifact at `path` (what calibration runs; tests).
Status writeCheckpointArtifact(const importer::ImportedModel &model, const std::string &path);

} // namespace ingot::compiler
