// The forward pass of `ingot compile --calib`: linear-layer inputs recorded on the CPU backend.
#include "tools/ingot/calibration_forward.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/step_inputs.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_data.h"

namespace ingot::tools {

using compiler::ForwardOptions;
using compiler::RecordedActivations;

StatusOr<RecordedActivations>
recordLinearInputsOnCpu(const std::string &artifactPath, const std::string &text,
                   const std::string &textName, const ForwardOptions &options,
                   const std::function<bool(const std::string &)> &record) {
  if (options.chunkTokens < 2)
    return invalidArgument("calibration chunks must hold at least 2 tokens");
  INGOT_ASSIGN_OR_RETURN(Artifact artifact, Artifact::open(artifactPath));
  const schema::ModelConfigDef *config = artifact.manifest().config();
  if (!config)
    return invalidArgument(artifactPath + ": artifact has no model config");
  INGOT_ASSIGN_OR_RETURN(TokenizerData data,
                         tokenizerDataFromManifest(artifact.manifest().tokenizer()));
  INGOT_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::create(std::move(data)));
  std::vector<int32_t> tokens = tokenizer.encode(text, /*addSpecial=*/true, /*parseSpecial=*/false);
  if (static_cast<int64_t>(tokens.size()) < options.minTokens)
    return invalidArgument("the calibration text '" + textName + "' has " +
                           std::to_string(tokens.size()) + " tokens; at least " +
                           std::to_string(options.minTokens) + " are needed");
  if (static_cast<int64_t>(tokens.size()) > options.maxTokens)
    tokens.resize(static_cast<size_t>(options.maxTokens));

  const int32_t blockSize = std::max(1, config->kv_block_size());
  const int64_t chunk =
      std::min<int64_t>(options.chunkTokens, std::max<int64_t>(2, config->max_context()));
  CpuBackendOptions backendOptions;
  backendOptions.num_threads = options.numThreads;
  backendOptions.num_kv_blocks = (chunk + blockSize - 1) / blockSize;
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend,
                         CpuBackend::create(artifact, backendOptions));
  RecordedActivations recorded;
  Status observed = okStatus();
  backend->setLinearObserver(
      [&](const std::string &weight, const float *x, int64_t rows, int64_t cols) {
        if (!observed.ok() || !record(weight))
          return;
        std::unique_ptr<quant::ChannelStats> &stats = recorded.inputs[weight];
        if (!stats)
          stats = std::make_unique<quant::ChannelStats>(cols, options.sampleRows,
                                                        options.seed + recorded.inputs.size());
        observed = stats->add(x, rows, cols).withPrefix("activations of '" + weight + "'");
      });

  const auto start = std::chrono::steady_clock::now();
  std::vector<float> logits;
  for (size_t first = 0; first < tokens.size(); first += static_cast<size_t>(chunk)) {
    const int32_t n = static_cast<int32_t>(std::min<size_t>(chunk, tokens.size() - first));
    StepInputs step;
    step.tokens.assign(tokens.begin() + first, tokens.begin() + first + n);
    step.positions.resize(n);
    std::iota(step.positions.begin(), step.positions.end(), 0);
    step.slot_mapping = step.positions; // block b holds slots [b * bs, (b + 1) * bs)
    step.num_requests = 1;
    step.max_blocks_per_request = (n + blockSize - 1) / blockSize;
    step.block_tables.resize(step.max_blocks_per_request);
    std::iota(step.block_tables.begin(), step.block_tables.end(), 0);
    step.seq_lens = {n};
    step.query_start = {0, n};
    step.logit_rows = {n - 1};
    INGOT_RETURN_IF_ERROR(backend->step(step, &logits).withPrefix("calibration forward pass"));
    INGOT_RETURN_IF_ERROR(observed);
  }
  recorded.tokens = static_cast<int64_t>(tokens.size());
  recorded.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return recorded;
}

}  // namespace ingot::tools
