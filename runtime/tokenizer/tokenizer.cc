// Tokenizer: special-token partition, then byte-level BPE or SentencePiece per text piece.
#include "runtime/tokenizer/tokenizer.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "runtime/tokenizer/bpe_model.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/sentencepiece_model.h"

namespace ingot {
namespace {

/// "▁" (U+2581), SentencePiece's space.
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

/// A run of the input: plain text to tokenize, or one matched special token.
struct Fragment {
  int32_t token;  // -1 for text
  size_t offset, size;
};

std::string replaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

/// Parses "<0xAB>" into its byte.
std::optional<uint8_t> byteTokenValue(const std::string& text) {
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  int hi = hex(text[3]), lo = hex(text[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

}  // namespace

struct Tokenizer::Impl {
  TokenizerData data;
  Vocab vocab;
  std::vector<std::string> pieces;      // decoded bytes of every token
  std::vector<int32_t> specialTokens;   // matched in text, longest text first
  std::optional<PreTokenizer> pre;      // byte-level BPE only
  std::optional<ByteLevelBpe> bpe;
  std::optional<SentencePieceBpe> spm;

  TokenType type(int32_t id) const {
    return data.tokenTypes.empty() ? TokenType::kNormal : data.tokenTypes[id];
  }
  std::vector<Fragment> partition(std::string_view text, bool parseSpecial) const;
};

StatusOr<Tokenizer> Tokenizer::create(TokenizerData data) {
  auto impl = std::make_shared<Impl>();
  const size_t n = data.tokens.size();
  if (n == 0) return invalidArgument("tokenizer: empty vocabulary");
  if (n > static_cast<size_t>(INT32_MAX)) return invalidArgument("tokenizer: vocabulary too large");
  if (!data.tokenTypes.empty() && data.tokenTypes.size() != n) {
    return invalidArgument("tokenizer: " + std::to_string(data.tokenTypes.size()) +
                           " token types for " + std::to_string(n) + " tokens");
  }
  if (!data.scores.empty() && data.scores.size() != n) {
    return invalidArgument("tokenizer: " + std::to_string(data.scores.size()) +
                           " scores for " + std::to_string(n) + " tokens");
  }
  for (auto [name, id] : {std::pair<const char*, int32_t>{"bos", data.bosId},
                          {"eos", data.eosId}, {"pad", data.padId}, {"unk", data.unkId}}) {
    if (id >= static_cast<int32_t>(n)) {
      return invalidArgument(std::string("tokenizer: ") + name + " id " + std::to_string(id) +
                             " is outside the vocabulary of " + std::to_string(n));
    }
  }
  if (data.addBos && data.bosId < 0) return invalidArgument("tokenizer: add_bos without a bos id");
  if (data.addEos && data.eosId < 0) return invalidArgument("tokenizer: add_eos without an eos id");

  impl->vocab.reserve(n);
  for (size_t i = 0; i < n; ++i) impl->vocab[data.tokens[i]] = static_cast<int32_t>(i);
  impl->data = std::move(data);
  const TokenizerData& d = impl->data;

  if (d.kind == TokenizerKind::kByteLevelBpe) {
    INGOT_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::create(d.preTokenizer));
    impl->pre.emplace(std::move(pre));
    const std::string& p = d.preTokenizer;
    bool ignoreMerges = p == "llama3" || p == "llama-bpe" || p == "llama-v3";
    INGOT_ASSIGN_OR_RETURN(ByteLevelBpe bpe, ByteLevelBpe::create(d, impl->vocab, ignoreMerges));
    impl->bpe.emplace(std::move(bpe));
  } else {
    INGOT_ASSIGN_OR_RETURN(SentencePieceBpe spm, SentencePieceBpe::create(d, impl->vocab));
    impl->spm.emplace(std::move(spm));
  }

  impl->pieces.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = d.tokens[i];
    TokenType type = impl->type(static_cast<int32_t>(i));
    std::string& piece = impl->pieces[i];
    if (type == TokenType::kNormal) {
      piece = d.kind == TokenizerKind::kByteLevelBpe ? byteLevelDecode(text)
                                                     : replaceAll(text, kSpmSpace, " ");
    } else if (type == TokenType::kByte) {
      auto b = byteTokenValue(text);
      piece = b ? std::string(1, static_cast<char>(*b)) : text;
    } else {
      piece = text;  // control, user-defined and unknown tokens decode verbatim
      if (!text.empty()) impl->specialTokens.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(impl->specialTokens.begin(), impl->specialTokens.end(),
                   [&](int32_t a, int32_t b) { return d.tokens[a].size() > d.tokens[b].size(); });
  return Tokenizer(std::move(impl));
}

std::vector<Fragment> Tokenizer::Impl::partition(std::string_view text, bool parseSpecial) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, text.size()});
  // As llama.cpp: each special token in turn (longest first) splits every text fragment
  // at each of its occurrences.
  for (int32_t id : specialTokens) {
    TokenType t = type(id);
    if (!parseSpecial && (t == TokenType::kControl || t == TokenType::kUnknown)) continue;
    const std::string& needle = data.tokens[id];
    std::vector<Fragment> next;
    next.reserve(fragments.size());
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view body = text.substr(f.offset, f.size);
      size_t pos = 0;
      while (true) {
        size_t hit = body.find(needle, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({-1, f.offset + pos, hit - pos});
        next.push_back({id, f.offset + hit, needle.size()});
        pos = hit + needle.size();
      }
      if (pos < body.size()) next.push_back({-1, f.offset + pos, body.size() - pos});
    }
    fragments = std::move(next);
  }
  return fragments;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool addSpecial,
                                       bool parseSpecial) const {
  const Impl& m = *impl_;
  const TokenizerData& d = m.data;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (addSpecial && d.addBos) out.push_back(d.bosId);

  // Ids of each distinct word, for this call (keeps encode const and thread-safe).
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> cache;
  std::vector<int32_t> word;
  bool prevSpecial = true;  // SentencePiece: a dummy prefix before text after a special token
  for (const Fragment& f : m.partition(text, parseSpecial)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prevSpecial = true;
      continue;
    }
    std::string_view body = text.substr(f.offset, f.size);
    if (m.bpe) {
      for (std::string_view w : m.pre->split(body)) {
        auto it = cache.find(w);
        if (it != cache.end()) {
          // Cached as a range of `out` written the first time this word was seen.
          for (size_t k = 0; k < it->second.second; ++k) {
            int32_t id = out[it->second.first + k];
            out.push_back(id);
          }
          continue;
        }
        size_t start = out.size();
        m.bpe->encodeWord(w, m.vocab, &out);
        cache.emplace(w, std::make_pair(start, out.size() - start));
      }
    } else {
      std::string prefixed;
      if (d.addSpacePrefix && prevSpecial) prefixed = " ";
      prefixed.append(body);
      m.spm->encode(replaceAll(prefixed, " ", kSpmSpace), m.vocab, &out);
    }
    prevSpecial = false;
  }
  if (addSpecial && d.addEos) out.push_back(d.eosId);
  return out;
}

bool Tokenizer::isSpecial(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->pieces.size()) return false;
  TokenType t = impl_->type(id);
  return t == TokenType::kControl || t == TokenType::kUnknown;
}

bool Tokenizer::stripsLeadingSpace() const {
  return impl_->data.kind == TokenizerKind::kSentencePieceBpe && impl_->data.addSpacePrefix;
}

std::string Tokenizer::tokenPiece(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->pieces.size()) return std::string();
  return impl_->pieces[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skipSpecial) const {
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= impl_->pieces.size()) continue;
    if (isSpecial(id)) {
      if (!skipSpecial) out += impl_->pieces[id];
      continue;
    }
    std::string_view piece = impl_->pieces[id];
    if (first && stripsLeadingSpace() && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
    first = false;
    out.append(piece);
  }
  return out;
}

size_t Tokenizer::vocabSize() const { return impl_->pieces.size(); }
const TokenizerData& Tokenizer::data() const { return impl_->data; }

}  // namespace ingot
