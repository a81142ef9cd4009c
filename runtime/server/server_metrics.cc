// ServerMetrics: latency/batch histograms plus engine counters, rendered as Prometheus text.
#include "runtime/server/server_metrics.h"

#include <cstdio>

namespace ingot::server {
namespace {

// Bucket bounds follow vLLM's choices for the same metrics, so dashboards carry over.
const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25,
                                         0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kItlBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
                                        0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0};
const std::vector<double> kE2eBounds = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
                                        20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0};
const std::vector<double> kBatchBounds = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256};

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void scalar(const char* type, const std::string& name, const std::string& help, double value,
            std::string* out) {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  *out += name + " " + num(value) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  ++count_;
  sum_ += value;
}

void Histogram::render(const std::string& name, const std::string& help, std::string* out) const {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  *out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  *out += name + "_sum " + num(sum_) + "\n";
  *out += name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_(kTtftBounds), itl_(kItlBounds), e2e_(kE2eBounds), batch_(kBatchBounds) {}

void ServerMetrics::observeTimeToFirstToken(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(s);
}
void ServerMetrics::observeInterTokenLatency(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(s);
}
void ServerMetrics::observeEndToEndLatency(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  e2e_.observe(s);
}
void ServerMetrics::observeBatchSize(int32_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  batch_.observe(n);
}
void ServerMetrics::countRequest(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reason == "stop") ++finished_stop_;
  else if (reason == "length") ++finished_length_;
  else ++finished_abort_;
}

std::string ServerMetrics::render(const EngineMetrics& m) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ttft_.render("ingot_time_to_first_token_seconds", "Time from request arrival to its first token.", &out);
    itl_.render("ingot_inter_token_latency_seconds", "Time between two tokens of one request.", &out);
    e2e_.render("ingot_e2e_request_latency_seconds", "Time from request arrival to its end.", &out);
    batch_.render("ingot_running_batch_size", "Sequences in each engine step.", &out);
    out += "# HELP ingot_request_success_total Finished requests by finish reason.\n"
           "# TYPE ingot_request_success_total counter\n";
    out += "ingot_request_success_total{finished_reason=\"stop\"} " + std::to_string(finished_stop_) + "\n";
    out += "ingot_request_success_total{finished_reason=\"length\"} " + std::to_string(finished_length_) + "\n";
    out += "ingot_request_success_total{finished_reason=\"abort\"} " + std::to_string(finished_abort_) + "\n";
  }
  scalar("counter", "ingot_prompt_tokens_total", "Prompt tokens of accepted requests.", m.prompt_tokens, &out);
  scalar("counter", "ingot_generation_tokens_total", "Tokens generated.", m.generation_tokens, &out);
  scalar("counter", "ingot_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache.",
         m.prefix_cache_hit_tokens, &out);
  scalar("counter", "ingot_computed_tokens_total", "Tokens run through the model (prefill + decode).",
         m.computed_tokens, &out);
  scalar("counter", "ingot_preemptions_total", "Sequences preempted for KV space.", m.preemptions, &out);
  scalar("counter", "ingot_engine_steps_total", "Engine steps run.", m.steps, &out);
  scalar("counter", "ingot_spec_decode_num_drafts_total", "Speculative draft trees verified.",
         m.spec_trees, &out);
  scalar("counter", "ingot_spec_decode_num_draft_tokens_total",
         "Speculative draft tokens run through the model.", m.spec_draft_tokens, &out);
  scalar("counter", "ingot_spec_decode_num_path_tokens_total",
         "Draft tokens on the longest path of each verified tree.", m.spec_path_tokens, &out);
  scalar("counter", "ingot_spec_decode_num_accepted_tokens_total",
         "Speculative draft tokens accepted.", m.spec_accepted_tokens, &out);
  scalar("counter", "ingot_spec_decode_target_passes_total",
         "Model passes (engine steps) that verified at least one draft tree.",
         m.spec_target_passes, &out);
  scalar("gauge", "ingot_num_requests_running", "Sequences running.", m.running, &out);
  scalar("gauge", "ingot_num_requests_waiting", "Sequences waiting for a batch slot.", m.waiting, &out);
  scalar("gauge", "ingot_kv_blocks_used", "KV cache blocks held by sequences.", m.kv_blocks_used, &out);
  scalar("gauge", "ingot_kv_blocks_total", "KV cache blocks in the pool.", m.kv_blocks_total, &out);
  scalar("gauge", "ingot_kv_cache_usage_perc", "Fraction of KV blocks held by sequences.",
         m.kv_blocks_total > 0 ? double(m.kv_blocks_used) / m.kv_blocks_total : 0.0, &out);
  return out;
}

}  // namespace ingot::server
