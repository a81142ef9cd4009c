// SequenceRunner: one sequence on a backend, fed token by token or in chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/cpu/simd_level.h"
#include "runtime/backend/kv_dtype.h"

namespace ingot {

struct SequenceRunnerOptions {
  /// KV pool element type; unset = the artifact's (CpuBackendOptions::kv_dtype).
  std::optional<KvDtype> kv_dtype;
  int num_threads = 0;
  /// Longest sequence; 0 = the model's max_context.
  int64_t max_tokens = 0;
  /// Most tokens fed to the backend in one step (chunked prefill).
  int64_t chunk_tokens = 256;
  /// The backend (the CLI's --device); unset = the CPU backend.
  BackendFactory backend_factory;
};

/// Runs one request through the batched step API: KV blocks 0, 1, 2, ... in order, RoPE
/// positions equal to KV slots. The serving engine replaces this with its scheduler; the
/// CLI (`ingot run`) and the end-to-end tests use it directly.
class SequenceRunner {
 public:
  static StatusOr<std::unique_ptr<SequenceRunner>> create(const Artifact& artifact,
                                                          const SequenceRunnerOptions& options);

  /// Appends `tokens` and sets `logits` to the logits of every appended token
  /// ([tokens.size(), vocab]) when `all_rows`, else of the last one only ([1, vocab]).
  Status append(const std::vector<int32_t>& tokens, bool all_rows, std::vector<float>* logits);
  /// Forgets the sequence (the KV pool is reused).
  void reset() { length_ = 0; }

  int64_t length() const { return length_; }
  int64_t maxTokens() const { return max_tokens_; }
  int64_t vocabSize() const { return backend_->vocabSize(); }
  /// The backend: one CpuBackend, the ranks of a tensor-parallel artifact, or the factory's.
  const Backend& backend() const { return *backend_; }
  /// The CPU kernels' SIMD level (rank 0's under tensor parallelism; scalar elsewhere).
  SimdLevel simdLevel() const { return simd_level_; }

 private:
  SequenceRunner() = default;
  std::unique_ptr<Backend> backend_;
  SimdLevel simd_level_ = SimdLevel::kScalar;
  int32_t block_size_ = 16;
  int64_t max_tokens_ = 0;
  int64_t chunk_tokens_ = 256;
  int64_t length_ = 0;
  std::vector<float> chunk_logits_;
};

}  // namespace ingot
