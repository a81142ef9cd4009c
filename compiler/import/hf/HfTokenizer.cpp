//===- HfTokenizer.cpp - tokenizer.json + tokenizer_config.json to a Tokenizer ===//
#include "compiler/import/hf/HfTokenizer.h"

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ingot::importer::hf {
namespace {

using nlohmann::json;

// Split regexes of the known byte-level families, as their tokenizer.json files spell them.
constexpr const char *kLlama3Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char *kQwen2Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
/// SentencePiece's word-boundary marker U+2581.
constexpr const char *kSpaceMarker = "\xe2\x96\x81";

std::string compact(const json &j) {
  std::string s = j.dump();
  return s.size() > 300 ? s.substr(0, 300) + "..." : s;
}

bool boolField(const json &j, const char *key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string stringField(const json &j, const char *key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

/// The pre-tokenizer list: a Sequence's members, or the one pre-tokenizer.
std::vector<json> preTokenizerSteps(const json &pre) {
  if (pre.is_object() && stringField(pre, "type") == "Sequence") {
    auto it = pre.find("pretokenizers");
    if (it != pre.end() && it->is_array())
      return std::vector<json>(it->begin(), it->end());
  }
  if (pre.is_null())
    return {};
  return {pre};
}

/// The family name runtime/tokenizer knows for a byte-level pre-tokenizer, or "".
std::string byteLevelFamily(const std::vector<json> &steps) {
  auto isType = [](const json &j, const char *type) { return stringField(j, "type") == type; };
  auto splitRegex = [](const json &j) {
    auto pattern = j.find("pattern");
    return pattern != j.end() && pattern->is_object() ? stringField(*pattern, "Regex") : "";
  };
  if (steps.size() == 1 && isType(steps[0], "ByteLevel") && boolField(steps[0], "use_regex", true))
    return "gpt2";
  if (steps.size() == 2 && isType(steps[0], "Digits") &&
      boolField(steps[0], "individual_digits", false) && isType(steps[1], "ByteLevel") &&
      boolField(steps[1], "use_regex", true))
    return "smollm";
  if (steps.size() == 2 && isType(steps[0], "Split") && isType(steps[1], "ByteLevel") &&
      !boolField(steps[1], "use_regex", true)) {
    std::string regex = splitRegex(steps[0]);
    if (regex == kLlama3Regex)
      return "llama3";
    if (regex == kQwen2Regex)
      return "qwen2";
  }
  return "";
}

bool mentionsType(const json &j, const char *type) {
  if (j.is_object()) {
    if (stringField(j, "type") == type)
      return true;
    for (const auto &item : j.items())
      if (mentionsType(item.value(), type))
        return true;
  } else if (j.is_array()) {
    for (const json &item : j)
      if (mentionsType(item, type))
        return true;
  }
  return false;
}

/// SentencePiece-style text prefixing: Metaspace prepend_scheme / add_prefix_space, or a
/// normalizer that prepends the space marker.
bool spacePrefix(const json &root) {
  for (const json &step : preTokenizerSteps(root.value("pre_tokenizer", json())))
    if (stringField(step, "type") == "Metaspace") {
      std::string scheme = stringField(step, "prepend_scheme");
      if (!scheme.empty())
        return scheme != "never";
      return boolField(step, "add_prefix_space", true);
    }
  std::string normalizer = root.value("normalizer", json()).dump();
  return normalizer.find("\"Prepend\"") != std::string::npos &&
         normalizer.find(kSpaceMarker) != std::string::npos;
}

/// Token id of the special token in a TemplateProcessing list item, or -1.
int64_t templateSpecialId(const json &item, const json &specials) {
  auto special = item.find("SpecialToken");
  if (special == item.end() || !special->is_object())
    return -1;
  std::string id = stringField(*special, "id");
  auto entry = specials.find(id);
  if (entry == specials.end() || !entry->is_object())
    return -1;
  auto ids = entry->find("ids");
  if (ids == entry->end() || !ids->is_array() || ids->size() != 1 || !(*ids)[0].is_number_integer())
    return -1;
  return (*ids)[0].get<int64_t>();
}

/// add_bos / add_eos from a TemplateProcessing post-processor (also inside a Sequence).
void applyPostProcessor(const json &post, Tokenizer &out) {
  if (!post.is_object())
    return;
  if (stringField(post, "type") == "Sequence") {
    auto it = post.find("processors");
    if (it != post.end() && it->is_array())
      for (const json &p : *it)
        applyPostProcessor(p, out);
    return;
  }
  if (stringField(post, "type") != "TemplateProcessing")
    return;
  auto single = post.find("single");
  json specials = post.value("special_tokens", json::object());
  if (single == post.end() || !single->is_array() || single->empty())
    return;
  if (int64_t id = templateSpecialId(single->front(), specials); id >= 0) {
    out.addBos = true;
    out.bosTokenId = id;
  }
  if (single->size() > 1)
    if (int64_t id = templateSpecialId(single->back(), specials); id >= 0) {
      out.addEos = true;
      out.eosTokenId = id;
    }
}

Status readText(const std::string &path, std::string &text, bool &found) {
  std::ifstream in(path, std::ios::binary);
  found = static_cast<bool>(in);
  if (!found)
    return okStatus();
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad())
    return ioError(path + ": read error");
  text = buffer.str();
  return okStatus();
}

/// A token string from tokenizer_config.json: "text" or {"content": "text", ...}.
std::string tokenString(const json &j) {
  if (j.is_string())
    return j.get<std::string>();
  if (j.is_object())
    return stringField(j, "content");
  return "";
}

} // namespace

static Status parseTokenizerJsonUnchecked(const std::string &text, const std::string &where,
                                          Tokenizer &out) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object())
    return invalidArgument(where + ": not a JSON object");
  auto model = root.find("model");
  if (model == root.end() || !model->is_object())
    return invalidArgument(where + ": no 'model' object");
  std::string type = stringField(*model, "type");
  if (type != "BPE")
    return invalidArgument(where + ": tokenizer model '" + type +
                           "' is not supported (BPE is: byte-level or SentencePiece-style)");

  // Vocabulary: model.vocab plus added_tokens, indexed by id; gaps become "[PAD<id>]".
  auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object())
    return invalidArgument(where + ": model has no 'vocab' object");
  std::map<int64_t, std::string> byId;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0)
      return invalidArgument(where + ": vocab entry '" + it.key() + "' has no valid id");
    byId[it.value().get<int64_t>()] = it.key();
  }
  std::map<int64_t, bool> added; // id -> special
  if (auto list = root.find("added_tokens"); list != root.end() && list->is_array())
    for (const json &token : *list) {
      auto id = token.find("id");
      if (id == token.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
          stringField(token, "content").empty())
        return invalidArgument(where + ": malformed added token " + compact(token));
      byId[id->get<int64_t>()] = stringField(token, "content");
      added[id->get<int64_t>()] = boolField(token, "special", false);
    }
  if (byId.empty())
    return invalidArgument(where + ": empty vocabulary");
  constexpr int64_t kMaxVocab = int64_t(1) << 24;
  int64_t size = byId.rbegin()->first + 1;
  if (size > kMaxVocab)
    return invalidArgument(where + ": token id " + std::to_string(size - 1) + " is too large");
  out.tokens.assign(size, "");
  out.tokenAttrs.assign(size, schema::TokenAttr::Normal);
  for (int64_t i = 0; i < size; ++i) {
    auto it = byId.find(i);
    out.tokens[i] = it == byId.end() ? "[PAD" + std::to_string(i) + "]" : it->second;
  }
  for (auto [id, special] : added)
    out.tokenAttrs[id] = special ? schema::TokenAttr::Control : schema::TokenAttr::UserDefined;

  out.merges.clear();
  if (auto merges = model->find("merges"); merges != model->end()) {
    if (!merges->is_array())
      return invalidArgument(where + ": 'merges' is not an array");
    out.merges.reserve(merges->size());
    for (const json &m : *merges) {
      if (m.is_string())
        out.merges.push_back(m.get<std::string>());
      else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
        out.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      else
        return invalidArgument(where + ": merge " + compact(m) +
                               " is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }

  json pre = root.value("pre_tokenizer", json());
  std::vector<json> steps = preTokenizerSteps(pre);
  bool byteLevel = mentionsType(pre, "ByteLevel");
  bool sentencePiece =
      boolField(*model, "byte_fallback", false) || mentionsType(pre, "Metaspace") ||
      (pre.is_null() &&
       root.value("normalizer", json()).dump().find(kSpaceMarker) != std::string::npos);
  if (byteLevel) {
    out.kind = schema::TokenizerKind::ByteLevelBpe;
    out.preTokenizer = byteLevelFamily(steps);
    if (out.preTokenizer.empty())
      return invalidArgument(where + ": byte-level pre-tokenizer " + compact(pre) +
                             " is not one of the known families (gpt2, smollm, llama3, qwen2)");
  } else if (sentencePiece) {
    out.kind = schema::TokenizerKind::SentencePieceBpe;
    out.preTokenizer = "default";
    out.addSpacePrefix = spacePrefix(root);
    // Merge priority as scores: the token a merge of rank r produces scores -r, so the
    // highest score is the earliest merge; other tokens rank after every merge.
    int64_t numMerges = static_cast<int64_t>(out.merges.size());
    out.scores.assign(size, 0.0f);
    for (int64_t i = 0; i < size; ++i)
      out.scores[i] = -static_cast<float>(numMerges + i);
    std::map<std::string, int64_t> idOf;
    for (int64_t i = 0; i < size; ++i)
      idOf.emplace(out.tokens[i], i);
    for (int64_t r = numMerges - 1; r >= 0; --r) {
      std::string merged = out.merges[r];
      size_t space = merged.find(' ');
      if (space != std::string::npos)
        merged.erase(space, 1);
      if (auto it = idOf.find(merged); it != idOf.end())
        out.scores[it->second] = -static_cast<float>(r);
    }
    for (int64_t i = 0; i < size; ++i) {
      const std::string &t = out.tokens[i];
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t.back() == '>' &&
          out.tokenAttrs[i] == schema::TokenAttr::Normal)
        out.tokenAttrs[i] = schema::TokenAttr::Byte;
    }
    std::string unk = stringField(*model, "unk_token");
    if (auto it = idOf.find(unk); !unk.empty() && it != idOf.end()) {
      out.unkTokenId = it->second;
      out.tokenAttrs[it->second] = schema::TokenAttr::Unknown;
    }
  } else {
    return invalidArgument(where + ": BPE tokenizer with pre-tokenizer " + compact(pre) +
                           " is neither byte-level nor SentencePiece-style");
  }
  applyPostProcessor(root.value("post_processor", json()), out);
  return okStatus();
}

static Status applyTokenizerConfigUnchecked(const std::string &text, const std::string &where,
                                            Tokenizer &out) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object())
    return invalidArgument(where + ": not a JSON object");
  if (auto tmpl = root.find("chat_template"); tmpl != root.end()) {
    if (tmpl->is_string()) {
      out.chatTemplate = tmpl->get<std::string>();
    } else if (tmpl->is_array()) { // [{"name": ..., "template": ...}]: take "default"
      for (const json &t : *tmpl)
        if (t.is_object() && (out.chatTemplate.empty() || stringField(t, "name") == "default"))
          out.chatTemplate = stringField(t, "template");
    }
  }
  out.addBos = boolField(root, "add_bos_token", out.addBos);
  out.addEos = boolField(root, "add_eos_token", out.addEos);
  std::map<std::string, int64_t> idOf;
  for (size_t i = 0; i < out.tokens.size(); ++i)
    idOf.emplace(out.tokens[i], static_cast<int64_t>(i));
  auto lookup = [&](const char *key, int64_t &id) -> Status {
    auto field = root.find(key);
    if (field == root.end() || field->is_null())
      return okStatus();
    std::string token = tokenString(*field);
    auto it = idOf.find(token);
    if (it == idOf.end())
      return invalidArgument(where + ": " + key + " '" + token + "' is not in the vocabulary");
    id = it->second;
    return okStatus();
  };
  INGOT_RETURN_IF_ERROR(lookup("bos_token", out.bosTokenId));
  INGOT_RETURN_IF_ERROR(lookup("eos_token", out.eosTokenId));
  INGOT_RETURN_IF_ERROR(lookup("pad_token", out.padTokenId));
  INGOT_RETURN_IF_ERROR(lookup("unk_token", out.unkTokenId));
  return okStatus();
}

