//===- CalibrationForward.h - record linear-layer inputs on the CPU backend -*- C++ -*-===//
//
// The runtime half of `--calib`: opens an unquantized artifact, tokenizes the calibration
// text with the artifact's tokenizer and runs CpuBackend over it, chunk by chunk from an
// empty KV cache, with an observer that accumulates the input-channel statistics of the
// chosen linear layers. Kept apart from Calibration.cpp because it includes runtime headers
// only (the runtime and the compiler each have a `Tokenizer`).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "compiler/quant/ActivationAwareScales.h"
#include "runtime/base/status.h"

namespace ingot::compiler {

struct ForwardOptions {
  /// Most tokens used (the text's first), fed in chunks of `chunkTokens`.
  int64_t maxTokens = 4096;
  int64_t chunkTokens = 512;
  /// Fewest tokens the text must have.
  int64_t minTokens = 64;
  /// Rows kept per recorded layer input, and the seed of their sampling.
  int64_t sampleRows = 64;
  uint64_t seed = 0;
  /// Worker threads; 0 = all cores.
  int numThreads = 0;
};

struct RecordedActivations {
  /// Per weight name: statistics of that linear's input.
  std::map<std::string, std::unique_ptr<quant::ChannelStats>> inputs;
  int64_t tokens = 0;
  double seconds = 0.0;
};

/// Runs the artifact at `artifactPath` over `text` (named `textName` in errors), recording
/// the inputs of the linears whose weight names `record` accepts. Fails on an unreadable
/// artifact, a text shorter than minTokens, or a failing step.
StatusOr<RecordedActivations>
recordLinearInputs(const std::string &artifactPath, const std::string &text,
                   const std::string &textName, const ForwardOptions &options,
                   const std::function<bool(const std::string &)> &record);

} // namespace ingot::compiler
