// ingot_test_server: `ingot serve` over a tiny random Llama with SmolLM2's tokenizer, for tests.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "core/artifact/artifact_reader.h"
#include "testing/llama_program.h"
#include "runtime/server/serve.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

int fail(const std::string& message) {
  std::cerr << "ingot_test_server: error: " << message << "\n";
  return 1;
}

}  // namespace

/// Usage: ingot_test_server TOKENIZER_TXT [--port P] [--max-running N] [--max-queue N]
///        [--kv-blocks N] [--max-context N] [--max-prefill-while-decoding N]
int main(int argc, char** argv) {
  using namespace ingot;
  auto started = std::chrono::steady_clock::now();
  if (argc < 2) return fail("usage: ingot_test_server TOKENIZER_TXT [options]");
  server::ServeConfig config;
  config.server.port = 0;
  config.server.model_name = "tiny";
  config.engine.num_threads = 1;
  config.engine.scheduler.max_batched_tokens = 256;
  int64_t max_context = 1024;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    long long v = std::atoll(argv[i + 1]);
    if (flag == "--port") config.server.port = static_cast<uint16_t>(v);
    else if (flag == "--max-running") config.engine.scheduler.max_running = static_cast<int32_t>(v);
    else if (flag == "--max-queue") config.server.max_queue = static_cast<int32_t>(v);
    else if (flag == "--kv-blocks") config.engine.num_kv_blocks = v;
    else if (flag == "--max-context") max_context = v;
    else if (flag == "--max-prefill-while-decoding")
      config.engine.scheduler.max_prefill_while_decoding = static_cast<int32_t>(v);
    else return fail("unknown flag " + flag);
  }
  std::ifstream in(argv[1]);
  if (!in) return fail(std::string("cannot read ") + argv[1]);
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<TokenizerData> data = tokenizerDataFromText(text.str());
  if (!data.ok()) return fail(data.status().message());
  int64_t vocab = static_cast<int64_t>(data->tokens.size());
  StatusOr<Tokenizer> tokenizer = Tokenizer::create(std::move(data).value());
  if (!tokenizer.ok()) return fail(tokenizer.status().message());

  testing::LlamaProgramOptions o;
  o.vocab = vocab;
  o.max_context = max_context;
  o.seed = 11;
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
  if (!bytes.ok()) return fail(bytes.status().message());
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*bytes);
  if (!artifact.ok()) return fail(artifact.status().message());
  Status served = server::serveModel(*artifact, *tokenizer, config, started, std::cerr);
  if (!served.ok()) return fail(served.message());
  return 0;
}
