// TokenizerData from the manifest's TokenizerDef and from the compact text dump.
#include "runtime/tokenizer/tokenizer_data.h"

#include <cstdlib>
#include <string_view>

#include "schemas/artifact_generated.h"

namespace ingot {
namespace {

StatusOr<TokenType> tokenTypeFromAttr(schema::TokenAttr attr) {
  switch (attr) {
    case schema::TokenAttr::Normal: return TokenType::kNormal;
    case schema::TokenAttr::Control: return TokenType::kControl;
    case schema::TokenAttr::UserDefined: return TokenType::kUserDefined;
    case schema::TokenAttr::Byte: return TokenType::kByte;
    case schema::TokenAttr::Unknown: return TokenType::kUnknown;
  }
  return invalidArgument("tokenizer: unknown token attribute " +
                         std::to_string(static_cast<int>(attr)));
}

int32_t idOrNone(int64_t id) {
  return id < 0 || id > INT32_MAX ? -1 : static_cast<int32_t>(id);
}

std::string unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    out += c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : c;
  }
  return out;
}

/// Splits text into lines without their '\n'.
std::vector<std::string_view> splitLines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.emplace_back(text.data() + start, end - start);
    start = end + 1;
  }
  return lines;
}

bool parseCount(std::string_view s, size_t* out) {
  if (s.empty() || s.size() > 9) return false;
  size_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<size_t>(c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

StatusOr<TokenizerData> tokenizerDataFromManifest(const schema::TokenizerDef* def) {
  if (def == nullptr)
    return notFound(
        "the artifact has no tokenizer (compiled from a model config or an IR module alone); "
        "use ingot bench, which runs it on random token prompts");
  TokenizerData data;
  switch (def->kind()) {
    case schema::TokenizerKind::ByteLevelBpe: data.kind = TokenizerKind::kByteLevelBpe; break;
    case schema::TokenizerKind::SentencePieceBpe:
      data.kind = TokenizerKind::kSentencePieceBpe;
      break;
    default:
      return invalidArgument("tokenizer: unsupported tokenizer kind " +
                             std::to_string(static_cast<int>(def->kind())));
  }
  if (def->pre_tokenizer()) data.preTokenizer = def->pre_tokenizer()->str();
  if (def->tokens()) {
    data.tokens.reserve(def->tokens()->size());
    for (const auto* t : *def->tokens()) data.tokens.push_back(t ? t->str() : std::string());
  }
  const size_t n = data.tokens.size();
  if (def->scores() && def->scores()->size() > 0) {
    if (def->scores()->size() != n) {
      return invalidArgument("tokenizer: " + std::to_string(def->scores()->size()) +
                             " scores for " + std::to_string(n) + " tokens");
    }
    data.scores.assign(def->scores()->begin(), def->scores()->end());
  }
  if (def->token_attrs() && def->token_attrs()->size() > 0) {
    if (def->token_attrs()->size() != n) {
      return invalidArgument("tokenizer: " + std::to_string(def->token_attrs()->size()) +
                             " token attributes for " + std::to_string(n) + " tokens");
    }
    data.tokenTypes.reserve(n);
    for (auto attr : *def->token_attrs()) {
      INGOT_ASSIGN_OR_RETURN(TokenType type, tokenTypeFromAttr(static_cast<schema::TokenAttr>(attr)));
      data.tokenTypes.push_back(type);
    }
  }
  if (def->merges()) {
    data.merges.reserve(def->merges()->size());
    for (const auto* m : *def->merges()) data.merges.push_back(m ? m->str() : std::string());
  }
  data.bosId = idOrNone(def->bos_token_id());
  data.eosId = idOrNone(def->eos_token_id());
  data.padId = idOrNone(def->pad_token_id());
  data.unkId = idOrNone(def->unk_token_id());
  data.addBos = def->add_bos();
  data.addEos = def->add_eos();
  data.addSpacePrefix = def->add_space_prefix();
  if (def->chat_template()) data.chatTemplate = def->chat_template()->str();
  return data;
}

StatusOr<TokenizerData> tokenizerDataFromText(const std::string& text) {
  std::vector<std::string_view> lines = splitLines(text);
  auto fail = [](size_t line, const std::string& what) {
    return invalidArgument("tokenizer text line " + std::to_string(line + 1) + ": " + what);
  };
  if (lines.empty() || lines[0] != "ingot-tokenizer-text 1") {
    return invalidArgument("tokenizer text: missing 'ingot-tokenizer-text 1' header");
  }
  TokenizerData data;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.find(' ');
    std::string_view key = line.substr(0, sp);
    std::string_view value = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    size_t count = 0;
    if (key == "tokens" || key == "merges" || key == "scores") {
      if (!parseCount(value, &count)) return fail(i, "bad count");
      if (count > lines.size() - 1 - i) return fail(i, "truncated list");
      for (size_t k = 0; k < count; ++k) {
        std::string_view item = lines[i + 1 + k];
        if (key == "tokens") {
          if (item.size() < 2 || item[0] < '0' || item[0] > '4' || item[1] != ' ') {
            return fail(i + 1 + k, "expected '<type 0-4> <token>'");
          }
          data.tokenTypes.push_back(static_cast<TokenType>(item[0] - '0'));
          data.tokens.push_back(unescape(item.substr(2)));
        } else if (key == "merges") {
          data.merges.push_back(unescape(item));
        } else {
          data.scores.push_back(std::strtof(std::string(item).c_str(), nullptr));
        }
      }
      i += count;
    } else if (key == "kind") {
      if (value == "gpt2") data.kind = TokenizerKind::kByteLevelBpe;
      else if (value == "llama") data.kind = TokenizerKind::kSentencePieceBpe;
      else return fail(i, "unknown kind '" + std::string(value) + "'");
    } else if (key == "pre") {
      data.preTokenizer = std::string(value);
    } else if (key == "chat_template") {
      data.chatTemplate = unescape(value);
    } else if (key == "bos" || key == "eos" || key == "pad" || key == "unk") {
      int32_t id = static_cast<int32_t>(std::strtol(std::string(value).c_str(), nullptr, 10));
      (key == "bos" ? data.bosId : key == "eos" ? data.eosId : key == "pad" ? data.padId
                                                                              : data.unkId) = id;
    } else if (key == "add_bos" || key == "add_eos" || key == "add_space_prefix") {
      bool v = value == "1";
      (key == "add_bos" ? data.addBos : key == "add_eos" ? data.addEos : data.addSpacePrefix) = v;
    } else {
      return fail(i, "unknown key '" + std::string(key) + "'");
    }
  }
  return data;
}

}  // namespace ingot
