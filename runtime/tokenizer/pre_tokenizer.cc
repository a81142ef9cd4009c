// PreTokenizer: the regex lists of llama.cpp's pre-tokenizer families, run with PCRE2.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "runtime/tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <cstdint>

namespace ingot {
namespace {

// GPT-2's pattern (tokenizer.json of GPT-2, SmolLM, StarCoder). The contractions are
// lowercase only; `\s+(?!\S)` leaves the last space of a run to the next word.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

// Llama 3's pattern with the case-insensitive group spelled out (as llama.cpp does):
// up to 3 digits per word, one leading non-letter glued to a letter run.
constexpr const char* kLlama3Pattern =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Qwen2: Llama 3's pattern but one digit per word.
constexpr const char* kQwen2Pattern =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::vector<std::string> regexesFor(const std::string& name) {
  if (name == "gpt2") return {kGpt2Pattern};
  if (name == "smollm") return {"\\p{N}", kGpt2Pattern};
  if (name == "llama3" || name == "llama-bpe" || name == "llama-v3") return {kLlama3Pattern};
  if (name == "qwen2") return {kQwen2Pattern};
  if (name == "default" || name.empty()) {
    // llama.cpp's fallback when a GGUF names no pre-tokenizer.
    return {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Pattern, "\\p{N}+", "[0-9][0-9][0-9]"};
  }
  return {};
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

StatusOr<PreTokenizer> PreTokenizer::create(const std::string& name) {
  std::vector<std::string> regexes = regexesFor(name);
  if (regexes.empty()) {
    return unimplemented("tokenizer: unsupported pre-tokenizer '" + name +
                         "' (known: gpt2, default, smollm, llama3, llama-bpe, qwen2)");
  }
  return fromRegexes(regexes);
}

StatusOr<PreTokenizer> PreTokenizer::fromRegexes(const std::vector<std::string>& regexes) {
  PreTokenizer pre;
  for (const std::string& pattern : regexes) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto regex = std::make_unique<Regex>();
    regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (regex->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return invalidArgument("tokenizer: bad pre-tokenizer regex at offset " +
                             std::to_string(offset) + ": " +
                             reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
    pre.regexes_.push_back(std::move(regex));
  }
  return pre;
}

namespace {

/// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not
/// valid UTF-8 (stray continuation, overlong form, surrogate, beyond U+10FFFF, truncated).
size_t validUtf8Length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

/// Splits text at invalid UTF-8 bytes, each of which becomes a piece of its own, so the
/// regexes only ever see valid UTF-8 (and can skip PCRE2's per-call UTF check).
std::vector<std::string_view> validUtf8Pieces(std::string_view text) {
  std::vector<std::string_view> pieces;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    size_t n = validUtf8Length(text, i);
    if (n > 0) {
      i += n;
      continue;
    }
    if (i > start) pieces.push_back(text.substr(start, i - start));
    pieces.push_back(text.substr(i, 1));
    start = ++i;
  }
  if (start < text.size()) pieces.push_back(text.substr(start));
  return pieces;
}

}  // namespace

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces = validUtf8Pieces(text);
  pcre2_match_data* match = nullptr;
  for (const auto& regex : regexes_) {
    if (match == nullptr) match = pcre2_match_data_create(1, nullptr);
    std::vector<std::string_view> next;
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) {
      if (piece.size() == 1 && static_cast<unsigned char>(piece[0]) >= 0x80) {
        next.push_back(piece);  // an invalid byte: never handed to PCRE2
        continue;
      }
      size_t pos = 0;      // where the next search starts
      size_t emitted = 0;  // end of what has become a piece already
      while (pos < piece.size()) {
        int rc = pcre2_match(regex->code, reinterpret_cast<PCRE2_SPTR>(piece.data()),
                             piece.size(), pos, PCRE2_NO_UTF_CHECK, match, nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
        size_t begin = ov[0], end = ov[1];
        if (end == begin) {  // empty match: step over one character
          pos = begin + std::max<size_t>(1, validUtf8Length(piece, begin));
          continue;
        }
        if (begin > emitted) next.push_back(piece.substr(emitted, begin - emitted));
        next.push_back(piece.substr(begin, end - begin));
        emitted = pos = end;
      }
      if (emitted < piece.size()) next.push_back(piece.substr(emitted));
    }
    pieces = std::move(next);
  }
  pcre2_match_data_free(match);
  return pieces;
}

}  // namespace ingot
