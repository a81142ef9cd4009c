// What watching a rank's channels costs per step: a ChannelWatch on a thread of its own
// (started and joined every step) against one on a kept ChannelWatcher, in the same run.
//
//   channel_watch_bench [--steps N]
//
// Each step arms a watch on a pipe, does `work` microseconds of busy work (a step's host
// side, so that the watcher thread wakes and polls as it would), and ends the watch.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/backend/tp/channel_watch.h"

namespace {

using Clock = std::chrono::steady_clock;

void busyFor(std::chrono::microseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

/// Mean microseconds per step beyond the busy work, with or without a kept watcher.
double perStep(int steps, std::chrono::microseconds work, int fd, ingot::ChannelWatcher* kept) {
  auto ready = [](size_t, short) { return false; };
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    if (kept) {
      ingot::ChannelWatch watch(*kept, {fd}, POLLIN, ready);
      busyFor(work);
    } else {
      ingot::ChannelWatch watch({fd}, POLLIN, ready);
      busyFor(work);
    }
  }
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / steps;
  return us - static_cast<double>(work.count());
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 5000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "channel_watch_bench: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (steps < 1) {
    std::fprintf(stderr, "channel_watch_bench: --steps must be >= 1\n");
    return 2;
  }
  int p[2];
  if (::pipe(p) != 0) return 1;
  ingot::ChannelWatcher watcher;
  std::printf("%-10s %16s %16s %8s\n", "work (us)", "own thread (us)", "kept (us)", "ratio");
  for (int work : {0, 50, 500}) {
    // Alternated, so both see the same machine load.
    double own = 0, kept = 0;
    for (int round = 0; round < 3; ++round) {
      own += perStep(steps / 3 + 1, std::chrono::microseconds(work), p[0], nullptr);
      kept += perStep(steps / 3 + 1, std::chrono::microseconds(work), p[0], &watcher);
    }
    own /= 3;
    kept /= 3;
    std::printf("%-10d %16.2f %16.2f %7.1fx\n", work, own, kept, kept > 0 ? own / kept : 0.0);
  }
  ::close(p[0]);
  ::close(p[1]);
  return 0;
}
