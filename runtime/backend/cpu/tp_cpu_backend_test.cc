// TpCpuBackend on sharded tiny Llamas: logits against the unsharded model, per-rank weight
// bytes, a stalled or failing rank, and the engine on top.
#include "runtime/backend/cpu/tp_cpu_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <random>

#include "runtime/backend/cpu/weight_store.h"
#include "testing/llama_program.h"
#include "runtime/engine/engine.h"
#include "testing/step_builder.h"

namespace ingot {
namespace {

using testing::makeStep;
using testing::Sequence;

using testing::LlamaProgramOptions;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Artifact openLlama(const LlamaProgramOptions& o) {
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  StatusOr<Artifact> a = Artifact::openFromMemory(*bytes);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return std::move(*a);
}

std::unique_ptr<Backend> makeBackend(const Artifact& a, TpCpuBackendOptions o = {}) {
  o.cpu.num_kv_blocks = 32;
  o.cpu.num_threads = 2;
  if (tensorParallelWorldSize(a) > 1 || o.wrap_communicator) {
    StatusOr<std::unique_ptr<TpCpuBackend>> tp = TpCpuBackend::create(a, o);
    EXPECT_TRUE(tp.ok()) << tp.status().message();
    if (!tp.ok()) return nullptr;
    return std::move(tp).value();
  }
  StatusOr<std::unique_ptr<Backend>> b = createCpuServingBackend(a, o.cpu);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(*b) : nullptr;
}

/// Runs the same steps (three requests: a batched prefill, then decodes of the reference's
/// greedy tokens) through every backend and returns each backend's logits, step by step.
std::vector<std::vector<std::vector<float>>> runSteps(const std::vector<Backend*>& backends,
                                                      int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<Sequence>> seqs(backends.size(), std::vector<Sequence>(3));
  const int lengths[3] = {5, 19, 33};
  for (int r = 0; r < 3; ++r) {
    std::vector<int32_t> prompt(lengths[r]);
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % vocab);
    for (auto& s : seqs) {
      s[r].tokens = prompt;
      s[r].blocks = {r * 8, r * 8 + 1, r * 8 + 2, r * 8 + 3};
    }
  }
  std::vector<std::vector<std::vector<float>>> out(backends.size());
  for (int iteration = 0; iteration < 5; ++iteration) {
    std::vector<int32_t> next;
    for (size_t b = 0; b < backends.size(); ++b) {
      std::vector<Sequence*> ptrs = {&seqs[b][0], &seqs[b][1], &seqs[b][2]};
      std::vector<int> counts;
      for (Sequence* s : ptrs) counts.push_back(static_cast<int>(s->tokens.size()) - s->done);
      const StepInputs in = makeStep(ptrs, counts, 16);
      std::vector<float> logits(7, std::numeric_limits<float>::quiet_NaN());  // poison
      Status st = backends[b]->step(in, &logits);
      EXPECT_TRUE(st.ok()) << "backend " << b << ": " << st.message();
      EXPECT_EQ(logits.size(), in.logit_rows.size() * vocab);
      if (b == 0) {
        // The reference's greedy token at each request's last row feeds the next step.
        for (int r = 0; r < 3; ++r) {
          const float* row = logits.data() + (in.query_start[r + 1] - 1) * vocab;
          next.push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
        }
      }
      out[b].push_back(std::move(logits));
    }
    for (auto& s : seqs)
      for (int r = 0; r < 3; ++r) s[r].tokens.push_back(next[r]);
  }
  return out;
}

/// max |a - b| / max |ref| over all steps.
double relativeError(const std::vector<std::vector<float>>& ref,
                     const std::vector<std::vector<float>>& got) {
  double maxRef = 0, maxDiff = 0;
  for (size_t s = 0; s < ref.size(); ++s) {
    if (got[s].size() != ref[s].size()) return std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < ref[s].size(); ++i) {
      if (!std::isfinite(got[s][i])) return std::numeric_limits<double>::infinity();
      maxRef = std::max(maxRef, std::fabs(static_cast<double>(ref[s][i])));
      maxDiff = std::max(maxDiff, std::fabs(static_cast<double>(ref[s][i]) - got[s][i]));
    }
  }
  return maxDiff / std::max(maxRef, 1e-30);
}

struct ShapeCase {
  const char* name;
  int heads, kv_heads, intermediate, vocab;
  bool tie;
};

