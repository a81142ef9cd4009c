// serveModel: wires an artifact, its tokenizer, the engine and the HTTP front end together.
#include "runtime/server/serve.h"

#include <random>

#include "runtime/server/engine_loop.h"
#include "runtime/server/server_metrics.h"

namespace ingot::server {

Status serveModel(const Artifact& artifact, const Tokenizer& tokenizer, ServeConfig config,
                  std::chrono::steady_clock::time_point started, std::ostream& log) {
  EngineOptions engine_options = config.engine;
  // Special tokens (EOS, <|im_end|>) carry no text; everything else is its bytes.
  engine_options.token_text = [&tokenizer](int32_t id) {
    return tokenizer.isSpecial(id) ? std::string() : tokenizer.tokenPiece(id);
  };
  StatusOr<std::unique_ptr<Engine>> engine = Engine::create(artifact, engine_options);
  if (!engine.ok()) return engine.status();

  ServerMetrics metrics;
  EngineLoop loop(**engine, metrics);
  ServingContext ctx;
  ctx.engine = engine->get();
  ctx.loop = &loop;
  ctx.metrics = &metrics;
  ctx.tokenizer = &tokenizer;
  ctx.options = config.server;
  ctx.created = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  ctx.max_model_len = (*engine)->maxModelLen();
  int32_t running_cap = std::min(engine_options.scheduler.max_running,
                                 engine_options.scheduler.max_batched_tokens);
  ctx.capacity = running_cap + std::max(0, config.server.max_queue);
  ctx.next_seed = std::random_device()() * 0x100000001ull;
  const std::string& source = tokenizer.data().chatTemplate;
  if (!source.empty()) {
    StatusOr<ChatTemplate> tmpl = ChatTemplate::parse(source);
    if (tmpl.ok()) ctx.chat_template = std::move(tmpl).value();
    else log << "[ingot serve] warning: chat template: " << tmpl.status().message()
             << " (chat completions are disabled)\n";
  }

  HttpServer http(ctx);
  INGOT_RETURN_IF_ERROR(http.listen());
  loop.start();
  double startup = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  log << "[ingot serve] ready on http://" << config.server.host << ":" << http.port() << " (model '"
      << config.server.model_name << "', max_model_len " << ctx.max_model_len << ", capacity "
      << ctx.capacity << ", " << describeKvAndRanks((*engine)->backend()) << ", startup " << startup
      << " s)" << std::endl;
  http.run();
  log << "[ingot serve] stopped" << std::endl;
  return okStatus();
}

}  // namespace ingot::server
