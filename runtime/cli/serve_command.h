// `ingot serve`: an OpenAI-compatible HTTP server for one artifact.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "runtime/cli/device_flag.h"

#include "runtime/sched/scheduler.h"

namespace ingot {

struct ServeOptions {
  std::string artifact;
  /// --device, --gpu-memory-utilization.
  DeviceFlags device;
  std::string host = "127.0.0.1";
  int port = 8000;
  /// Backend compute threads (0 = all cores).
  int threads = 0;
  /// Threads for network I/O.
  int io_threads = 2;
  /// Sequences admitted beyond the running cap before 429.
  int max_queue = 256;
  /// KV pool blocks (0 = the engine's default).
  int64_t kv_blocks = 0;
  /// --kv-dtype: f32 or fp8; empty = the artifact's KV dtype.
  std::string kv_dtype;
  int max_running = 64;
  int max_batched_tokens = 512;
  /// Cost of prefill a step may carry next to decodes (SchedulerOptions).
  int max_prefill_while_decoding = SchedulerOptions().max_prefill_while_decoding;
  int max_model_len = 0;
  bool no_prefix_cache = false;
  /// Speculative decoding (speculativeOptions()).
  std::string speculative = "off";
  int spec_tokens = 8;
  int spec_branches = 1;
  /// --speculative draft-model: the draft artifact.
  std::string draft;
  /// Name clients use in "model"; empty = the artifact's file name without ".ingot".
  std::string model_name;
  /// --tp N: the tensor-parallel world size the artifact must have been compiled for
  /// (`ingot compile --tp N`); 0 = whatever it has. The ranks run as threads of this
  /// process, or as processes with --tp-mode processes (docs/tensor-parallel.md).
  int tp = 0;
};

/// Serves until SIGTERM/SIGINT, draining running requests; 0 on a clean stop.
int runServe(const ServeOptions& options, std::ostream& err);

}  // namespace ingot
