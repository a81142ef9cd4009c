// `ingot run`: generate text from a prompt with one artifact on the CPU backend.
#include "runtime/cli/run_command.h"

#include <chrono>
#include <algorithm>
#include <cstdio>
#include <memory>

#include "core/artifact/artifact_reader.h"
#include "runtime/cli/tensor_parallel_flag.h"
#include "runtime/generate/sequence_runner.h"
#include "runtime/generate/stop_matcher.h"
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

/// Everything one artifact needs to generate: mapped file, tokenizer, runner.
struct Session {
  std::unique_ptr<Artifact> artifact;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<SequenceRunner> runner;
  std::unique_ptr<ChatTemplate> chat_template;  // parsed on first use
  std::vector<int64_t> eos;
  double load_s = 0;

  bool isEos(int32_t id) const { return std::find(eos.begin(), eos.end(), id) != eos.end(); }
};

StatusOr<Session> openSession(const RunOptions& options) {
  Clock::time_point start = Clock::now();
  Session session;
  StatusOr<Artifact> artifact = Artifact::open(options.artifact);
  if (!artifact.ok()) return artifact.status();
  session.artifact = std::make_unique<Artifact>(std::move(artifact).value());
  INGOT_RETURN_IF_ERROR(checkTensorParallelFlag(options.tp, *session.artifact, options.artifact));
  StatusOr<TokenizerData> data =
      tokenizerDataFromManifest(session.artifact->manifest().tokenizer());
  if (!data.ok()) return data.status().withPrefix(options.artifact);
  StatusOr<Tokenizer> tokenizer = Tokenizer::create(std::move(data).value());
  if (!tokenizer.ok()) return tokenizer.status().withPrefix(options.artifact);
  session.tokenizer = std::make_unique<Tokenizer>(std::move(tokenizer).value());
  SequenceRunnerOptions runner_options;
  runner_options.num_threads = options.num_threads;
  StatusOr<std::optional<KvDtype>> kv_dtype = parseKvDtypeFlag(options.kv_dtype);
  if (!kv_dtype.ok()) return kv_dtype.status();
  runner_options.kv_dtype = *kv_dtype;
  StatusOr<BackendFactory> factory = backendFactoryFor(options.device);
  if (!factory.ok()) return factory.status();
  runner_options.backend_factory = std::move(factory).value();
  StatusOr<std::unique_ptr<SequenceRunner>> runner =
      SequenceRunner::create(*session.artifact, runner_options);
  if (!runner.ok()) return runner.status();
  session.runner = std::move(runner).value();
  const schema::ModelConfigDef* config = session.artifact->manifest().config();
  if (config->eos_token_ids())
    session.eos.assign(config->eos_token_ids()->begin(), config->eos_token_ids()->end());
  if (session.tokenizer->eosId() >= 0) session.eos.push_back(session.tokenizer->eosId());
  session.load_s = std::chrono::duration<double>(Clock::now() - start).count();
  return session;
}

/// The conversation as prompt token ids through the artifact's chat template, parsed once
/// per session.
StatusOr<std::vector<int32_t>> chatPrompt(Session& session,
                                          const std::vector<ChatMessage>& messages) {
  if (!session.chat_template) {
    const std::string& source = session.tokenizer->data().chatTemplate;
    if (source.empty()) return invalidArgument("the artifact has no chat template");
    StatusOr<ChatTemplate> tmpl = ChatTemplate::parse(source);
    if (!tmpl.ok()) return tmpl.status().withPrefix("chat template");
    session.chat_template = std::make_unique<ChatTemplate>(std::move(tmpl).value());
  }
  return encodeChatPrompt(*session.chat_template, *session.tokenizer, messages);
}

struct GenerationStats {
  size_t prompt_tokens = 0;
  int32_t generated = 0;
  double prefill_s = 0, decode_s = 0;
};

