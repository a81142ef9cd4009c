// NcclCommunicator's control flow on the CPU, over a fake libcuda + libnccl: bootstrap,
// nonblocking init and enqueue, timeouts that abort, peers that die, aborts from elsewhere;
// and the stream-ordered calls: no host wait per collective, captured into a graph and
// replayed, the one bounded wait at the end of a step.
#include "runtime/dist/nccl_communicator.h"

#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <future>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "testing/test_seed.h"

namespace ingot {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

/// The fake, opened by path before anything asks for libcuda.so.1 (its soname), so the
/// driver loader and NcclLibrary both get it.
class FakeDriver {
 public:
  FakeDriver() {
    handle_ = ::dlopen(INGOT_FAKE_CUDA_NCCL, RTLD_NOW | RTLD_GLOBAL);
    EXPECT_NE(handle_, nullptr) << ::dlerror();
    setModes = reinterpret_cast<void (*)(int, int)>(::dlsym(handle_, "fakeSetModes"));
    aborts = reinterpret_cast<int (*)()>(::dlsym(handle_, "fakeAborts"));
    destroys = reinterpret_cast<int (*)()>(::dlsym(handle_, "fakeDestroys"));
    lastBlocking = reinterpret_cast<int (*)()>(::dlsym(handle_, "fakeLastBlocking"));
    collectives = reinterpret_cast<int (*)()>(::dlsym(handle_, "fakeCollectives"));
    resetLog = reinterpret_cast<void (*)()>(::dlsym(handle_, "fakeCudaReset"));
    logSize = reinterpret_cast<int (*)()>(::dlsym(handle_, "fakeCudaLaunchCount"));
    logEntry = reinterpret_cast<const char* (*)(int, unsigned*, int*)>(
        ::dlsym(handle_, "fakeCudaLaunch"));
    setenv("INGOT_NCCL_LIBRARY", INGOT_FAKE_CUDA_NCCL, 1);
    auto cuda = CudaDriver::load();
    EXPECT_TRUE(cuda.ok()) << cuda.status().message();
    cuda_ = std::move(cuda).value();
  }
  CudaDriver& cuda() { return *cuda_; }

  void (*setModes)(int init, int collective) = nullptr;
  int (*aborts)() = nullptr;
  int (*destroys)() = nullptr;
  int (*lastBlocking)() = nullptr;
  int (*collectives)() = nullptr;
  /// The fake driver's launch log, where the fake NCCL logs each collective that runs.
  void (*resetLog)() = nullptr;
  int (*logSize)() = nullptr;
  const char* (*logEntry)(int i, unsigned* dims, int* fromGraph) = nullptr;

