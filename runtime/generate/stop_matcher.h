// StopMatcher: finds stop strings in streamed text and decides why a generation finishes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/generate/sampler.h"

namespace ingot {

/// Why a generation ended (OpenAI's finish_reason).
enum class FinishReason {
  kNone,    // still running
  kStop,    // a stop string, a stop token id, or EOS
  kLength,  // max_tokens (or the context) reached
};

/// "stop", "length", or "" for kNone.
const char* finishReasonName(FinishReason reason);

/// The finish reason after `token` became the `generated`-th output token (counting from 1):
/// kStop for a stop token id or, unless ignore_eos, an EOS token (`is_eos`); else kLength when
/// `generated` reached max_tokens; else kNone. A stop token's text is not part of the output.
FinishReason finishAfterToken(const SamplingParams& params, int32_t token, int64_t generated,
                              bool is_eos);

/// Incremental stop-string detection over detokenized text as it streams. Text that could
/// still be the start of a stop string is held back; once a stop string completes, the output
/// ends right before it (OpenAI semantics). Among stop strings, the one that completes first
/// in the text wins (ties: the longest), so the result does not depend on how the text is
/// split into pieces.
class StopMatcher {
 public:
  /// `stops` must be non-empty strings (SamplingParams::validate checks); empty ones are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  /// Appends newly decoded text; returns the text that is safe to emit now. When a stop string
  /// completes, returns the text before it and stopped() becomes true; later calls return "".
  std::string push(std::string_view text);
  /// End of generation for another reason: returns the held-back text (empty once stopped).
  std::string finish();

  bool stopped() const { return matched_ >= 0; }
  /// Index into `stops` of the stop string that matched, or -1.
  int matchedIndex() const { return matched_; }
  /// All text emitted so far; after a stop, the final text truncated before the stop string.
  const std::string& emitted() const { return emitted_; }
  /// Bytes currently held back.
  size_t heldBack() const { return pending_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // received, not yet emitted; may be the start of a stop string
  std::string emitted_;
  int matched_ = -1;
  bool finished_ = false;
};

}  // namespace ingot
