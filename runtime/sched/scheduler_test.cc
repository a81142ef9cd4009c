// Scheduler properties: decode-first, chunked prefill, budget and cap, preemption, cancel.
#include "runtime/sched/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

namespace ingot {
namespace {

std::vector<int32_t> iota(int n, int32_t first) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

/// Plays the engine: after each plan, every sequence that wanted logits gets the next token
/// (a function of its length), or finishes once it generated `outputs[id]` tokens.
struct Driver {
  KvCacheManager* kv;
  Scheduler* sched;
  std::map<RequestId, int> outputs;      // target generated tokens
  std::map<RequestId, int> prompt_len;
  std::map<RequestId, std::vector<int32_t>> finished;

  void add(RequestId id, int prompt, int out, int32_t priority = 0) {
    ASSERT_TRUE(sched->add(id, iota(prompt, static_cast<int32_t>(id * 1000)), priority).ok());
    outputs[id] = out;
    prompt_len[id] = prompt;
  }
  StepPlan step() {
    StepPlan plan = sched->schedule();
    EXPECT_TRUE(sched->completeStep(plan).ok());
    for (const ScheduledSeq& s : plan.seqs) {
      if (!s.needs_logits) continue;
      const std::vector<int32_t>& t = *sched->tokens(s.id);
      const int generated = static_cast<int>(t.size()) - prompt_len[s.id] + 1;
      if (generated >= outputs[s.id]) {
        std::vector<int32_t> all = t;
        all.push_back(static_cast<int32_t>(t.size()));
        finished[s.id] = all;
        EXPECT_TRUE(sched->finish(s.id).ok());
      } else {
        EXPECT_TRUE(sched->appendToken(s.id, static_cast<int32_t>(t.size())).ok());
      }
    }
    return plan;
  }
};

TEST(SchedulerTest, DecodesAreScheduledBeforePrefill) {
  KvCacheManager kv(256, 16);
  SchedulerOptions o;
  o.max_batched_tokens = 64;
  o.max_prefill_while_decoding = 0;  // prefill may fill the rest of the budget
  Scheduler s(&kv, o);
  Driver d{&kv, &s};
  for (int i = 0; i < 4; ++i) d.add(i, 8, 100);
  d.step();  // all four prefill in one step
  d.add(10, 300, 5);
  for (int step = 0; step < 5; ++step) {
    StepPlan p = d.step();
    ASSERT_EQ(p.num_decodes, 4);
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(p.seqs[i].is_decode);
    for (size_t i = 4; i < p.seqs.size(); ++i) EXPECT_FALSE(p.seqs[i].is_decode);
    EXPECT_EQ(p.num_tokens, 64);  // prefill fills the rest of the budget
  }
}

TEST(SchedulerTest, PrefillWhileDecodingIsCappedAndUncappedOtherwise) {
  KvCacheManager kv(256, 16);
  SchedulerOptions o;
  o.max_batched_tokens = 64;
  o.max_prefill_while_decoding = 6;
  Scheduler s(&kv, o);
  Driver d{&kv, &s};
  for (int i = 0; i < 4; ++i) d.add(i, 8, 20);
  d.step();  // no decodes yet: the four prompts share the whole budget
  d.add(10, 300, 2);
  int32_t covered = 0;
  for (int step = 0; step < 10; ++step) {
    StepPlan p = d.step();
    ASSERT_EQ(p.num_decodes, 4);
    EXPECT_EQ(p.num_tokens, 4 + 6);  // four decodes plus at most six prefill tokens
    covered += p.num_tokens - 4;
  }
  EXPECT_EQ(covered, 60);
  // Once the decoders are gone, the long prompt gets the whole budget again.
  for (int step = 0; step < 20 && d.finished.size() < 4; ++step) d.step();
  ASSERT_EQ(d.finished.size(), 4u);
  StepPlan p = d.step();
  ASSERT_EQ(p.num_decodes, 0);
  EXPECT_EQ(p.num_tokens, 64);
}

TEST(SchedulerTest, PrefillWhileDecodingIsChargedForItsContext) {
  KvCacheManager kv(512, 16);
  SchedulerOptions o;
  o.max_batched_tokens = 64;
  o.max_prefill_while_decoding = 6;
  o.prefill_context_cost_keys = 100;  // a token at position p costs 1 + p / 100
  o.prefill_share_while_decoding = 1.0;
  Scheduler s(&kv, o);
  Driver d{&kv, &s};
  for (int i = 0; i < 4; ++i) d.add(i, 8, 1000);  // still decoding when the prompt is done
  d.step();
  d.add(10, 400, 2);
  auto cost = [](int32_t p) { return 1.0 + p / 100.0; };
  int32_t position = 0;
  bool sawFloor = false, sawDecodeCost = false;
  while (position < 400) {
    StepPlan p = d.step();
    ASSERT_EQ(p.num_decodes, 4);
    // Prefill may cost as much as the decodes, and at least 6.
    double decodes = 0;
    for (const ScheduledSeq& q : p.seqs)
      if (q.is_decode) decodes += cost(q.start);
    const double allowed = std::max(6.0, decodes);
    (decodes < 6.0 ? sawFloor : sawDecodeCost) = true;
    const int32_t n = p.num_tokens - 4;
    ASSERT_GE(n, 1) << "the long prompt always progresses";
    double used = 0;
    for (int32_t i = 0; i < n; ++i) used += cost(position + i);
    EXPECT_TRUE(used <= allowed + 1e-9 || n == 1) << "at " << position << ": " << n << " tokens";
    EXPECT_GT(used + cost(position + n), allowed) << "at " << position << ": one more fits";
    position += n;
  }
  EXPECT_TRUE(sawFloor);
  EXPECT_TRUE(sawDecodeCost);
}

TEST(SchedulerTest, OnlyLongPromptsAreHeldToThePrefillCost) {
  KvCacheManager kv(512, 16);
  SchedulerOptions o;
  o.max_batched_tokens = 256;
  o.max_prefill_while_decoding = 6;
  o.long_prefill_tokens = 100;
  Scheduler s(&kv, o);
  Driver d{&kv, &s};
  for (int i = 0; i < 4; ++i) d.add(i, 8, 100);
  d.step();
  d.add(10, 90, 2);   // short: prefilled at once next to the decodes
  StepPlan p = d.step();
  EXPECT_EQ(p.num_decodes, 4);
  EXPECT_EQ(p.num_tokens, 4 + 90);
  d.add(11, 300, 2);  // long: six tokens a step
  p = d.step();
  EXPECT_EQ(p.num_tokens - p.num_decodes, 6);
}

TEST(SchedulerTest, ContextCostKeysFollowTheModelShape) {
  // SmolLM2-135M: hidden 576, intermediate 1536, 9 heads of 64, 3 kv heads.
  EXPECT_EQ(prefillContextCostKeys(576, 1536, 9, 3, 64), (2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536) / (2 * 9 * 64));
  EXPECT_EQ(prefillContextCostKeys(0, 0, 0, 0, 0), 0);
}

TEST(SchedulerTest, LongPromptIsChunkedWithinTheBudget) {
  KvCacheManager kv(256, 16);
  SchedulerOptions o;
  o.max_batched_tokens = 100;
  Scheduler s(&kv, o);
  Driver d{&kv, &s};
  d.add(1, 1000, 3);
  int32_t covered = 0;
  for (int step = 0; step < 10; ++step) {
    StepPlan p = d.step();
    ASSERT_EQ(p.seqs.size(), 1u);
    EXPECT_EQ(p.seqs[0].start, covered);
    EXPECT_EQ(p.seqs[0].numTokens(), 100);
    EXPECT_EQ(p.seqs[0].needs_logits, step == 9);
    covered += 100;
  }
  StepPlan p = d.step();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_TRUE(p.seqs[0].is_decode);
  EXPECT_EQ(p.seqs[0].start, 1000);
}

TEST(SchedulerTest, NeverExceedsTokenBudgetOrSequenceCap) {
  KvCacheManager kv(1024, 16);
  SchedulerOptions o;
  o.max_batched_tokens = 48;
  o.max_running = 6;
  Scheduler s(&kv, o);
  Driver d{&kv, &s};
  for (int i = 0; i < 20; ++i) d.add(i, 5 + 7 * i, 10 + i);
  int steps = 0;
  while (s.hasWork() && steps < 10000) {
    StepPlan p = d.step();
    ++steps;
    EXPECT_LE(p.num_tokens, 48);
    EXPECT_LE(static_cast<int>(p.seqs.size()), 6);
    EXPECT_LE(s.numRunning(), 6);
    int sum = 0;
    for (const ScheduledSeq& q : p.seqs) {
      sum += q.numTokens();
      EXPECT_EQ(q.slots.size(), q.tokens.size());
    }
    EXPECT_EQ(sum, p.num_tokens);
  }
  EXPECT_EQ(d.finished.size(), 20u);
}

TEST(SchedulerTest, PriorityOrdersAdmission) {
  KvCacheManager kv(64, 16);
  SchedulerOptions o;
  o.max_batched_tokens = 16;
  o.max_running = 1;
  Scheduler s(&kv, o);
  Driver d{&kv, &s};
  d.add(1, 4, 1, /*priority=*/5);
  d.add(2, 4, 1, /*priority=*/0);
  d.add(3, 4, 1, /*priority=*/5);
  std::vector<RequestId> order;
  while (s.hasWork()) {
    StepPlan p = d.step();
    for (const ScheduledSeq& q : p.seqs) order.push_back(q.id);
  }
  EXPECT_EQ(order, (std::vector<RequestId>{2, 1, 3}));
}

TEST(SchedulerTest, PreemptsLowestPriorityNewestWhenBlocksRunOut) {
  // 4 blocks of 4 tokens: three sequences of 4 prompt tokens fill 3 blocks; the 4th block
  // goes to the first decode, the next decode must preempt.
  KvCacheManager kv(4, 4, /*enable_prefix_cache=*/false);
  SchedulerOptions o;
  o.admission_watermark_blocks = 0;
  Scheduler s(&kv, o);
  Driver d{&kv, &s};
  d.add(1, 4, 10, 0);
  d.add(2, 4, 10, 1);
  d.add(3, 4, 10, 1);
  StepPlan p = d.step();
  ASSERT_EQ(p.seqs.size(), 3u);
  p = d.step();  // decode of 1 takes the last block; 2 needs one -> newest lowest (3) goes
  ASSERT_EQ(p.preempted, (std::vector<RequestId>{3}));
  EXPECT_EQ(s.numWaiting(), 1);
  EXPECT_EQ(p.num_decodes, 2);
  EXPECT_EQ(p.seqs[0].id, 1);
  EXPECT_EQ(p.seqs[1].id, 2);
}

TEST(SchedulerTest, PreemptedRequestCompletesAfterRecompute) {
  KvCacheManager kv(4, 4, /*enable_prefix_cache=*/false);
  SchedulerOptions o;
  o.admission_watermark_blocks = 0;
  Scheduler s(&kv, o);
  Driver d{&kv, &s};
  d.add(1, 4, 6, 0);
  d.add(2, 4, 6, 1);
  bool saw_recompute = false;
  int steps = 0;
  while (s.hasWork() && steps++ < 1000) {
    StepPlan p = d.step();
    for (const ScheduledSeq& q : p.seqs)
      if (q.id == 2 && !q.is_decode && q.numTokens() > 4) saw_recompute = true;
  }
  EXPECT_GT(s.numPreemptions(), 0);
  EXPECT_TRUE(saw_recompute);
  ASSERT_EQ(d.finished.size(), 2u);
  // Each output token is the sequence length when it was sampled: recompute kept them all.
  for (RequestId id : {1, 2}) {
    const std::vector<int32_t>& t = d.finished[id];
    ASSERT_EQ(t.size(), 10u);
    for (int i = 4; i < 10; ++i) EXPECT_EQ(t[i], i);
  }
  EXPECT_EQ(kv.usage().used, 0);
}

TEST(SchedulerTest, CancelReturnsBlocksImmediately) {
  KvCacheManager kv(64, 16, /*enable_prefix_cache=*/false);
  Scheduler s(&kv, SchedulerOptions{});
  Driver d{&kv, &s};
  d.add(1, 100, 50);
  d.add(2, 40, 50);
  d.step();
  d.step();
  EXPECT_GT(kv.usage().used, 0);
  EXPECT_TRUE(s.cancel(1));
  EXPECT_EQ(kv.usage().used, 3);  // request 2's 41 tokens
  EXPECT_TRUE(s.cancel(2));
  EXPECT_EQ(kv.usage().used, 0);
  EXPECT_FALSE(s.hasWork());
  EXPECT_FALSE(s.cancel(2));
}

TEST(SchedulerTest, CancelOfWaitingRequestRemovesIt) {
  KvCacheManager kv(8, 16);
  SchedulerOptions o;
  o.max_running = 1;
  Scheduler s(&kv, o);
  ASSERT_TRUE(s.add(1, iota(10, 0)).ok());
  ASSERT_TRUE(s.add(2, iota(10, 0)).ok());
  (void)s.schedule();
  EXPECT_EQ(s.numWaiting(), 1);
  EXPECT_TRUE(s.cancel(2));
  EXPECT_EQ(s.numWaiting(), 0);
}

TEST(SchedulerTest, RejectsPromptLargerThanThePool) {
  KvCacheManager kv(4, 16);
  Scheduler s(&kv, SchedulerOptions{});
  EXPECT_FALSE(s.add(1, iota(65, 0)).ok());
  EXPECT_TRUE(s.add(2, iota(64, 0)).ok());
  EXPECT_FALSE(s.add(2, iota(4, 0)).ok());
  EXPECT_FALSE(s.add(3, {}).ok());
}

TEST(SchedulerTest, ForkSharesThePromptBlocks) {
  KvCacheManager kv(16, 4, false);
  Scheduler s(&kv, SchedulerOptions{});
  ASSERT_TRUE(s.add(1, iota(6, 0)).ok());
  StepPlan p = s.schedule();
  ASSERT_TRUE(s.completeStep(p).ok());
  ASSERT_TRUE(s.fork(1, 2).ok());
  EXPECT_EQ(kv.usage().used, 2);
  ASSERT_TRUE(s.appendToken(1, 7).ok());
  ASSERT_TRUE(s.appendToken(2, 8).ok());
  p = s.schedule();
  ASSERT_EQ(p.num_decodes, 2);
  EXPECT_EQ(p.copies.size(), 1u);  // the shared partial block is copied once
  EXPECT_NE(p.seqs[0].slots[0], p.seqs[1].slots[0]);
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(SchedulerDraftTest, DraftRidesWithTheDecodeAndAcceptDraftKeepsOnlyTheAcceptedTokens) {
  KvCacheManager kv(64, 4);
  SchedulerOptions o;
  o.max_batched_tokens = 64;
  Scheduler s(&kv, o);
  ASSERT_TRUE(s.add(1, {10, 11, 12, 13, 14, 15}).ok());
  StepPlan prefill = s.schedule();
  ASSERT_TRUE(s.completeStep(prefill).ok());
  ASSERT_TRUE(s.appendToken(1, 16).ok());
  ASSERT_TRUE(s.isDecodeReady(1));
  // Five draft tokens after the decode token 16 (at position 6): slots 6..11.
  ASSERT_TRUE(s.setDraft(1, {17, 18, 99, 98, 97}).ok());
  StepPlan plan = s.schedule();
  ASSERT_EQ(plan.seqs.size(), 1u);
  const ScheduledSeq& q = plan.seqs[0];
  EXPECT_EQ(q.num_draft, 5);
  EXPECT_EQ(q.tokens, (std::vector<int32_t>{16, 17, 18, 99, 98, 97}));
  EXPECT_EQ(q.start, 6);
  EXPECT_EQ(q.seqLen(), 12);
  EXPECT_EQ(plan.num_tokens, 6);
  ASSERT_TRUE(s.completeStep(plan).ok());
  EXPECT_FALSE(s.isDecodeReady(1));  // the draft waits for acceptDraft
  EXPECT_EQ(kv.numComputedTokens(q.kv_seq), 7);
  const int32_t used_with_draft = kv.usage().used;
  EXPECT_EQ(used_with_draft, 3);  // 12 tokens of 4-token blocks
  // More accepted than drafted, or a second accept, fails.
  EXPECT_FALSE(s.acceptDraft(1, {1, 2, 3, 4, 5, 6}).ok());
  ASSERT_TRUE(s.acceptDraft(1, {17, 18}).ok());
  EXPECT_FALSE(s.acceptDraft(1, {}).ok());
  EXPECT_EQ(*s.tokens(1), (std::vector<int32_t>{10, 11, 12, 13, 14, 15, 16, 17, 18}));
  EXPECT_EQ(kv.numComputedTokens(q.kv_seq), 9);
  EXPECT_EQ(kv.table(q.kv_seq)->numTokens(), 9);
  EXPECT_EQ(kv.usage().used, 3);  // 9 tokens still need 3 blocks
  ASSERT_TRUE(s.appendToken(1, 19).ok());
  EXPECT_TRUE(s.isDecodeReady(1));
  StepPlan next = s.schedule();
  ASSERT_EQ(next.seqs.size(), 1u);
  EXPECT_EQ(next.seqs[0].num_draft, 0);  // drafts last one step
  EXPECT_EQ(next.seqs[0].start, 9);
  EXPECT_EQ(next.seqs[0].tokens, std::vector<int32_t>{19});
}

TEST(SchedulerDraftTest, RejectedDraftReleasesItsBlocks) {
  KvCacheManager kv(64, 4);
  Scheduler s(&kv, SchedulerOptions{});
  ASSERT_TRUE(s.add(1, {1, 2, 3, 4}).ok());
  StepPlan prefill = s.schedule();
  ASSERT_TRUE(s.completeStep(prefill).ok());
  ASSERT_TRUE(s.appendToken(1, 5).ok());
  ASSERT_TRUE(s.setDraft(1, {6, 7, 8, 9, 10, 11, 12}).ok());
  StepPlan plan = s.schedule();
  ASSERT_EQ(plan.seqs[0].num_draft, 7);
  ASSERT_TRUE(s.completeStep(plan).ok());
  EXPECT_EQ(kv.usage().used, 3);  // 12 tokens
  ASSERT_TRUE(s.acceptDraft(1, {}).ok());
  EXPECT_EQ(kv.usage().used, 2);  // 5 tokens
  ASSERT_TRUE(s.finish(1).ok());
  EXPECT_EQ(kv.usage().used, 0);
}

TEST(SchedulerDraftTest, DraftIsDroppedWhenBudgetOrBlocksCannotTakeIt) {
  {
    KvCacheManager kv(64, 4);
    SchedulerOptions o;
    o.max_batched_tokens = 4;
    Scheduler s(&kv, o);
    ASSERT_TRUE(s.add(1, {1, 2, 3}).ok());
    ASSERT_TRUE(s.completeStep(s.schedule()).ok());
    ASSERT_TRUE(s.appendToken(1, 4).ok());
    ASSERT_TRUE(s.setDraft(1, {5, 6, 7, 8}).ok());  // 1 + 4 > budget 4
    StepPlan plan = s.schedule();
    EXPECT_EQ(plan.seqs[0].num_draft, 0);
    EXPECT_EQ(plan.num_tokens, 1);
  }
  {
    KvCacheManager kv(2, 4);  // 8 slots in all
    Scheduler s(&kv, SchedulerOptions{});
    ASSERT_TRUE(s.add(1, {1, 2, 3}).ok());
    ASSERT_TRUE(s.completeStep(s.schedule()).ok());
    ASSERT_TRUE(s.appendToken(1, 4).ok());
    ASSERT_TRUE(s.setDraft(1, {5, 6, 7, 8, 9}).ok());  // would need a third block
    StepPlan plan = s.schedule();
    EXPECT_EQ(plan.seqs[0].num_draft, 0);
    EXPECT_TRUE(plan.preempted.empty());
  }
  {
    KvCacheManager kv(64, 4);
    Scheduler s(&kv, SchedulerOptions{});
    EXPECT_FALSE(s.setDraft(7, {1}).ok());  // unknown request
  }
}

}  // namespace
}  // namespace ingot
