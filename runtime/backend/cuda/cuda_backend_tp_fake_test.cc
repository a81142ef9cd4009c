// A CUDA tensor-parallel rank's control flow on the CPU: a TP2 tiny Llama rank over the fake
// libcuda / libcublasLt with a communicator that records its calls and plays the other rank.
// Checked: the collectives in program order with their sizes and device pointers (each
// all_reduce sees exactly what the GEMM before it wrote), the vocabulary-parallel head's
// gathered slices rearranged into [L, V] on the "GPU", steps run eagerly, the KV pool agreed
// over the group, and failures (a communicator error names the step; bad inputs never reach
// a collective). The GPU test (test/gpu/cuda_tp_test.cc) checks real logits.
#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/backend/cuda/cuda_backend.h"
#include "testing/cuda/fake_cuda_test.h"
#include "testing/cuda/fake_libcuda.h"
#include "testing/llama_program.h"
#include "testing/step_builder.h"
#include "testing/test_seed.h"
#include "runtime/dist/communicator.h"

namespace ingot {
namespace {

using testing::makeStep;
using testing::Sequence;

/// One collective as the backend called it, with what its input held at that moment.
struct CollectiveCall {
  bool gather = false;
  const float* in = nullptr;
  float* out = nullptr;
  int64_t n = 0;
  std::vector<float> input;     ///< in[0, n) at the call
  std::vector<float> result;    ///< what the call wrote to out (gather: all ranks' slices)
  int gemms_before = 0;         ///< fake cuBLASLt matmuls issued before the call
  void* last_gemm_output = nullptr;
  std::vector<float> last_gemm_values;  ///< its first n floats at the call
};

/// Rank `rank` of a `world`-rank group whose other ranks are played by random numbers: a
/// sum adds fresh random values, a gather puts fresh random slices beside this rank's own.
/// Device pointers are host pointers on the fake driver, so the data can be read here.
class RecordingCommunicator final : public Communicator {
 public:
  /// `seed`: the other ranks' random contributions (drawn from the test's seed).
  RecordingCommunicator(int rank, int world, void* blas, uint32_t seed)
      : rng(seed), rank_(rank), world_(world) {
    gemm_count_ = reinterpret_cast<int (*)()>(::dlsym(blas, "fakeCublasLtCallCount"));
    gemm_output_ = reinterpret_cast<void* (*)(int)>(::dlsym(blas, "fakeCublasLtCallOutput"));
  }
  int rank() const override { return rank_; }
  int worldSize() const override { return world_; }
  Status allReduceSum(float* data, int64_t n) override {
    CollectiveCall& c = record(false, data, data, n);
    if (calls.size() == fail_at) return failedPrecondition("peer rank went away (injected)");
    std::uniform_real_distribution<float> other(-1.0f, 1.0f);
    for (int64_t i = 0; i < n; ++i) data[i] += other(rng);
    c.result.assign(data, data + n);
    return okStatus();
  }
  Status allGather(const float* in, int64_t n, float* out) override {
    CollectiveCall& c = record(true, in, out, n);
    if (calls.size() == fail_at) return failedPrecondition("peer rank went away (injected)");
    std::uniform_real_distribution<float> other(-1.0f, 1.0f);
    for (int r = 0; r < world_; ++r)
      for (int64_t i = 0; i < n; ++i)
        out[r * n + i] = r == rank_ ? in[i] : (other_count ? other_count(r) : other(rng));
    c.result.assign(out, out + world_ * n);
    return okStatus();
  }
  Status barrier() override { return okStatus(); }
  void abort(const Status& error) override { if (error_.ok()) error_ = error; }
  Status groupStatus() const override { return error_; }

  std::vector<CollectiveCall> calls;
  /// 1-based index of the call that fails (0: none).
  size_t fail_at = 0;
  /// What the other ranks contribute to a gather (unset: random values).
  std::function<float(int rank)> other_count;
  std::mt19937 rng;