 private:
  void* handle_ = nullptr;
  std::unique_ptr<CudaDriver> cuda_;
};

FakeDriver& fake() {
  static FakeDriver* driver = new FakeDriver();  // lives for the process, as libcuda would
  return *driver;
}

/// The fake's abort count once it reaches `want`, or after 3 s: ncclCommAbort runs on the
/// communicator's own thread, so it may land just after the failing call returned.
int abortsReaching(int want) {
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  while (fake().aborts() < want && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(1));
  return fake().aborts();
}

class NcclCommunicatorFake : public ::testing::Test {
 protected:
  void SetUp() override {
    fake().setModes(0, 0);
    auto server = TcpStoreServer::start("127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
    auto store = TcpStoreClient::connect("127.0.0.1", server_->port(), milliseconds(5000));
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();
  }

  StatusOr<std::unique_ptr<NcclCommunicator>> make(milliseconds timeout, int rank = 0,
                                                   int world = 1) {
    NcclGroupOptions options;
    options.rank = rank;
    options.world_size = world;
    options.timeout = timeout;
    options.group_name = "g" + std::to_string(next_++);
    return NcclCommunicator::create(fake().cuda(), *store_, options);
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> store_;
  int next_ = 0;
};

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST_F(NcclCommunicatorFake, CollectivesPassTheRightBuffersCountsAndDtypes) {
  auto comm = make(milliseconds(5000));
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  EXPECT_EQ(fake().lastBlocking(), 0) << "the communicator must be nonblocking";
  std::mt19937 rng(ingot::testing::testSeed());
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> in(1001), out(1001, NAN);
  for (float& x : in) x = dist(rng);
  // Fake device memory is host memory: a one-rank NCCL collective copies in to out.
  ASSERT_TRUE((*comm)->allReduceSum(CollectiveDtype::kF32, in.data(), out.data(), 1001).ok());
  EXPECT_EQ(out, in);
  std::vector<uint16_t> in16(999), out16(999, 0xFFFF);
  for (auto& x : in16) x = static_cast<uint16_t>(rng() & 0x7F7F);
  ASSERT_TRUE((*comm)->allGather(CollectiveDtype::kBf16, in16.data(), 999, out16.data()).ok());
  EXPECT_EQ(out16, in16);
  std::fill(out.begin(), out.end(), NAN);
  ASSERT_TRUE((*comm)->allGather(in.data(), 1001, out.data()).ok());
  EXPECT_EQ(out, in);
  ASSERT_TRUE((*comm)->barrier().ok());
  EXPECT_TRUE((*comm)->groupStatus().ok());
}

TEST_F(NcclCommunicatorFake, NonblockingEnqueueInProgressIsWaitedFor) {
  auto comm = make(milliseconds(5000));
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  fake().setModes(0, 3);
  std::vector<float> x(64, 1.0f);
  int before = fake().collectives();
  ASSERT_TRUE((*comm)->allReduceSum(x.data(), 64).ok());
  EXPECT_EQ(fake().collectives(), before + 1);
}

TEST_F(NcclCommunicatorFake, HealthyShutdownFinalizesAndDestroysWithoutAbort) {
  int aborts = fake().aborts(), destroys = fake().destroys();
  {
    auto comm = make(milliseconds(5000));
    ASSERT_TRUE(comm.ok()) << comm.status().message();
  }
  EXPECT_EQ(fake().destroys(), destroys + 1);
  EXPECT_EQ(fake().aborts(), aborts);
}

TEST_F(NcclCommunicatorFake, InitThatNeverCompletesTimesOutAndAborts) {
  fake().setModes(1, 0);
  int aborts = fake().aborts();
  auto start = Clock::now();
  auto comm = make(milliseconds(300));
  ASSERT_FALSE(comm.ok());
  EXPECT_GE(secondsSince(start), 0.29);
  EXPECT_LT(secondsSince(start), 3.0);
  EXPECT_EQ(comm.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = comm.status().message();
  EXPECT_NE(m.find("rank 0 of 1"), std::string::npos) << m;
  EXPECT_NE(m.find("init"), std::string::npos) << m;
  EXPECT_NE(m.find("300 ms"), std::string::npos) << m;
  EXPECT_EQ(abortsReaching(aborts + 1), aborts + 1);
}

TEST_F(NcclCommunicatorFake, JoinProbeErrorEndsAnInitThatWaitsAndAbortsIt) {
  fake().setModes(1, 0);  // init never completes: a rank that never comes
  int aborts = fake().aborts();
  NcclGroupOptions options;
  options.timeout = milliseconds(20000);
  options.group_name = "probe";
  std::atomic<int> asked{0};
  const auto start = Clock::now();
  options.join_probe = [&]() -> Status {
    ++asked;
    if (Clock::now() - start < milliseconds(50)) return okStatus();
    return failedPrecondition("tp rank 1 (pid 4242) exited with status 3 while the group formed");
  };
  auto comm = NcclCommunicator::create(fake().cuda(), *store_, options);
  const double seconds = secondsSince(start);
  ASSERT_FALSE(comm.ok());
  EXPECT_GE(seconds, 0.05);
  EXPECT_LT(seconds, 1.0) << "the probe's error must end the wait, not the 20 s timeout";
  EXPECT_GE(asked.load(), 2);
  EXPECT_EQ(comm.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = comm.status().message();
  EXPECT_NE(m.find("rank 0 of 1"), std::string::npos) << m;
  EXPECT_NE(m.find("tp rank 1 (pid 4242) exited with status 3"), std::string::npos) << m;
  EXPECT_EQ(abortsReaching(aborts + 1), aborts + 1) << "the initializing communicator is aborted";
}

TEST_F(NcclCommunicatorFake, JoinProbeIsNotAskedOnceTheGroupFormed) {
  NcclGroupOptions options;
  options.timeout = milliseconds(300);
  options.group_name = "probe-ok";
  std::atomic<int> asked{0};
  options.join_probe = [&]() -> Status {
    ++asked;
    return okStatus();
  };
  auto comm = NcclCommunicator::create(fake().cuda(), *store_, options);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  const int after_init = asked.load();
  fake().setModes(0, 1);  // a collective that never completes: the probe is for the join only
  std::vector<float> x(10, 1.0f);
  EXPECT_FALSE((*comm)->allReduceSum(x.data(), 10).ok());
  EXPECT_EQ(asked.load(), after_init);
}

TEST_F(NcclCommunicatorFake, InitFailureCarriesNcclsMessage) {
  fake().setModes(2, 0);
  auto comm = make(milliseconds(5000));
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("fake NCCL error"), std::string::npos)
      << comm.status().message();
}

TEST_F(NcclCommunicatorFake, CollectiveThatNeverCompletesTimesOutAndBreaksTheGroup) {
  auto comm = make(milliseconds(300));
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  fake().setModes(0, 1);
  int aborts = fake().aborts();
  std::vector<float> x(1000, 1.0f);
  auto start = Clock::now();
  Status s = (*comm)->allReduceSum(x.data(), 1000);
  ASSERT_FALSE(s.ok());
  EXPECT_GE(secondsSince(start), 0.29);
  EXPECT_LT(secondsSince(start), 3.0);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("all_reduce of 1000 f32 on rank 0 of 1"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("300 ms"), std::string::npos) << s.message();
  EXPECT_EQ(abortsReaching(aborts + 1), aborts + 1);
  // Broken for good: later calls fail at once with the first error, without NCCL.
  fake().setModes(0, 0);
  int calls = fake().collectives();
  start = Clock::now();
  EXPECT_EQ((*comm)->barrier().message(), s.message());
  EXPECT_EQ((*comm)->allGather(x.data(), 10, x.data() + 100).message(), s.message());
  EXPECT_LT(secondsSince(start), 0.25);  // well under the 300 ms a wait would take
  EXPECT_EQ(fake().collectives(), calls);
  EXPECT_EQ((*comm)->groupStatus().message(), s.message());
}

TEST_F(NcclCommunicatorFake, PeerDeathReportedByNcclFailsBeforeTheTimeout) {
  auto comm = make(milliseconds(20000));
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  fake().setModes(0, 2);
  std::vector<uint16_t> x(4096);
  auto start = Clock::now();
  Status s = (*comm)->allReduceSum(CollectiveDtype::kBf16, x.data(), x.data(), 4096);
  ASSERT_FALSE(s.ok());
  EXPECT_LT(secondsSince(start), 2.0);
  EXPECT_NE(s.message().find("all_reduce of 4096 bf16"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("remote process exited"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("peer 1 closed"), std::string::npos) << s.message();
}

TEST_F(NcclCommunicatorFake, AbortFromAnotherThreadEndsACollectiveInFlight) {
  auto comm = make(milliseconds(30000));
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  fake().setModes(0, 1);
  int aborts = fake().aborts();
  std::vector<float> x(16);
  auto start = Clock::now();
  auto pending =
      std::async(std::launch::async, [&] { return (*comm)->allReduceSum(x.data(), 16); });
  std::this_thread::sleep_for(milliseconds(100));
  (*comm)->abort(internalError("rank 1 died: its engine step failed"));
  Status s = pending.get();
  EXPECT_LT(secondsSince(start), 2.0);
  EXPECT_EQ(s.message(), "rank 1 died: its engine step failed");
  EXPECT_EQ(abortsReaching(aborts + 1), aborts + 1);  // aborted once, by the polling thread
}

TEST_F(NcclCommunicatorFake, BadArgumentsAreRefusedWithoutBreakingTheGroup) {
  auto comm = make(milliseconds(5000));
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  std::vector<float> x(100);
  Status s = (*comm)->allReduceSum(CollectiveDtype::kF32, x.data(), x.data() + 10, 50);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.message();
  s = (*comm)->allGather(CollectiveDtype::kF32, x.data() + 5, 10, x.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  s = (*comm)->allReduceSum(x.data(), -1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_TRUE((*comm)->groupStatus().ok());
  EXPECT_TRUE((*comm)->allReduceSum(x.data(), 100).ok());

  auto bad = make(milliseconds(5000), 2, 2);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("rank 2 of 2"), std::string::npos)
      << bad.status().message();
  NcclGroupOptions options;
  options.device = 1;  // the fake has one device
  auto noDevice = NcclCommunicator::create(fake().cuda(), *store_, options);
  EXPECT_NE(noDevice.status().message().find("device 1 does not exist"), std::string::npos)
      << noDevice.status().message();
}

TEST_F(NcclCommunicatorFake, OtherRanksTakeTheUniqueIdFromTheStore) {
  // Rank 1 of 2 waits for rank 0's id: missing, then malformed, then right.
  auto start = Clock::now();
  auto missing = make(milliseconds(300), 1, 2);
  ASSERT_FALSE(missing.ok());
  EXPECT_LT(secondsSince(start), 3.0);
  EXPECT_NE(missing.status().message().find("'g0/nccl_unique_id'"), std::string::npos)
      << missing.status().message();
  ASSERT_TRUE(store_->set("g1/nccl_unique_id", std::vector<uint8_t>(100, 1)).ok());
  auto malformed = make(milliseconds(1000), 1, 2);
  EXPECT_EQ(malformed.status().code(), StatusCode::kDataLoss) << malformed.status().message();
  ASSERT_TRUE(store_->set("g2/nccl_unique_id", std::vector<uint8_t>(NCCL_UNIQUE_ID_BYTES, 3)).ok());
  auto joined = make(milliseconds(1000), 1, 2);
  ASSERT_TRUE(joined.ok()) << joined.status().message();
  EXPECT_EQ((*joined)->rank(), 1);
  EXPECT_EQ((*joined)->worldSize(), 2);
  // Rank 0 publishes the id it made for the others.
  auto root = make(milliseconds(1000), 0, 2);
  ASSERT_TRUE(root.ok()) << root.status().message();
  auto id = store_->get("g3/nccl_unique_id", milliseconds(100));
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(id->size(), size_t(NCCL_UNIQUE_ID_BYTES));
}


/// A stream of the fake driver, destroyed at the end of the scope.
struct FakeStream {
  FakeStream() {
    EXPECT_EQ(fake().cuda().streamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  }
  ~FakeStream() { fake().cuda().streamDestroy(stream); }
  CUstream stream = nullptr;
};

CUdeviceptr devicePtr(const float* p) { return reinterpret_cast<CUdeviceptr>(p); }

TEST_F(NcclCommunicatorFake, StreamOrderedCollectivesEnqueueWithoutWaitingAndWaitOnceAtTheEnd) {
  // Rank 0 of 2 on the fake: the other rank mirrors this one (a sum doubles, a gather
  // repeats), so values can be checked without a peer.
  auto comm = make(milliseconds(5000), 0, 2);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  FakeStream s;
  std::mt19937 rng(ingot::testing::testSeed());
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> x(777), gathered(2 * 777, NAN);
  for (float& v : x) v = dist(rng);
  const std::vector<float> original = x;
  fake().setModes(0, 1);  // the stream never drains: an enqueue that waited would hang
  auto start = Clock::now();
  ASSERT_TRUE((*comm)->enqueueAllReduceSum(devicePtr(x.data()), 777, s.stream).ok());
  ASSERT_TRUE((*comm)
                  ->enqueueAllGather(devicePtr(x.data()), 777, devicePtr(gathered.data()), s.stream)
                  .ok());
  EXPECT_LT(secondsSince(start), 0.5) << "enqueueing must not wait for the stream";
  fake().setModes(0, 0);
  ASSERT_TRUE((*comm)->enqueueAllReduceSum(devicePtr(x.data()), 1, s.stream).ok());  // drains
  ASSERT_TRUE((*comm)->waitStream(s.stream, "step 7").ok());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(gathered[i], 2 * original[i]) << i;
    ASSERT_EQ(gathered[777 + i], 2 * original[i]) << i;
    ASSERT_EQ(x[i], (i == 0 ? 4 : 2) * original[i]) << i;
  }
  EXPECT_TRUE((*comm)->groupStatus().ok());
}

TEST_F(NcclCommunicatorFake, StreamOrderedCollectivesAreCapturedIntoAGraphAndReplayed) {
  auto comm = make(milliseconds(5000), 0, 2);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  CudaDriver& cu = fake().cuda();
  FakeStream s;
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 20.5f;
  const std::vector<float> original = x;
  fake().resetLog();
  ASSERT_EQ(cu.streamBeginCapture(s.stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  ASSERT_TRUE((*comm)->enqueueAllReduceSum(devicePtr(x.data()), 64, s.stream).ok());
  CUgraph graph = nullptr;
  ASSERT_EQ(cu.streamEndCapture(s.stream, &graph), CUDA_SUCCESS);
  EXPECT_EQ(x, original) << "a captured collective runs only when the graph is launched";
  EXPECT_EQ(fake().logSize(), 0);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cu.graphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  cu.graphDestroy(graph);
  for (int replay = 1; replay <= 3; ++replay) {
    ASSERT_EQ(cu.graphLaunch(exec, s.stream), CUDA_SUCCESS);
    ASSERT_TRUE((*comm)->waitStream(s.stream, "replay " + std::to_string(replay)).ok());
    EXPECT_EQ(x[5], original[5] * static_cast<float>(1 << replay)) << "replay " << replay;
  }
  ASSERT_EQ(fake().logSize(), 3);
  unsigned dims[6];
  int fromGraph = 0;
  EXPECT_STREQ(fake().logEntry(2, dims, &fromGraph), "ncclAllReduce");
  EXPECT_EQ(fromGraph, 1);
  EXPECT_EQ(dims[0], 64u);
  EXPECT_EQ(dims[2], 2u);
  cu.graphExecDestroy(exec);
}

TEST_F(NcclCommunicatorFake, StreamWaitOnAHungCollectiveTimesOutNamingTheStepAndAborts) {
  auto comm = make(milliseconds(300), 0, 2);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  FakeStream s;
  std::vector<float> x(32, 1.0f);
  fake().setModes(0, 1);
  const int aborts = fake().aborts();
  ASSERT_TRUE((*comm)->enqueueAllReduceSum(devicePtr(x.data()), 32, s.stream).ok());
  auto start = Clock::now();
  Status st = (*comm)->waitStream(s.stream, "step (decode graph of batch 4)");
  ASSERT_FALSE(st.ok());
  EXPECT_GE(secondsSince(start), 0.29);
  EXPECT_LT(secondsSince(start), 3.0);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("step (decode graph of batch 4) on nccl rank 0 of 2"),
            std::string::npos) << st.message();
  EXPECT_NE(st.message().find("300 ms"), std::string::npos) << st.message();
  EXPECT_EQ(abortsReaching(aborts + 1), aborts + 1);
  fake().setModes(0, 0);
  EXPECT_EQ((*comm)->enqueueAllReduceSum(devicePtr(x.data()), 32, s.stream).message(), st.message())
      << "broken for good";
}

TEST_F(NcclCommunicatorFake, StreamWaitEndsWithinMillisecondsOfAnAbortFromAnotherThread) {
  auto comm = make(milliseconds(30000), 0, 2);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  FakeStream s;
  std::vector<float> x(16);
  fake().setModes(0, 1);
  const int aborts = fake().aborts();
  ASSERT_TRUE((*comm)->enqueueAllReduceSum(devicePtr(x.data()), 16, s.stream).ok());
  auto pending = std::async(std::launch::async,
                            [&] { return (*comm)->waitStream(s.stream, "step 3"); });
  std::this_thread::sleep_for(milliseconds(50));
  auto aborted = Clock::now();
  (*comm)->abort(internalError("tp rank 1 (pid 42) exited with status 1"));
  Status st = pending.get();
  const double ms = secondsSince(aborted) * 1000.0;
  EXPECT_LT(ms, 100.0);
  std::printf("[ measured ] stream wait ended %.2f ms after abort() from another thread\n", ms);
  EXPECT_EQ(st.message(), "tp rank 1 (pid 42) exited with status 1");
  EXPECT_EQ(abortsReaching(aborts + 1), aborts + 1);
}

TEST_F(NcclCommunicatorFake, StreamOrderedCallsRefuseBadBuffersWithoutBreakingTheGroup) {
  auto comm = make(milliseconds(5000), 0, 2);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  FakeStream s;
  std::vector<float> x(100);
  Status st =
      (*comm)->enqueueAllGather(devicePtr(x.data()), 40, devicePtr(x.data() + 10), s.stream);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("overlaps"), std::string::npos) << st.message();
  EXPECT_EQ((*comm)->enqueueAllReduceSum(0, 5, s.stream).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*comm)->waitStream(nullptr, "step").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*comm)->groupStatus().ok());
}

}  // namespace
}  // namespace ingot
