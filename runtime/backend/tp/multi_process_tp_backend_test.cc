// MultiProcessTpBackend on a sharded tiny Llama: the bits of TpCpuBackend, KV copies, a killed
// or failing worker, rejected inputs, and workers started from the real `ingot` binary.
#include "runtime/backend/tp/multi_process_tp_backend.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

#include "runtime/backend/cpu/tp_cpu_backend.h"
#include "testing/llama_program.h"
#include "testing/step_builder.h"
#include "runtime/backend/tp/tp_process_test_util.h"
#include "testing/test_seed.h"

namespace ingot {
namespace {

using testing::FailingCommunicator;
using testing::forkWorker;
using testing::makeStep;
using testing::Sequence;
using Clock = std::chrono::steady_clock;
using TinyTp2 = testing::TinyTpModel;

constexpr int kBlockSize = 16;
constexpr int64_t kKvBlocks = 32;

/// A TP2 tiny Llama in `<TempDir>/<name>-<pid>.ingot`.
TinyTp2 writeTinyTp2(const std::string& name, uint64_t seed) {
  return testing::writeTinyTpModel(2, seed, kBlockSize, name);
}

MultiProcessTpOptions processOptions(const TinyTp2& model, std::chrono::milliseconds timeout) {
  MultiProcessTpOptions o;
  o.artifact_path = model.path;
  o.cpu.num_threads = 2;
  o.cpu.num_kv_blocks = kKvBlocks;
  o.timeout = timeout;
  o.chunk_floats = 256;  // small: the logits gather and prefill sums take several rounds
  o.launch_worker = forkWorker;
  return o;
}

std::unique_ptr<TpCpuBackend> threadRanks(const TinyTp2& model) {
  TpCpuBackendOptions o;
  o.cpu.num_threads = 2;
  o.cpu.num_kv_blocks = kKvBlocks;
  StatusOr<std::unique_ptr<TpCpuBackend>> b = TpCpuBackend::create(model.artifact, o);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return std::move(b).value();
}

std::vector<float> poisoned(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

/// Runs one step on both backends and expects bit-identical logits.
void expectSameStep(Backend& processes, Backend& threads, const StepInputs& in, const char* what) {
  const size_t n = in.logit_rows.size() * static_cast<size_t>(threads.vocabSize());
  std::vector<float> a = poisoned(n), b = poisoned(n);
  Status sa = processes.step(in, &a);
  Status sb = threads.step(in, &b);
  ASSERT_TRUE(sa.ok()) << what << ": " << sa.message();
  ASSERT_TRUE(sb.ok()) << what << ": " << sb.message();
  ASSERT_EQ(a.size(), n);
  ASSERT_EQ(b.size(), n);
  for (float x : a) ASSERT_TRUE(std::isfinite(x)) << what << ": unwritten or bad logits";
  EXPECT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0)
      << what << ": process ranks differ from thread ranks";
}

TEST(MultiProcessTpBackend, ProcessRanksGiveTheLogitsOfThreadRanksBitForBit) {
  const uint32_t seed = ingot::testing::testSeed();
  TinyTp2 model = writeTinyTp2("bits", seed);
  auto processes = MultiProcessTpBackend::create(model.artifact,
                                                 processOptions(model, std::chrono::seconds(20)));
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  std::unique_ptr<TpCpuBackend> threads = threadRanks(model);
  EXPECT_EQ((*processes)->worldSize(), 2);
  EXPECT_EQ((*processes)->numKvBlocks(), threads->numKvBlocks());
  EXPECT_EQ((*processes)->matrixBytes(), threads->matrixBytes());
  EXPECT_EQ((*processes)->numThreads(), threads->numThreads());

  std::mt19937 rng(seed);
  const int vocab = static_cast<int>(threads->vocabSize());
  std::vector<Sequence> seqs(3);
  const int lengths[3] = {5, 19, 40};
  for (int r = 0; r < 3; ++r) {
    seqs[r].tokens.resize(lengths[r]);
    for (int32_t& t : seqs[r].tokens) t = static_cast<int32_t>(rng() % vocab);
    seqs[r].blocks = {r * 8, r * 8 + 1, r * 8 + 2, r * 8 + 3};
  }
  std::vector<Sequence*> all = {&seqs[0], &seqs[1], &seqs[2]};
  expectSameStep(**processes, *threads, makeStep(all, {5, 19, 40}, kBlockSize), "prefill");
  for (int decode = 0; decode < 6; ++decode) {
    for (Sequence& s : seqs) s.tokens.push_back(static_cast<int32_t>(rng() % vocab));
    expectSameStep(**processes, *threads, makeStep(all, {1, 1, 1}, kBlockSize), "decode");
  }

  // Copy-on-write: request 1's second block copied to block 30 on every rank, then a fork
  // of request 1 decodes from the copy. A rank that missed the copy reads zeros there.
  ASSERT_TRUE((*processes)->copyKvBlocks(9, 30).ok());
  ASSERT_TRUE(threads->copyKvBlocks(9, 30).ok());
  Sequence fork = seqs[1];
  fork.blocks = {8, 30, 31};
  fork.tokens.push_back(static_cast<int32_t>(rng() % vocab));
  std::vector<Sequence*> forked = {&fork};
  expectSameStep(**processes, *threads, makeStep(forked, {1}, kBlockSize), "decode after copy");
  // Slot moves: position 25's K/V (slot 30*16+9) over position 24's, which the next decode
  // attends to.
  const std::vector<std::pair<int32_t, int32_t>> moves = {{30 * kBlockSize + 9, 30 * kBlockSize + 8}};
  ASSERT_TRUE((*processes)->copyKvSlots(moves).ok());
  ASSERT_TRUE(threads->copyKvSlots(moves).ok());
  fork.tokens.push_back(static_cast<int32_t>(rng() % vocab));
  expectSameStep(**processes, *threads, makeStep(forked, {1}, kBlockSize), "decode after move");
  std::remove(model.path.c_str());
}

TEST(MultiProcessTpBackend, RejectedInputsFailTheStepButLeaveTheGroupUsable) {
  TinyTp2 model = writeTinyTp2("reject", 7);
  auto processes = MultiProcessTpBackend::create(model.artifact,
                                                 processOptions(model, std::chrono::seconds(20)));
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  Sequence s;
  s.tokens = {1, 2, 300000};  // outside the vocabulary
  s.blocks = {0};
  std::vector<Sequence*> one = {&s};
  std::vector<float> logits;
  Status bad = (*processes)->step(makeStep(one, {3}, kBlockSize), &logits);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("300000"), std::string::npos) << bad.message();
  EXPECT_TRUE((*processes)->groupStatus().ok());
  s.done = 0;
  s.tokens[2] = 3;
  EXPECT_TRUE((*processes)->step(makeStep(one, {3}, kBlockSize), &logits).ok());
  std::remove(model.path.c_str());
}

TEST(MultiProcessTpBackend, KilledWorkerFailsTheStepNamingItsRankAndTheGroupStaysBroken) {
  TinyTp2 model = writeTinyTp2("kill", 11);
  auto processes = MultiProcessTpBackend::create(model.artifact,
                                                 processOptions(model, std::chrono::seconds(20)));
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  Sequence s;
  s.tokens = {1, 2, 3, 4};
  s.blocks = {0, 1};
  std::vector<Sequence*> one = {&s};
  std::vector<float> logits;
  ASSERT_TRUE((*processes)->step(makeStep(one, {3}, kBlockSize), &logits).ok());

  const pid_t victim = (*processes)->workerPid(1);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto killed = Clock::now();
  Status st = (*processes)->step(makeStep(one, {1}, kBlockSize), &logits);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - killed).count();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 1 (pid " + std::to_string(victim) + ")"), std::string::npos)
      << st.message();
  EXPECT_LT(ms, 2000.0) << "the 20 s timeout must not be what notices a dead worker";
  std::printf("killed worker noticed after %.1f ms: %s\n", ms, st.message().c_str());

