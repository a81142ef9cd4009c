// SequenceRunner: one sequence on a backend, fed token by token or in chunks.
#include "runtime/generate/sequence_runner.h"

#include <algorithm>
#include <numeric>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/tp_cpu_backend.h"

namespace ingot {

StatusOr<std::unique_ptr<SequenceRunner>> SequenceRunner::create(
    const Artifact& artifact, const SequenceRunnerOptions& options) {
  const schema::ModelConfigDef* config = artifact.manifest().config();
  if (!config) return invalidArgument(artifact.source() + ": artifact has no model config");
  std::unique_ptr<SequenceRunner> runner(new SequenceRunner());
  runner->block_size_ = std::max(1, config->kv_block_size());
  runner->max_tokens_ = options.max_tokens > 0 ? options.max_tokens : config->max_context();
  if (runner->max_tokens_ <= 0) return invalidArgument("no maximum sequence length");
  runner->chunk_tokens_ = std::max<int64_t>(1, options.chunk_tokens);
  CpuBackendOptions backend_options;
  backend_options.num_threads = options.num_threads;
  backend_options.kv_dtype = options.kv_dtype;
  backend_options.num_kv_blocks =
      (runner->max_tokens_ + runner->block_size_ - 1) / runner->block_size_;
  StatusOr<std::unique_ptr<Backend>> backend = [&]() -> StatusOr<std::unique_ptr<Backend>> {
    if (!options.backend_factory) return createCpuServingBackend(artifact, backend_options);
    BackendRequest request;
    request.num_threads = options.num_threads;
    request.num_kv_blocks = backend_options.num_kv_blocks;
    request.kv_dtype = options.kv_dtype;
    request.max_model_len = runner->max_tokens_;
    return options.backend_factory(artifact, request);
  }();
  if (!backend.ok()) return backend.status();
  runner->backend_ = std::move(backend).value();
  if (const auto* tp = dynamic_cast<const TpCpuBackend*>(runner->backend_.get()))
    runner->simd_level_ = tp->rank(0).simdLevel();
  else if (const auto* cpu = dynamic_cast<const CpuBackend*>(runner->backend_.get()))
    runner->simd_level_ = cpu->simdLevel();
  else  // another backend (ranks as processes, CUDA): the level the CPU kernels would use
    runner->simd_level_ = detectSimdLevel();
  return runner;
}

Status SequenceRunner::append(const std::vector<int32_t>& tokens, bool all_rows,
                              std::vector<float>* logits) {
  if (tokens.empty()) return invalidArgument("nothing to append");
  if (length_ + static_cast<int64_t>(tokens.size()) > max_tokens_)
    return invalidArgument("sequence of " + std::to_string(length_ + tokens.size()) +
                           " tokens exceeds the limit of " + std::to_string(max_tokens_));
  const int64_t vocab = backend_->vocabSize();
  logits->clear();
  for (size_t start = 0; start < tokens.size(); start += static_cast<size_t>(chunk_tokens_)) {
    const size_t n = std::min(tokens.size() - start, static_cast<size_t>(chunk_tokens_));
    const bool last_chunk = start + n == tokens.size();
    StepInputs step;
    step.tokens.assign(tokens.begin() + start, tokens.begin() + start + n);
    step.positions.resize(n);
    std::iota(step.positions.begin(), step.positions.end(), static_cast<int32_t>(length_));
    step.slot_mapping = step.positions;  // block b holds slots [b*bs, (b+1)*bs)
    const int64_t new_length = length_ + static_cast<int64_t>(n);
    step.num_requests = 1;
    step.max_blocks_per_request = static_cast<int32_t>((new_length + block_size_ - 1) / block_size_);
    step.block_tables.resize(step.max_blocks_per_request);
    std::iota(step.block_tables.begin(), step.block_tables.end(), 0);
    step.seq_lens = {static_cast<int32_t>(new_length)};
    step.query_start = {0, static_cast<int32_t>(n)};
    if (all_rows) {
      step.logit_rows.resize(n);
      std::iota(step.logit_rows.begin(), step.logit_rows.end(), 0);
    } else if (last_chunk) {
      step.logit_rows = {static_cast<int32_t>(n - 1)};
    }
    if (step.logit_rows.empty()) {
      // A prefill chunk whose logits nobody reads: ask for one row and drop it.
      step.logit_rows = {static_cast<int32_t>(n - 1)};
    }
    INGOT_RETURN_IF_ERROR(backend_->step(step, &chunk_logits_));
    length_ = new_length;
    if (all_rows || last_chunk)
      logits->insert(logits->end(), chunk_logits_.begin(),
                     chunk_logits_.begin() + static_cast<int64_t>(step.logit_rows.size()) * vocab);
  }
  return okStatus();
}

}  // namespace ingot
