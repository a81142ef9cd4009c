// NcclCommunicator on real GPUs against the in-process SharedMemoryGroup: same inputs, same
// sums and gathers; plus a group that never forms and an aborted group failing fast.
// Label `gpu`: skips, saying why, without a driver, a device or NCCL.
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/backend/cuda/cuda_driver.h"
#include "testing/test_seed.h"
#include "runtime/dist/nccl_communicator.h"
#include "runtime/dist/shared_memory_group.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

/// Nearest-even bf16 of `f` (NaN stays NaN), as CUDA's __float2bfloat16_rn.
uint16_t toBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float fromBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// The machine's GPUs, or why there are none (the reason a test skips).
struct Gpus {
  std::unique_ptr<CudaDriver> cuda;
  int count = 0;
  std::string why;
};

Gpus findGpus() {
  Gpus g;
  auto cuda = CudaDriver::load();
  if (!cuda.ok()) { g.why = "no GPU: " + cuda.status().message(); return g; }
  g.cuda = std::move(cuda).value();
  if (g.cuda->deviceGetCount(&g.count) != CUDA_SUCCESS || g.count == 0) {
    g.why = "no CUDA device";
    return g;
  }
  auto nccl = NcclLibrary::load();
  if (!nccl.ok()) { g.why = "GPU present but " + nccl.status().message(); g.count = 0; return g; }
  return g;
}

/// Device memory on the context current on this thread, freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer(CudaDriver& cu, size_t bytes) : cu_(cu), bytes_(bytes) {
    EXPECT_TRUE(cu.check("cuMemAlloc", cu.memAlloc(&ptr_, bytes)).ok());
  }
  ~DeviceBuffer() { if (ptr_) cu_.memFree(ptr_); }
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  template <typename T>
  void upload(const std::vector<T>& host) {
    ASSERT_EQ(host.size() * sizeof(T), bytes_);
    ASSERT_TRUE(cu_.check("cuMemcpyHtoD", cu_.memcpyHtoD(ptr_, host.data(), bytes_)).ok());
  }
  template <typename T>
  std::vector<T> download() {
    std::vector<T> host(bytes_ / sizeof(T));
    EXPECT_TRUE(cu_.check("cuMemcpyDtoH", cu_.memcpyDtoH(host.data(), ptr_, bytes_)).ok());
    return host;
  }

 private:
  CudaDriver& cu_;
  CUdeviceptr ptr_ = 0;
  size_t bytes_;
};

/// Makes device `ordinal`'s primary context current on this thread (for test buffers).
void useDevice(CudaDriver& cu, int ordinal) {
  CUdevice device;
  CUcontext context;
  ASSERT_TRUE(cu.check("cuDeviceGet", cu.deviceGet(&device, ordinal)).ok());
  ASSERT_TRUE(cu.check("cuDevicePrimaryCtxRetain", cu.primaryCtxRetain(&context, device)).ok());
  ASSERT_TRUE(cu.check("cuCtxSetCurrent", cu.ctxSetCurrent(context)).ok());
}

std::vector<float> randomFloats(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> dist(-8, 8);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

/// What every rank of an in-process group computes, as the reference.
struct Reference {
  std::vector<std::vector<float>> sum;     // per rank: the all-reduced input
  std::vector<std::vector<float>> gather;  // per rank: the all-gathered input
};

Reference sharedMemoryResult(const std::vector<std::vector<float>>& inputs) {
  int world = static_cast<int>(inputs.size());
  auto group = SharedMemoryGroup::create(world, milliseconds(20000));
  EXPECT_TRUE(group.ok());
  Reference ref;
  ref.sum = inputs;
  ref.gather.assign(world, std::vector<float>(inputs[0].size() * world, NAN));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      Communicator* c = (*group)->communicator(r);
      EXPECT_TRUE(c->allReduceSum(ref.sum[r].data(), ref.sum[r].size()).ok());
      EXPECT_TRUE(c->allGather(inputs[r].data(), inputs[r].size(), ref.gather[r].data()).ok());
    });
  }
  for (auto& t : threads) t.join();
  return ref;
}

std::vector<uint16_t> toBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = toBf16(v[i]);
  return out;
}

