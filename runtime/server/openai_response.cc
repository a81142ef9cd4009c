// Formatting OpenAI responses: completion/chat objects, streaming chunks, SSE framing.
#include "runtime/server/openai_response.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace ingot::server {
namespace {

using Json = nlohmann::json;

std::string dump(const Json& j) {
  // Token pieces may hold part of a UTF-8 character: replace rather than throw.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

/// JSON has no -inf: report the most negative float instead (as vLLM does).
double finiteLogprob(float lp) { return std::isfinite(lp) ? lp : -9999.0; }

Json bytesOf(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

/// Completions logprobs: {tokens, token_logprobs, top_logprobs, text_offset}.
Json completionLogprobs(const ChoiceDelta& c, const TokenPiece& piece, int64_t text_offset) {
  Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
  for (const SampleLogprobs& s : c.logprobs) {
    std::string t = piece(s.chosen.token);
    tokens.push_back(t);
    lps.push_back(finiteLogprob(s.chosen.logprob));
    Json top = Json::object();
    for (const TokenLogprob& alt : s.top) top[piece(alt.token)] = finiteLogprob(alt.logprob);
    tops.push_back(s.top.empty() ? Json(nullptr) : top);
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(t.size());
  }
  return Json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops},
              {"text_offset", offsets}};
}

/// Chat logprobs: {content: [{token, logprob, bytes, top_logprobs: [...]}]}.
Json chatLogprobs(const ChoiceDelta& c, const TokenPiece& piece) {
  Json content = Json::array();
  for (const SampleLogprobs& s : c.logprobs) {
    std::string t = piece(s.chosen.token);
    Json top = Json::array();
    for (const TokenLogprob& alt : s.top) {
      std::string a = piece(alt.token);
      top.push_back({{"token", a}, {"logprob", finiteLogprob(alt.logprob)}, {"bytes", bytesOf(a)}});
    }
    content.push_back({{"token", t}, {"logprob", finiteLogprob(s.chosen.logprob)},
                       {"bytes", bytesOf(t)}, {"top_logprobs", top}});
  }
  return Json{{"content", content}};
}

Json finishReason(const ChoiceDelta& c) {
  return c.finish_reason.empty() ? Json(nullptr) : Json(c.finish_reason);
}

Json usageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens}, {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

Json envelope(const ResponseHeader& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

}  // namespace

std::string ApiError::toJson() const {
  Json e = {{"message", message}, {"type", type},
            {"param", param.empty() ? Json(nullptr) : Json(param)},
            {"code", code.empty() ? Json(nullptr) : Json(code)}};
  return dump(Json{{"error", e}});
}

std::string formatResponse(const ResponseHeader& h, const std::vector<ChoiceDelta>& choices,
                           const Usage& usage, bool with_logprobs, const TokenPiece& piece) {
  bool chat = h.kind == RequestKind::kChat;
  Json j = envelope(h, chat ? "chat.completion" : "text_completion");
  Json list = Json::array();
  for (const ChoiceDelta& c : choices) {
    Json choice = {{"index", c.index}, {"finish_reason", finishReason(c)}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      choice["logprobs"] = with_logprobs ? chatLogprobs(c, piece) : Json(nullptr);
    } else {
      choice["text"] = c.text;
      choice["logprobs"] = with_logprobs ? completionLogprobs(c, piece, 0) : Json(nullptr);
    }
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  j["usage"] = usageJson(usage);
  return dump(j);
}

std::string formatChunk(const ResponseHeader& h, const std::vector<ChoiceDelta>& choices,
                        bool first, bool with_logprobs, const TokenPiece& piece) {
  bool chat = h.kind == RequestKind::kChat;
  Json j = envelope(h, chat ? "chat.completion.chunk" : "text_completion");
  Json list = Json::array();
  for (const ChoiceDelta& c : choices) {
    Json choice = {{"index", c.index}, {"finish_reason", finishReason(c)}};
    if (chat) {
      Json delta = Json::object();
      if (first) delta["role"] = "assistant";
      if (!c.text.empty() || c.finish_reason.empty()) delta["content"] = c.text;
      choice["delta"] = std::move(delta);
      choice["logprobs"] = with_logprobs && !c.logprobs.empty() ? chatLogprobs(c, piece) : Json(nullptr);
    } else {
      choice["text"] = c.text;
      choice["logprobs"] = with_logprobs && !c.logprobs.empty() ? completionLogprobs(c, piece, 0)
                                                               : Json(nullptr);
    }
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  return dump(j);
}

std::string formatUsageChunk(const ResponseHeader& h, const Usage& usage) {
  Json j = envelope(h, h.kind == RequestKind::kChat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = Json::array();
  j["usage"] = usageJson(usage);
  return dump(j);
}

std::string formatModels(const std::string& model, int64_t created, int64_t max_model_len) {
  Json m = {{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "ingot"},
            {"max_model_len", max_model_len}};
  return dump(Json{{"object", "list"}, {"data", Json::array({m})}});
}

}  // namespace ingot::server