/// Prefills `prompt` from an empty sequence and streams up to max_new_tokens to `out`;
/// `text` receives the generated text.
StatusOr<GenerationStats> generate(Session& session, const RunOptions& options,
                                   const std::vector<int32_t>& prompt, std::ostream& out,
                                   std::string* text) {
  SequenceRunner& seq = *session.runner;
  if (static_cast<int64_t>(prompt.size()) >= seq.maxTokens())
    return invalidArgument("the prompt has " + std::to_string(prompt.size()) +
                           " tokens; the limit is " + std::to_string(seq.maxTokens() - 1));
  GenerationStats stats;
  stats.prompt_tokens = prompt.size();
  seq.reset();
  std::vector<float> logits;
  Clock::time_point prefill_start = Clock::now();
  INGOT_RETURN_IF_ERROR(seq.append(prompt, /*all_rows=*/false, &logits));
  stats.prefill_s = std::chrono::duration<double>(Clock::now() - prefill_start).count();

  Sampler sampler(options.sampling);
  sampler.setPrompt(prompt);
  StreamDecoder decoder(*session.tokenizer, /*skipSpecial=*/true);
  StopMatcher stops(options.sampling.stop);
  Clock::time_point decode_start = Clock::now();
  const int64_t vocab = seq.vocabSize();
  while (stats.generated < options.max_new_tokens) {
    int32_t next = sampler.sample(logits.data(), vocab);
    ++stats.generated;
    if (finishAfterToken(options.sampling, next, stats.generated, session.isEos(next)) ==
        FinishReason::kStop)
      break;
    std::string piece = stops.push(decoder.push(next));
    out << piece << std::flush;
    if (text) *text += piece;
    if (stops.stopped()) break;
    if (seq.length() + 1 > seq.maxTokens() || stats.generated == options.max_new_tokens) break;
    INGOT_RETURN_IF_ERROR(seq.append({next}, /*all_rows=*/false, &logits));
  }
  std::string rest = stops.stopped() ? std::string() : stops.push(decoder.finish());
  rest += stops.finish();
  out << rest << std::endl;
  if (text) *text += rest;
  stats.decode_s = std::chrono::duration<double>(Clock::now() - decode_start).count();
  return stats;
}

void printStats(const Session& session, const GenerationStats& stats, std::ostream& err) {
  char line[320];
  std::snprintf(line, sizeof(line),
                "[ingot] load %.2f s | prompt %zu tokens, %.1f tok/s | generated %d tokens, "
                "%.1f tok/s | %d threads, %s | %s\n",
                session.load_s, stats.prompt_tokens,
                stats.prompt_tokens / std::max(stats.prefill_s, 1e-9), stats.generated,
                stats.generated / std::max(stats.decode_s, 1e-9),
                session.runner->backend().numThreads(),
                simdLevelName(session.runner->simdLevel()),
                describeKvAndRanks(session.runner->backend()).c_str());
  err << line;
}

}  // namespace

int runGenerate(const RunOptions& options, std::ostream& out, std::ostream& err) {
  if (Status valid = options.sampling.validate(); !valid.ok()) return fail(err, valid);
  StatusOr<Session> session = openSession(options);
  if (!session.ok()) return fail(err, session.status());
  std::vector<int32_t> prompt;
  if (options.chat) {
    StatusOr<std::vector<int32_t>> ids = chatPrompt(*session, {{"user", options.prompt}});
    if (!ids.ok()) return fail(err, ids.status().withPrefix("--chat"));
    prompt = std::move(ids).value();
  } else {
    prompt = session->tokenizer->encode(options.prompt, /*addSpecial=*/true, /*parseSpecial=*/true);
  }
  if (prompt.empty()) return fail(err, invalidArgument("the prompt is empty"));
  StatusOr<GenerationStats> stats = generate(*session, options, prompt, out, nullptr);
  if (!stats.ok()) return fail(err, stats.status());
  printStats(*session, *stats, err);
  return 0;
}

int runChat(const RunOptions& options, std::istream& in, std::ostream& out, std::ostream& err) {
  if (Status valid = options.sampling.validate(); !valid.ok()) return fail(err, valid);
  StatusOr<Session> session = openSession(options);
  if (!session.ok()) return fail(err, session.status());
  err << "[ingot] chatting with " << options.artifact
      << " on the CPU; one line per turn, /exit or end of input to stop\n";
  std::vector<ChatMessage> messages;
  std::string line = options.prompt;
  bool have_line = !line.empty();
  while (true) {
    if (!have_line) {
      out << "> " << std::flush;
      if (!std::getline(in, line)) {
        out << "\n";  // end of input: leave the terminal on a fresh line
        break;
      }
    }
    have_line = false;
    if (line == "/exit") break;
    if (line.empty()) continue;
    if (!options.prompt.empty() && messages.empty()) out << "> " << line << "\n";
    messages.push_back({"user", line});
    StatusOr<std::vector<int32_t>> prompt = chatPrompt(*session, messages);
    if (!prompt.ok()) return fail(err, prompt.status());
    std::string reply;
    StatusOr<GenerationStats> stats = generate(*session, options, *prompt, out, &reply);
    if (!stats.ok()) {
      // The conversation outgrew the context: say so and start over.
      err << "ingot chat: " << stats.status().message() << "; starting a new conversation\n";
      messages.clear();
      continue;
    }
    printStats(*session, *stats, err);
    messages.push_back({"assistant", reply});
  }
  return 0;
}

}  // namespace ingot
