// AdaptiveDepth: how many tokens a request drafts per step, from how many it recently had
// accepted, and whether to speculate at all at the current batch size.
#include "runtime/spec/adaptive_depth.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace ingot {

AdaptiveDepth::AdaptiveDepth(AdaptiveDepthConfig config)
    : config_(config), ema_(config.initial_depth - 1) {
  assert(config_.min_depth >= 1 && config_.max_depth >= config_.min_depth);
  assert(config_.smoothing > 0 && config_.smoothing <= 1);
}

void AdaptiveDepth::observe(int32_t proposed, int32_t accepted) {
  if (proposed <= 0) return;
  double value = accepted;
  if (accepted >= proposed) value = std::max(value, static_cast<double>(depth()));
  ema_ += config_.smoothing * (value - ema_);
}

int32_t AdaptiveDepth::depth() const {
  int32_t d = static_cast<int32_t>(std::lround(ema_)) + 1;
  return std::clamp(d, config_.min_depth, config_.max_depth);
}

int32_t AdaptiveDepth::depthFor(int32_t batch_size) const {
  return batch_size > config_.max_batch_size ? 0 : depth();
}

int32_t AdaptiveDepth::nextDepth(int32_t batch_size) {
  if (batch_size > config_.max_batch_size) return 0;
  if (ema_ < config_.pause_below) {
    if (paused_ < config_.pause_steps) {
      ++paused_;
      return 0;
    }
    paused_ = 0;
    return config_.min_depth;
  }
  return depth();
}

}  // namespace ingot
