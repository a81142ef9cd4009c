// serveModel: wires an artifact, its tokenizer, the engine and the HTTP front end together.
#pragma once

#include <chrono>
#include <ostream>

#include "core/artifact/artifact_reader.h"
#include "core/base/status.h"
#include "runtime/engine/engine.h"
#include "runtime/server/http_server.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ingot::server {

struct ServeConfig {
  ServerOptions server;
  EngineOptions engine;
};

/// Builds the engine for `artifact`, listens, prints one line
/// "[ingot serve] ready on http://HOST:PORT ..." to `log` (with the startup time since
/// `started`), and serves until SIGTERM/SIGINT has been handled and running requests have
/// drained. Errors before serving (engine creation, binding) are returned.
Status serveModel(const Artifact& artifact, const Tokenizer& tokenizer, ServeConfig config,
                  std::chrono::steady_clock::time_point started, std::ostream& log);

}  // namespace ingot::server