 private:
  CollectiveCall& record(bool gather, const float* in, float* out, int64_t n) {
    CollectiveCall c;
    c.gather = gather;
    c.in = in;
    c.out = out;
    c.n = n;
    c.input.assign(in, in + n);
    c.gemms_before = gemm_count_();
    c.last_gemm_output = c.gemms_before > 0 ? gemm_output_(c.gemms_before - 1) : nullptr;
    if (c.last_gemm_output) {
      const float* d = static_cast<const float*>(c.last_gemm_output);
      c.last_gemm_values.assign(d, d + n);
    }
    calls.push_back(std::move(c));
    return calls.back();
  }

  int rank_, world_;
  int (*gemm_count_)() = nullptr;
  void* (*gemm_output_)(int) = nullptr;
  Status error_;
};

class CudaBackendTpFakeTest : public FakeCudaTest {
 protected:
  /// A TP2 tiny Llama (4 q / 2 kv heads, vocab 256: one kv head and half the vocabulary
  /// per rank) with fake CUDA kernels.
  void build(int32_t tp = 2) {
    o.tp = tp;
    o.fake_cuda_kernels = true;
    o.seed = rng();
    StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    bytes_ = std::move(bytes).value();
    StatusOr<Artifact> a = Artifact::openFromMemory(bytes_);
    ASSERT_TRUE(a.ok()) << a.status().message();
    artifact = std::make_unique<Artifact>(std::move(a).value());
  }
  StatusOr<std::unique_ptr<CudaBackend>> rank(int r, Communicator* comm, int64_t blocks = 64) {
    CudaBackendOptions options;
    options.num_kv_blocks = blocks;
    options.max_model_len = 256;
    options.gpu_memory_utilization = 0.535;  // the fake: 16 GiB, half of it free
    options.kernels.ptx_cache_dir = "none";
    options.tp_rank = r;
    options.communicator = comm;
    return CudaBackend::create(*artifact, options);
  }
  void fillGemmOutputs() {
    reinterpret_cast<void (*)(uint64_t)>(::dlsym(blas_, "fakeCublasLtSetFillSeed"))(rng() | 1u);
  }
  std::vector<int32_t> randomTokens(int n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(o.vocab));
    return t;
  }

  testing::LlamaProgramOptions o;
  std::unique_ptr<Artifact> artifact;
  std::mt19937 rng{ingot::testing::testSeed()};

