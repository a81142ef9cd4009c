// The engine's path for backends that sample where the logits are (Backend::stepAndSample):
// a CPU backend wrapped to sample with the GPU kernel's algorithm run on the host gives every
// seeded request exactly the tokens of host sampling, batched with greedy, filtered and
// penalized requests (those fall back to logits), and parallel samples.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "codegen/cuda/kernels/sampling.cuh"
#include "runtime/backend/cpu/cpu_backend.h"
#include "testing/llama_program.h"
#include "testing/test_seed.h"
#include "runtime/engine/engine.h"

namespace ingot {
namespace {

constexpr int kVocab = 256;

const Artifact& tinyLlama() { return testing::sharedLlamaArtifact(kVocab, 512, 11); }

/// A CPU backend that "samples on the backend" as the CUDA one does: its step(), then the
/// sampling kernel's algorithm per logit row (sampling::sampleRowHost).
class HostSamplingBackend final : public Backend {
 public:
  explicit HostSamplingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  Status step(const StepInputs& in, std::vector<float>* logits) override {
    ++logit_steps;
    return inner_->step(in, logits);
  }
  bool samplesOnBackend() const override { return true; }
  Status stepAndSample(const StepInputs& in, const std::vector<RowSampling>& rows,
                       std::vector<int32_t>* tokens) override {
    ++sampled_steps;
    EXPECT_EQ(rows.size(), in.logit_rows.size());
    INGOT_RETURN_IF_ERROR(inner_->step(in, &logits_));
    tokens->resize(rows.size());
    const int64_t vocab = inner_->vocabSize();
    for (size_t i = 0; i < rows.size(); ++i) {
      sampling::RowParams p{rows[i].temperature, rows[i].top_k, rows[i].top_p, rows[i].min_p,
                            rows[i].u};
      (*tokens)[i] = sampling::sampleRowHost(logits_.data() + i * vocab, static_cast<int>(vocab), p);
    }
    return okStatus();
  }
  Status copyKvBlocks(int64_t src, int64_t dst) override { return inner_->copyKvBlocks(src, dst); }
  Status copyKvSlots(const std::vector<std::pair<int32_t, int32_t>>& moves) override {
    return inner_->copyKvSlots(moves);
  }
  int64_t numKvBlocks() const override { return inner_->numKvBlocks(); }
  int64_t vocabSize() const override { return inner_->vocabSize(); }
  int32_t numExtraInputs() const override { return inner_->numExtraInputs(); }
  bool takesTreeInputs() const override { return inner_->takesTreeInputs(); }
  double attentionMacCost() const override { return inner_->attentionMacCost(); }
  int numThreads() const override { return inner_->numThreads(); }
  uint64_t matrixBytes() const override { return inner_->matrixBytes(); }
  KvDtype kvDtype() const override { return inner_->kvDtype(); }

  int logit_steps = 0, sampled_steps = 0;

