// `ingot eval`: model quality measurements from the command line (`ingot eval ppl`).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "runtime/cli/device_flag.h"

namespace ingot {

struct EvalPerplexityOptions {
  std::string artifact;
  /// UTF-8 text file to score.
  std::string text_path;
  /// Tokens per window (at most the model's max_context).
  int64_t context = 1024;
  /// Tokens between window starts; 0 = context (disjoint windows).
  int64_t stride = 0;
  /// Score only the text's first this-many tokens; 0 = all.
  int64_t max_tokens = 0;
  int num_threads = 0;
  /// --kv-dtype: f32 or fp8; empty = the artifact's KV dtype.
  std::string kv_dtype;
  /// --device, --gpu-memory-utilization.
  DeviceFlags device;
  /// --tp N: the tensor-parallel world size the artifact must have been compiled for
  /// (`ingot compile --tp N`); 0 = whatever it has. The ranks run as threads on the CPU.
  int32_t tp = 0;
  /// Also write the result as JSON here.
  std::string json_path;
  /// --no-window-bos: start later windows without the BOS the tokenizer adds to a text.
  bool no_window_bos = false;
};

/// Tokenizes the file (BOS/EOS as the tokenizer's add_bos/add_eos say; special-token
/// strings stay plain text; a tokenizer that adds BOS also starts every later window with
/// it, unless no_window_bos), scores it in windows on the CPU backend and prints tokens
/// scored, mean NLL, perplexity and speed to `out`; progress lines and errors go to `err`.
/// Returns the process exit code.
int runEvalPerplexity(const EvalPerplexityOptions& options, std::ostream& out, std::ostream& err);

}  // namespace ingot
