// StopMatcher: finds stop strings in streamed text and decides why a generation finishes.
#include "runtime/generate/stop_matcher.h"

#include <algorithm>

namespace ingot {

const char* finishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
  }
  return "";
}

FinishReason finishAfterToken(const SamplingParams& params, int32_t token, int64_t generated,
                              bool is_eos) {
  if (is_eos && !params.ignore_eos) return FinishReason::kStop;
  if (std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), token) !=
      params.stop_token_ids.end())
    return FinishReason::kStop;
  if (params.max_tokens && generated >= *params.max_tokens) return FinishReason::kLength;
  return FinishReason::kNone;
}

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped() || finished_) return {};
  pending_.append(text.data(), text.size());
  // No stop string lies wholly inside the old pending text (it would have matched then), so
  // each string's first occurrence in pending_ is its earliest completion.
  size_t bestEnd = std::string::npos, bestStart = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t at = pending_.find(stops_[i]);
    if (at == std::string::npos) continue;
    const size_t end = at + stops_[i].size();
    if (bestEnd == std::string::npos || end < bestEnd || (end == bestEnd && at < bestStart)) {
      bestEnd = end;
      bestStart = at;
      matched_ = static_cast<int>(i);
    }
  }
  if (stopped()) {
    std::string out = pending_.substr(0, bestStart);
    emitted_ += out;
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  emitted_ += out;
  return out;
}

std::string StopMatcher::finish() {
  if (stopped() || finished_) return {};
  finished_ = true;
  std::string out;
  out.swap(pending_);
  emitted_ += out;
  return out;
}

}  // namespace ingot
