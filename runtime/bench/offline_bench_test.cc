// The offline benchmark finishes every request and reports consistent numbers, closed or open loop.
#include "runtime/bench/offline_bench.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/llama_program.h"

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

TEST(OfflineBench, PoissonArrivalsWithFileLengthsFinishEveryRequest) {
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact({});
  ASSERT_TRUE(bytes.ok());
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*bytes);
  ASSERT_TRUE(artifact.ok());
  BenchOptions options;
  options.concurrency = 0;  // no cap: arrivals alone pace the run
  options.request_rate = 200;
  options.lengths = {{4, 3}, {9, 5}, {2, 1}};
  options.num_requests = 9;
  options.num_threads = 1;
  options.seed = 3;
  StatusOr<BenchResult> result = runOfflineBench(*artifact, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->requests, 9);
  EXPECT_EQ(result->prompt_tokens, 3 * (4 + 9 + 2));
  EXPECT_EQ(result->generated_tokens, 3 * (3 + 5 + 1));
  EXPECT_DOUBLE_EQ(result->request_rate, 200);
  // The run lasts at least until the last arrival.
  EXPECT_GE(result->seconds, poissonArrivals(200, 9, 3).back());
  EXPECT_GT(result->requests_per_s, 0);
  EXPECT_GT(result->tpot_ms.p50, 0);
  EXPECT_LE(result->tpot_ms.p50, result->tpot_ms.p99);
  nlohmann::json json = nlohmann::json::parse(benchResultsJson({*result}));
  EXPECT_EQ(json[0]["mode"], "offline");
  EXPECT_EQ(json[0]["request_rate"], 200.0);
  EXPECT_GT(json[0]["tpot_ms"]["p90"].get<double>(), 0);
  EXPECT_GT(json[0]["requests_per_s"].get<double>(), 0);
}

TEST(OfflineBench, ConcurrencyCapsAnOpenLoop) {
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact({});
  ASSERT_TRUE(bytes.ok());
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*bytes);
  ASSERT_TRUE(artifact.ok());
  BenchOptions options;
  options.concurrency = 2;
  options.request_rate = 1e6;  // everything arrives at once; the cap holds it back
  options.num_requests = 8;
  options.prompt_min = options.prompt_max = 4;
  options.output_min = options.output_max = 4;
  options.num_threads = 1;
  StatusOr<BenchResult> result = runOfflineBench(*artifact, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->requests, 8);
  EXPECT_LE(result->mean_batch, 2.0);
  EXPECT_GT(result->mean_batch, 1.0);
  options.concurrency = 0;
  options.request_rate = 0;  // no cap and no rate: nothing would pace the run
  EXPECT_FALSE(runOfflineBench(*artifact, options).ok());
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
