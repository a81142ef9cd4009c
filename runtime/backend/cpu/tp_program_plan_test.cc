// A rank's program on its own: the vocab-parallel embedding and head with their collectives,
// computed by hand, and the planner's errors for malformed sharded programs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "core/artifact/artifact_writer.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/dist/shared_memory_group.h"

namespace ingot {
namespace {

using schema::BufferKind;
using schema::DType;
using schema::OpKind;

constexpr int64_t kVocab = 64, kHidden = 8, kRanks = 2, kShard = kVocab / kRanks;

/// What to break in the two-rank program embedding -> all_reduce -> logits -> all_gather.
struct Breakage {
  int64_t vocab_start_shift = 0;  // added to each rank's vocab_start
  int64_t gather_width = kVocab;  // the all_gather output's width
  bool reduce_into_logits = false;  // an all_reduce writes the logits output
  bool read_slice = false;          // an add reads the head's slice of the logits
  /// Activation slots as written (embedded, hidden, logits slice), unchecked and unplanned
  /// by the writer: all -1 is an artifact older than format 1.3. Empty: the writer plans.
  std::vector<int32_t> slots;
};

/// Two ranks: rank r holds table rows [r * 32, r * 32 + 32) (tied head).
std::vector<uint8_t> buildProgram(const Breakage& k, std::vector<float>* table) {
  ArtifactWriter w;
  if (!k.slots.empty()) w.skipValidationForTesting();
  ModelConfig config;
  config.architecture = "llama";
  config.name = "tp-plan-test";
  config.vocabSize = kVocab;
  config.hiddenSize = kHidden;
  config.intermediateSize = 16;
  config.numLayers = 1;
  config.numHeads = 2;
  config.numKvHeads = 2;
  config.headDim = 4;
  config.maxContext = 64;
  config.kvBlockSize = 16;
  w.setModelConfig(config);
  w.setTensorParallel(kRanks);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  table->resize(kVocab * kHidden);
  for (float& x : *table) x = u(rng);
  for (int32_t r = 0; r < kRanks; ++r) {
    std::vector<uint8_t> bytes(kShard * kHidden * 4);
    std::memcpy(bytes.data(), table->data() + r * kShard * kHidden, bytes.size());
    const int32_t t = w.addTensor({"model.embed_tokens.weight", DType::F32, {kShard, kHidden}, {}, r},
                                  std::move(bytes));
    Program p;
    p.name = "step_tp" + std::to_string(r);
    p.tpRank = r;
    const char* inputs[] = {"tokens", "positions", "kv_cache", "block_tables",
                            "seq_lens", "query_start", "slot_mapping", "logit_rows"};
    for (int i = 0; i < 8; ++i) {
      Buffer b{inputs[i], BufferKind::Input, DType::I32, {-1}};
      if (i == 2) b = {inputs[i], BufferKind::KvCache, DType::F32, {-1, 1, 2, 16, 1, 4}};
      if (i == 3) b.shape = {-1, -1};
      p.buffers.push_back(b);
    }
    auto buffer = [&](const char* name, int64_t width, BufferKind kind = BufferKind::Activation) {
      p.buffers.push_back({name, kind, DType::F32, {-1, width}});
      return static_cast<int32_t>(p.buffers.size() - 1);
    };
    auto step = [&](OpKind op, std::vector<int32_t> in, int32_t out, std::vector<int32_t> weights,
                    std::vector<Param> params = {}) {
      ProgramStep s;
      s.op = op;
      s.inputs = std::move(in);
      s.outputs = {out};
      s.weights = std::move(weights);
      s.params = std::move(params);
      p.steps.push_back(std::move(s));
    };
    const int32_t e = buffer("embedded", kHidden), h = buffer("hidden", kHidden);
    step(OpKind::Embedding, {0}, e, {t}, {{"vocab_start", r * kShard + k.vocab_start_shift, 0}});
    step(OpKind::AllReduce, {e}, h, {});
    const int32_t slice = buffer("logits_slice", kShard);
    step(OpKind::Logits, {h, 7}, slice, {t});
    const int32_t logits = buffer("logits", k.gather_width, BufferKind::Output);
    if (k.read_slice) {
      const int32_t sum = buffer("sum", kShard);
      step(OpKind::Add, {slice, slice}, sum, {});
    }
    if (k.reduce_into_logits) step(OpKind::AllReduce, {slice}, logits, {});
    else step(OpKind::AllGather, {slice}, logits, {});
    for (size_t i = 0; i < k.slots.size(); ++i) p.buffers[e + i].slot = k.slots[i];
    w.addProgram(std::move(p));
  }
  StatusOr<std::vector<uint8_t>> bytes = w.writeToBuffer();
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

/// Creates both ranks (one group) or returns the first error.
Status createRanks(const Artifact& a, SharedMemoryGroup& group,
                   std::vector<std::unique_ptr<CpuBackend>>* ranks) {
  for (int r = 0; r < kRanks; ++r) {
    CpuBackendOptions o;
    o.num_threads = 1;
    o.num_kv_blocks = 4;
    o.tp_rank = r;
    o.communicator = group.communicator(r);
    INGOT_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> b, CpuBackend::create(a, o));
    ranks->push_back(std::move(b));
  }
  return okStatus();
}

/// The ranks' logits against the unsharded head computed by hand.
void expectUnshardedLogits(const Breakage& k) {
  std::vector<float> table;
  StatusOr<Artifact> a = Artifact::openFromMemory(buildProgram(k, &table));
  ASSERT_TRUE(a.ok()) << a.status().message();
  StatusOr<std::unique_ptr<SharedMemoryGroup>> group = SharedMemoryGroup::create(kRanks);
  ASSERT_TRUE(group.ok());
  std::vector<std::unique_ptr<CpuBackend>> ranks;
  ASSERT_TRUE(createRanks(*a, **group, &ranks).ok());
  // Tokens from both halves of the vocabulary; logits of two of the five rows only.
  StepInputs in;
  in.tokens = {3, 40, 31, 32, 63};
  in.positions = {0, 1, 2, 3, 4};
  in.slot_mapping = {0, 1, 2, 3, 4};
  in.num_requests = 1;
  in.max_blocks_per_request = 1;
  in.block_tables = {0};
  in.seq_lens = {5};
  in.query_start = {0, 5};
  in.logit_rows = {1, 3};
  std::vector<std::vector<float>> logits(kRanks, std::vector<float>(3, NAN));
  std::vector<Status> st(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] { st[r] = ranks[r]->step(in, &logits[r]); });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(st[r].ok()) << st[r].message();
    ASSERT_EQ(logits[r].size(), 2u * kVocab);
    for (int row = 0; row < 2; ++row) {
      const int32_t token = in.tokens[in.logit_rows[row]];
      for (int64_t v = 0; v < kVocab; ++v) {
        double want = 0;
        for (int64_t d = 0; d < kHidden; ++d)
          want += static_cast<double>(table[token * kHidden + d]) * table[v * kHidden + d];
        EXPECT_NEAR(logits[r][row * kVocab + v], want, 1e-5)
            << "rank " << r << " row " << row << " vocab " << v;
      }
    }
  }
}

