// Parsing and validating OpenAI /v1/completions and /v1/chat/completions request bodies.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "runtime/generate/sampler.h"
#include "runtime/server/api_error.h"
#include "runtime/tokenizer/chat_template.h"

namespace ingot::server {

enum class RequestKind { kCompletion, kChat };

/// One generation request, as the server understands it after validation.
struct GenerateRequest {
  RequestKind kind = RequestKind::kCompletion;
  std::string model;
  /// Completions: the prompt text, or `prompt_ids` when the prompt was given as token ids.
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
  /// Chat: the conversation.
  std::vector<ChatMessage> messages;
  bool stream = false;
  /// With `stream`: send a final chunk carrying `usage` (stream_options.include_usage).
  bool stream_usage = false;
  /// Completions: prepend the prompt to the returned text.
  bool echo = false;
  int32_t n = 1;
  SamplingParams sampling;
};

/// Largest `n` a request may ask for.
constexpr int32_t kMaxChoices = 16;

/// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool isValidUtf8(const std::string& s);

/// Parses a request body for `kind`. Errors are 400s naming the field at fault (malformed
/// JSON, wrong types, out-of-range values, invalid UTF-8). `seed` is used when the request
/// gives none, so every unseeded request gets its own random stream.
/// The model name is not checked here (the caller knows which models it serves).
bool parseGenerateRequest(const std::string& body, RequestKind kind, uint64_t default_seed,
                          GenerateRequest* out, ApiError* error);

}  // namespace ingot::server
