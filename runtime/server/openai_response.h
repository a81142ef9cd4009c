// Formatting OpenAI responses: completion/chat objects, streaming chunks, SSE framing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/generate/logprobs.h"
#include "runtime/server/openai_request.h"

namespace ingot::server {

/// What one choice adds in a chunk, or carries in total in a full response.
struct ChoiceDelta {
  int32_t index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  /// One entry per token when logprobs were asked for.
  std::vector<SampleLogprobs> logprobs;
  /// "stop", "length", "abort", or empty while the choice runs (serialized as null).
  std::string finish_reason;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

/// Identity shared by every object of one response.
struct ResponseHeader {
  RequestKind kind = RequestKind::kCompletion;
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

/// The text of one token (for logprobs' token fields).
using TokenPiece = std::function<std::string(int32_t)>;

/// A non-streaming response: "text_completion" or "chat.completion".
std::string formatResponse(const ResponseHeader& header, const std::vector<ChoiceDelta>& choices,
                           const Usage& usage, bool with_logprobs, const TokenPiece& piece);

/// One streaming chunk ("text_completion" or "chat.completion.chunk"). For chat, `first`
/// adds the assistant role to the delta.
std::string formatChunk(const ResponseHeader& header, const std::vector<ChoiceDelta>& choices,
                        bool first, bool with_logprobs, const TokenPiece& piece);

/// The final usage-only chunk of a stream with include_usage.
std::string formatUsageChunk(const ResponseHeader& header, const Usage& usage);

/// One server-sent event carrying `data`.
inline std::string sseEvent(const std::string& data) { return "data: " + data + "\n\n"; }
/// The event that ends every stream.
inline const char* sseDone() { return "data: [DONE]\n\n"; }

/// GET /v1/models for one model.
std::string formatModels(const std::string& model, int64_t created, int64_t max_model_len);

}  // namespace ingot::server
