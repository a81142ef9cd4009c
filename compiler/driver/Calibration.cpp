//===- Calibration.cpp - activation-aware 4-bit quantization (`--calib FILE`) -===//
#include "compiler/driver/Calibration.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "compiler/driver/CalibrationForward.h"
#include "compiler/driver/ModuleToArtifact.h"
#include "compiler/driver/Pipeline.h"
#include "compiler/import/LlamaModuleBuilder.h"
#include "compiler/import/WeightConversion.h"
#include "compiler/quant/ActivationAwareScales.h"
#include "mlir/IR/MLIRContext.h"

namespace ingot::compiler {
namespace {

using Clock = std::chrono::steady_clock;

/// Fewest calibration tokens accepted: below this the per-channel means are noise.
constexpr int64_t kMinCalibrationTokens = 64;
/// Seed of the activation-row reservoir (any constant: the sample must be reproducible).
constexpr uint64_t kSampleSeed = 0x1A3F5C7E9B2D4F61ull;

std::string layerName(int32_t layer, const std::string &suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

/// The linears whose inputs calibration records: one per distinct activation.
bool isRecordedInput(const std::string &weight) {
  for (const char *suffix : {"self_attn.q_proj.weight", "mlp.gate_proj.weight",
                             "self_attn.o_proj.weight", "mlp.down_proj.weight"}) {
    const std::string s(suffix);
    if (weight.size() >= s.size() && weight.compare(weight.size() - s.size(), s.size(), s) == 0)
      return true;
  }
  return false;
}

/// Removes a file when it goes out of scope.
struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty())
      ::unlink(path.c_str());
  }
};

