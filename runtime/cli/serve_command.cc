// `ingot serve`: an OpenAI-compatible HTTP server for one artifact.
#include "runtime/cli/serve_command.h"

#include <chrono>
#include <memory>
#include <optional>

#include "core/artifact/artifact_reader.h"
#include "runtime/cli/tensor_parallel_flag.h"
#include "runtime/server/serve.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ingot {

int runServe(const ServeOptions& options, std::ostream& err) {
  auto started = std::chrono::steady_clock::now();
  auto fail = [&](const Status& s) {
    err << "ingot serve: error: " << s.message() << "\n";
    return 1;
  };
  if (options.port < 0 || options.port > 65535) return fail(invalidArgument("bad --port"));
  StatusOr<Artifact> artifact = Artifact::open(options.artifact);
  if (!artifact.ok()) return fail(artifact.status());
  if (Status tp = checkTensorParallelFlag(options.tp, *artifact, options.artifact); !tp.ok())
    return fail(tp);
  StatusOr<TokenizerData> data = tokenizerDataFromManifest(artifact->manifest().tokenizer());
  if (!data.ok()) return fail(data.status().withPrefix(options.artifact));
  StatusOr<Tokenizer> tokenizer = Tokenizer::create(std::move(data).value());
  if (!tokenizer.ok()) return fail(tokenizer.status().withPrefix(options.artifact));

  server::ServeConfig config;
  config.server.host = options.host;
  config.server.port = static_cast<uint16_t>(options.port);
  config.server.io_threads = options.io_threads;
  config.server.max_queue = options.max_queue;
  std::string name = options.model_name;
  if (name.empty()) {
    name = options.artifact.substr(options.artifact.find_last_of('/') + 1);
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".ingot") == 0) name.resize(name.size() - 6);
  }
  config.server.model_name = name;
  config.engine.num_threads = options.threads;
  config.engine.num_kv_blocks = options.kv_blocks;
  StatusOr<std::optional<KvDtype>> kv_dtype = parseKvDtypeFlag(options.kv_dtype);
  if (!kv_dtype.ok()) return fail(kv_dtype.status());
  config.engine.kv_dtype = *kv_dtype;
  StatusOr<BackendFactory> factory = backendFactoryFor(options.device);
  if (!factory.ok()) return fail(factory.status());
  config.engine.backend_factory = std::move(factory).value();
  config.engine.enable_prefix_cache = !options.no_prefix_cache;
  config.engine.max_model_len = options.max_model_len;
  config.engine.scheduler.max_running = options.max_running;
  config.engine.scheduler.max_batched_tokens = options.max_batched_tokens;
  config.engine.scheduler.max_prefill_while_decoding = options.max_prefill_while_decoding;
  StatusOr<SpeculativeOptions> spec =
      speculativeOptions(options.speculative, options.spec_tokens, options.spec_branches);
  if (!spec.ok()) return fail(spec.status());
  std::optional<Artifact> draft;
  if (spec->source == DraftSource::kDraftModel) {
    if (options.draft.empty()) return fail(invalidArgument("--speculative draft-model needs --draft PATH"));
    StatusOr<Artifact> opened = Artifact::open(options.draft);
    if (!opened.ok()) return fail(opened.status());
    draft.emplace(std::move(opened).value());
    spec->draft = &*draft;
  }
  config.engine.speculative = *spec;
  Status served = server::serveModel(*artifact, *tokenizer, config, started, err);
  if (!served.ok()) return fail(served);
  return 0;
}

}  // namespace ingot
