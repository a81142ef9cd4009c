// Parsing and validating OpenAI /v1/completions and /v1/chat/completions request bodies.
#include "runtime/server/openai_request.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace ingot::server {
namespace {

using Json = nlohmann::json;

const char* typeName(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

ApiError wrongType(const std::string& field, const char* expected, const Json& got) {
  return badRequest("'" + field + "' must be " + expected + ", got " + typeName(got), field,
                    "invalid_type");
}

/// Reads the optional field `key`; absent or null leaves `out` untouched. These return false
/// with `error` set when the field has the wrong type.
bool getBool(const Json& obj, const char* key, bool* out, ApiError* error) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_boolean()) return (*error = wrongType(key, "a boolean", *it), false);
  *out = it->get<bool>();
  return true;
}

bool getFloat(const Json& obj, const char* key, float* out, ApiError* error) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_number()) return (*error = wrongType(key, "a number", *it), false);
  *out = static_cast<float>(it->get<double>());
  return true;
}

bool isInteger(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return true;
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15;
}

bool getInt64(const Json& obj, const char* key, int64_t lo, int64_t hi, int64_t* out,
              ApiError* error) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!isInteger(*it)) return (*error = wrongType(key, "an integer", *it), false);
  int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX)
                  ? INT64_MAX
                  : (it->is_number_float() ? int64_t(it->get<double>()) : it->get<int64_t>());
  if (v < lo || v > hi) {
    *error = badRequest("'" + std::string(key) + "' must be in [" + std::to_string(lo) + ", " +
                            std::to_string(hi) + "], got " + std::to_string(v),
                        key, "invalid_value");
    return false;
  }
  *out = v;
  return true;
}

bool getInt32(const Json& obj, const char* key, int32_t lo, int32_t hi, int32_t* out,
              ApiError* error) {
  int64_t v = *out;
  if (!getInt64(obj, key, lo, hi, &v, error)) return false;
  *out = static_cast<int32_t>(v);
  return true;
}

bool parseStop(const Json& obj, SamplingParams* p, ApiError* error) {
  auto it = obj.find("stop");
  if (it == obj.end() || it->is_null()) return true;
  if (it->is_string()) {
    p->stop.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const Json& s : *it) {
      if (!s.is_string()) return (*error = wrongType("stop", "a string or array of strings", s), false);
      p->stop.push_back(s.get<std::string>());
    }
  } else {
    return (*error = wrongType("stop", "a string or array of strings", *it), false);
  }
  for (const std::string& s : p->stop)
    if (s.empty()) return (*error = badRequest("'stop' must not contain an empty string", "stop"), false);
  return true;
}

bool parseTokenIds(const Json& v, const char* field, std::vector<int32_t>* out, ApiError* error) {
  for (const Json& t : v) {
    if (!isInteger(t)) return (*error = wrongType(field, "an array of integers", t), false);
    int64_t id = t.is_number_float() ? int64_t(t.get<double>()) : t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      return (*error = badRequest(std::string("'") + field + "' has an invalid token id " +
                                      std::to_string(id), field, "invalid_value"), false);
    out->push_back(static_cast<int32_t>(id));
  }
  return true;
}

/// Fields both endpoints share: model, stream, n, sampling, stop, seed, ignore_eos.
bool parseCommon(const Json& j, uint64_t default_seed, GenerateRequest* r, ApiError* error) {
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return (*error = wrongType("model", "a string", *it), false);
    r->model = it->get<std::string>();
  }
  SamplingParams& p = r->sampling;
  if (!getBool(j, "stream", &r->stream, error)) return false;
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return (*error = wrongType("stream_options", "an object", *it), false);
    if (!getBool(*it, "include_usage", &r->stream_usage, error)) return false;
  }
  if (!getInt32(j, "n", 1, kMaxChoices, &r->n, error)) return false;
  int32_t max_tokens = -1;
  if (!getInt32(j, "max_tokens", 1, std::numeric_limits<int32_t>::max(), &max_tokens, error))
    return false;
  if (r->kind == RequestKind::kChat &&
      !getInt32(j, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max(), &max_tokens,
                error))
    return false;
  if (max_tokens > 0) p.max_tokens = max_tokens;
  else if (r->kind == RequestKind::kCompletion) p.max_tokens = 16;  // OpenAI's default
  if (!getFloat(j, "temperature", &p.temperature, error)) return false;
  if (!getFloat(j, "top_p", &p.top_p, error)) return false;
  if (!getInt32(j, "top_k", -1, std::numeric_limits<int32_t>::max(), &p.top_k, error)) return false;
  if (!getFloat(j, "min_p", &p.min_p, error)) return false;
  if (!getFloat(j, "presence_penalty", &p.presence_penalty, error)) return false;
  if (!getFloat(j, "frequency_penalty", &p.frequency_penalty, error)) return false;
  if (!getFloat(j, "repetition_penalty", &p.repetition_penalty, error)) return false;
  if (!getBool(j, "ignore_eos", &p.ignore_eos, error)) return false;
  int64_t seed = -1;
  if (!getInt64(j, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                &seed, error))
    return false;
  p.seed = j.contains("seed") && !j["seed"].is_null() ? static_cast<uint64_t>(seed) : default_seed;
  if (!parseStop(j, &p, error)) return false;
  if (auto it = j.find("stop_token_ids"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return (*error = wrongType("stop_token_ids", "an array of integers", *it), false);
    if (!parseTokenIds(*it, "stop_token_ids", &p.stop_token_ids, error)) return false;
  }
  return true;
}

