//===- CalibrationForward.h - the forward pass `--calib` needs, as a hook -*- C++ -*-===//
//
// The runtime half of `--calib`: open an unquantized artifact, tokenize the calibration
// text with the artifact's tokenizer and run the model over it, recording the input-channel
// statistics of the chosen linear layers. The compiler never links the runtime, so the
// forward pass comes in as a function: the `ingot` tool passes one that runs the CPU backend
// (tools/ingot/calibration_forward.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "compiler/quant/ActivationAwareScales.h"
#include "core/base/status.h"

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
using RecordLinearInputs = std::function<StatusOr<RecordedActivations>(
    const std::string &artifactPath, const std::string &text, const std::string &textName,
    const ForwardOptions &options, const std::function<bool(const std::string &)> &record)>;

} // namespace ingot::compiler
