// `ingot run`: generate text from a prompt with one artifact on the CPU backend.
#include "runtime/cli/run_command.h"

#include <chrono>
#include <cstdio>

#include "runtime/artifact/artifact_reader.h"
#include "runtime/generate/sequence_runner.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/stream_decoder.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ingot {
namespace {

using Clock = std::chrono::steady_clock;

int fail(std::ostream& err, const Status& status) {
  err << "ingot run: error: " << status.message() << "\n";
  return 1;
}

/// The prompt's token ids: through the chat template when asked, specials parsed.
StatusOr<std::vector<int32_t>> promptTokens(const RunOptions& options,
                                            const Tokenizer& tokenizer) {
  std::string text = options.prompt;
  if (options.chat) {
    const std::string& source = tokenizer.data().chatTemplate;
    if (source.empty()) return invalidArgument("--chat: the artifact has no chat template");
    StatusOr<ChatTemplate> tmpl = ChatTemplate::parse(source);
    if (!tmpl.ok()) return tmpl.status().withPrefix("chat template");
    auto piece = [&](int32_t id) { return id >= 0 ? tokenizer.tokenPiece(id) : std::string(); };
    StatusOr<std::string> rendered =
        tmpl->render({{"user", options.prompt}}, /*addGenerationPrompt=*/true,
                     piece(tokenizer.bosId()), piece(tokenizer.eosId()));
    if (!rendered.ok()) return rendered.status().withPrefix("chat template");
    text = *rendered;
  }
  std::vector<int32_t> ids = tokenizer.encode(text, /*addSpecial=*/true, /*parseSpecial=*/true);
  if (ids.empty()) return invalidArgument("the prompt is empty");
  return ids;
}

}  // namespace

int runGenerate(const RunOptions& options, std::ostream& out, std::ostream& err) {
  Clock::time_point load_start = Clock::now();
  StatusOr<Artifact> artifact = Artifact::open(options.artifact);
  if (!artifact.ok()) return fail(err, artifact.status());
  StatusOr<TokenizerData> data = tokenizerDataFromManifest(artifact->manifest().tokenizer());
  if (!data.ok()) return fail(err, data.status().withPrefix(options.artifact));
  StatusOr<Tokenizer> tokenizer = Tokenizer::create(std::move(data).value());
  if (!tokenizer.ok()) return fail(err, tokenizer.status().withPrefix(options.artifact));
  SequenceRunnerOptions runner_options;
  runner_options.num_threads = options.num_threads;
  StatusOr<std::unique_ptr<SequenceRunner>> runner =
      SequenceRunner::create(*artifact, runner_options);
  if (!runner.ok()) return fail(err, runner.status());
  SequenceRunner& seq = **runner;
  double load_s = std::chrono::duration<double>(Clock::now() - load_start).count();

  StatusOr<std::vector<int32_t>> prompt = promptTokens(options, *tokenizer);
  if (!prompt.ok()) return fail(err, prompt.status());
  if (static_cast<int64_t>(prompt->size()) >= seq.maxTokens())
    return fail(err, invalidArgument("the prompt has " + std::to_string(prompt->size()) +
                                     " tokens; the limit is " +
                                     std::to_string(seq.maxTokens() - 1)));

  const schema::ModelConfigDef* config = artifact->manifest().config();
  std::vector<int64_t> eos;
  if (config->eos_token_ids()) eos.assign(config->eos_token_ids()->begin(), config->eos_token_ids()->end());
  if (tokenizer->eosId() >= 0) eos.push_back(tokenizer->eosId());
  auto isEos = [&](int32_t id) { return std::find(eos.begin(), eos.end(), id) != eos.end(); };

  std::vector<float> logits;
  Clock::time_point prefill_start = Clock::now();
  Status status = seq.append(*prompt, /*all_rows=*/false, &logits);
  if (!status.ok()) return fail(err, status);
  double prefill_s = std::chrono::duration<double>(Clock::now() - prefill_start).count();

  Sampler sampler(options.sampling);
  StreamDecoder decoder(*tokenizer, /*skipSpecial=*/true);
  int32_t generated = 0;
  Clock::time_point decode_start = Clock::now();
  const int64_t vocab = seq.vocabSize();
  while (generated < options.max_new_tokens) {
    int32_t next = sampler.sample(logits.data(), vocab);
    ++generated;
    if (!options.ignore_eos && isEos(next)) break;
    out << decoder.push(next) << std::flush;
    if (seq.length() + 1 > seq.maxTokens() || generated == options.max_new_tokens) break;
    status = seq.append({next}, /*all_rows=*/false, &logits);
    if (!status.ok()) return fail(err, status);
  }
  out << decoder.finish() << std::endl;
  double decode_s = std::chrono::duration<double>(Clock::now() - decode_start).count();

  char line[256];
  std::snprintf(line, sizeof(line),
                "[ingot run] load %.2f s | prompt %zu tokens, %.1f tok/s | generated %d "
                "tokens, %.1f tok/s | %d threads, %s\n",
                load_s, prompt->size(), prompt->size() / std::max(prefill_s, 1e-9), generated,
                generated / std::max(decode_s, 1e-9), seq.backend().numThreads(),
                simdLevelName(seq.backend().simdLevel()));
  err << line;
  return 0;
}

}  // namespace ingot