  const auto again = Clock::now();
  Status later = (*processes)->copyKvBlocks(0, 5);
  EXPECT_EQ(later.message(), st.message());
  const double again_ms = std::chrono::duration<double, std::milli>(Clock::now() - again).count();
  EXPECT_LT(again_ms, 50.0);
  std::remove(model.path.c_str());
}

TEST(MultiProcessTpBackend, WorkerStepFailureBreaksTheGroupWithItsRankedError) {
  TinyTp2 model = writeTinyTp2("fail", 17);
  MultiProcessTpOptions o = processOptions(model, std::chrono::seconds(20));
  o.launch_worker = [](const TpWorkerOptions& w) {
    TpWorkerOptions failing = w;
    // The tiny Llama sums 5 times per step (embedding, then o and down of 2 layers): the
    // second step's third sum fails.
    failing.wrap_communicator = [](Communicator* inner) {
      return std::make_unique<FailingCommunicator>(inner, 7);
    };
    return forkWorker(failing);
  };
  auto processes = MultiProcessTpBackend::create(model.artifact, o);
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  Sequence s;
  s.tokens = {1, 2, 3, 4, 5};
  s.blocks = {0};
  std::vector<Sequence*> one = {&s};
  std::vector<float> logits;
  ASSERT_TRUE((*processes)->step(makeStep(one, {4}, kBlockSize), &logits).ok());
  const auto start = Clock::now();
  Status st = (*processes)->step(makeStep(one, {1}, kBlockSize), &logits);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  ASSERT_FALSE(st.ok());
  // The worker's own error (CpuBackend names the program step), prefixed with its rank.
  EXPECT_EQ(st.message().rfind("tp rank 1: ", 0), 0u) << st.message();
  EXPECT_NE(st.message().find("injected all_reduce failure"), std::string::npos) << st.message();
  EXPECT_LT(ms, 2000.0);
  s.tokens.push_back(6);
  EXPECT_EQ((*processes)->step(makeStep(one, {1}, kBlockSize), &logits).message(), st.message());
  std::remove(model.path.c_str());
}

