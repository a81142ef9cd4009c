// The forward pass of `ingot compile --calib`, run on the runtime's CPU backend.
//
// Opens the unquantized artifact, tokenizes the calibration text with the artifact's
// tokenizer and runs CpuBackend over it, chunk by chunk from an empty KV cache, with an
// observer that accumulates the input-channel statistics of the chosen linear layers. It
// lives here, beside the `ingot` tool, because it is the one place the compiler needs the
// runtime: the compiler takes it as a hook (compiler/driver/CalibrationForward.h).
#pragma once

#include <functional>
#include <string>

#include "compiler/driver/CalibrationForward.h"
#include "core/base/status.h"

namespace ingot::tools {

/// A compiler::RecordLinearInputs that runs the CPU backend.
StatusOr<compiler::RecordedActivations>
recordLinearInputsOnCpu(const std::string &artifactPath, const std::string &text,
                        const std::string &textName, const compiler::ForwardOptions &options,
                        const std::function<bool(const std::string &)> &record);

}  // namespace ingot::tools
