// `ingot run`: generate text from a prompt with one artifact on the CPU backend.
#pragma once

#include <cstdint>
#include <istream>
#include <ostream>
#include <string>

#include "runtime/cli/device_flag.h"

#include "runtime/generate/sampler.h"

namespace ingot {

struct RunOptions {
  std::string artifact;
  /// --device, --gpu-memory-utilization.
  DeviceFlags device;
  std::string prompt;
  /// Wrap the prompt as a user message in the artifact's chat template.
  bool chat = false;
  /// Tokens to generate at most.
  int32_t max_new_tokens = 128;
  /// Sampling, stop tokens and strings, ignore_eos.
  SamplingParams sampling;
  int num_threads = 0;
  /// --kv-dtype: f32 or fp8; empty = the artifact's KV dtype.
  std::string kv_dtype;
  /// --tp N: the tensor-parallel world size the artifact must have been compiled for
  /// (`ingot compile --tp N`); 0 = whatever it has. The ranks run as threads on the CPU.
  int32_t tp = 0;
};

/// Streams the generated text to `out`; statistics and errors go to `err`. Returns the
/// process exit code.
int runGenerate(const RunOptions& options, std::ostream& out, std::ostream& err);

/// An interactive chat: reads user turns from `in` (one line each; "/exit" or end of input
/// stops), answers each with the artifact's chat template applied to the whole
/// conversation. `options.prompt`, if set, is sent as the first turn.
int runChat(const RunOptions& options, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace ingot
