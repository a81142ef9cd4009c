// Randomized simulation: thousands of arrivals and cancellations over a tiny KV pool; no
// request is lost, every one finishes with the tokens it would have had alone.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "runtime/sched/scheduler.h"

namespace ingot {
namespace {

struct Want {
  int prompt = 0;
  int output = 0;
};

/// Next "sampled" token: a hash of the sequence so far, so a request's outputs only depend
/// on its own tokens (as with a real model), whatever the batching or preemption.
int32_t nextToken(const std::vector<int32_t>& t) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : t) h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
  return static_cast<int32_t>(h % 1000);
}

void runSimulation(uint32_t seed, bool prefix_cache) {
  std::mt19937 rng(seed);
  KvCacheManager kv(24, 4, prefix_cache);  // 96 token slots
  SchedulerOptions o;
  o.max_batched_tokens = 32;
  o.max_running = 8;
  Scheduler s(&kv, o);
  std::map<RequestId, Want> live;
  std::set<RequestId> cancelled, finished;
  RequestId next = 0;
  const int kRequests = 2000;
  int steps = 0;
  while ((next < kRequests || s.hasWork()) && steps < 200000) {
    ++steps;
    // Arrivals (a few shared prefixes so the prefix cache is exercised).
    while (next < kRequests && rng() % 3 == 0) {
      Want w{1 + static_cast<int>(rng() % 40), 1 + static_cast<int>(rng() % 40)};
      std::vector<int32_t> prompt(w.prompt);
      const int32_t base = static_cast<int32_t>(rng() % 4) * 100;
      for (int i = 0; i < w.prompt; ++i) prompt[i] = i < 8 ? base + i : static_cast<int32_t>(rng() % 1000);
      ASSERT_TRUE(s.add(next, prompt, static_cast<int32_t>(rng() % 3)).ok());
      live[next++] = w;
    }
    // Cancellations.
    if (!live.empty() && rng() % 20 == 0) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE(s.cancel(it->first));
      cancelled.insert(it->first);
      live.erase(it);
    }
    StepPlan plan = s.schedule();
    ASSERT_LE(plan.num_tokens, o.max_batched_tokens);
    ASSERT_LE(s.numRunning(), o.max_running);
    std::set<int32_t> slots;
    for (const ScheduledSeq& q : plan.seqs)
      for (int32_t slot : q.slots) ASSERT_TRUE(slots.insert(slot).second) << "slot reused";
    ASSERT_TRUE(s.completeStep(plan).ok());
    for (const ScheduledSeq& q : plan.seqs) {
      if (!q.needs_logits) continue;
      const std::vector<int32_t>& t = *s.tokens(q.id);
      const Want& w = live.at(q.id);
      if (static_cast<int>(t.size()) + 1 - w.prompt >= w.output) {
        ASSERT_TRUE(s.finish(q.id).ok());
        finished.insert(q.id);
        live.erase(q.id);
      } else {
        ASSERT_TRUE(s.appendToken(q.id, nextToken(t)).ok());
      }
    }
    const KvUsage u = kv.usage();
    ASSERT_EQ(u.used + u.cached + u.free, u.total);
  }
  EXPECT_FALSE(s.hasWork());
  EXPECT_TRUE(live.empty()) << live.size() << " requests never finished";
  EXPECT_EQ(static_cast<int>(finished.size() + cancelled.size()), kRequests);
  EXPECT_GT(s.numPreemptions(), 0);
  EXPECT_EQ(kv.usage().used, 0);
}

TEST(SchedulerSimulationTest, NoRequestIsLostWithATinyPool) { runSimulation(1, false); }
TEST(SchedulerSimulationTest, NoRequestIsLostWithPrefixCache) { runSimulation(2, true); }
TEST(SchedulerSimulationTest, NoRequestIsLostOtherSeed) { runSimulation(3, true); }

}  // namespace
}  // namespace ingot
