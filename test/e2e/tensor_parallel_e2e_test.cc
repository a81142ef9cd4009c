// Tensor parallelism end to end: SmolLM2 and the tiny Llama compiled with --tp 1, 2 and 4
// (f32) give the same greedy tokens and logits, and each rank keeps ~1/N of the weights;
// quantized models (--quant, SmolLM2's exact Q4_1 int4 and the tiny Q4 GGUF in every format)
// give the logits of their --tp 1 artifact.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/tp_cpu_backend.h"
#include "runtime/engine/engine.h"
#include "runtime/generate/sequence_runner.h"
#include "test/e2e/golden_cases.h"

namespace ingot {
namespace {

/// The artifacts the ctest fixture compiles: `<dir>/<model>-tp<N>.ingot`.
std::string artifactPath(const std::string& model, int tp) {
  return std::string(INGOT_TP_ARTIFACTS) + "/" + model + "-tp" + std::to_string(tp) + ".ingot";
}

/// The artifact of `model` for every N in `tps` (tp 1 first), or none when one is missing.
std::vector<std::unique_ptr<Artifact>> openAll(const std::string& model,
                                               std::initializer_list<int> tps = {1, 2, 4}) {
  std::vector<std::unique_ptr<Artifact>> out;
  for (int tp : tps) {
    const std::string path = artifactPath(model, tp);
    if (!std::ifstream(path)) return {};
    StatusOr<Artifact> a = Artifact::open(path);
    EXPECT_TRUE(a.ok()) << a.status().message();
    if (!a.ok()) return {};
    EXPECT_EQ(tensorParallelWorldSize(*a), tp) << path;
    out.push_back(std::make_unique<Artifact>(std::move(a).value()));
  }
  return out;
}

#define SKIP_WITHOUT(artifacts, model)                                                        \
  if ((artifacts).empty())                                                                    \
  GTEST_SKIP() << artifactPath(model, 2) << " (and tp 1, 4) were not compiled (needs the "    \
                  "compiler with --tp, and INGOT_SMOLLM2_GGUF for smollm2)"

/// Logits of every position of `tokens` in one pass (chunked prefill), [n, vocab].
std::vector<float> teacherForced(const Artifact& artifact, const std::vector<int32_t>& tokens) {
  SequenceRunnerOptions o;
  o.num_threads = 2;
  o.max_tokens = 512;
  StatusOr<std::unique_ptr<SequenceRunner>> runner = SequenceRunner::create(artifact, o);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  if (!runner.ok()) return {};
  std::vector<float> logits;
  Status st = (*runner)->append(tokens, /*all_rows=*/true, &logits);
  EXPECT_TRUE(st.ok()) << st.message();
  return logits;
}

/// Greedy continuations of every prompt, batched through the engine.
std::vector<std::vector<int32_t>> engineGreedy(const Artifact& artifact,
                                               const std::vector<std::vector<int32_t>>& prompts,
                                               int32_t n) {
  return engineGreedyRuns(artifact, prompts, std::vector<int32_t>(prompts.size(), n),
                          SpeculativeOptions{});
}

/// For each tp > 1 artifact: the largest, over positions, of max |logit - reference| over
/// max |reference logit| at that position, at most `tolerance`.
void expectSameLogits(const std::vector<std::unique_ptr<Artifact>>& artifacts,
                      const std::vector<std::vector<int32_t>>& sequences, const char* model,
                      double tolerance = 1e-4) {
  const int64_t vocab = artifacts[0]->manifest().config()->vocab_size();
  for (size_t a = 1; a < artifacts.size(); ++a) {
    double worst = 0;
    for (const std::vector<int32_t>& seq : sequences) {
      const std::vector<float> ref = teacherForced(*artifacts[0], seq);
      const std::vector<float> got = teacherForced(*artifacts[a], seq);
      ASSERT_EQ(ref.size(), seq.size() * vocab);
      ASSERT_EQ(got.size(), ref.size());
      for (size_t pos = 0; pos < seq.size(); ++pos) {
        double maxRef = 0, maxDiff = 0;
        for (int64_t v = 0; v < vocab; ++v) {
          const double r = ref[pos * vocab + v], g = got[pos * vocab + v];
          ASSERT_TRUE(std::isfinite(r)) << model << " tp 1 position " << pos;
          ASSERT_TRUE(std::isfinite(g)) << model << " position " << pos;
          maxRef = std::max(maxRef, std::fabs(r));
          maxDiff = std::max(maxDiff, std::fabs(r - g));
        }
        ASSERT_GT(maxRef, 0) << model << " position " << pos << ": tp 1 logits are all zero";
        worst = std::max(worst, maxDiff / maxRef);
      }
    }
    const int tp = tensorParallelWorldSize(*artifacts[a]);
    std::printf("[ tp ] %s tp=%d: teacher-forced logits within %.3g of the max |logit|\n", model,
                tp, worst);
    EXPECT_LE(worst, tolerance) << model << " tp " << tp;
  }
}

std::vector<std::vector<int32_t>> smollm2Sequences(std::vector<std::vector<int32_t>>* prompts) {
  std::ifstream in(INGOT_GOLDENS_JSON);
  EXPECT_TRUE(in) << "cannot read " << INGOT_GOLDENS_JSON;
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> sequences;
  for (const auto& c : j.at("cases")) {
    std::vector<int32_t> seq = c.at("prompt_ids").get<std::vector<int32_t>>();
    prompts->push_back(seq);
    const auto greedy = c.at("greedy").get<std::vector<int32_t>>();
    seq.insert(seq.end(), greedy.begin(), greedy.end());
    sequences.push_back(std::move(seq));
  }
  return sequences;
}

/// Random token sequences of lengths 3, 17 and 40 below `vocab`.
std::vector<std::vector<int32_t>> randomSequences(int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> sequences;
  for (int n : {3, 17, 40}) {
    std::vector<int32_t> s(n);
    for (int32_t& t : s) t = static_cast<int32_t>(rng() % vocab);
    sequences.push_back(std::move(s));
  }
  return sequences;
}

TEST(TensorParallelE2E, SmolLM2Tp124GiveTheSameTeacherForcedLogits) {
  auto artifacts = openAll("smollm2");
  SKIP_WITHOUT(artifacts, "smollm2");
  std::vector<std::vector<int32_t>> prompts;
  const auto sequences = smollm2Sequences(&prompts);
  expectSameLogits(artifacts, sequences, "smollm2");
}

TEST(TensorParallelE2E, SmolLM2Tp124GiveTheSameGreedyTokens) {
  auto artifacts = openAll("smollm2");
  SKIP_WITHOUT(artifacts, "smollm2");
  std::vector<std::vector<int32_t>> prompts;
  smollm2Sequences(&prompts);
  const auto reference = engineGreedy(*artifacts[0], prompts, 32);
  ASSERT_EQ(reference.size(), prompts.size());
  for (size_t a = 1; a < artifacts.size(); ++a) {
    const auto got = engineGreedy(*artifacts[a], prompts, 32);
    for (size_t p = 0; p < prompts.size(); ++p)
      EXPECT_EQ(got[p], reference[p]) << "tp " << tensorParallelWorldSize(*artifacts[a])
                                      << " prompt " << p;
  }
}

TEST(TensorParallelE2E, TinyLlamaTp124GiveTheSameLogitsAndGreedyTokens) {
  auto artifacts = openAll("tiny-llama");
  SKIP_WITHOUT(artifacts, "tiny-llama");
  const int64_t vocab = artifacts[0]->manifest().config()->vocab_size();
  const auto sequences = randomSequences(vocab, 2024);
  expectSameLogits(artifacts, sequences, "tiny-llama");
  const auto reference = engineGreedy(*artifacts[0], sequences, 24);
  for (size_t a = 1; a < artifacts.size(); ++a)
    EXPECT_EQ(engineGreedy(*artifacts[a], sequences, 24), reference)
        << "tp " << tensorParallelWorldSize(*artifacts[a]);
}

// SmolLM2's Q4_1 blocks copied exactly (--quant int4, other tensors f32) and sharded: each
// rank's slices are the source blocks it covers, so only the row-parallel sums' order
// differs from tp 1 (measured: 3.3e-6).
TEST(TensorParallelE2E, SmolLM2Int4Tp2GivesTheLogitsOfTp1) {
  auto artifacts = openAll("smollm2-int4", {1, 2});
  SKIP_WITHOUT(artifacts, "smollm2-int4");
  std::vector<std::vector<int32_t>> prompts;
  const auto sequences = smollm2Sequences(&prompts);
  expectSameLogits(artifacts, sequences, "smollm2-int4", 1e-5);
}

// The tiny Q4 GGUF (hidden 64, MLP 128, head_dim 16) in every format: tp 2, and NVFP4 at
// tp 3, whose MLP split is one of whole 16-blocks (48 / 48 / 32) and whose global scales are
// replicated.
TEST(TensorParallelE2E, TinyQ4QuantizedTpGivesTheLogitsOfTp1) {
  for (const char* format : {"int4", "fp8", "nvfp4", "mxfp4"}) {
    const std::string model = std::string("tiny-q4-") + format;
    auto artifacts = std::string(format) == "nvfp4" ? openAll(model, {1, 2, 3})
                                                    : openAll(model, {1, 2});
    SKIP_WITHOUT(artifacts, model);
    const int64_t vocab = artifacts[0]->manifest().config()->vocab_size();
    expectSameLogits(artifacts, randomSequences(vocab, 77), model.c_str(), 1e-5);
  }
}

/// Resident bytes (Rss) of the mapping that holds `address`, from /proc/self/smaps.
uint64_t residentBytesOfMapping(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo <= a && a < hi;
      continue;
    }
    unsigned long long kb = 0;
    if (inside && std::sscanf(line.c_str(), "Rss: %llu kB", &kb) == 1) return kb * 1024;
  }
  return 0;
}