Status applyFold(const TensorFold &fold, const std::vector<int64_t> &shape,
                 std::vector<float> &values) {
  const int64_t rows = shape.empty() ? 1 : shape[0];
  const int64_t cols = shape.size() >= 2 ? shape[1] : 1;
  if (static_cast<int64_t>(values.size()) != rows * cols)
    return internalError("read " + std::to_string(values.size()) + " values for " +
                         std::to_string(rows) + " x " + std::to_string(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float divisor = fold.rowDivisor.empty() ? 1.0f : fold.rowDivisor[r];
    for (int64_t c = 0; c < cols; ++c) {
      float &v = values[r * cols + c];
      if (!fold.columnScale.empty())
        v *= fold.columnScale[c];
      v /= divisor;
    }
  }
  return okStatus();
}

/// Everything one layer's search needs from the recorded activations.
struct LayerStats {
  const quant::ChannelStats *attentionInput = nullptr, *mlpInput = nullptr,
                            *attentionOutput = nullptr, *mlpHidden = nullptr;
};

/// The folds, importance and errors one layer's search produced.
struct LayerResult {
  Status status = okStatus();
  FoldPlan folds;
  std::map<std::string, std::vector<float>> importance;
  std::vector<float> alphas;
  double error = 0.0, unscaledError = 0.0;
};

class LayerSearch {
public:
  LayerSearch(const importer::ImportedModel &model, const CalibrationOptions &options,
              int32_t layer, const LayerStats &stats, LayerResult &result)
      : model(model), options(options), layer(layer), stats(stats), result(result) {}

  Status run() {
    const ModelConfig &cfg = model.config;
    LayerScales scales;
    // q/k/v read the attention norm's output.
    INGOT_ASSIGN_OR_RETURN(
        scales.attentionInput,
        search(*stats.attentionInput,
               {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"},
               stats.attentionInput->meanAbs()));
    // gate/up read the MLP norm's output.
    INGOT_ASSIGN_OR_RETURN(scales.mlpInput,
                           search(*stats.mlpInput, {"mlp.gate_proj.weight", "mlp.up_proj.weight"},
                                  stats.mlpInput->meanAbs()));
    // o_proj reads attention's output: channel (head h, d) is a mix of V channel
    // (kv head h / group, d), so the heads of one group share a scale (their mean |x|).
    const int64_t heads = cfg.numHeads, kvHeads = cfg.numKvHeads, headDim = cfg.headDim;
    if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0 || headDim <= 0 ||
        stats.attentionOutput->channels() != heads * headDim)
      return invalidArgument("attention of " + std::to_string(heads) + " heads, " +
                             std::to_string(kvHeads) + " KV heads of " + std::to_string(headDim) +
                             " does not match o_proj's " +
                             std::to_string(stats.attentionOutput->channels()) + " inputs");
    const int64_t groupSize = heads / kvHeads;
    std::vector<float> mean = stats.attentionOutput->meanAbs(), tied(mean.size());
    for (int64_t g = 0; g < kvHeads; ++g)
      for (int64_t d = 0; d < headDim; ++d) {
        float sum = 0.0f;
        for (int64_t h = g * groupSize; h < (g + 1) * groupSize; ++h)
          sum += mean[h * headDim + d];
        for (int64_t h = g * groupSize; h < (g + 1) * groupSize; ++h)
          tied[h * headDim + d] = sum / static_cast<float>(groupSize);
      }
    INGOT_ASSIGN_OR_RETURN(std::vector<float> output,
                           search(*stats.attentionOutput, {"self_attn.o_proj.weight"}, tied));
    if (!output.empty()) {
      scales.value.resize(static_cast<size_t>(kvHeads * headDim));
      for (int64_t g = 0; g < kvHeads; ++g)
        for (int64_t d = 0; d < headDim; ++d)
          scales.value[g * headDim + d] = output[g * groupSize * headDim + d];
    }
    // down_proj reads silu(gate) * up.
    INGOT_ASSIGN_OR_RETURN(scales.mlpHidden, search(*stats.mlpHidden, {"mlp.down_proj.weight"},
                                                    stats.mlpHidden->meanAbs()));
    return addLayerFolds(model, layer, scales, result.folds);
  }

private:
  StatusOr<std::vector<float>> readTensor(const std::string &name, int64_t &n, int64_t &k) {
    int32_t index = model.find(name);
    if (index < 0)
      return notFound("calibration needs tensor '" + name + "', which the checkpoint lacks");
    const importer::ImportedTensor &t = model.tensors[index];
    if (t.shape.size() != 2 || !t.readF32)
      return invalidArgument("tensor '" + name + "' is not a matrix readable as f32");
    n = t.shape[0];
    k = t.shape[1];
    std::vector<float> values;
    INGOT_RETURN_IF_ERROR(t.readF32(values).withPrefix("tensor '" + name + "'"));
    return values;
  }

  /// The scales of the linears `suffixes` that read `input` (ones when scaling is off or
  /// the encoding cannot hold them); records their column scales and importance.
  StatusOr<std::vector<float>> search(const quant::ChannelStats &input,
                                      const std::vector<std::string> &suffixes,
                                      const std::vector<float> &magnitude) {
    std::vector<std::vector<float>> weights;
    quant::ScaleSearchProblem problem;
    bool encodable = true;
    for (const std::string &suffix : suffixes) {
      int64_t n = 0, k = 0;
      INGOT_ASSIGN_OR_RETURN(std::vector<float> w, readTensor(layerName(layer, suffix), n, k));
      if (k != input.channels())
        return invalidArgument("tensor '" + layerName(layer, suffix) + "' has " +
                               std::to_string(k) + " inputs, its recorded activations " +
                               std::to_string(input.channels()));
      encodable = encodable && quant::checkEncodable(options.encoding, n, k, options.group).ok();
      weights.push_back(std::move(w));
      problem.rows.push_back(n);
    }
    const int64_t k = input.channels();
    std::vector<float> scales(static_cast<size_t>(k), 1.0f);
    if (options.searchScales && encodable) {
      for (const std::vector<float> &w : weights)
        problem.weights.push_back(w.data());
      problem.k = k;
      problem.magnitude = magnitude.data();
      problem.sample = input.sample().data();
      problem.sampleRows = input.sampledRows();
      problem.encoding = options.encoding;
      problem.group = options.group;
      INGOT_ASSIGN_OR_RETURN(quant::ScaleSearchResult found,
                             quant::searchChannelScales(problem, quant::defaultAlphaGrid()));
      scales = std::move(found.scales);
      result.alphas.push_back(found.alpha);
      result.error += found.error;
      result.unscaledError += found.unscaledError;
    }
    std::vector<float> importance = input.meanSquare();
    for (int64_t c = 0; c < k; ++c)
      importance[c] /= scales[c] * scales[c];
    if (options.weightedBlocks)
      for (const std::string &suffix : suffixes)
        result.importance[layerName(layer, suffix)] = importance;
    if (std::all_of(scales.begin(), scales.end(), [](float v) { return v == 1.0f; }))
      scales.clear(); // nothing to fold
    return scales;
  }

  const importer::ImportedModel &model;
  const CalibrationOptions &options;
  int32_t layer;
  const LayerStats &stats;
  LayerResult &result;
};

StatusOr<std::string> readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return notFound("cannot read the calibration text '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

Status addLayerFolds(const importer::ImportedModel &model, int32_t layer, const LayerScales &scales,
                     FoldPlan &plan) {
  const ModelConfig &cfg = model.config;
  const int64_t heads = cfg.numHeads, kvHeads = cfg.numKvHeads, headDim = cfg.headDim;
  if (kvHeads <= 0 || heads % kvHeads != 0)
    return invalidArgument("cannot fold into " + std::to_string(heads) + " query heads over " +
                           std::to_string(kvHeads) + " KV heads");
  const std::vector<float> none;
  // Where a scale vector goes: columns of some tensors, row divisors of others.
  auto fold = [&](const std::vector<float> &s, int64_t size, const char *what,
                  std::vector<std::string> columnsOf, std::vector<std::string> rowsOf) -> Status {
    if (s.empty())
      return okStatus();
    if (static_cast<int64_t>(s.size()) != size)
      return invalidArgument(std::string(what) + " scales of layer " + std::to_string(layer) +
                             ": " + std::to_string(s.size()) + " values for " +
                             std::to_string(size) + " channels");
    for (const std::string &suffix : rowsOf) {
      const std::string name = layerName(layer, suffix);
      if (model.find(name) < 0) {
        if (suffix == "self_attn.v_proj.bias")
          continue; // only Qwen2-style attention has one
        return notFound("cannot fold into '" + name + "': not in the checkpoint");
      }
      plan[name].rowDivisor = s;
    }
    for (const std::string &suffix : columnsOf) {
      const std::string name = layerName(layer, suffix);
      if (model.find(name) < 0)
        return notFound("cannot fold into '" + name + "': not in the checkpoint");
      plan[name].columnScale = s;
    }
    return okStatus();
  };
  INGOT_RETURN_IF_ERROR(
      fold(scales.attentionInput, cfg.hiddenSize, "attention input",
           {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"},
           {"input_layernorm.weight"}));
  // The norm whose output the MLP reads: with sandwich norms (Gemma 3) the MLP has its own,
  // post_attention_layernorm then normalizing the attention output before the residual add.
  const char *mlpNorm = model.features.sandwichNorms ? "pre_feedforward_layernorm.weight"
                                                     : "post_attention_layernorm.weight";
  INGOT_RETURN_IF_ERROR(fold(scales.mlpInput, cfg.hiddenSize, "MLP input",
                             {"mlp.gate_proj.weight", "mlp.up_proj.weight"}, {mlpNorm}));
  INGOT_RETURN_IF_ERROR(fold(scales.mlpHidden, cfg.intermediateSize, "MLP hidden",
                             {"mlp.down_proj.weight"}, {"mlp.up_proj.weight"}));
  // V channel (g, d) feeds o_proj input (h, d) for every query head h of group g.
  std::vector<float> expanded;
  if (!scales.value.empty()) {
    const int64_t groupSize = heads / kvHeads;
    expanded.resize(static_cast<size_t>(heads * headDim));
    if (static_cast<int64_t>(scales.value.size()) == kvHeads * headDim)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < headDim; ++d)
          expanded[h * headDim + d] = scales.value[(h / groupSize) * headDim + d];
  }
  INGOT_RETURN_IF_ERROR(fold(scales.value, kvHeads * headDim, "attention value", {},
                             {"self_attn.v_proj.weight", "self_attn.v_proj.bias"}));
  return fold(expanded, heads * headDim, "attention output", {"self_attn.o_proj.weight"}, {});
}

Status writeCheckpointArtifact(const importer::ImportedModel &model, const std::string &path) {
  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  std::string error;
  auto built = importer::buildLlamaModule(context, model, error);
  if (mlir::failed(built))
    return invalidArgument("cannot build the model: " + error);
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*built);
  if (mlir::failed(runCompilePipeline(*module, PipelineOptions{})))
    return internalError("the pass pipeline failed on the unquantized model");
  LoweringOptions lowering;
  lowering.weights = WeightSource::Checkpoint;
  lowering.checkpoint = &model;
  lowering.provenance.compilerVersion = "ingot (calibration)";
  lowering.provenance.source = model.source;
  ArtifactWriter writer;
  if (mlir::failed(lowerModuleToArtifact(*module, lowering, writer)))
    return internalError("cannot lower the unquantized model to an artifact");
  return writer.write(path);
}

StatusOr<importer::ImportedModel> foldCheckpoint(const importer::ImportedModel &model,
                                                 const FoldPlan &folds) {
  importer::ImportedModel folded = model;
  for (const auto &[name, fold] : folds) {
    int32_t index = folded.find(name);
    if (index < 0)
      return notFound("cannot fold into tensor '" + name + "': not in the checkpoint");
    importer::ImportedTensor &t = folded.tensors[index];
    const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
    const int64_t cols = t.shape.size() >= 2 ? t.shape[1] : 1;
    if (t.shape.size() > 2 ||
        (!fold.columnScale.empty() &&
         (t.shape.size() != 2 || static_cast<int64_t>(fold.columnScale.size()) != cols)) ||
        (!fold.rowDivisor.empty() && static_cast<int64_t>(fold.rowDivisor.size()) != rows))
      return invalidArgument("fold of " + std::to_string(fold.columnScale.size()) +
                             " column scales and " + std::to_string(fold.rowDivisor.size()) +
                             " row divisors does not fit tensor '" + name + "'");
    for (float v : fold.columnScale)
      if (!(v > 0.0f) || !std::isfinite(v))
        return invalidArgument("fold into '" + name + "' has a scale that is not finite and > 0");
    for (float v : fold.rowDivisor)
      if (!(v > 0.0f) || !std::isfinite(v))
        return invalidArgument("fold into '" + name + "' has a divisor that is not finite and > 0");
    if (!t.readF32)
      return invalidArgument("cannot fold into tensor '" + name + "': not readable as f32");
    auto read = [inner = t.readF32, fold = fold, shape = t.shape](std::vector<float> &values) {
      INGOT_RETURN_IF_ERROR(inner(values));
      return applyFold(fold, shape, values);
    };
    t.readF32 = read;
    t.produce = [read, dtype = t.dtype](const TensorByteSink &sink) -> Status {
      std::vector<float> values;
      INGOT_RETURN_IF_ERROR(read(values));
      return importer::writeConverted(values, dtype, sink);
    };
    t.sourceQuant = importer::SourceQuant::None;
    t.readBlocks = nullptr;
  }
  return folded;
}

StatusOr<CalibrationResult> calibrateCheckpoint(const importer::ImportedModel &model,
                                                const CalibrationOptions &options) {
  if (!options.recordInputs)
    return invalidArgument("calibration needs a forward pass, and this build of the compiler "
                           "was given none (the `ingot` tool passes the CPU backend's)");
  if (options.chunkTokens < 2 || options.maxTokens < kMinCalibrationTokens ||
      options.sampleRows < 1)
    return invalidArgument("calibration needs chunks of >= 2 tokens, >= " +
                           std::to_string(kMinCalibrationTokens) + " tokens and >= 1 sampled row");
  if (!model.hasTokenizer)
    return invalidArgument("calibration needs the checkpoint's tokenizer, and it has none");
  INGOT_ASSIGN_OR_RETURN(std::string text, readText(options.textPath));

  // The unquantized model, compiled to a temporary artifact and run by the runtime.
  std::string dir = options.tempDir;
  if (dir.empty()) {
    const char *env = std::getenv("TMPDIR");
    dir = env && *env ? env : "/tmp";
  }
  TempFile temp{dir + "/ingot-calib-XXXXXX"};
  int fd = ::mkstemp(temp.path.data());
  if (fd < 0) {
    temp.path.clear();
    return ioError("cannot create a temporary file in '" + dir + "'");
  }
  ::close(fd);
  INGOT_RETURN_IF_ERROR(writeCheckpointArtifact(model, temp.path)
                            .withPrefix("calibration: the unquantized artifact"));
  ForwardOptions forward;
  forward.maxTokens = options.maxTokens;
  forward.chunkTokens = options.chunkTokens;
  forward.minTokens = kMinCalibrationTokens;
  forward.sampleRows = options.sampleRows;
  forward.seed = kSampleSeed;
  forward.numThreads = options.numThreads;
  INGOT_ASSIGN_OR_RETURN(
      RecordedActivations activations,
      options.recordInputs(temp.path, text, options.textPath, forward, isRecordedInput));
  const auto &recorded = activations.inputs;
  CalibrationResult result;
  result.tokens = activations.tokens;
  result.forwardSeconds = activations.seconds;

  // One search per layer; layers are independent (each reads only its own tensors and
  // the unscaled activations), so they run on a few threads.
  const Clock::time_point start = Clock::now();
  const int32_t layers = model.config.numLayers;
  std::vector<LayerStats> stats(static_cast<size_t>(layers));
  for (int32_t l = 0; l < layers; ++l) {
    auto get = [&](const char *suffix) -> const quant::ChannelStats * {
      auto it = recorded.find(layerName(l, suffix));
      return it == recorded.end() ? nullptr : it->second.get();
    };
    stats[l] = {get("self_attn.q_proj.weight"), get("mlp.gate_proj.weight"),
                get("self_attn.o_proj.weight"), get("mlp.down_proj.weight")};
    if (!stats[l].attentionInput || !stats[l].mlpInput || !stats[l].attentionOutput ||
        !stats[l].mlpHidden)
      return invalidArgument("calibration saw no activations of layer " + std::to_string(l) +
                             "'s q_proj, gate_proj, o_proj and down_proj (not a Llama-layout "
                             "model?)");
  }
  std::vector<LayerResult> layerResults(static_cast<size_t>(layers));
  std::atomic<int32_t> next{0};
  auto worker = [&] {
    for (int32_t l = next++; l < layers; l = next++)
      layerResults[l].status = LayerSearch(model, options, l, stats[l], layerResults[l]).run();
  };
  // Each search thread holds one layer's weights in f32 and two working copies of the
  // largest; a few threads are enough to hide that work and keep a large model's memory in
  // bounds (an 8B Llama layer is ~1 GB of f32 weights).
  constexpr unsigned kMaxSearchThreads = 8;
  const unsigned cores =
      std::min(kMaxSearchThreads, options.numThreads > 0
                                      ? static_cast<unsigned>(options.numThreads)
                                      : std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < std::min<unsigned>(cores, static_cast<unsigned>(layers)); ++i)
    threads.emplace_back(worker);
  worker();
  for (std::thread &t : threads)
    t.join();
  for (int32_t l = 0; l < layers; ++l) {
    LayerResult &r = layerResults[l];
    INGOT_RETURN_IF_ERROR(r.status.withPrefix("calibration of layer " + std::to_string(l)));
    for (auto &[name, fold] : r.folds)
      result.folds[name] = std::move(fold);
    for (auto &[name, importance] : r.importance)
      result.columnImportance[name] = std::move(importance);
    result.alphas.insert(result.alphas.end(), r.alphas.begin(), r.alphas.end());
    result.error += r.error;
    result.unscaledError += r.unscaledError;
  }
  result.searchSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  INGOT_ASSIGN_OR_RETURN(result.model, foldCheckpoint(model, result.folds));
  return result;
}

} // namespace ingot::compiler
