// Timing helpers shared by the CPU benches: wall-clock seconds and the machine's read
// bandwidth, the reference every GEMV and decode rate is reported against.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/thread_pool.h"

namespace ingot::bench {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// Best of `passes` reads of a 1 GiB buffer by every pool thread through the kernels' dot
/// (GB/s): what streaming weights from DRAM can reach at most.
inline double measureReadBandwidth(ThreadPool& pool, const CpuKernels& k, int passes) {
  const int64_t n = (int64_t{1} << 30) / sizeof(float);
  std::unique_ptr<float[]> buf(new float[n]);
  pool.parallelRanges(n, 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<float>(i & 7);
  });
  double best = 0;
  std::vector<double> sink(pool.size());
  for (int p = 0; p < passes; ++p) {
    auto t0 = Clock::now();
    pool.parallelRanges(n, 4096, [&](int64_t b, int64_t e) {
      double s = 0;
      for (int64_t i = b; i < e; i += 1 << 16)
        s += k.dot(&buf[i], &buf[i], std::min<int64_t>(1 << 16, e - i));
      sink[b * pool.size() / n] += s;
    });
    best = std::max(best, n * sizeof(float) / seconds(t0, Clock::now()) / 1e9);
  }
  if (sink[0] == 12345.0) std::printf(" ");  // keep the reads
  return best;
}

}  // namespace ingot::bench
