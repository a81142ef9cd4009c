// Packed CUDA step inputs, decode buckets, split-KV and KV pool sizing, on the CPU.
#include "runtime/backend/cuda/step_pack.h"
#include "testing/test_seed.h"

#include <random>
#include <set>

#include <gtest/gtest.h>

namespace ingot {
namespace {

/// A decode step of `R` requests with random lengths over shuffled-looking blocks.
StepInputs decodeStep(std::mt19937& rng, int32_t R, int32_t block_size, int32_t max_blocks) {
  StepInputs in;
  in.num_requests = R;
  in.max_blocks_per_request = max_blocks;
  std::uniform_int_distribution<int32_t> len(1, block_size * max_blocks);
  in.query_start.push_back(0);
  for (int32_t r = 0; r < R; ++r) {
    const int32_t n = len(rng);
    in.tokens.push_back(static_cast<int32_t>(rng() % 1000));
    in.positions.push_back(n - 1);
    in.seq_lens.push_back(n);
    in.query_start.push_back(r + 1);
    for (int32_t b = 0; b < max_blocks; ++b) in.block_tables.push_back(r * max_blocks + b + 1);
    in.slot_mapping.push_back(in.block_tables[r * max_blocks + (n - 1) / block_size] * block_size +
                              (n - 1) % block_size);
    in.logit_rows.push_back(r);
  }
  return in;
}

TEST(StepPack, LayoutAlignsEveryArrayAndHoldsItsLength) {
  const StepDims d{5, 3, 7, 2};
  const StepLayout l = stepLayout(d);
  const int64_t starts[] = {l.tokens, l.positions, l.slot_mapping, l.seq_lens, l.query_start,
                            l.block_tables, l.logit_rows, l.run_tokens, l.run_starts};
  const int64_t lengths[] = {5, 5, 5, 3, 4, 21, 2, 5, 6};
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(starts[i] % 16, 0) << i;
    const int64_t end = i + 1 < 9 ? starts[i + 1] : l.words;
    EXPECT_GE(end - starts[i], lengths[i]) << i;
  }
}

TEST(StepPack, PaddedDecodeStepKeepsRealRowsAndMakesPaddingHarmless) {
  std::mt19937 rng(ingot::testing::testSeed());
  const StepInputs in = decodeStep(rng, 3, 16, 4);
  const StepDims dims{8, 8, 6, 8};
  const StepLayout l = stepLayout(dims);
  std::vector<int32_t> out(l.words, -777);
  ASSERT_TRUE(packStepInputs(in, dims, 42, out.data()).ok());
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(out[l.tokens + t], in.tokens[t]);
    EXPECT_EQ(out[l.positions + t], in.positions[t]);
    EXPECT_EQ(out[l.slot_mapping + t], in.slot_mapping[t]);
    EXPECT_EQ(out[l.seq_lens + t], in.seq_lens[t]);
    for (int b = 0; b < 4; ++b)
      EXPECT_EQ(out[l.block_tables + t * 6 + b], in.block_tables[t * 4 + b]);
    for (int b = 4; b < 6; ++b) EXPECT_EQ(out[l.block_tables + t * 6 + b], 42);
  }
  for (int t = 3; t < 8; ++t) {
    EXPECT_EQ(out[l.tokens + t], 0);
    EXPECT_EQ(out[l.slot_mapping + t], -1) << "a padded token must not write the KV cache";
    EXPECT_EQ(out[l.seq_lens + t], 1);
    for (int b = 0; b < 6; ++b) EXPECT_EQ(out[l.block_tables + t * 6 + b], 42);
    EXPECT_EQ(out[l.logit_rows + t], 0);
  }
  for (int r = 0; r <= 8; ++r) EXPECT_EQ(out[l.query_start + r], r);
}

TEST(StepPack, EagerPackIsTheInputsThemselves) {
  std::mt19937 rng(ingot::testing::testSeed());
  StepInputs in = decodeStep(rng, 4, 16, 3);
  in.logit_rows = {3, 1};
  const StepDims dims = stepDims(in);
  std::vector<int32_t> out(stepLayout(dims).words);
  ASSERT_TRUE(packStepInputs(in, dims, 0, out.data()).ok());
  const StepLayout l = stepLayout(dims);
  EXPECT_EQ(out[l.logit_rows], 3);
  EXPECT_EQ(out[l.logit_rows + 1], 1);
  EXPECT_EQ(out[l.query_start + 4], 4);
}

TEST(StepPack, AStepLargerThanItsBuffersIsRefused) {
  std::mt19937 rng(1);
  const StepInputs in = decodeStep(rng, 5, 16, 3);
  std::vector<int32_t> out(1024);
  const Status s = packStepInputs(in, StepDims{4, 4, 3, 4}, 0, out.data());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("does not fit"), std::string::npos) << s.message();
  EXPECT_FALSE(packStepInputs(in, StepDims{8, 8, 3, 8}, -1, out.data()).ok());
}

TEST(StepPack, OnlyOneTokenPerRequestWithAllLogitsIsPlainDecode) {
  std::mt19937 rng(2);
  StepInputs in = decodeStep(rng, 3, 16, 2);
  EXPECT_TRUE(isPlainDecode(in));
  StepInputs fewer = in;
  fewer.logit_rows = {0, 2};
  EXPECT_FALSE(isPlainDecode(fewer));
  StepInputs chunk = in;
  chunk.tokens.push_back(1);
  chunk.positions.push_back(0);
  chunk.slot_mapping.push_back(99);
  chunk.query_start.back() = 4;
  chunk.logit_rows.push_back(3);
  EXPECT_FALSE(isPlainDecode(chunk));
  StepInputs tree = in;
  const int64_t shape[1] = {3};
  const int32_t data[3] = {0, 0, 0};
  tree.extra_inputs.push_back({RegionType::kI32, shape, 1, data});
  EXPECT_FALSE(isPlainDecode(tree));
}