TEST(TpProgramPlan, VocabParallelEmbeddingAndHeadGiveTheUnshardedLogits) {
  expectUnshardedLogits({});
}

TEST(TpProgramPlan, RunsWithTheArtifactsSlotsOrPlansThemForAnOlderArtifact) {
  Breakage k;
  k.slots = {0, 1, 0};  // the slice may take the embedding's slot
  expectUnshardedLogits(k);
  k.slots = {-1, -1, -1};
  expectUnshardedLogits(k);
}

void expectPlanError(const Breakage& k, const std::string& fragment) {
  std::vector<float> table;
  StatusOr<Artifact> a = Artifact::openFromMemory(buildProgram(k, &table));
  ASSERT_TRUE(a.ok()) << a.status().message();
  StatusOr<std::unique_ptr<SharedMemoryGroup>> group = SharedMemoryGroup::create(kRanks);
  ASSERT_TRUE(group.ok());
  std::vector<std::unique_ptr<CpuBackend>> ranks;
  Status st = createRanks(*a, **group, &ranks);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
}

TEST(TpProgramPlan, RejectsAnEmbeddingShardPastTheVocabulary) {
  Breakage k;
  k.vocab_start_shift = 1;  // rank 1's rows would run to token 64
  expectPlanError(k, "table shard of 32 rows from vocab_start 33 runs past the vocabulary of 64");
}

TEST(TpProgramPlan, RejectsAGatherOfTheWrongWidth) {
  Breakage k;
  k.gather_width = 48;
  expectPlanError(k, "has width 48, expected 64 (input width x world size 2)");
}

TEST(TpProgramPlan, RejectsAStepOtherThanACollectiveReadingTheLogitsSlice) {
  Breakage k;
  k.read_slice = true;
  expectPlanError(k, "(Add) reads buffer %10, a slice of the logits that only a collective may read");
}

TEST(TpProgramPlan, RejectsASumIntoTheLogitsOutput) {
  Breakage k;
  k.reduce_into_logits = true;
  k.gather_width = kShard;
  expectPlanError(k, "only an all_gather of the head's logits may write the logits output");
}

TEST(TpProgramPlan, RejectsSlotsThatOverwriteAValueStillToBeRead) {
  Breakage k;
  k.slots = {0, 0, 1};  // the all_reduce would write over its own input
  expectPlanError(k, "step 1 (AllReduce) writes buffer %9 into slot 0, which holds buffer %8 "
                     "that this step reads or writes");
  k.slots = {0, 1, -1};
  expectPlanError(k, "buffer %10: activation slot -1 outside [0, 12)");
}

}  // namespace
}  // namespace ingot