TEST(TpCpuBackend, ShardedLogitsMatchTheUnshardedModelForTp2And4) {
  const ShapeCase cases[] = {
      // Even splits; at tp 4 the two kv heads are replicated over two ranks each.
      {"4q/2kv", 4, 2, 128, 256, true},
      // SmolLM2's 3:1 grouping: uneven kv blocks (2 + 1) at tp 2, replication at tp 4;
      // an intermediate size and a vocabulary that do not divide by 4 (the head and the
      // embedding stay replicated there); untied head.
      {"6q/3kv", 6, 3, 130, 250, false},
  };
  for (const ShapeCase& c : cases) {
    LlamaProgramOptions o;
    o.heads = c.heads;
    o.kv_heads = c.kv_heads;
    o.intermediate = c.intermediate;
    o.vocab = c.vocab;
    o.tie_embeddings = c.tie;
    o.seed = 7;
    Artifact unsharded = openLlama(o);
    std::unique_ptr<Backend> reference = makeBackend(unsharded);
    for (int tp : {2, 4}) {
      o.tp = tp;
      Artifact sharded = openLlama(o);
      ASSERT_EQ(tensorParallelWorldSize(sharded), tp);
      std::unique_ptr<Backend> backend = makeBackend(sharded);
      ASSERT_TRUE(reference && backend);
      // A fresh reference each round: both start from an empty KV pool.
      std::unique_ptr<Backend> ref = makeBackend(unsharded);
      auto logits = runSteps({ref.get(), backend.get()}, c.vocab, 100 + tp);
      const double err = relativeError(logits[0], logits[1]);
      std::printf("[ tp ] %s tp=%d: max |logit diff| / max |logit| = %.3g\n", c.name, tp, err);
      EXPECT_LT(err, 1e-5) << c.name << " tp " << tp;
    }
  }
}

TEST(TpCpuBackend, EachRankReadsOnlyTheReplicatedTensorsAndItsOwnShards) {
  LlamaProgramOptions o;
  o.layers = 3;
  o.hidden = 128;
  o.intermediate = 256;
  for (int tp : {2, 4}) {
    o.tp = tp;
    Artifact a = openLlama(o);
    std::unique_ptr<Backend> b = makeBackend(a);
    ASSERT_TRUE(b);
    auto* group = dynamic_cast<TpCpuBackend*>(b.get());
    ASSERT_NE(group, nullptr);
    uint64_t replicated = 0, sharded = 0;
    std::vector<uint64_t> own(tp, 0);
    for (size_t i = 0; i < a.numTensors(); ++i) {
      const schema::TensorDef& t = a.tensor(i);
      if (t.tp_rank() < 0) replicated += t.size();
      else own[t.tp_rank()] += t.size(), sharded += t.size();
    }
    for (int r = 0; r < tp; ++r) {
      const uint64_t reads = group->rank(r).weightBytes();
      std::printf("[ tp ] tp=%d rank %d reads %llu weight bytes: replicated %llu + own shards "
                  "%llu (all shards %llu, / %d = %llu)\n",
                  tp, r, static_cast<unsigned long long>(reads),
                  static_cast<unsigned long long>(replicated),
                  static_cast<unsigned long long>(own[r]),
                  static_cast<unsigned long long>(sharded), tp,
                  static_cast<unsigned long long>(sharded / tp));
      EXPECT_EQ(reads, replicated + own[r]) << "rank " << r;
      EXPECT_NEAR(static_cast<double>(own[r]), static_cast<double>(sharded) / tp,
                  0.05 * static_cast<double>(sharded) / tp);
    }
    // Every rank's tensors lie inside its ShardDef's byte range of the blob.
    const auto* shards = a.manifest().tensor_parallel()->shards();
    ASSERT_EQ(shards->size(), static_cast<uint32_t>(tp));
    for (size_t i = 0; i < a.numTensors(); ++i) {
      const schema::TensorDef& t = a.tensor(i);
      if (t.tp_rank() < 0) continue;
      const schema::ShardDef* s = shards->Get(t.tp_rank());
      EXPECT_GE(t.offset(), s->blob_offset());
      EXPECT_LE(t.offset() + t.size(), s->blob_offset() + s->blob_size());
    }
  }
}

/// A rank's communicator that misbehaves at one collective: stalls there until released
/// (a hung or killed rank, as the others see it), or fails without telling the group.
class FaultyCommunicator final : public Communicator {
 public:
  enum class Fault { kStall, kFail };
  struct Control {
    std::mutex mu;
    std::condition_variable cv;
    bool released = false;
    std::atomic<bool> reached{false};
    void release() {
      std::lock_guard<std::mutex> lock(mu);
      released = true;
      cv.notify_all();
    }
  };
  FaultyCommunicator(Communicator* inner, int at, Fault fault, Control* control)
      : inner_(inner), at_(at), fault_(fault), control_(control) {}

