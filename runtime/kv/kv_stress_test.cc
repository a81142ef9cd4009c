// Randomized stress test of KvCacheManager against a reference model and a simulated KV store.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "testing/test_seed.h"
#include "runtime/kv/kv_cache_manager.h"

namespace ingot {
namespace {

constexpr int32_t kB = 4;
constexpr int32_t kNumBlocks = 48;

/// What the test believes about one live sequence.
struct ModelSeq {
  std::vector<int32_t> tokens;
  /// prefix_hash[i]: the KV "content" position i must hold (depends on tokens[0..i]).
  std::vector<uint64_t> prefix_hash;
  int32_t computed = 0;
  int32_t family = 0;  // forks share a family
};

uint64_t extend(uint64_t h, int32_t token) {
  h ^= static_cast<uint64_t>(token) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

class KvStress {
 public:
  explicit KvStress(uint32_t seed) : rng_(seed), kv_(kNumBlocks, kB) {
    store_.assign(kNumBlocks * kB, 0);
    for (auto& doc : docs_) {
      doc.resize(64);
      for (auto& t : doc) t = pick(0, 6);  // a small vocabulary makes equal blocks common
    }
  }

  void run(int ops) {
    for (int i = 0; i < ops; ++i) {
      const int op = pick(0, 99);
      if (op < 25) admit();
      else if (op < 45) computeChunk();
      else if (op < 70) append();
      else if (op < 78) fork();
      else if (op < 95) freeOne();
      else kv_.evict(pick(1, 6));
      checkInvariants();
      if (HasFatalFailure() || HasNonfatalFailure()) return;
    }
    while (!seqs_.empty()) {
      ASSERT_TRUE(kv_.free(seqs_.begin()->first).ok());
      seqs_.erase(seqs_.begin());
    }
    checkInvariants();
    // FreeReturnsEveryBlock: nothing in use, every block free or cached.
    EXPECT_EQ(kv_.usage().used, 0);
    EXPECT_EQ(kv_.usage().free + kv_.usage().cached, kNumBlocks);
  }

  int admitted = 0, refused = 0, hits = 0, copies = 0, append_refused = 0;

 private:
  static bool HasFatalFailure() { return ::testing::Test::HasFatalFailure(); }
  static bool HasNonfatalFailure() { return ::testing::Test::HasNonfatalFailure(); }

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  SeqId randomSeq(bool fully_computed) {
    std::vector<SeqId> ids;
    for (auto& [id, s] : seqs_)
      if (!fully_computed || s.computed == static_cast<int32_t>(s.tokens.size()))
        ids.push_back(id);
    return ids.empty() ? -1 : ids[pick(0, static_cast<int>(ids.size()) - 1)];
  }

  void writeKv(SeqId id, ModelSeq& s, int32_t upto) {
    const BlockTable* t = kv_.table(id);
    for (int32_t p = s.computed; p < upto; ++p) store_[t->slotOf(p)] = s.prefix_hash[p];
    s.computed = upto;
    ASSERT_TRUE(kv_.markComputed(id, upto).ok());
  }

  void admit() {
    const auto& doc = docs_[pick(0, 3)];
    std::vector<int32_t> prompt(doc.begin(), doc.begin() + pick(1, 40));
    for (int n = pick(0, 6); n > 0; --n) prompt.push_back(pick(0, 6));
    const KvUsage before = kv_.usage();
    const bool can = kv_.canAdmit(static_cast<int32_t>(prompt.size()));
    auto r = kv_.admit(prompt);
    if (!r.ok()) {
      ++refused;
      EXPECT_FALSE(can) << "canAdmit promised room";
      EXPECT_TRUE(isOutOfKvBlocks(r.status())) << r.status().toString();
      const KvUsage after = kv_.usage();
      EXPECT_EQ(after.used, before.used);
      EXPECT_EQ(after.free, before.free);
      EXPECT_EQ(after.cached, before.cached);
      return;
    }
    ++admitted;
    ModelSeq s;
    s.tokens = prompt;
    uint64_t h = 1;
    for (int32_t t : prompt) s.prefix_hash.push_back(h = extend(h, t));
    s.family = next_family_++;
    EXPECT_EQ(r->num_cached_tokens % kB, 0);
    EXPECT_LT(r->num_cached_tokens, static_cast<int32_t>(prompt.size()));
    EXPECT_EQ(r->num_cached_tokens + r->num_tokens_to_compute, static_cast<int32_t>(prompt.size()));
    if (r->num_cached_tokens > 0) ++hits;
    // The reused prefix must already hold exactly this prompt's KV.
    const BlockTable* t = kv_.table(r->id);
    for (int32_t p = 0; p < r->num_cached_tokens; ++p)
      ASSERT_EQ(store_[t->slotOf(p)], s.prefix_hash[p]) << "reused block holds other KV";
    s.computed = r->num_cached_tokens;
    auto& stored = seqs_[r->id] = s;
    if (pick(0, 1)) writeKv(r->id, stored, static_cast<int32_t>(prompt.size()));
  }

  void computeChunk() {
    std::vector<SeqId> ids;
    for (auto& [id, s] : seqs_)
      if (s.computed < static_cast<int32_t>(s.tokens.size())) ids.push_back(id);
    if (ids.empty()) return;
    const SeqId id = ids[pick(0, static_cast<int>(ids.size()) - 1)];
    ModelSeq& s = seqs_[id];
    const int32_t left = static_cast<int32_t>(s.tokens.size()) - s.computed;
    writeKv(id, s, s.computed + pick(1, left));
  }

  void append() {
    const SeqId id = randomSeq(/*fully_computed=*/true);
    if (id < 0) return;
    ModelSeq& s = seqs_[id];
    std::vector<int32_t> toks;
    for (int n = pick(1, 3); n > 0; --n) toks.push_back(pick(0, 6));
    const std::vector<BlockId> blocks_before = kv_.table(id)->blocks();
    const int32_t needed = kv_.blocksNeededToAppend(id, static_cast<int32_t>(toks.size()));
    const KvUsage before = kv_.usage();
    auto r = kv_.appendTokens(id, toks);
    if (!r.ok()) {
      ++append_refused;
      EXPECT_GT(needed, before.free + before.cached);
      EXPECT_TRUE(isOutOfKvBlocks(r.status()));
      EXPECT_EQ(kv_.table(id)->blocks(), blocks_before);
      EXPECT_EQ(kv_.table(id)->numTokens(), static_cast<int32_t>(s.tokens.size()));
      EXPECT_EQ(kv_.usage().used, before.used);
      return;
    }
    EXPECT_EQ(r->slots.size(), toks.size());
    // The backend's copies happen before the step writes the new tokens.
    for (const BlockCopy& c : r->copies) {
      ++copies;
      std::copy(store_.begin() + c.src * kB, store_.begin() + (c.src + 1) * kB,
                store_.begin() + c.dst * kB);
    }
    for (int32_t t : toks) {
      s.tokens.push_back(t);
      s.prefix_hash.push_back(extend(s.prefix_hash.back(), t));
    }
    for (size_t i = 0; i < toks.size(); ++i)
      EXPECT_EQ(r->slots[i], kv_.table(id)->slotOf(s.computed + static_cast<int32_t>(i)));
    writeKv(id, s, static_cast<int32_t>(s.tokens.size()));
  }

  void fork() {
    const SeqId id = randomSeq(/*fully_computed=*/true);
    if (id < 0) return;
    auto r = kv_.fork(id);
    ASSERT_TRUE(r.ok());
    seqs_[*r] = seqs_[id];
  }

  void freeOne() {
    const SeqId id = randomSeq(/*fully_computed=*/false);
    if (id < 0) return;
    ASSERT_TRUE(kv_.free(id).ok());
    seqs_.erase(id);
  }

  void checkInvariants() {
    const BlockPool& pool = kv_.pool();
    std::map<BlockId, int> refs;
    std::map<BlockId, std::set<int>> families;
    for (auto& [id, s] : seqs_) {
      const BlockTable* t = kv_.table(id);
      ASSERT_NE(t, nullptr);
      ASSERT_EQ(t->tokens(), s.tokens);
      ASSERT_EQ(t->blocks().size(), (s.tokens.size() + kB - 1) / kB);
      std::set<BlockId> mine(t->blocks().begin(), t->blocks().end());
      ASSERT_EQ(mine.size(), t->blocks().size()) << "a block twice in one table";
      for (BlockId b : t->blocks()) {
        ++refs[b];
        families[b].insert(s.family);
      }
      // Every computed token reads back its own KV (no block shared that should not be).
      for (int32_t p = 0; p < s.computed; ++p)
        ASSERT_EQ(store_[t->slotOf(p)], s.prefix_hash[p]) << "seq " << id << " pos " << p;
      // The block still being written is never cached.
      if (s.tokens.size() % kB != 0) {
        ASSERT_FALSE(pool.isCached(t->blocks().back()));
      }
    }
    int cached = 0;
    for (BlockId b = 0; b < kNumBlocks; ++b) {
      const int expected = refs.count(b) ? refs[b] : 0;
      ASSERT_EQ(pool.refCount(b), expected) << "block " << b;
      if (pool.isFree(b)) {
        ASSERT_FALSE(pool.isCached(b));
      }
      if (expected == 0) {
        ASSERT_TRUE(pool.isFree(b) || pool.isCached(b));
      }
      // Shared across unrelated sequences only through the prefix cache.
      if (families.count(b) && families[b].size() > 1) {
        ASSERT_TRUE(pool.isCached(b)) << b;
      }
      if (pool.isCached(b)) {
        ++cached;
        ASSERT_TRUE(kv_.prefixTree().contains(b));
      }
    }
    ASSERT_EQ(cached, kv_.prefixTree().numCachedBlocks());
    const KvUsage u = kv_.usage();
    ASSERT_EQ(u.used, static_cast<int32_t>(refs.size()));
    ASSERT_EQ(u.used + u.cached + u.free, u.total);
  }

  std::mt19937 rng_;
  KvCacheManager kv_;
  std::vector<uint64_t> store_;  // simulated K/V: one prefix hash per slot
  std::vector<int32_t> docs_[4];
  std::map<SeqId, ModelSeq> seqs_;
  int next_family_ = 0;
};

TEST(KvCacheStress, RandomOperationsKeepRefcountsAndContentsRight) {
  const uint32_t base = ingot::testing::testSeed();
  for (uint32_t round = 0; round < 8; ++round) {
    const uint32_t seed = base + round;
    SCOPED_TRACE("round " + std::to_string(round) + " (seed + " + std::to_string(round) + ")");
    KvStress stress(seed);
    stress.run(4000);
    if (::testing::Test::HasFailure()) return;
    // The run must have exercised the interesting paths.
    EXPECT_GT(stress.hits, 0);
    EXPECT_GT(stress.refused + stress.append_refused, 0);
    EXPECT_GT(stress.copies, 0);
  }
}

}  // namespace
}  // namespace ingot
