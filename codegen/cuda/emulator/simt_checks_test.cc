// The SIMT emulator's checks fire, naming kernel, block, thread and line: shared out of bounds and races, divergent barriers, warp masks, global accesses, traps.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/emulator/simt_test_util.h"

namespace ingot {
namespace simt {
namespace {

using testing::build;
using testing::DeviceArray;
using testing::run;

// ---- the checks fire, naming kernel, block, thread and line -------------------------------------

TEST(SimtChecks, SharedOutOfBoundsNamesTheArray) {
  auto m = build(R"(
extern "C" __global__ void overrun(int *out, int extra) {
  __shared__ int tile[32];
  tile[threadIdx.x + extra] = 1;
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];
})");
  ASSERT_NE(m, nullptr);
  DeviceArray<int> out(32);
  EXPECT_TRUE(run(*m, "overrun", {1, 1, 1}, {32, 1, 1}, 0, out.get(), 0).ok);
  LaunchResult r = run(*m, "overrun", {1, 1, 1}, {32, 1, 1}, 0, out.get(), 1);
  EXPECT_TRUE(r.aborted);
  EXPECT_TRUE(testing::reported(r, Diagnostic::Kind::kSharedOutOfBounds,
                                {"overrun block (0,0,0) thread (31,0,0)", "past the end of `overrun::tile`",
                                 ":4"}))
      << r.report();
}

TEST(SimtChecks, SharedRacesBetweenBarriersAreReported) {
  auto m = build(R"(
extern "C" __global__ void race(int *out, int sync) {
  __shared__ int v[64];
  v[threadIdx.x] = threadIdx.x;
  if (sync == 1) __syncthreads();
  if (sync == 2) __syncwarp();
  out[threadIdx.x] = v[threadIdx.x ^ 1];
})");
  ASSERT_NE(m, nullptr);
  DeviceArray<int> out(64);
  LaunchResult racy = run(*m, "race", {1, 1, 1}, {64, 1, 1}, 0, out.get(), 0);
  EXPECT_TRUE(testing::reported(racy, Diagnostic::Kind::kSharedRace,
                                {"race block (0,0,0)", "shared-memory race on `race::v`", ":7"}))
      << racy.report();
  EXPECT_TRUE(run(*m, "race", {1, 1, 1}, {64, 1, 1}, 0, out.get(), 1).ok) << "ordered by a barrier";
  // Lanes x and x ^ 1 share a warp: __syncwarp orders their accesses too.
  LaunchResult warp = run(*m, "race", {1, 1, 1}, {64, 1, 1}, 0, out.get(), 2);
  EXPECT_TRUE(warp.ok) << warp.report();
}

TEST(SimtChecks, ABarrierNotEveryLiveThreadReachesIsReported) {
  auto m = build(R"(
extern "C" __global__ void divergent(int *out, int mode) {
  if (mode == 0) {  // two different __syncthreads
    if (threadIdx.x < 32) __syncthreads();
    else __syncthreads();
  } else if (mode == 1) {  // half a warp waits in a shuffle for lanes that went to the barrier
    if (threadIdx.x >= 32 && threadIdx.x < 48) out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
    __syncthreads();
  } else {  // threads that exit are not live: the rest meet
    if (threadIdx.x >= 32) return;
    __syncthreads();
  }
  out[threadIdx.x] = 1;
})");
  ASSERT_NE(m, nullptr);
  DeviceArray<int> out(64);
  LaunchResult two = run(*m, "divergent", {1, 1, 1}, {64, 1, 1}, 0, out.get(), 0);
  EXPECT_TRUE(two.aborted);
  EXPECT_TRUE(testing::reported(two, Diagnostic::Kind::kBarrierDivergence,
                                {"divergent block (0,0,0)", "not reached by every live thread",
                                 ":4", ":5"}))
      << two.report();
  LaunchResult stuck = run(*m, "divergent", {1, 1, 1}, {64, 1, 1}, 0, out.get(), 1);
  EXPECT_TRUE(stuck.aborted);
  EXPECT_TRUE(testing::reported(stuck, Diagnostic::Kind::kBarrierDivergence,
                                {"deadlock", "__syncthreads", "__shfl_xor_sync"}))
      << stuck.report();
  EXPECT_TRUE(run(*m, "divergent", {1, 1, 1}, {64, 1, 1}, 0, out.get(), 2).ok);
}

TEST(SimtChecks, AWarpCollectiveNamingAnExitedLaneIsReported) {
  auto m = build(R"(
extern "C" __global__ void exited(int *out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
})");
  ASSERT_NE(m, nullptr);
  DeviceArray<int> out(32);
  LaunchResult r = run(*m, "exited", {1, 1, 1}, {32, 1, 1}, 0, out.get());
  EXPECT_TRUE(r.aborted);
  EXPECT_TRUE(testing::reported(r, Diagnostic::Kind::kWarpMask, {"exited", "__shfl_xor_sync"}))
      << r.report();
}

TEST(SimtChecks, GlobalAccessesOutsideAllocationsAreStoppedBeforeTheyHappen) {
  auto m = build(R"(
extern "C" __global__ void past(float *data, int n, int over) {
  data[threadIdx.x + over] = 1.0f;
})");
  ASSERT_NE(m, nullptr);
  DeviceArray<float> data(64), guard(64);
  const std::vector<float> before = guard.read();
  LaunchResult r = run(*m, "past", {1, 1, 1}, {64, 1, 1}, 0, data.get(), 64, 1);
  EXPECT_TRUE(r.aborted);
  EXPECT_TRUE(testing::reported(r, Diagnostic::Kind::kGlobalOutOfBounds,
                                {"past block (0,0,0) thread (63,0,0)", "4 bytes past its end", ":3"}))
      << r.report();
  // Freed memory, and host memory, are reported too.
  float *freed = static_cast<float *>(deviceAlloc(256));
  deviceFree(freed);
  r = run(*m, "past", {1, 1, 1}, {1, 1, 1}, 0, freed, 64, 0);
  EXPECT_TRUE(testing::reported(r, Diagnostic::Kind::kGlobalOutOfBounds, {"not allocated"}))
      << r.report();
  std::vector<float> host(64);
  r = run(*m, "past", {1, 1, 1}, {1, 1, 1}, 0, host.data(), 64, 0);
  EXPECT_TRUE(testing::reported(r, Diagnostic::Kind::kHostMemory, {"not device memory"}))
      << r.report();
  EXPECT_EQ(host[0], 0.0f) << "the host write was not made";
}

TEST(SimtChecks, TrapsAndLaunchBoundsEndTheLaunch) {
  auto m = build(R"(
extern "C" __global__ void __launch_bounds__(128) bounded(int *out, int trap) {
  if (trap && threadIdx.x == 3) __trap();
  out[threadIdx.x] = 1;
})");
  ASSERT_NE(m, nullptr);
  DeviceArray<int> out(256);
  LaunchResult trapped = run(*m, "bounded", {1, 1, 1}, {128, 1, 1}, 0, out.get(), 1);
  EXPECT_TRUE(testing::reported(trapped, Diagnostic::Kind::kTrap, {"thread (3,0,0)", "__trap"}))
      << trapped.report();
  LaunchResult wide = run(*m, "bounded", {1, 1, 1}, {256, 1, 1}, 0, out.get(), 0);
  EXPECT_TRUE(testing::reported(wide, Diagnostic::Kind::kTrap, {"__launch_bounds__ (128)"}))
      << wide.report();
}

}  // namespace
}  // namespace simt
}  // namespace ingot