  int rank() const override { return inner_->rank(); }
  int worldSize() const override { return inner_->worldSize(); }
  Status allReduceSum(float* data, int64_t n) override {
    INGOT_RETURN_IF_ERROR(maybeFault());
    return inner_->allReduceSum(data, n);
  }
  Status allGather(const float* in, int64_t n, float* out) override {
    INGOT_RETURN_IF_ERROR(maybeFault());
    return inner_->allGather(in, n, out);
  }
  Status barrier() override {
    INGOT_RETURN_IF_ERROR(maybeFault());
    return inner_->barrier();
  }
  void abort(const Status& error) override { inner_->abort(error); }
  Status groupStatus() const override { return inner_->groupStatus(); }

 private:
  Status maybeFault() {
    if (calls_++ != at_) return okStatus();
    control_->reached = true;
    if (fault_ == Fault::kFail)
      return internalError("rank " + std::to_string(rank()) + " lost its device");
    std::unique_lock<std::mutex> lock(control_->mu);
    control_->cv.wait(lock, [&] { return control_->released; });
    return okStatus();
  }

  Communicator* inner_;
  const int at_;
  const Fault fault_;
  Control* control_;
  int calls_ = 0;
};

LlamaProgramOptions tp4Llama() {
  LlamaProgramOptions o;
  o.tp = 4;
  o.heads = 8;
  o.kv_heads = 4;
  return o;
}

TEST(TpCpuBackend, AStalledRankFailsTheStepOnEveryOtherRankWithinTheTimeout) {
  Artifact a = openLlama(tp4Llama());
  FaultyCommunicator::Control control;
  TpCpuBackendOptions o;
  o.collective_timeout = std::chrono::milliseconds(300);
  o.wrap_communicator = [&](int rank, Communicator* inner) -> std::unique_ptr<Communicator> {
    if (rank != 1) return std::make_unique<FaultyCommunicator>(inner, -1,
                                                               FaultyCommunicator::Fault::kStall,
                                                               &control);
    return std::make_unique<FaultyCommunicator>(inner, 5, FaultyCommunicator::Fault::kStall,
                                                &control);
  };
  std::unique_ptr<Backend> b = makeBackend(a, o);
  ASSERT_TRUE(b);
  Sequence q{{1, 2, 3, 4, 5, 6, 7, 8, 9}, {0}};
  const StepInputs in = makeStep({&q}, {9}, 16);
  std::vector<float> logits;
  auto start = Clock::now();
  Status st = b->step(in, &logits);
  const double took = secondsSince(start);
  EXPECT_TRUE(control.reached);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("#5: rank 1 did not arrive within 300 ms"), std::string::npos)
      << st.message();
  EXPECT_LT(took, 2.0) << "the step must not wait for the stalled rank";
  std::printf("[ tp ] stalled rank: step failed after %.3f s: %s\n", took, st.message().c_str());
  // Every other rank failed its own step with the timeout; rank 1 is still stalled.
  const auto results = static_cast<TpCpuBackend*>(b.get())->lastRankResults();
  ASSERT_EQ(results.size(), 4u);
  EXPECT_FALSE(results[1].has_value());
  for (int r : {0, 2, 3}) {
    ASSERT_TRUE(results[r].has_value()) << "rank " << r;
    EXPECT_NE(results[r]->message().find("rank 1 did not arrive within 300 ms"),
              std::string::npos)
        << "rank " << r << ": " << results[r]->message();
  }
  // The group stays failed: later calls fail at once, with the first error.
  start = Clock::now();
  Status again = b->step(in, &logits);
  EXPECT_EQ(again.message(), st.message());
  EXPECT_EQ(b->copyKvBlocks(0, 1).message(), st.message());
  EXPECT_EQ(b->copyKvSlots({{0, 1}}).message(), st.message());
  EXPECT_LT(secondsSince(start), 0.1);
  control.release();  // the stalled rank finds the group broken and ends; then teardown
}