TEST(TensorParallelE2E, SmolLM2EachRankKeepsAboutOneNthOfTheShardedWeightsResident) {
  for (int tp : {2, 4}) {
    const std::string path = artifactPath("smollm2", tp);
    if (!std::ifstream(path)) GTEST_SKIP() << path << " was not compiled";
    // One mapping per rank, so each mapping's Rss counts what that rank touched.
    std::vector<Artifact> maps;
    for (int r = 0; r < tp; ++r) {
      StatusOr<Artifact> a = Artifact::open(path);
      ASSERT_TRUE(a.ok()) << a.status().message();
      maps.push_back(std::move(a).value());
    }
    const Artifact& a = maps[0];
    uint64_t replicated = 0, sharded = 0;
    std::vector<uint64_t> own(tp, 0);
    std::vector<int32_t> anyTensor(tp, -1);
    for (size_t i = 0; i < a.numTensors(); ++i) {
      const schema::TensorDef& t = a.tensor(i);
      if (t.tp_rank() < 0) {
        replicated += t.size();
        continue;
      }
      own[t.tp_rank()] += t.size();
      sharded += t.size();
      anyTensor[t.tp_rank()] = static_cast<int32_t>(i);
    }
    StatusOr<std::unique_ptr<SharedMemoryGroup>> group = SharedMemoryGroup::create(tp);
    ASSERT_TRUE(group.ok());
    std::vector<std::unique_ptr<CpuBackend>> ranks;
    for (int r = 0; r < tp; ++r) {
      CpuBackendOptions o;
      o.num_threads = 1;
      o.num_kv_blocks = 4;
      o.tp_rank = r;
      o.communicator = (*group)->communicator(r);
      StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(maps[r], o);
      ASSERT_TRUE(b.ok()) << b.status().message();
      ranks.push_back(std::move(b).value());
    }
    StepInputs in;
    in.tokens = {1, 2, 3, 4};
    in.positions = {0, 1, 2, 3};
    in.slot_mapping = {0, 1, 2, 3};
    in.num_requests = 1;
    in.max_blocks_per_request = 1;
    in.block_tables = {0};
    in.seq_lens = {4};
    in.query_start = {0, 4};
    in.logit_rows = {3};
    std::vector<Status> st(tp);
    std::vector<std::vector<float>> logits(tp);
    std::vector<std::thread> threads;
    for (int r = 0; r < tp; ++r)
      threads.emplace_back([&, r] { st[r] = ranks[r]->step(in, &logits[r]); });
    for (std::thread& t : threads) t.join();
    const uint64_t manifest = a.header().manifest_offset + a.header().manifest_size;
    for (int r = 0; r < tp; ++r) {
      ASSERT_TRUE(st[r].ok()) << st[r].message();
      const uint64_t rss = residentBytesOfMapping(maps[r].tensorBytes(anyTensor[r]).data);
      const double share = static_cast<double>(rss) / static_cast<double>(replicated + sharded);
      std::printf("[ tp ] smollm2 tp=%d rank %d: resident %.1f MiB of its artifact mapping; "
                  "replicated %.1f MiB + own shards %.1f MiB (all shards %.1f MiB, / %d = %.1f "
                  "MiB); manifest %.1f MiB; %.3f of all weight bytes\n",
                  tp, r, rss / 1048576.0, replicated / 1048576.0, own[r] / 1048576.0,
                  sharded / 1048576.0, tp, sharded / tp / 1048576.0, manifest / 1048576.0, share);
      // What the rank touched: the replicated tensors, its shards and the manifest, give
      // or take the kernel's fault-around at the edges of its ranges.
      const double expected = static_cast<double>(replicated + own[r] + manifest);
      EXPECT_LE(rss, expected + 4.0 * 1048576) << "rank " << r;
      EXPECT_GE(rss, 0.9 * static_cast<double>(own[r])) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace ingot