Status readHfTokenizer(const std::string &dir, Tokenizer &out, bool &found) {
  std::string text;
  INGOT_RETURN_IF_ERROR(readText(dir + "/tokenizer.json", text, found));
  if (!found)
    return okStatus();
  INGOT_RETURN_IF_ERROR(parseTokenizerJson(text, dir + "/tokenizer.json", out));
  bool present = false;
  INGOT_RETURN_IF_ERROR(readText(dir + "/tokenizer_config.json", text, present));
  if (present)
    INGOT_RETURN_IF_ERROR(applyTokenizerConfig(text, dir + "/tokenizer_config.json", out));
  // transformers >= 4.43 may keep the template in its own file.
  INGOT_RETURN_IF_ERROR(readText(dir + "/chat_template.jinja", text, present));
  if (present && out.chatTemplate.empty())
    out.chatTemplate = text;
  return okStatus();
}

Status parseTokenizerJson(const std::string &text, const std::string &where, Tokenizer &out) {
  // nlohmann::json throws on a value of an unexpected type: report it as a bad file.
  try {
    return parseTokenizerJsonUnchecked(text, where, out);
  } catch (const nlohmann::json::exception &e) {
    return invalidArgument(where + ": " + e.what());
  }
}

Status applyTokenizerConfig(const std::string &text, const std::string &where, Tokenizer &out) {
  // nlohmann::json throws on a value of an unexpected type: report it as a bad file.
  try {
    return applyTokenizerConfigUnchecked(text, where, out);
  } catch (const nlohmann::json::exception &e) {
    return invalidArgument(where + ": " + e.what());
  }
}

} // namespace ingot::importer::hf
