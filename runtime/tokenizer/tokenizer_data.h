// TokenizerData: everything a tokenizer needs, as stored in the manifest (from GGUF metadata).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace ingot {

namespace schema {
struct TokenizerDef;
}  // namespace schema

/// Which tokenization model the vocabulary belongs to (GGUF `tokenizer.ggml.model`:
/// "gpt2" is byte-level BPE, "llama" is SentencePiece-style BPE).
enum class TokenizerKind : uint8_t {
  kByteLevelBpe,      // GPT-2 / Llama 3 / SmolLM / Qwen2: merges by rank over byte chars
  kSentencePieceBpe,  // Llama 2 / Mistral: scores as merge priorities, "▁" for spaces
};

/// Per-token type (GGUF `tokenizer.ggml.token_type`, minus "unused").
enum class TokenType : uint8_t {
  kNormal,
  kControl,      // <|im_start|>, <s>: matched in text only when parsing special tokens
  kUserDefined,  // added tokens: always matched in text, decoded verbatim
  kByte,         // <0x0A>: SentencePiece byte fallback
  kUnknown,      // <unk>
};

/// A tokenizer's data in plain C++ form; mirrors schema::TokenizerDef (and GGUF's
/// tokenizer.ggml.* keys). Ids are -1 when absent.
struct TokenizerData {
  TokenizerKind kind = TokenizerKind::kByteLevelBpe;
  /// Pre-tokenizer name as in GGUF `tokenizer.ggml.pre` ("smollm", "llama3", "qwen2",
  /// "gpt2", "default"). Ignored for SentencePiece.
  std::string preTokenizer;
  /// Vocabulary indexed by token id. Byte-level BPE tokens are in GPT-2's byte-to-unicode
  /// encoding; SentencePiece tokens use "▁" (U+2581) for spaces.
  std::vector<std::string> tokens;
  /// SentencePiece scores indexed by id (higher merges first); may be empty for BPE.
  std::vector<float> scores;
  /// Token types indexed by id; empty means all normal.
  std::vector<TokenType> tokenTypes;
  /// Byte-level BPE merges "left right", highest priority first.
  std::vector<std::string> merges;
  int32_t bosId = -1;
  int32_t eosId = -1;
  int32_t padId = -1;
  int32_t unkId = -1;
  /// Whether encode(addSpecial=true) prepends BOS / appends EOS.
  bool addBos = false;
  bool addEos = false;
  /// SentencePiece "add dummy prefix": a space before text (GGUF
  /// `tokenizer.ggml.add_space_prefix`, true when absent). Ignored for byte-level BPE.
  bool addSpacePrefix = true;
  /// Jinja chat template (`tokenizer.chat_template`), possibly empty.
  std::string chatTemplate;
};

/// Copies a manifest's TokenizerDef into TokenizerData. Errors on a missing table, an
/// unknown kind, or per-token arrays whose length differs from the vocabulary's.
StatusOr<TokenizerData> tokenizerDataFromManifest(const schema::TokenizerDef* def);

/// Parses the compact text dump written by scripts/make_tokenizer_refs.py (used for test
/// data so tests need neither the GGUF nor its reader). Format, one item per line:
///   `ingot-tokenizer-text 1`, then `key value` lines (kind, pre, bos, eos, pad, unk,
///   add_bos, add_eos, add_space_prefix, chat_template), then `tokens N` followed by N
///   lines `<type digit> <score> <token>`, then `merges M` followed by M lines.
/// Strings escape backslash, newline, carriage return and tab as \\ \n \r \t.
StatusOr<TokenizerData> tokenizerDataFromText(const std::string& text);

}  // namespace ingot