TEST(MultiProcessTpBackend, StoppedWorkerFailsTheStepAfterTheTimeoutNeverAHang) {
  TinyTp2 model = writeTinyTp2("stop", 13);
  auto processes = MultiProcessTpBackend::create(
      model.artifact, processOptions(model, std::chrono::milliseconds(500)));
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  Sequence s;
  s.tokens = {5, 6, 7};
  s.blocks = {0};
  std::vector<Sequence*> one = {&s};
  std::vector<float> logits;
  const pid_t stopped = (*processes)->workerPid(1);
  ASSERT_EQ(::kill(stopped, SIGSTOP), 0);  // alive, but never arrives
  const auto start = Clock::now();
  Status st = (*processes)->step(makeStep(one, {3}, kBlockSize), &logits);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  ::kill(stopped, SIGCONT);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 1 did not arrive within 500 ms"), std::string::npos)
      << st.message();
  EXPECT_GE(ms, 450.0);
  EXPECT_LT(ms, 3000.0);
  EXPECT_EQ((*processes)->groupStatus().message(), st.message());
  std::remove(model.path.c_str());
}

TEST(MultiProcessTpBackend, WorkerOnAnotherArtifactIsRefusedNamingItsRankNodeAndBothIdentities) {
  // Same model shape, different weights: a worker would load it and compute wrong sums.
  const uint64_t seed = ingot::testing::testSeed();
  TinyTp2 mine = writeTinyTp2("ident-a", seed);
  TinyTp2 other = writeTinyTp2("ident-b", seed + 1);
  const uint64_t a = mine.artifact.header().manifest_xxh64;
  const uint64_t b = other.artifact.header().manifest_xxh64;
  ASSERT_NE(a, b);
  MultiProcessTpOptions o = processOptions(mine, std::chrono::seconds(20));
  o.artifact_path = other.path;  // what a node with another file would open
  auto processes = MultiProcessTpBackend::create(mine.artifact, o);
  ASSERT_FALSE(processes.ok()) << "a worker on another artifact was accepted";
  const std::string& m = processes.status().message();
  auto hex = [](uint64_t v) {
    char t[19];
    std::snprintf(t, sizeof(t), "0x%016llx", static_cast<unsigned long long>(v));
    return std::string(t);
  };
  EXPECT_NE(m.find("tp rank 1 (node 0)"), std::string::npos) << m;
  EXPECT_NE(m.find(hex(a)), std::string::npos) << m;
  EXPECT_NE(m.find(hex(b)), std::string::npos) << m;
  EXPECT_NE(m.find(mine.path), std::string::npos) << m;
  EXPECT_LT(m.find(hex(b)), m.find(hex(a))) << "the worker's identity comes first: " << m;

  // The same file on both sides still forms the group.
  o.artifact_path = mine.path;
  auto same = MultiProcessTpBackend::create(mine.artifact, o);
  EXPECT_TRUE(same.ok()) << same.status().message();
  std::remove(mine.path.c_str());
  std::remove(other.path.c_str());
}

TEST(MultiProcessTpBackend, WorkerThatCannotLoadTheArtifactFailsCreateWithItsError) {
  TinyTp2 model = writeTinyTp2("noload", 3);
  MultiProcessTpOptions o = processOptions(model, std::chrono::seconds(20));
  o.artifact_path = model.path + ".missing";
  const auto start = Clock::now();
  auto processes = MultiProcessTpBackend::create(model.artifact, o);
  ASSERT_FALSE(processes.ok());
  EXPECT_NE(processes.status().message().find("tp rank 1"), std::string::npos)
      << processes.status().message();
  EXPECT_NE(processes.status().message().find(".missing"), std::string::npos)
      << processes.status().message();
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(took, 5.0);

  // An unsharded artifact is refused with a reason.
  testing::LlamaProgramOptions plain;
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(plain);
  ASSERT_TRUE(bytes.ok());
  StatusOr<Artifact> unsharded = Artifact::openFromMemory(*bytes);
  ASSERT_TRUE(unsharded.ok());
  auto refused = MultiProcessTpBackend::create(*unsharded, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("not sharded"), std::string::npos);
  std::remove(model.path.c_str());
}

#ifdef INGOT_BINARY
TEST(MultiProcessTpBackend, WorkersStartedFromTheIngotBinaryMatchThreadRanks) {
  TinyTp2 model = writeTinyTp2("binary", 5);
  MultiProcessTpOptions o = processOptions(model, std::chrono::seconds(20));
  o.launch_worker = nullptr;
  o.worker_executable = INGOT_BINARY;
  auto processes = MultiProcessTpBackend::create(model.artifact, o);
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  std::unique_ptr<TpCpuBackend> threads = threadRanks(model);
  Sequence s;
  s.tokens = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11, 12, 13, 14, 15, 16, 17};
  s.blocks = {2, 3};
  std::vector<Sequence*> one = {&s};
  expectSameStep(**processes, *threads, makeStep(one, {17}, kBlockSize), "prefill");
  s.tokens.push_back(42);
  expectSameStep(**processes, *threads, makeStep(one, {1}, kBlockSize), "decode");
  std::remove(model.path.c_str());
}
#endif

}  // namespace
}  // namespace ingot