bool parseCompletion(const Json& j, GenerateRequest* r, ApiError* error) {
  auto it = j.find("prompt");
  if (it == j.end() || it->is_null())
    return (*error = badRequest("'prompt' is required", "prompt", "missing_required_parameter"), false);
  const Json* prompt = &*it;
  // A one-element batch is the same as its element.
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array()))
    prompt = &(*prompt)[0];
  if (prompt->is_string()) {
    r->prompt = prompt->get<std::string>();
  } else if (prompt->is_array() && !prompt->empty() && !(*prompt)[0].is_string()) {
    r->prompt_is_ids = true;
    if (!parseTokenIds(*prompt, "prompt", &r->prompt_ids, error)) return false;
  } else if (prompt->is_array() && !prompt->empty()) {
    return (*error = badRequest("batched prompts are not supported; send one prompt per request",
                                "prompt", "invalid_value"), false);
  } else {
    return (*error = wrongType("prompt", "a string or an array of token ids", *prompt), false);
  }
  if (!r->prompt_is_ids && r->prompt.empty())
    return (*error = badRequest("'prompt' must not be empty", "prompt", "invalid_value"), false);
  if (r->prompt_is_ids && r->prompt_ids.empty())
    return (*error = badRequest("'prompt' must not be empty", "prompt", "invalid_value"), false);
  if (!getBool(j, "echo", &r->echo, error)) return false;
  int32_t logprobs = -1;
  if (!getInt32(j, "logprobs", 0, kMaxTopLogprobs, &logprobs, error)) return false;
  if (logprobs >= 0) {
    r->sampling.logprobs = true;
    r->sampling.top_logprobs = logprobs;
  }
  return true;
}

bool parseChat(const Json& j, GenerateRequest* r, ApiError* error) {
  auto it = j.find("messages");
  if (it == j.end() || it->is_null())
    return (*error = badRequest("'messages' is required", "messages", "missing_required_parameter"), false);
  if (!it->is_array()) return (*error = wrongType("messages", "an array", *it), false);
  if (it->empty()) return (*error = badRequest("'messages' must not be empty", "messages", "invalid_value"), false);
  for (const Json& m : *it) {
    if (!m.is_object()) return (*error = wrongType("messages", "an array of objects", m), false);
    ChatMessage msg;
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return (*error = badRequest("each message needs a string 'role'", "messages", "invalid_type"), false);
    msg.role = role->get<std::string>();
    auto content = m.find("content");
    if (content != m.end() && content->is_string()) {
      msg.content = content->get<std::string>();
    } else if (content != m.end() && content->is_array()) {
      for (const Json& part : *content) {
        auto text = part.is_object() ? part.find("text") : part.end();
        if (!part.is_object() || part.value("type", std::string()) != "text" ||
            text == part.end() || !text->is_string())
          return (*error = badRequest("only text content parts are supported", "messages",
                                      "invalid_value"), false);
        msg.content += text->get<std::string>();
      }
    } else if (content != m.end() && !content->is_null()) {
      return (*error = wrongType("messages.content", "a string or an array of parts", *content), false);
    }
    r->messages.push_back(std::move(msg));
  }
  if (!getBool(j, "logprobs", &r->sampling.logprobs, error)) return false;
  if (!getInt32(j, "top_logprobs", 0, kMaxTopLogprobs, &r->sampling.top_logprobs, error)) return false;
  if (r->sampling.top_logprobs > 0 && !r->sampling.logprobs)
    return (*error = badRequest("'top_logprobs' needs 'logprobs' to be true", "top_logprobs",
                                "invalid_value"), false);
  return true;
}

}  // namespace

bool isValidUtf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) { ++i; continue; }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

bool parseGenerateRequest(const std::string& body, RequestKind kind, uint64_t default_seed,
                          GenerateRequest* out, ApiError* error) {
  if (!isValidUtf8(body)) {
    *error = badRequest("the request body is not valid UTF-8", "", "invalid_utf8");
    return false;
  }
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *error = badRequest("the request body is not valid JSON", "", "invalid_json");
    return false;
  }
  if (!j.is_object()) {
    *error = badRequest("the request body must be a JSON object", "", "invalid_json");
    return false;
  }
  *out = GenerateRequest();
  out->kind = kind;
  if (!parseCommon(j, default_seed, out, error)) return false;
  if (kind == RequestKind::kCompletion ? !parseCompletion(j, out, error) : !parseChat(j, out, error))
    return false;
  if (Status s = out->sampling.validate(); !s.ok()) {
    std::string msg = s.message();
    *error = badRequest(msg, msg.substr(0, msg.find(' ')), "invalid_value");
    return false;
  }
  return true;
}

}  // namespace ingot::server