 private:
  std::vector<uint8_t> bytes_;
};

TEST_F(CudaBackendTpFakeTest, RankRunsCollectivesInOrderOnTheGemmOutputsAndRearrangesTheHead) {
  build();
  RecordingCommunicator comm(1, 2, blas_, rng());
  StatusOr<std::unique_ptr<CudaBackend>> made = rank(1, &comm);
  ASSERT_TRUE(made.ok()) << made.status().message();
  CudaBackend& b = **made;
  EXPECT_EQ(b.tpWorldSize(), 2);
  EXPECT_EQ(b.worldSize(), 1) << "one rank; the group is its caller's";
  EXPECT_FALSE(b.samplesOnBackend()) << "a rank holds a slice of the logits";
  EXPECT_NE(b.describe().find("tp rank 1 of 2"), std::string::npos) << b.describe();
  EXPECT_TRUE(comm.calls.empty()) << "a given KV pool size needs no agreement";

  std::vector<Sequence> seqs(2);
  for (int r = 0; r < 2; ++r) {
    seqs[r].tokens = randomTokens(20);
    seqs[r].blocks = {3 * r + 1, 3 * r + 2};
  }
  std::vector<Sequence*> all = {&seqs[0], &seqs[1]};
  const int64_t D = o.hidden, V = o.vocab, W = V / 2;
  for (int stepIndex = 0; stepIndex < 3; ++stepIndex) {
    SetUp();
    fillGemmOutputs();
    comm.calls.clear();
    const std::vector<int> counts = stepIndex == 0 ? std::vector<int>{7, 5} : std::vector<int>{1, 1};
    const StepInputs in = makeStep(all, counts, o.block_size);
    const int64_t T = in.numTokens(), L = static_cast<int64_t>(in.logit_rows.size());
    std::vector<float> logits(static_cast<size_t>(L * V), std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(b.step(in, &logits).ok());
    EXPECT_TRUE(b.stepStarted());
    EXPECT_EQ(b.lastGraphBucket(), 0) << "a rank runs every step eagerly";

    // Vocab-parallel embedding sum, then per layer the o_proj and down_proj sums, then the
    // gather of the head's slices.
    ASSERT_EQ(comm.calls.size(), static_cast<size_t>(1 + 2 * o.layers + 1));
    for (size_t c = 0; c + 1 < comm.calls.size(); ++c) {
      const CollectiveCall& call = comm.calls[c];
      EXPECT_FALSE(call.gather) << "call " << c;
      EXPECT_EQ(call.n, T * D) << "call " << c << ": the [T, hidden] residual contribution";
      if (c == 0) continue;  // after the embedding kernel, which the fake does not run
      // The sum's buffer holds exactly the row-parallel GEMM's output (copied, or in place).
      ASSERT_NE(call.last_gemm_output, nullptr);
      EXPECT_EQ(call.input, call.last_gemm_values)
          << "call " << c << " does not see what the GEMM before it wrote";
    }
    const CollectiveCall& gather = comm.calls.back();
    ASSERT_TRUE(gather.gather);
    EXPECT_EQ(gather.n, L * W) << "this rank's [L, V/2] slice";
    EXPECT_EQ(gather.in, gather.last_gemm_output) << "the head GEMM's output is gathered";
    EXPECT_TRUE(gather.out >= gather.in + gather.n || gather.out + 2 * gather.n <= gather.in)
        << "gather output must not overlap its input";
    // The logits are the slices side by side: row t = [rank 0's row t | rank 1's row t].
    for (int64_t t = 0; t < L; ++t)
      for (int32_t r = 0; r < 2; ++r)
        for (int64_t j = 0; j < W; ++j)
          ASSERT_EQ(logits[t * V + r * W + j], gather.result[r * L * W + t * W + j])
              << "row " << t << ", rank " << r << ", column " << j;
    EXPECT_EQ(stats().copies2d, 2) << "one strided copy per rank";
    EXPECT_EQ(stats().captures, 0);
    EXPECT_EQ(stats().graphLaunches, 0);
  }
}

TEST_F(CudaBackendTpFakeTest, CommunicatorFailureNamesTheStepAndBadInputsReachNoCollective) {
  build();
  RecordingCommunicator comm(0, 2, blas_, rng());
  StatusOr<std::unique_ptr<CudaBackend>> made = rank(0, &comm);
  ASSERT_TRUE(made.ok()) << made.status().message();
  CudaBackend& b = **made;
  Sequence bad;
  bad.tokens = {static_cast<int32_t>(o.vocab)};
  bad.blocks = {0};
  std::vector<float> logits;
  EXPECT_FALSE(b.step(makeStep({&bad}, {1}, o.block_size), &logits).ok());
  EXPECT_FALSE(b.stepStarted()) << "rejected before anything ran: the group stays usable";
  EXPECT_TRUE(comm.calls.empty());

  Sequence seq;
  seq.tokens = randomTokens(8);
  seq.blocks = {5};
  comm.fail_at = 2;  // the first layer's o_proj sum
  Status s = b.step(makeStep({&seq}, {8}, o.block_size), &logits);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(b.stepStarted()) << "the caller must break the group";
  EXPECT_NE(s.message().find("(all_reduce)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("step "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("peer rank went away"), std::string::npos) << s.message();
  EXPECT_EQ(comm.calls.size(), 2u) << "nothing runs after the failed collective";
}

TEST_F(CudaBackendTpFakeTest, KvPoolIsTheLeastAnyRankHasRoomFor) {
  build();
  RecordingCommunicator comm(0, 2, blas_, rng());
  const int64_t theirs = 100 + static_cast<int64_t>(rng() % 900);
  comm.other_count = [&](int) { return static_cast<float>(theirs); };
  StatusOr<std::unique_ptr<CudaBackend>> made = rank(0, &comm, 0);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ((*made)->numKvBlocks(), theirs) << "rank 1 has room for fewer blocks";
  ASSERT_EQ(comm.calls.size(), 1u);
  EXPECT_TRUE(comm.calls[0].gather);
  EXPECT_EQ(comm.calls[0].n, 1);
  EXPECT_GT(comm.calls[0].input[0], static_cast<float>(theirs)) << "this rank's own count";
  // A rank without room (0 blocks) fails the others naming it.
  RecordingCommunicator starved(0, 2, blas_, rng());
  starved.other_count = [](int) { return 0.0f; };
  made = rank(0, &starved, 0);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("tp rank 1"), std::string::npos) << made.status().message();
}

TEST_F(CudaBackendTpFakeTest, RankWithAnFp8KvCacheWritesAndReadsItsOwnKvHeadInFp8) {
  // `ingot compile --tp 2 --kv-dtype fp8`: each rank's pool holds its own kv head, with its
  // own per-block-head scales, so the fp8 write needs nothing from the other rank.
  o.kv_dtype = schema::DType::F8E4M3FN;
  build();
  RecordingCommunicator comm(1, 2, blas_, rng());
  StatusOr<std::unique_ptr<CudaBackend>> made = rank(1, &comm);
  ASSERT_TRUE(made.ok()) << made.status().message();
  CudaBackend& b = **made;
  EXPECT_EQ(b.kvDtype(), KvDtype::kFp8E4M3);
  Sequence seq;
  seq.tokens = randomTokens(20);
  seq.blocks = {3, 4};
  std::vector<float> logits;
  SetUp();
  ASSERT_TRUE(b.step(makeStep({&seq}, {11}, o.block_size), &logits).ok());
  const std::vector<RecordedLaunch> ls = launches();
  size_t writes = 0, fp8Decodes = 0, f32Decodes = 0;
  for (const RecordedLaunch& l : ls) {
    if (l.name == "ingot_fused_kv_write_fp8_f32") {
      ++writes;
      EXPECT_EQ(l.dims[0], 1u) << "1 kv head of this rank x K/V: 2 warps, one CTA";
    }
    fp8Decodes += l.name.rfind("ingot_decode_", 0) == 0 && l.name.find("_kvfp8_") != std::string::npos;
    f32Decodes += l.name.rfind("ingot_decode_", 0) == 0 && l.name.find("_kvfp8_") == std::string::npos;
  }
  EXPECT_EQ(writes, static_cast<size_t>(o.layers));
  EXPECT_EQ(fp8Decodes, static_cast<size_t>(o.layers));
  EXPECT_EQ(f32Decodes, 0u);
  EXPECT_EQ(comm.calls.size(), static_cast<size_t>(1 + 2 * o.layers + 1)) << "same collectives";
}

TEST_F(CudaBackendTpFakeTest, GroupMismatchesAreRefusedNamingBothSides) {
  build();
  RecordingCommunicator four(0, 4, blas_, rng());
  StatusOr<std::unique_ptr<CudaBackend>> made = rank(0, &four);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("4 ranks"), std::string::npos) << made.status().message();
  EXPECT_NE(made.status().message().find("sharded over 2"), std::string::npos);
  made = rank(0, nullptr);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("communicator"), std::string::npos) << made.status().message();
  RecordingCommunicator one(1, 2, blas_, rng());
  made = rank(0, &one);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("disagrees"), std::string::npos) << made.status().message();
}

}  // namespace
}  // namespace ingot
