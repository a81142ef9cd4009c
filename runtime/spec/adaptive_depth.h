// AdaptiveDepth: how many tokens a request drafts per step, from how many it recently had
// accepted, and whether to speculate at all at the current batch size.
#pragma once

#include <cstdint>

namespace ingot {

/// Tuning for AdaptiveDepth.
struct AdaptiveDepthConfig {
  int32_t min_depth = 1;
  int32_t max_depth = 8;
  /// Depth before any observation.
  int32_t initial_depth = 4;
  /// Weight of the newest observation in the moving average, in (0, 1].
  double smoothing = 0.25;
  /// Above this many running requests a step is compute-bound already and drafting costs
  /// more than it saves: speculation is switched off (depthFor returns 0).
  int32_t max_batch_size = 32;
  /// A request whose average accepted tokens per step falls below this pauses speculating
  /// (a draft that is never right only costs), and probes again at min_depth every
  /// pause_steps steps.
  double pause_below = 0.1;
  int32_t pause_steps = 16;
};

/// Per request. The rule: depth = clamp(round(ema) + 1, min_depth, max_depth), where ema is
/// an exponential moving average of accepted draft tokens per step. The +1 lets depth grow
/// by one while drafts are fully accepted and settle one past the typical accepted length
/// otherwise; a run of rejections walks it down to min_depth.
class AdaptiveDepth {
 public:
  explicit AdaptiveDepth(AdaptiveDepthConfig config = {});

  /// Records one verify step: `proposed` draft tokens on the longest path, `accepted` of
  /// them kept. Steps with nothing proposed are ignored. A fully accepted proposal counts
  /// as at least the current depth, so a draft source that ran short (prompt lookup near
  /// the end of its match) does not shrink the depth.
  void observe(int32_t proposed, int32_t accepted);

  /// Draft depth for the next step.
  int32_t depth() const;
  /// Draft depth when `batch_size` requests run this step; 0 = do not speculate.
  int32_t depthFor(int32_t batch_size) const;
  /// depthFor(), and the pause: 0 while paused (counting the step), then min_depth once
  /// to probe.
  int32_t nextDepth(int32_t batch_size);
  double acceptedAverage() const { return ema_; }

 private:
  AdaptiveDepthConfig config_;
  double ema_;
  int32_t paused_ = 0;
};

}  // namespace ingot
