// Test helpers shared by the multi-process tensor-parallel tests: a tiny sharded Llama
// written to a file, forked workers, and rank communicators that fail or hang on purpose.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "testing/llama_program.h"
#include "runtime/backend/tp/multi_process_tp_backend.h"
#include "runtime/dist/communicator.h"

namespace ingot::testing {

/// A tiny Llama sharded for `tp` ranks, written to a file (workers open it by path) and
/// opened here.
struct TinyTpModel {
  std::string path;
  Artifact artifact;
};

/// Builds the tiny Llama (`tp` ranks, `seed`, `block_size`) and writes it to
/// `<TempDir>/<stem>-<pid>.ingot`; a failure is a test failure (check HasFailure()).
inline TinyTpModel writeTinyTpModel(int tp, uint64_t seed, int block_size,
                                    const std::string& stem) {
  LlamaProgramOptions o;
  o.tp = tp;
  o.seed = seed;
  o.block_size = block_size;
  StatusOr<std::vector<uint8_t>> bytes = buildLlamaArtifact(o);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  const std::string path =
      ::testing::TempDir() + stem + "-" + std::to_string(::getpid()) + ".ingot";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes->data()),
             static_cast<std::streamsize>(bytes->size()));
  StatusOr<Artifact> a = Artifact::open(path);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return {path, std::move(a).value()};
}

/// Starts a worker by forking this test process and calling runTpWorker in the child, which
/// dies with this process and reports its error on stderr.
inline StatusOr<pid_t> forkWorker(const TpWorkerOptions& w) {
  const pid_t pid = ::fork();
  if (pid < 0) return ioError("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    Status s = runTpWorker(w);
    if (!s.ok()) std::fprintf(stderr, "worker: %s\n", s.message().c_str());
    std::fflush(stderr);
    ::_exit(s.ok() ? 0 : 1);
  }
  return pid;
}

/// Forwards to the group, except that all_reduce number `fail_at` fails on this rank.
class FailingCommunicator final : public Communicator {
 public:
  FailingCommunicator(Communicator* inner, int fail_at) : inner_(inner), fail_at_(fail_at) {}
  int rank() const override { return inner_->rank(); }
  int worldSize() const override { return inner_->worldSize(); }
  Status allReduceSum(float* data, int64_t n) override {
    if (calls_++ == fail_at_) return internalError("injected all_reduce failure");
    return inner_->allReduceSum(data, n);
  }
  Status allGather(const float* in, int64_t n, float* out) override {
    return inner_->allGather(in, n, out);
  }
  Status barrier() override { return inner_->barrier(); }
  void abort(const Status& error) override { inner_->abort(error); }
  Status groupStatus() const override { return inner_->groupStatus(); }

 private:
  Communicator* inner_;
  const int fail_at_;
  int calls_ = 0;
};

/// Forwards to the group, except that all_reduce number `hang_at` blocks until abort() (or
/// `deaf_for`), like an NCCL collective whose peer is gone; `on_hang` runs as it starts.
/// Tests make `deaf_for` far longer than they accept, so only an abort can end the wait.
class DeafCommunicator final : public Communicator {
 public:
  DeafCommunicator(Communicator* inner, int hang_at, std::chrono::milliseconds deaf_for)
      : inner_(inner), hang_at_(hang_at), deaf_for_(deaf_for) {}
  int rank() const override { return inner_->rank(); }
  int worldSize() const override { return inner_->worldSize(); }
  Status allReduceSum(float* data, int64_t n) override {
    if (calls_++ != hang_at_) return inner_->allReduceSum(data, n);
    if (on_hang) on_hang();
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, deaf_for_, [&] { return aborted_; }))
      return failedPrecondition("deaf collective: nobody aborted it");
    return inner_->groupStatus();
  }
  Status allGather(const float* in, int64_t n, float* out) override {
    return inner_->allGather(in, n, out);
  }
  Status barrier() override { return inner_->barrier(); }
  void abort(const Status& error) override {
    inner_->abort(error);
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }
  Status groupStatus() const override { return inner_->groupStatus(); }

  std::function<void()> on_hang;

 private:
  Communicator* inner_;
  const int hang_at_;
  const std::chrono::milliseconds deaf_for_;
  int calls_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool aborted_ = false;
};

}  // namespace ingot::testing