TEST(TpCpuBackend, ARankThatFailsOnItsOwnEndsTheStepAtOnceWithItsError) {
  Artifact a = openLlama(tp4Llama());
  FaultyCommunicator::Control control;
  TpCpuBackendOptions o;
  o.collective_timeout = std::chrono::milliseconds(20000);
  o.wrap_communicator = [&](int rank, Communicator* inner) -> std::unique_ptr<Communicator> {
    return std::make_unique<FaultyCommunicator>(inner, rank == 2 ? 3 : -1,
                                                FaultyCommunicator::Fault::kFail, &control);
  };
  std::unique_ptr<Backend> b = makeBackend(a, o);
  ASSERT_TRUE(b);
  Sequence q{{3, 1, 4, 1, 5}, {0}};
  std::vector<float> logits;
  const auto start = Clock::now();
  Status st = b->step(makeStep({&q}, {5}, 16), &logits);
  ASSERT_FALSE(st.ok());
  EXPECT_LT(secondsSince(start), 5.0) << "the others must not wait out the 20 s timeout";
  EXPECT_NE(st.message().find("tp rank 2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 2 lost its device"), std::string::npos) << st.message();
  EXPECT_EQ(b->step(makeStep({&q}, {0}, 16), &logits).message(), st.message());
}

TEST(TpCpuBackend, InvalidInputsFailTheStepButLeaveTheGroupUsable) {
  LlamaProgramOptions o;
  o.tp = 2;
  Artifact a = openLlama(o);
  std::unique_ptr<Backend> b = makeBackend(a);
  ASSERT_TRUE(b);
  Sequence bad{{1, 2, 100000}, {0}};
  std::vector<float> logits;
  Status st = b->step(makeStep({&bad}, {3}, 16), &logits);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  Sequence good{{1, 2, 3}, {0}};
  st = b->step(makeStep({&good}, {3}, 16), &logits);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(logits.size(), 3u * 256u);
}

TEST(TpCpuBackend, ARankNeedsItsCommunicatorAndReadsNoOtherRanksShard) {
  LlamaProgramOptions o;
  o.tp = 2;
  Artifact a = openLlama(o);
  CpuBackendOptions alone;
  StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(a, alone);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("sharded over 2 tensor-parallel ranks"), std::string::npos)
      << b.status().message();

  StatusOr<std::unique_ptr<SharedMemoryGroup>> group = SharedMemoryGroup::create(4);
  ASSERT_TRUE(group.ok());
  CpuBackendOptions wrongWorld;
  wrongWorld.communicator = (*group)->communicator(0);
  b = CpuBackend::create(a, wrongWorld);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("4 ranks, the artifact is sharded over 2"),
            std::string::npos)
      << b.status().message();

  // Rank 0's store refuses rank 1's shard of a tensor, by name.
  WeightStore store(a, 0);
  int32_t rank1 = -1;
  for (size_t i = 0; i < a.numTensors() && rank1 < 0; ++i)
    if (a.tensor(i).tp_rank() == 1) rank1 = static_cast<int32_t>(i);
  ASSERT_GE(rank1, 0);
  StatusOr<WeightView> w = store.dense(rank1);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("'" + a.tensor(rank1).name()->str() +
                                      "' is tensor-parallel rank 1's shard"),
            std::string::npos)
      << w.status().message();
}

TEST(TpCpuBackend, EngineGreedyTokensMatchTheUnshardedModel) {
  LlamaProgramOptions o;
  o.heads = 6;
  o.kv_heads = 3;
  o.seed = 11;
  auto generate = [&](int tp) {
    o.tp = tp;
    Artifact a = openLlama(o);
    EngineOptions eo;
    eo.num_threads = 2;
    eo.num_kv_blocks = 64;
    StatusOr<std::unique_ptr<Engine>> e = Engine::create(a, eo);
    EXPECT_TRUE(e.ok()) << e.status().message();
    std::map<RequestId, std::vector<int32_t>> out;
    if (!e.ok()) return out;
    std::mt19937 rng(5);
    for (int r = 0; r < 4; ++r) {
      std::vector<int32_t> prompt(3 + 7 * r);
      for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % o.vocab);
      SamplingParams p;
      p.max_tokens = 12;
      p.ignore_eos = true;
      EXPECT_TRUE((*e)->addRequest(prompt, p).ok());
    }
    while ((*e)->hasWork()) {
      StatusOr<std::vector<RequestOutput>> step = (*e)->step();
      EXPECT_TRUE(step.ok()) << step.status().message();
      if (!step.ok()) break;
      for (const RequestOutput& r : *step)
        out[r.id].insert(out[r.id].end(), r.token_ids.begin(), r.token_ids.end());
    }
    return out;
  };
  const auto reference = generate(1);
  ASSERT_EQ(reference.size(), 4u);
  for (const auto& [id, tokens] : reference) EXPECT_EQ(tokens.size(), 12u);
  EXPECT_EQ(generate(2), reference);
  EXPECT_EQ(generate(3), reference);
}

}  // namespace
}  // namespace ingot
