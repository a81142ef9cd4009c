// The offline benchmark finishes every request and reports consistent numbers.
#include "runtime/bench/offline_bench.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/backend/testing/llama_program.h"

namespace ingot {
namespace {

TEST(OfflineBench, PercentilesOfKnownValues) {
  LatencySummary s = summarize({5, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(s.p50, 3);
  EXPECT_DOUBLE_EQ(s.p99, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(summarize({}).p50, 0);
}

TEST(OfflineBench, CompletesEveryRequestAndCountsTheirTokens) {
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact({});
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*bytes);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  BenchOptions options;
  options.concurrency = 4;
  options.num_requests = 10;
  options.prompt_min = 3;
  options.prompt_max = 20;
  options.output_min = 2;
  options.output_max = 6;
  options.num_threads = 1;
  StatusOr<BenchResult> result = runOfflineBench(*artifact, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->requests, 10);
  EXPECT_GE(result->generated_tokens, 20);
  EXPECT_LE(result->generated_tokens, 60);
  EXPECT_GE(result->prompt_tokens, 30);
  EXPECT_GT(result->output_tokens_per_s, 0);
  EXPECT_GT(result->ttft_ms.p50, 0);
  EXPECT_LE(result->ttft_ms.p50, result->ttft_ms.p99);
  EXPECT_GT(result->mean_batch, 1.0);  // concurrency 4 batches requests together
  nlohmann::json json = nlohmann::json::parse(benchResultsJson({*result}));
  EXPECT_EQ(json[0]["requests"], 10);
  EXPECT_EQ(json[0]["concurrency"], 4);
}

TEST(OfflineBench, InterferenceMeasuresBothPhases) {
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact({});
  ASSERT_TRUE(bytes.ok());
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*bytes);
  ASSERT_TRUE(artifact.ok());
  InterferenceOptions options;
  options.decoders = 4;
  options.decoder_prompt = 8;
  options.long_prompt = 200;
  options.baseline_steps = 8;
  options.max_prefill_while_decoding = 16;
  options.max_batched_tokens = 64;
  options.num_threads = 1;
  StatusOr<InterferenceResult> r = runPrefillInterference(*artifact, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->baseline_itl_ms.p50, 0);
  EXPECT_GT(r->during_itl_ms.p50, 0);
  // 200 prompt tokens at <= 16 per step take at least 13 steps after it arrives.
  EXPECT_GE(r->long_prompt_ttft_ms, 12 * r->baseline_itl_ms.p50 * 0.5);
  EXPECT_GT(r->p99_ratio, 0);
}

TEST(OfflineBench, RejectsBadRanges) {
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact({});
  ASSERT_TRUE(bytes.ok());
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*bytes);
  ASSERT_TRUE(artifact.ok());
  BenchOptions options;
  options.prompt_min = 10;
  options.prompt_max = 5;
  EXPECT_FALSE(runOfflineBench(*artifact, options).ok());
}

}  // namespace
}  // namespace ingot