 private:
  std::unique_ptr<Backend> inner_;
  std::vector<float> logits_;
};

std::unique_ptr<Engine> makeEngine(HostSamplingBackend** wrapper) {
  EngineOptions o;
  o.num_threads = 2;
  o.num_kv_blocks = 256;
  o.scheduler.max_batched_tokens = 64;
  o.eos_token_ids = std::vector<int32_t>{};
  if (wrapper)
    o.backend_factory = [wrapper](const Artifact& a, const BackendRequest& r)
        -> StatusOr<std::unique_ptr<Backend>> {
      CpuBackendOptions c;
      c.num_threads = r.num_threads;
      c.num_kv_blocks = r.num_kv_blocks > 0 ? r.num_kv_blocks : 256;
      StatusOr<std::unique_ptr<CpuBackend>> cpu = CpuBackend::create(a, c);
      if (!cpu.ok()) return cpu.status();
      auto w = std::make_unique<HostSamplingBackend>(std::move(cpu).value());
      *wrapper = w.get();
      return std::unique_ptr<Backend>(std::move(w));
    };
  StatusOr<std::unique_ptr<Engine>> e = Engine::create(tinyLlama(), o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(*e);
}

std::map<RequestId, std::vector<int32_t>> run(Engine& e) {
  std::map<RequestId, std::vector<int32_t>> tokens;
  while (e.hasWork()) {
    StatusOr<std::vector<RequestOutput>> outs = e.step();
    EXPECT_TRUE(outs.ok()) << outs.status().message();
    if (!outs.ok()) break;
    for (const RequestOutput& o : *outs)
      tokens[o.id].insert(tokens[o.id].end(), o.token_ids.begin(), o.token_ids.end());
  }
  return tokens;
}

/// A mix of requests: greedy, plain temperature, top-k, top-p, min-p and their mixes.
std::vector<std::pair<std::vector<int32_t>, SamplingParams>> requests(std::mt19937& rng,
                                                                      bool penalized) {
  std::vector<std::pair<std::vector<int32_t>, SamplingParams>> out;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> prompt(5 + 3 * i);
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % kVocab);
    SamplingParams p;
    p.max_tokens = 16;
    p.seed = rng();
    p.temperature = i == 0 ? 0.0f : 0.6f + 0.1f * i;
    p.top_k = i % 3 == 1 ? 12 : 0;
    p.top_p = i % 3 == 2 ? 0.85f : 1.0f;
    p.min_p = i >= 5 ? 0.05f : 0.0f;
    if (penalized && i == 3) p.repetition_penalty = 1.3f;
    out.push_back({prompt, p});
  }
  return out;
}

TEST(EngineBackendSamplingTest, SeededRequestsGetTheTokensOfHostSampling) {
  std::mt19937 rng(ingot::testing::testSeed());
  const auto reqs = requests(rng, false);
  HostSamplingBackend* wrapper = nullptr;
  std::unique_ptr<Engine> host = makeEngine(nullptr), backend = makeEngine(&wrapper);
  ASSERT_TRUE(wrapper);
  std::vector<RequestId> a, b;
  for (const auto& [prompt, p] : reqs) {
    a.push_back(*host->addRequest(prompt, p));
    b.push_back(*backend->addRequest(prompt, p));
  }
  auto ta = run(*host), tb = run(*backend);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(ta[a[i]].size(), 16u);
    EXPECT_EQ(ta[a[i]], tb[b[i]]) << "request " << i;
  }
  EXPECT_GT(wrapper->sampled_steps, 0);
  EXPECT_EQ(wrapper->logit_steps, 0) << "every row could be sampled on the backend";
}

TEST(EngineBackendSamplingTest, AStepWithAPenalizedRequestFallsBackToLogits) {
  std::mt19937 rng(ingot::testing::testSeed());
  const auto reqs = requests(rng, true);
  HostSamplingBackend* wrapper = nullptr;
  std::unique_ptr<Engine> host = makeEngine(nullptr), backend = makeEngine(&wrapper);
  std::vector<RequestId> a, b;
  for (const auto& [prompt, p] : reqs) {
    a.push_back(*host->addRequest(prompt, p));
    b.push_back(*backend->addRequest(prompt, p));
  }
  auto ta = run(*host), tb = run(*backend);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(ta[a[i]], tb[b[i]]) << "request " << i;
  EXPECT_GT(wrapper->logit_steps, 0) << "the penalized request needs the logits";
}

TEST(EngineBackendSamplingTest, ParallelSamplesTakeTheLogitsPath) {
  std::mt19937 rng(ingot::testing::testSeed());
  HostSamplingBackend* wrapper = nullptr;
  std::unique_ptr<Engine> host = makeEngine(nullptr), backend = makeEngine(&wrapper);
  std::vector<int32_t> prompt(20);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % kVocab);
  SamplingParams p;
  p.max_tokens = 8;
  p.temperature = 0.9f;
  p.seed = 5;
  StatusOr<RequestId> ra = host->addRequest(prompt, p, 0, 3), rb = backend->addRequest(prompt, p, 0, 3);
  ASSERT_TRUE(ra.ok() && rb.ok());
  auto ta = run(*host), tb = run(*backend);
  EXPECT_EQ(ta.size(), 3u);
  EXPECT_EQ(ta, tb);
}

}  // namespace
}  // namespace ingot