TEST(StepPack, DecodeBucketsGrowGeometricallyThenLinearly) {
  const std::vector<int32_t> b = decodeBuckets(256);
  const std::vector<int32_t> head = {1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128,
                                     160, 192, 224, 256};
  EXPECT_EQ(b, head);
  EXPECT_EQ(decodeBuckets(100).back(), 100);
  EXPECT_EQ(decodeBucket(1, b), 1);
  EXPECT_EQ(decodeBucket(3, b), 4);
  EXPECT_EQ(decodeBucket(65, b), 80);
  EXPECT_EQ(decodeBucket(257, b), -1);
  for (size_t i = 1; i < b.size(); ++i)
    EXPECT_LE(b[i] - b[i - 1], b[i] <= 64 ? 8 : b[i] <= 128 ? 16 : 32) << "padded rows stay few";
}

TEST(StepPack, SplitsFillTheGpuOnlyWhenRequestsDoNot) {
  // One request, 3 kv heads, 8k keys on 132 SMs: many splits of >= 256 keys.
  SplitPlan p = chooseSplits(8192, 3, 132, 32);
  EXPECT_GT(p.num_splits, 1);
  EXPECT_EQ(p.keys_per_split % 32, 0);
  EXPECT_GE(p.keys_per_split, 256);
  EXPECT_GE(int64_t{p.num_splits} * p.keys_per_split, 8192);
  EXPECT_LT(int64_t{p.num_splits - 1} * p.keys_per_split, 8192) << "no empty trailing split";
  // Enough CTAs already: one split that covers every key.
  p = chooseSplits(8192, 64 * 8, 132, 32);
  EXPECT_EQ(p.num_splits, 1);
  EXPECT_GE(p.keys_per_split, 8192);
  // Short sequences are not split.
  p = chooseSplits(100, 1, 132, 32);
  EXPECT_EQ(p.num_splits, 1);
}

TEST(StepPack, KvPoolTakesWhatTheUtilizationLeaves) {
  const uint64_t GiB = 1ull << 30;
  // 80 GiB GPU, 20 GiB in use: 0.9 allows 72, so 52 - 1 reserved = 51 GiB of 1 MiB blocks.
  StatusOr<int64_t> n = kvBlocksForMemory(60 * GiB, 80 * GiB, 0.9, 1 * GiB, 1 << 20, 1);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 51 * 1024);
  // Another process holds most of it: not even the minimum fits, and the error says why.
  n = kvBlocksForMemory(5 * GiB, 80 * GiB, 0.9, 1 * GiB, 1 << 20, 8192);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("--gpu-memory-utilization"), std::string::npos);
  EXPECT_FALSE(kvBlocksForMemory(GiB, GiB, 0.0, 0, 1, 1).ok());
  EXPECT_FALSE(kvBlocksForMemory(GiB, GiB, 1.5, 0, 1, 1).ok());
}

TEST(StepPack, KvRunsGroupEachBlocksTokensInTokenOrderAndPadWithEmptyRuns) {
  std::mt19937 rng(ingot::testing::testSeed());
  const int32_t bs = 4;
  for (int trial = 0; trial < 50; ++trial) {
    // Slots of a few requests interleaved at random (each request's own slots ascending),
    // so one block's tokens need not be adjacent in the step.
    StepInputs in;
    std::vector<int32_t> next = {0, 40, 80};
    const int32_t T = 1 + static_cast<int32_t>(rng() % 20);
    for (int32_t t = 0; t < T; ++t) in.slot_mapping.push_back(next[rng() % 3]++);
    const StepDims dims{T + static_cast<int32_t>(rng() % 4), 1, 1, 1};
    const StepLayout l = stepLayout(dims);
    std::vector<int32_t> out(static_cast<size_t>(l.words), -777);
    const int32_t runs = packKvRuns(in, dims, bs, out.data());
    const int32_t* tokens = out.data() + l.run_tokens;
    const int32_t* starts = out.data() + l.run_starts;
    std::set<int32_t> blocks, seen;
    for (int32_t s : in.slot_mapping) blocks.insert(s / bs);
    ASSERT_EQ(runs, static_cast<int32_t>(blocks.size()));
    ASSERT_EQ(starts[0], 0);
    for (int32_t r = 0; r < runs; ++r) {
      ASSERT_LT(starts[r], starts[r + 1]) << "a real run is not empty";
      const int32_t block = in.slot_mapping[tokens[starts[r]]] / bs;
      EXPECT_TRUE(seen.insert(block).second) << "block " << block << " in two runs";
      for (int32_t i = starts[r]; i < starts[r + 1]; ++i) {
        EXPECT_EQ(in.slot_mapping[tokens[i]] / bs, block);
        if (i > starts[r]) EXPECT_LT(tokens[i - 1], tokens[i]) << "token order within a run";
      }
    }
    for (int32_t r = runs; r <= dims.tokens; ++r) EXPECT_EQ(starts[r], T) << "empty padding runs";
  }
}

}  // namespace
}  // namespace ingot
