// ServerMetrics: latency/batch histograms plus engine counters, rendered as Prometheus text.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"

namespace ingot::server {

/// A cumulative Prometheus histogram with fixed upper bounds (+Inf implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  /// Appends `# TYPE` and the _bucket/_sum/_count lines for `name`.
  void render(const std::string& name, const std::string& help, std::string* out) const;
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; last = +Inf
  int64_t count_ = 0;
  double sum_ = 0;
};

/// Everything /metrics reports. Observations come from the engine thread; render() from
/// any I/O thread (both take the lock).
class ServerMetrics {
 public:
  ServerMetrics();
  void observeTimeToFirstToken(double seconds);
  void observeInterTokenLatency(double seconds);
  void observeEndToEndLatency(double seconds);
  void observeBatchSize(int32_t sequences);
  void countRequest(const std::string& finish_reason);
  /// Prometheus text exposition (version 0.0.4) with the engine's counters and gauges.
  std::string render(const EngineMetrics& engine) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_, itl_, e2e_, batch_;
  int64_t finished_stop_ = 0, finished_length_ = 0, finished_abort_ = 0;
};

}  // namespace ingot::server
