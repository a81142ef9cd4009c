// `ingot eval`: model quality measurements from the command line (`ingot eval ppl`).
#include "runtime/cli/eval_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/artifact/artifact_reader.h"
#include "runtime/cli/tensor_parallel_flag.h"
#include "runtime/eval/perplexity.h"
#include "runtime/generate/sequence_runner.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ingot {
namespace {

using Clock = std::chrono::steady_clock;

/// Seconds between progress lines (the last window is always reported).
constexpr double kProgressIntervalS = 1.0;

int fail(std::ostream& err, const std::string& message) {
  err << "ingot eval ppl: error: " << message << "\n";
  return 1;
}

StatusOr<std::string> readText(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return ioError("cannot read the text file " + path);
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return ioError("cannot read the text file " + path);
  if (text.str().empty()) return invalidArgument("the text file " + path + " is empty");
  return text.str();
}

/// The result as JSON at options.json_path; false when the file cannot be written.
bool writeJson(const EvalPerplexityOptions& options, const PerplexityResult& result,
               size_t text_tokens, int64_t stride, bool window_bos, int threads) {
  const double seconds = std::max(result.seconds, 1e-9);
  nlohmann::json json = {
      {"artifact", options.artifact},
      {"text", options.text_path},
      {"text_tokens", text_tokens},
      {"context", options.context},
      {"stride", stride},
      {"window_bos", window_bos},
      {"windows", result.num_windows},
      {"tokens_scored", result.tokens_scored},
      {"tokens_evaluated", result.tokens_evaluated},
      {"nll_sum", result.nll_sum},
      {"mean_nll", result.mean_nll},
      {"perplexity", result.perplexity},
      {"seconds", result.seconds},
      {"tokens_per_s", result.tokens_evaluated / seconds},
      {"threads", threads},
  };
  std::ofstream file(options.json_path);
  file << json.dump(2) << "\n";
  return static_cast<bool>(file);
}

}  // namespace