/// Runs rank `rank` of a `world`-rank NCCL group on device `rank`: f32 and bf16 all_reduce
/// (out of place into poisoned buffers, and in place) and all_gather, checked against the
/// shared-memory group's results for the same inputs. bf16 inputs are the f32 inputs
/// rounded; the reference sums them in f32 and rounds once, as NCCL's bf16 sum does.
void runRank(CudaDriver& cu, uint16_t port, int rank, int world, const std::string& name,
             const std::vector<std::vector<float>>& inputs, const Reference& ref,
             const Reference& refBf16) {
  useDevice(cu, rank);
  auto store = TcpStoreClient::connect("127.0.0.1", port, milliseconds(10000));
  ASSERT_TRUE(store.ok()) << store.status().message();
  NcclGroupOptions options;
  options.rank = rank;
  options.world_size = world;
  options.device = rank;
  options.timeout = milliseconds(60000);
  options.group_name = name;
  auto comm = NcclCommunicator::create(cu, **store, options);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  NcclCommunicator& c = **comm;
  if (rank == 0)
    std::cout << "[ gpu ] NCCL " << c.library().versionString() << " from "
              << c.library().path() << ", " << world << " rank(s)\n";
  const size_t n = inputs[rank].size();
  const std::vector<float> poison(n * world, NAN);

  DeviceBuffer in(cu, n * 4), out(cu, n * 4), gathered(cu, n * world * 4);
  in.upload(inputs[rank]);
  out.upload(std::vector<float>(n, NAN));
  ASSERT_TRUE(c.allReduceSum(CollectiveDtype::kF32, in.get(), out.get(), n).ok());
  std::vector<float> sum = out.download<float>();
  ASSERT_EQ(std::memcmp(sum.data(), ref.sum[rank].data(), n * 4), 0) << "f32 all_reduce";
  // The Communicator interface: in place.
  ASSERT_TRUE(c.allReduceSum(static_cast<float*>(in.get()), n).ok());
  sum = in.download<float>();
  ASSERT_EQ(std::memcmp(sum.data(), ref.sum[rank].data(), n * 4), 0) << "f32 in place";
  in.upload(inputs[rank]);
  gathered.upload(poison);
  ASSERT_TRUE(c.allGather(static_cast<const float*>(in.get()), n,
                          static_cast<float*>(gathered.get())).ok());
  std::vector<float> all = gathered.download<float>();
  ASSERT_EQ(std::memcmp(all.data(), ref.gather[rank].data(), all.size() * 4), 0) << "f32 gather";

  DeviceBuffer in16(cu, n * 2), out16(cu, n * 2), gathered16(cu, n * world * 2);
  in16.upload(toBf16(inputs[rank]));
  out16.upload(std::vector<uint16_t>(n, 0x7FC1));  // a NaN no sum produces
  ASSERT_TRUE(c.allReduceSum(CollectiveDtype::kBf16, in16.get(), out16.get(), n).ok());
  std::vector<uint16_t> sum16 = out16.download<uint16_t>();
  int worst = 0;
  for (size_t i = 0; i < n; ++i) {
    int diff = std::abs(int(sum16[i]) - int(toBf16(refBf16.sum[rank][i])));
    ASSERT_FALSE(std::isnan(fromBf16(sum16[i]))) << i;
    worst = std::max(worst, diff);
  }
  // One rank: the sum is the input itself. Two: one rounding of an exact f32 sum.
  EXPECT_LE(worst, world == 1 ? 0 : 1) << "bf16 all_reduce, ulps";
  gathered16.upload(std::vector<uint16_t>(n * world, 0x7FC1));
  ASSERT_TRUE(c.allGather(CollectiveDtype::kBf16, in16.get(), n, gathered16.get()).ok());
  std::vector<uint16_t> all16 = gathered16.download<uint16_t>();
  ASSERT_EQ(all16, toBf16(refBf16.gather[rank])) << "bf16 gather";
  ASSERT_TRUE(c.barrier().ok());

  // Latency of a decode-sized all_reduce (one token's hidden state of a 4096-wide model).
  const int kIters = 200, kHidden = 4096;
  auto start = Clock::now();
  for (int i = 0; i < kIters; ++i)
    ASSERT_TRUE(c.allReduceSum(CollectiveDtype::kBf16, in16.get(), in16.get(), kHidden).ok());
  double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kIters;
  if (rank == 0)
    std::cout << "[ gpu ] " << world << "-rank bf16 all_reduce of " << kHidden
              << " values, enqueue + wait: " << us << " us\n";
  EXPECT_TRUE(c.groupStatus().ok());
}

