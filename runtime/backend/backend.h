// Backend: what the engine needs from whatever executes an artifact's serving step — the
// CPU backend, the tensor-parallel group of CPU ranks, later CUDA.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/kv_dtype.h"
#include "runtime/backend/step_inputs.h"
#include "core/base/status.h"

namespace ingot {

/// How the token of one logit row is picked where the logits are (Backend::stepAndSample):
/// the request's Sampler transforms and the one uniform it drew for this token. 24 bytes,
/// the layout of the CUDA sampling kernel's parameters (codegen/cuda/kernels/sampling.cuh).
struct RowSampling {
  float temperature = 0.0f;  ///< <= 0: greedy
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  double u = 0.0;  ///< in [0, 1): the inverse-CDF draw over the kept tokens in id order
};

class Backend {
 public:
  virtual ~Backend() = default;

  /// Runs one batched step: writes the new tokens' K/V into the pool and sets `logits` to
  /// [inputs.logit_rows.size(), vocab] row-major. Invalid inputs are rejected before
  /// anything runs. A program with the speculative tree inputs may be given none: it then
  /// runs as plain causal attention.
  virtual Status step(const StepInputs& inputs, std::vector<float>* logits) = 0;
  /// Whether stepAndSample() works on this backend.
  virtual bool samplesOnBackend() const { return false; }
  /// step(), then the token of each logit row picked by `rows[i]` (Sampler semantics:
  /// temperature, top-k, top-p, min-p, the draw in token-id order) where the logits are, so
  /// only tokens come back: `tokens` gets one per logit row. Penalties and logprobs need the
  /// host (use step()). Backends that cannot sample say so.
  virtual Status stepAndSample(const StepInputs& inputs, const std::vector<RowSampling>& rows,
                               std::vector<int32_t>* tokens) {
    (void)inputs, (void)rows, (void)tokens;
    return unimplemented("this backend does not sample; use step()");
  }
  /// Copies every layer's K and V of block `src` to block `dst` (copy-on-write).
  virtual Status copyKvBlocks(int64_t src, int64_t dst) = 0;
  /// Whether kvBlocksFreed wants to hear of the blocks the cache frees (the emulated CUDA
  /// backend: it fills them with NaN, so a kernel that reads a block no sequence holds
  /// shows it in its output).
  virtual bool wantsFreedKvBlocks() const { return false; }
  virtual Status kvBlocksFreed(const std::vector<int32_t>& blocks) {
    (void)blocks;
    return okStatus();
  }
  /// Copies every layer's K and V row of slot `from` to slot `to`, pair by pair in order.
  virtual Status copyKvSlots(const std::vector<std::pair<int32_t, int32_t>>& moves) = 0;

  virtual int64_t numKvBlocks() const = 0;
  virtual int64_t vocabSize() const = 0;
  /// Program inputs after the eight (extra attention operands).
  virtual int32_t numExtraInputs() const = 0;
  /// The extra inputs are the speculative tree pair (tree_start, tree_bits).
  virtual bool takesTreeInputs() const = 0;
  /// Time of one attention multiply-add over one linear-layer multiply-add (the
  /// scheduler's prefill cost model).
  virtual double attentionMacCost() const = 0;
  /// Worker threads in all.
  virtual int numThreads() const = 0;
  /// Bytes of the weight matrices one decode token reads.
  virtual uint64_t matrixBytes() const = 0;
  /// The KV pool's element type as resolved at creation (--kv-dtype over the artifact's).
  virtual KvDtype kvDtype() const = 0;
  /// Tensor-parallel ranks behind this backend (1 = unsharded).
  virtual int worldSize() const { return 1; }
};

class Artifact;

/// What a caller asks of a backend it gets from a BackendFactory.
struct BackendRequest {
  /// Worker threads (CPU backends); 0 = all cores.
  int num_threads = 0;
  /// Blocks in the KV pool; 0 = the backend's own choice (CUDA: what free memory allows).
  int64_t num_kv_blocks = 0;
  /// KV pool element type; unset = the artifact's.
  std::optional<KvDtype> kv_dtype;
  /// Longest sequence the caller will run; 0 = the model's max_context.
  int64_t max_model_len = 0;
};

/// Makes the backend an engine or runner executes on (the CLI's --device). Unset where a
/// caller takes one: the CPU backend (the tensor-parallel CPU group for a sharded artifact).
using BackendFactory = std::function<StatusOr<std::unique_ptr<Backend>>(
    const Artifact& artifact, const BackendRequest& request)>;

/// "kv f32" or "kv fp8", plus ", tp N" for a backend of N > 1 ranks: for startup lines.
inline std::string describeKvAndRanks(const Backend& backend) {
  std::string text = std::string("kv ") + kvDtypeName(backend.kvDtype());
  if (backend.worldSize() > 1) text += ", tp " + std::to_string(backend.worldSize());
  return text;
}

}  // namespace ingot