int runEvalPerplexity(const EvalPerplexityOptions& options, std::ostream& out,
                      std::ostream& err) {
  if (options.context < 2)
    return fail(err, "--ctx must be at least 2 tokens, not " + std::to_string(options.context));
  const int64_t stride = options.stride == 0 ? options.context : options.stride;
  if (stride < 1 || stride > options.context)
    return fail(err, "--stride must be between 1 and --ctx (" + std::to_string(options.context) +
                         "), not " + std::to_string(options.stride));
  StatusOr<std::string> text = readText(options.text_path);
  if (!text.ok()) return fail(err, text.status().message());

  StatusOr<Artifact> artifact = Artifact::open(options.artifact);
  if (!artifact.ok()) return fail(err, artifact.status().message());
  if (Status tp = checkTensorParallelFlag(options.tp, *artifact, options.artifact); !tp.ok())
    return fail(err, tp.message());
  const schema::ModelConfigDef* config = artifact->manifest().config();
  if (!config) return fail(err, options.artifact + ": artifact has no model config");
  if (options.context > config->max_context())
    return fail(err, "--ctx " + std::to_string(options.context) +
                         " exceeds the model's maximum context of " +
                         std::to_string(config->max_context()) + " tokens");
  StatusOr<TokenizerData> data = tokenizerDataFromManifest(artifact->manifest().tokenizer());
  StatusOr<Tokenizer> tokenizer =
      data.ok() ? Tokenizer::create(std::move(data).value()) : StatusOr<Tokenizer>(data.status());
  if (!tokenizer.ok()) return fail(err, options.artifact + ": " + tokenizer.status().message());

  const Clock::time_point tokenize_start = Clock::now();
  std::vector<int32_t> tokens =
      tokenizer->encode(*text, /*addSpecial=*/true, /*parseSpecial=*/false);
  const double tokenize_s = std::chrono::duration<double>(Clock::now() - tokenize_start).count();
  const size_t text_tokens = tokens.size();
  if (options.max_tokens > 0 && tokens.size() > static_cast<size_t>(options.max_tokens))
    tokens.resize(static_cast<size_t>(options.max_tokens));
  if (tokens.size() < 2)
    return fail(err, "the text " + options.text_path + " has " + std::to_string(tokens.size()) +
                         " token(s) to score; perplexity needs at least 2");

  // Every window reads like the start of a text where the tokenizer starts one with BOS
  // (Gemma degrades badly without it), as llama.cpp's perplexity does.
  const int32_t window_bos =
      tokenizer->data().addBos && tokenizer->bosId() >= 0 && !options.no_window_bos
          ? tokenizer->bosId()
          : -1;
  SequenceRunnerOptions runner_options;
  runner_options.num_threads = options.num_threads;
  StatusOr<std::optional<KvDtype>> kv_dtype = parseKvDtypeFlag(options.kv_dtype);
  if (!kv_dtype.ok()) return fail(err, kv_dtype.status().message());
  runner_options.kv_dtype = *kv_dtype;
  StatusOr<BackendFactory> factory = backendFactoryFor(options.device);
  if (!factory.ok()) return fail(err, factory.status().message());
  runner_options.backend_factory = std::move(factory).value();
  runner_options.max_tokens = options.context;  // the KV pool holds one window
  StatusOr<std::unique_ptr<SequenceRunner>> runner =
      SequenceRunner::create(*artifact, runner_options);
  if (!runner.ok()) return fail(err, runner.status().message());

  char line[512];
  std::snprintf(line, sizeof(line),
                "[ingot] %s: %zu tokens (tokenized in %.2f s), scoring %zu | ctx %lld, stride "
                "%lld, BOS per window %s | %d threads, %s\n",
                options.text_path.c_str(), text_tokens, tokenize_s, tokens.size(),
                static_cast<long long>(options.context), static_cast<long long>(stride),
                window_bos >= 0 ? "yes" : "no",
                (*runner)->backend().numThreads(), simdLevelName((*runner)->simdLevel()));
  err << line << std::flush;

  double last_report_s = -kProgressIntervalS;
  auto report = [&](const PerplexityProgress& p) {
    if (p.windows_done < p.num_windows && p.seconds - last_report_s < kProgressIntervalS) return;
    last_report_s = p.seconds;
    std::snprintf(line, sizeof(line),
                  "[ingot] window %lld/%lld | %lld tokens scored | ppl %.4f | %.1f tok/s\n",
                  static_cast<long long>(p.windows_done), static_cast<long long>(p.num_windows),
                  static_cast<long long>(p.nll.count), p.nll.perplexity(),
                  p.tokens_evaluated / std::max(p.seconds, 1e-9));
    err << line << std::flush;
  };
  PerplexityOptions eval_options;
  eval_options.context = options.context;
  eval_options.stride = stride;
  eval_options.window_prefix = window_bos;
  StatusOr<PerplexityResult> result = evaluatePerplexity(**runner, tokens, eval_options, report);
  if (!result.ok()) return fail(err, result.status().message());

  const double seconds = std::max(result->seconds, 1e-9);
  std::snprintf(line, sizeof(line),
                "tokens scored  %lld (%lld windows, %lld tokens evaluated)\n"
                "mean NLL       %.6f nats/token\n"
                "perplexity     %.4f\n"
                "speed          %.1f tokens/s evaluated, %.1f scored/s (%.2f s)\n",
                static_cast<long long>(result->tokens_scored),
                static_cast<long long>(result->num_windows),
                static_cast<long long>(result->tokens_evaluated), result->mean_nll,
                result->perplexity, result->tokens_evaluated / seconds,
                result->tokens_scored / seconds, result->seconds);
  out << line;

  if (!options.json_path.empty() &&
      !writeJson(options, *result, text_tokens, stride, window_bos >= 0,
                 (*runner)->backend().numThreads()))
    return fail(err, "cannot write " + options.json_path);
  return 0;
}

}  // namespace ingot