void checkGroup(int world, const std::string& name) {
  Gpus gpus = findGpus();
  if (gpus.count == 0) GTEST_SKIP() << gpus.why;
  if (gpus.count < world) GTEST_SKIP() << "needs " << world << " GPUs, found " << gpus.count;
  std::mt19937 rng(ingot::testing::testSeed());
  const size_t n = (1 << 20) + 37;  // not a multiple of any chunk size NCCL uses
  std::vector<std::vector<float>> inputs, inputsBf16;
  for (int r = 0; r < world; ++r) {
    inputs.push_back(randomFloats(rng, n));
    std::vector<float> rounded(n);
    for (size_t i = 0; i < n; ++i) rounded[i] = fromBf16(toBf16(inputs.back()[i]));
    inputsBf16.push_back(std::move(rounded));
  }
  Reference ref = sharedMemoryResult(inputs), refBf16 = sharedMemoryResult(inputsBf16);
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      runRank(*gpus.cuda, (*server)->port(), r, world, name, inputs, ref,
              refBf16);
    });
  for (auto& t : ranks) t.join();
}

TEST(NcclCommunicator, OneRankGroupMatchesTheSharedMemoryGroup) { checkGroup(1, "one-rank"); }

TEST(NcclCommunicator, TwoRanksOnTwoGpusMatchTheSharedMemoryGroup) { checkGroup(2, "two-ranks"); }

TEST(NcclCommunicator, InitWaitingForARankThatNeverComesTimesOutInsteadOfHanging) {
  Gpus gpus = findGpus();
  if (gpus.count == 0) GTEST_SKIP() << gpus.why;
  useDevice(*gpus.cuda, 0);
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto store = TcpStoreClient::connect("127.0.0.1", (*server)->port(), milliseconds(5000));
  ASSERT_TRUE(store.ok());
  NcclGroupOptions options;
  options.world_size = 2;  // rank 1 never starts
  options.timeout = milliseconds(3000);
  options.group_name = "lonely";
  auto start = Clock::now();
  auto comm = NcclCommunicator::create(*gpus.cuda, **store, options);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(comm.ok());
  std::cout << "[ gpu ] " << comm.status().message() << " (" << seconds << " s)\n";
  EXPECT_EQ(comm.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(comm.status().message().find("init"), std::string::npos);
  EXPECT_NE(comm.status().message().find("3000 ms"), std::string::npos);
  EXPECT_LT(seconds, 30.0);  // the timeout plus ncclCommAbort, never a hang
}

TEST(NcclCommunicator, BadArgumentsAreRefusedAndAnAbortedGroupFailsAtOnce) {
  Gpus gpus = findGpus();
  if (gpus.count == 0) GTEST_SKIP() << gpus.why;
  CudaDriver& cu = *gpus.cuda;
  useDevice(cu, 0);
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto store = TcpStoreClient::connect("127.0.0.1", (*server)->port(), milliseconds(5000));
  ASSERT_TRUE(store.ok());
  NcclGroupOptions options;
  options.device = gpus.count;  // one past the last
  auto bad = NcclCommunicator::create(cu, **store, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not exist"), std::string::npos)
      << bad.status().message();
  options.device = 0;
  options.group_name = "abort";
  auto comm = NcclCommunicator::create(cu, **store, options);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  DeviceBuffer buffer(cu, 4096 * 4);
  Status s = (*comm)->allReduceSum(CollectiveDtype::kF32, buffer.get(),
                                   static_cast<char*>(buffer.get()) + 4, 1000);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_TRUE((*comm)->groupStatus().ok()) << "a refused call must not break the group";
  ASSERT_TRUE((*comm)->barrier().ok());
  (*comm)->abort(internalError("rank 3 lost its GPU"));
  auto start = Clock::now();
  s = (*comm)->allReduceSum(static_cast<float*>(buffer.get()), 4096);
  // At once: not after the 30 s timeout.
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
  EXPECT_EQ(s.message(), "rank 3 lost its GPU");
  EXPECT_EQ((*comm)->groupStatus().message(), "rank 3 lost its GPU");
}

TEST(NcclLibrary, AMissingOrForeignLibraryIsAClearError) {
  // Runs without a GPU: opening NCCL is the runtime's first step on any machine.
  auto missing = NcclLibrary::loadFrom("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/libnccl.so.2"), std::string::npos)
      << missing.status().message();
  auto foreign = NcclLibrary::loadFrom("libc.so.6");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("has no ncclGetVersion"), std::string::npos)
      << foreign.status().message();
  auto found = NcclLibrary::load();
  std::cout << "[ nccl ] " << (found.ok() ? "NCCL " + (*found)->versionString() + " at " +
                                                (*found)->path()
                                          : found.status().message())
            << "\n";
}

}  // namespace
}  // namespace ingot
