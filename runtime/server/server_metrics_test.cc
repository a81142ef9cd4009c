// Prometheus text: cumulative histogram buckets and every counter/gauge /metrics promises.
#include "runtime/server/server_metrics.h"

#include <gtest/gtest.h>

namespace ingot::server {
namespace {

TEST(ServerMetrics, HistogramBucketsAreCumulative) {
  Histogram h({1, 2});
  for (double v : {0.5, 1.5, 1.7, 9.0}) h.observe(v);
  std::string out;
  h.render("x", "help", &out);
  EXPECT_NE(out.find("x_bucket{le=\"1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"2\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_count 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("# TYPE x histogram\n"), std::string::npos);
}

TEST(ServerMetrics, RendersEveryPromisedSeries) {
  ServerMetrics m;
  m.observeTimeToFirstToken(0.1);
  m.observeInterTokenLatency(0.01);
  m.observeEndToEndLatency(1);
  m.observeBatchSize(8);
  EngineMetrics e;
  e.prompt_tokens = 11;
  e.kv_blocks_used = 3;
  std::string text = m.render(e);
  for (const char* s : {"ingot_time_to_first_token_seconds_count 1", "ingot_inter_token_latency_seconds_count 1",
                        "ingot_e2e_request_latency_seconds_count 1", "ingot_running_batch_size_sum 8",
                        "ingot_prompt_tokens_total 11", "ingot_generation_tokens_total 0",
                        "ingot_prefix_cache_hit_tokens_total 0", "ingot_preemptions_total 0",
                        "ingot_num_requests_running 0", "ingot_num_requests_waiting 0",
                        "ingot_kv_blocks_used 3"})
    EXPECT_NE(text.find(s), std::string::npos) << s;
}

}  // namespace
}  // namespace ingot::server
