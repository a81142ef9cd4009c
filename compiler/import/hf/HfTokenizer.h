//===- HfTokenizer.h - tokenizer.json + tokenizer_config.json to a Tokenizer -*- C++ -*-===//
//
// Converts a Hugging Face `tokenizers` BPE model into the artifact's Tokenizer: byte-level
// BPE (GPT-2 style) with the pre-tokenizer family recognised from the pre_tokenizer config
// (gpt2, smollm, llama3, qwen2: the names runtime/tokenizer knows), or SentencePiece-style
// BPE (Metaspace / byte_fallback) with merge-rank scores. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "core/artifact/artifact_contents.h"
#include "core/base/status.h"

namespace ingot::importer::hf {

/// Parses tokenizer.json's text (`where` names it in messages) into `out`: kind,
/// pre-tokenizer, tokens (added tokens included), token attributes, merges, scores.
Status parseTokenizerJson(const std::string &text, const std::string &where, Tokenizer &out);

/// Applies tokenizer_config.json's text: chat template, add_bos/add_eos, and the bos, eos,
/// pad and unk token strings (looked up in `out.tokens`).
Status applyTokenizerConfig(const std::string &text, const std::string &where, Tokenizer &out);

/// Reads `<dir>/tokenizer.json`, `<dir>/tokenizer_config.json` and `<dir>/chat_template.jinja`
/// (each optional except tokenizer.json). Sets `found` false when there is no tokenizer.json.
Status readHfTokenizer(const std::string &dir, Tokenizer &out, bool &found);

} // namespace ingot::importer::hf
