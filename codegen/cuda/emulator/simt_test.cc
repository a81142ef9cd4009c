// The SIMT emulator against CUDA's semantics: indices, shared memory, barriers, warp collectives, atomics, conversions, tensor cores, counters.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
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

/// A fresh seed per run, printed; INGOT_TEST_SEED replays one.
uint64_t seed() {
  const char *env = std::getenv("INGOT_TEST_SEED");
  const uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::printf("INGOT_TEST_SEED=%llu\n", static_cast<unsigned long long>(s));
  return s;
}

// ---- the device branches run ---------------------------------------------------------------

TEST(SimtEmulator, DeviceBranchesRunWithTheRequestedArch) {
  const char *source = R"(
extern "C" __global__ void marker(int *out) {
#if defined(__CUDA_ARCH__)
  out[0] = __CUDA_ARCH__;
#else
  out[0] = -1;
#endif
#if defined(__CUDACC_RTC__)
  out[1] = 1;
#endif
})";
  for (int arch : {800, 900}) {
    auto m = build(source, arch);
    ASSERT_NE(m, nullptr);
    DeviceArray<int> out(2);
    LaunchResult r = run(*m, "marker", {1, 1, 1}, {1, 1, 1}, 0, out.get());
    ASSERT_TRUE(r.ok) << r.report();
    EXPECT_EQ(out.read()[0], arch);
    EXPECT_EQ(out.read()[1], 1) << "compiled as NVRTC compiles it";
  }
}

TEST(SimtEmulator, ThreadAndBlockIndicesCoverTheGridOnce) {
  auto m = build(R"(
extern "C" __global__ void ids(unsigned *out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned n = blockDim.x * blockDim.y * blockDim.z;
  atomicAdd(&out[block * n + thread], block * 1000u + thread + 1u);
})");
  ASSERT_NE(m, nullptr);
  const Dim grid{3, 2, 2}, block{5, 3, 4};
  const unsigned n = 60, blocks = 12;
  DeviceArray<unsigned> out(std::vector<unsigned>(n * blocks, 0));
  LaunchResult r = run(*m, "ids", grid, block, 0, out.get());
  ASSERT_TRUE(r.ok) << r.report();
  const std::vector<unsigned> got = out.read();
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned t = 0; t < n; ++t) EXPECT_EQ(got[b * n + t], b * 1000u + t + 1u);
  EXPECT_EQ(r.counters.blocks, blocks);
  EXPECT_EQ(r.counters.threads, blocks * n);
}

// ---- shared memory and barriers ----------------------------------------------------------------

TEST(SimtEmulator, SharedMemoryIsPerBlockAndBarriersOrderIt) {
  auto m = build(R"(
extern "C" __global__ void reverse(const int *in, int *out) {
  __shared__ int tile[256];
  const int t = threadIdx.x, base = blockIdx.x * 256;
  tile[t] = in[base + t];
  __syncthreads();
  out[base + t] = tile[255 - t] + static_cast<int>(blockIdx.x) * 100000;
})");
  ASSERT_NE(m, nullptr);
  const int blocks = 16;
  std::vector<int> in(256 * blocks);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i);
  DeviceArray<int> din(in), dout(in.size());
  LaunchResult r = run(*m, "reverse", {blocks, 1, 1}, {256, 1, 1}, 0, din.get(), dout.get());
  ASSERT_TRUE(r.ok) << r.report();
  const std::vector<int> out = dout.read();
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < 256; ++t) EXPECT_EQ(out[b * 256 + t], b * 256 + 255 - t + b * 100000);
}

TEST(SimtEmulator, DynamicSharedMemoryFollowsTheLaunch) {
  auto m = build(R"(
extern "C" __global__ void fill(float *out, int n) {
  extern __shared__ float dyn[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) dyn[i] = i * 0.5f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += dyn[i];
    out[blockIdx.x] = s;
  }
})");
  ASSERT_NE(m, nullptr);
  const int n = 3000;  // 12000 bytes
  DeviceArray<float> out(2);
  LaunchResult r = run(*m, "fill", {2, 1, 1}, {64, 1, 1}, n * 4, out.get(), n);
  ASSERT_TRUE(r.ok) << r.report();
  EXPECT_EQ(out.read()[0], 0.5f * n * (n - 1) / 2);
  // One float more than the launch gave is out of bounds.
  r = run(*m, "fill", {1, 1, 1}, {64, 1, 1}, (n - 1) * 4, out.get(), n);
  EXPECT_TRUE(testing::reported(r, Diagnostic::Kind::kSharedOutOfBounds, {"fill", "dynamic shared"}))
      << r.report();
}

TEST(SimtEmulator, BarrierReductionsCountOrAndAnd) {
  auto m = build(R"(
extern "C" __global__ void votes(const int *pred, int *out) {
  const int p = pred[threadIdx.x];
  const int count = __syncthreads_count(p);
  const int any = __syncthreads_or(p);
  const int all = __syncthreads_and(p);
  if (threadIdx.x == 0) { out[0] = count; out[1] = any; out[2] = all; }
})");
  ASSERT_NE(m, nullptr);
  std::mt19937_64 rng(seed());
  for (int ones : {0, 1, 77, 160}) {
    std::vector<int> pred(160, 0);
    for (int i = 0; i < ones; ++i) pred[i] = 1 + static_cast<int>(rng() % 5);
    std::shuffle(pred.begin(), pred.end(), rng);
    DeviceArray<int> dp(pred), out(3);
    LaunchResult r = run(*m, "votes", {1, 1, 1}, {160, 1, 1}, 0, dp.get(), out.get());
    ASSERT_TRUE(r.ok) << r.report();
    EXPECT_EQ(out.read(), (std::vector<int>{ones, ones > 0, ones == 160}));
  }
}

// ---- warp collectives --------------------------------------------------------------------------

/// CUDA's shuffles on the host: the source lane of `lane` (CUDA C++ Programming Guide, Warp
/// Shuffle Functions), or `lane` itself where the value stays.
int shuffleSource(int op, int lane, int arg, int width) {
  const int segment = lane & ~(width - 1), inSegment = lane - segment;
  switch (op) {
    case 0: return segment + (arg % width);                                  // idx
    case 1: return inSegment >= arg ? lane - arg : lane;                     // up
    case 2: return inSegment + arg < width ? lane + arg : lane;              // down
    default: return (lane ^ arg) < segment + width ? (lane ^ arg) : lane;    // xor
  }
}

TEST(SimtEmulator, ShufflesFollowCudaForEveryWidth) {
  auto m = build(R"(
extern "C" __global__ void shuffles(const double *in, double *out, int op, int arg, int width) {
  const double v = in[threadIdx.x];
  double r = 0;
  if (op == 0) r = __shfl_sync(0xffffffffu, v, arg, width);
  if (op == 1) r = __shfl_up_sync(0xffffffffu, v, arg, width);
  if (op == 2) r = __shfl_down_sync(0xffffffffu, v, arg, width);
  if (op == 3) r = __shfl_xor_sync(0xffffffffu, v, arg, width);
  out[threadIdx.x] = r;
})");
  ASSERT_NE(m, nullptr);
  std::vector<double> in(64);
  for (int i = 0; i < 64; ++i) in[i] = 1.0 + i * 1.25;
  DeviceArray<double> din(in), dout(64);
  for (int op = 0; op < 4; ++op)
    for (int width : {1, 2, 4, 8, 16, 32})
      for (int arg : {0, 1, 3, 5, 16, 31}) {
        LaunchResult r = run(*m, "shuffles", {1, 1, 1}, {64, 1, 1}, 0, din.get(), dout.get(), op,
                             arg, width);
        ASSERT_TRUE(r.ok) << r.report();
        const std::vector<double> out = dout.read();
        for (int t = 0; t < 64; ++t) {
          const int lane = t % 32, warp = t / 32;
          EXPECT_EQ(out[t], in[warp * 32 + shuffleSource(op, lane, arg, width)])
              << "op " << op << " width " << width << " arg " << arg << " thread " << t;
        }
      }
}

TEST(SimtEmulator, VotesAndSubWarpMasksInDivergentCode) {
  auto m = build(R"(
extern "C" __global__ void votes(const int *pred, unsigned *out) {
  const unsigned lane = threadIdx.x & 31;
  const int p = pred[threadIdx.x];
  out[threadIdx.x * 4 + 0] = __ballot_sync(0xffffffffu, p);
  out[threadIdx.x * 4 + 1] = __any_sync(0xffffffffu, p);
  out[threadIdx.x * 4 + 2] = __all_sync(0xffffffffu, p);
  // The two halves of the warp take different branches, each with its own mask.
  if (lane < 16) out[threadIdx.x * 4 + 3] = __shfl_xor_sync(0x0000ffffu, lane, 1);
  else out[threadIdx.x * 4 + 3] = __shfl_down_sync(0xffff0000u, lane, 2, 16);
})");
  ASSERT_NE(m, nullptr);
  std::mt19937_64 rng(seed());
  std::vector<int> pred(32);
  for (int &p : pred) p = rng() % 3 == 0;
  unsigned ballot = 0;
  for (int i = 0; i < 32; ++i) ballot |= static_cast<unsigned>(pred[i] != 0) << i;
  DeviceArray<int> dp(pred);
  DeviceArray<unsigned> out(32 * 4);
  LaunchResult r = run(*m, "votes", {1, 1, 1}, {32, 1, 1}, 0, dp.get(), out.get());
  ASSERT_TRUE(r.ok) << r.report();
  const std::vector<unsigned> got = out.read();
  for (unsigned lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(got[lane * 4 + 0], ballot);
    EXPECT_EQ(got[lane * 4 + 1], ballot != 0u);
    EXPECT_EQ(got[lane * 4 + 2], ballot == 0xffffffffu);
    const unsigned want = lane < 16 ? lane ^ 1u : (lane % 16 + 2 < 16 ? lane + 2 : lane);
    EXPECT_EQ(got[lane * 4 + 3], want) << "lane " << lane;
  }
}

TEST(SimtEmulator, ActiveMaskLeavesOutExitedLanes) {
  auto m = build(R"(
extern "C" __global__ void active(unsigned *out) {
  if (threadIdx.x % 3 == 0) return;
  __syncwarp(__activemask());
  out[threadIdx.x] = __activemask();
})");
  ASSERT_NE(m, nullptr);
  DeviceArray<unsigned> out(std::vector<unsigned>(32, 7u));
  LaunchResult r = run(*m, "active", {1, 1, 1}, {32, 1, 1}, 0, out.get());
  ASSERT_TRUE(r.ok) << r.report();
  unsigned live = 0;
  for (int i = 0; i < 32; ++i) live |= static_cast<unsigned>(i % 3 != 0) << i;
  const std::vector<unsigned> got = out.read();
  for (int i = 0; i < 32; ++i)
    if (i % 3 != 0) EXPECT_EQ(got[i], live) << i;
}

// ---- atomics ------------------------------------------------------------------------------------

TEST(SimtEmulator, AtomicsAreAtomicAcrossBlocksAndThreads) {
  auto m = build(R"(
extern "C" __global__ void atomics(int *sum, float *fsum, unsigned *orbits, int *minimum,
                                   unsigned long long *least, unsigned *cas) {
  __shared__ int local;
  if (threadIdx.x == 0) local = 0;
  __syncthreads();
  atomicAdd(&local, 1);
  __syncthreads();
  const int id = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) atomicAdd(sum, local);
  atomicAdd(fsum, 0.5f);
  atomicOr(orbits, 1u << (id % 32));
  atomicMin(minimum, 1000 - id);
  atomicMin(least, 5000ull + static_cast<unsigned long long>((id * 7919) % 1000));
  atomicCAS(cas, 0u, static_cast<unsigned>(id) + 1u);
})");
  ASSERT_NE(m, nullptr);
  DeviceArray<int> sum(std::vector<int>{0}), minimum(std::vector<int>{1 << 30});
  DeviceArray<float> fsum(std::vector<float>{0.0f});
  DeviceArray<unsigned> orbits(std::vector<unsigned>{0u}), cas(std::vector<unsigned>{0u});
  DeviceArray<unsigned long long> least(std::vector<unsigned long long>{~0ull});
  LaunchResult r = run(*m, "atomics", {8, 1, 1}, {96, 1, 1}, 0, sum.get(), fsum.get(),
                       orbits.get(), minimum.get(), least.get(), cas.get());
  ASSERT_TRUE(r.ok) << r.report();
  EXPECT_EQ(sum.read()[0], 8 * 96);
  EXPECT_EQ(fsum.read()[0], 0.5f * 8 * 96);
  EXPECT_EQ(orbits.read()[0], 0xffffffffu);
  EXPECT_EQ(minimum.read()[0], 1000 - (8 * 96 - 1));
  EXPECT_EQ(least.read()[0], 5000ull);
  EXPECT_GE(cas.read()[0], 1u);  // exactly one thread's value
  EXPECT_LE(cas.read()[0], 8u * 96u);
}

// ---- conversions and math -----------------------------------------------------------------------

/// The nearest value to `x` among `grid` (ascending, finite), ties to the one whose code
/// (its index + `firstCode`) is even; what round-to-nearest-even means, searched.
double nearestEven(double x, const std::vector<double> &grid, size_t *index) {
  size_t best = 0;
  for (size_t i = 1; i < grid.size(); ++i) {
    const double d = std::fabs(grid[i] - x), b = std::fabs(grid[best] - x);
    if (d < b || (d == b && i % 2 == 0)) best = i;
  }
  *index = best;
  return grid[best];
}

TEST(SimtEmulator, Bf16AndF16ConversionsAreBitExact) {
  auto m = build(R"(
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" __global__ void convert(const float *in, unsigned short *bf, unsigned short *h,
                                   float *back, float *backHalf, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    bf[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
    h[i] = __half_as_ushort(__float2half_rn(in[i]));
    back[i] = __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(i)));
    backHalf[i] = __half2float(__ushort_as_half(static_cast<unsigned short>(i)));
  }
})");
  ASSERT_NE(m, nullptr);
  std::mt19937_64 rng(seed());
  const int n = 65536;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    if (i % 4 == 0) bits = (bits & 0x8000ffffu) | (static_cast<uint32_t>(100 + i % 60) << 23);
    std::memcpy(&in[i], &bits, 4);
  }
  DeviceArray<float> din(in), back(n), backHalf(n);
  DeviceArray<unsigned short> bf(n), h(n);
  LaunchResult r = run(*m, "convert", {1, 1, 1}, {256, 1, 1}, 0, din.get(), bf.get(), h.get(),
                       back.get(), backHalf.get(), n);
  ASSERT_TRUE(r.ok) << r.report();
  const std::vector<unsigned short> gotBf = bf.read(), gotH = h.read();
  for (int i = 0; i < n; ++i) {
    const float x = in[i];
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    // bf16: the nearest of the two neighbours (truncation and one ulp up), ties to even.
    uint16_t want;
    if (std::isnan(x)) {
      want = 0x7fff;
    } else {
      const uint16_t lo = static_cast<uint16_t>(bits >> 16);
      const uint32_t loBits = uint32_t{lo} << 16, hiBits = loBits + 0x10000u;
      float a, b;
      std::memcpy(&a, &loBits, 4);
      std::memcpy(&b, &hiBits, 4);
      // Past the largest bf16 the next step up is 2^128 (the exponent unbounded): a value
      // from half a step above the largest rounds to infinity.
      const double up = std::isinf(b) ? std::copysign(std::ldexp(1.0, 128), b) : double(b);
      const double da = std::fabs(double(x) - a), db = std::fabs(up - x);
      want = (db < da || (db == da && (lo & 1))) ? static_cast<uint16_t>(lo + 1) : lo;
    }
    ASSERT_EQ(gotBf[i], want) << "bf16 of " << x;
    // f16: the compiler's own _Float16 conversion rounds to nearest even.
    const _Float16 hf = static_cast<_Float16>(x);
    uint16_t hbits;
    std::memcpy(&hbits, &hf, 2);
    if (std::isnan(x)) hbits = 0x7fff;
    ASSERT_EQ(gotH[i], hbits) << "f16 of " << x;
  }
  // Widening is exact for every one of the 65536 codes of each type.
  const std::vector<float> widened = back.read(), widenedHalf = backHalf.read();
  for (int i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(i) << 16;
    float want;
    std::memcpy(&want, &bits, 4);
    uint32_t got;
    std::memcpy(&got, &widened[i], 4);
    EXPECT_EQ(got, bits) << "bf16 " << i;
    const uint16_t hbits = static_cast<uint16_t>(i);
    _Float16 hf;
    std::memcpy(&hf, &hbits, 2);
    const float wantHalf = static_cast<float>(hf);
    if (std::isnan(wantHalf)) EXPECT_TRUE(std::isnan(widenedHalf[i])) << "f16 " << i;
    else EXPECT_EQ(widenedHalf[i], wantHalf) << "f16 " << i;
  }
}

TEST(SimtEmulator, E4m3ConversionsRoundToTheNearestCode) {
  auto m = build(R"(
#include <cuda_fp8.h>
extern "C" __global__ void toFp8(const float *in, unsigned char *sat, unsigned char *nosat, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    sat[i] = __nv_cvt_float_to_fp8(in[i], __NV_SATFINITE, __NV_E4M3);
    nosat[i] = __nv_cvt_float_to_fp8(in[i], __NV_NOSAT, __NV_E4M3);
  }
})");
  ASSERT_NE(m, nullptr);
  // The E4M3FN grid from the format's definition (OCP FP8): 0..126 for the magnitudes.
  std::vector<double> grid;
  for (int c = 0; c <= 126; ++c) {
    const int e = c >> 3, mant = c & 7;
    grid.push_back(e == 0 ? std::ldexp(mant, -9) : std::ldexp(1.0 + mant / 8.0, e - 7));
  }
  std::mt19937_64 rng(seed());
  std::vector<float> in;
  for (int i = 0; i < 20000; ++i)
    in.push_back(static_cast<float>(std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                                               static_cast<int>(rng() % 24) - 12)));
  for (double g : grid) in.push_back(static_cast<float>(g)), in.push_back(static_cast<float>(-g));
  for (float x : {464.0f, 470.0f, 1e6f, INFINITY, -INFINITY, NAN, 0.0009765625f, 0.0f, -0.0f})
    in.push_back(x);
  const int n = static_cast<int>(in.size());
  DeviceArray<float> din(in);
  DeviceArray<unsigned char> sat(n), nosat(n);
  LaunchResult r = run(*m, "toFp8", {1, 1, 1}, {256, 1, 1}, 0, din.get(), sat.get(), nosat.get(), n);
  ASSERT_TRUE(r.ok) << r.report();
  const std::vector<unsigned char> s = sat.read(), ns = nosat.read();
  for (int i = 0; i < n; ++i) {
    const float x = in[i];
    const unsigned sign = std::signbit(x) ? 0x80u : 0u;
    unsigned want;
    // As cuda_fp8.hpp's __nv_cvt_double_to_fp8: the sign kept on every code, NaN too.
    if (std::isnan(x)) {
      want = sign | 0x7fu;
      ASSERT_EQ(ns[i], want) << "no-saturation E4M3 of " << x;
    } else {
      size_t code;
      nearestEven(std::fabs(double(x)), grid, &code);
      // Beyond 448 + half a step (464; 464 itself ties to even, 448) a value rounds past the
      // largest code: the largest, or without saturation NaN.
      const bool over = std::fabs(double(x)) > 464.0;
      want = sign | (over ? 0x7eu : static_cast<unsigned>(code));
      const unsigned wantNoSat = over ? sign | 0x7fu : want;
      ASSERT_EQ(ns[i], wantNoSat) << "no-saturation E4M3 of " << x;
    }
    ASSERT_EQ(s[i], want) << "E4M3 of " << x;
  }
}

TEST(SimtEmulator, FastMathIntrinsicsStayWithinTheirDocumentedError) {
  auto m = build(R"(
extern "C" __global__ void fast(const float *in, float *out, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = __expf(in[i]);
})");
  ASSERT_NE(m, nullptr);
  std::vector<float> in;
  for (float x = -80.0f; x <= 80.0f; x += 0.0137f) in.push_back(x);
  const int n = static_cast<int>(in.size());
  DeviceArray<float> din(in), dout(n);
  LaunchResult r = run(*m, "fast", {1, 1, 1}, {128, 1, 1}, 0, din.get(), dout.get(), n);
  ASSERT_TRUE(r.ok) << r.report();
  const std::vector<float> out = dout.read();
  for (int i = 0; i < n; ++i) {
    // CUDA Math API, __expf: maximum ulp error 2 + floor(abs(1.173 * x)).
    const double exact = std::exp(double(in[i]));
    const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
    EXPECT_LE(std::fabs(out[i] - exact) / ulp, 2.0 + std::floor(std::fabs(1.173 * in[i])))
        << "__expf(" << in[i] << ")";
  }
}

// ---- tensor cores -------------------------------------------------------------------------------

/// A kernel that places a 16x16 A, a 16x8 B and a 16x8 C into fragments by the PTX ISA's
/// formulas for mma.m16n8k16 (section 9.7.14.5.8, written out again here), runs the
/// emulator's mma.sync and writes D back by the same formulas.
const char *kMmaSource = R"(
extern "C" __global__ void mma(const unsigned short *A, const unsigned short *B, const float *C,
                               float *D) {
  const int lane = threadIdx.x, gid = lane >> 2, tig = lane % 4;
  unsigned a[4], b[2];
  float c[4];
  for (int i = 0; i < 8; ++i) {
    const int row = gid + ((i < 2 || (i >= 4 && i < 6)) ? 0 : 8);
    const int col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
    const unsigned v = A[row * 16 + col];
    if (i % 2 == 0) a[i / 2] = v; else a[i / 2] |= v << 16;
  }
  for (int i = 0; i < 4; ++i) {
    const int row = tig * 2 + (i & 1) + (i >= 2 ? 8 : 0), col = gid;
    const unsigned v = B[row * 8 + col];
    if (i % 2 == 0) b[i / 2] = v; else b[i / 2] |= v << 16;
  }
  for (int i = 0; i < 4; ++i) c[i] = C[(gid + (i >= 2 ? 8 : 0)) * 8 + tig * 2 + (i & 1)];
  ::ingot::simt::mmaM16N8K16Bf16(c, a, b[0], b[1]);
  for (int i = 0; i < 4; ++i) D[(gid + (i >= 2 ? 8 : 0)) * 8 + tig * 2 + (i & 1)] = c[i];
}
)";

uint16_t bf16Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>(b >> 16);  // inputs below are exact in bf16
}

/// Runs kMmaSource on random exact-bf16 operands; the largest error against a double matmul.
double mmaError(Module &m, std::mt19937_64 &rng, uint64_t *tensorFlops) {
  std::vector<uint16_t> A(256), B(128);
  std::vector<float> Af(256), Bf(128), C(128);
  std::uniform_int_distribution<int> small(-64, 64);
  for (int i = 0; i < 256; ++i) Af[i] = small(rng) / 16.0f, A[i] = bf16Bits(Af[i]);
  for (int i = 0; i < 128; ++i) Bf[i] = small(rng) / 16.0f, B[i] = bf16Bits(Bf[i]);
  for (float &c : C) c = small(rng) / 4.0f;
  DeviceArray<uint16_t> dA(A), dB(B);
  DeviceArray<float> dC(C), dD(128);
  LaunchResult r = run(m, "mma", {1, 1, 1}, {32, 1, 1}, 0, dA.get(), dB.get(), dC.get(), dD.get());
  EXPECT_TRUE(r.ok) << r.report();
  *tensorFlops = r.counters.tensor_flops;
  const std::vector<float> D = dD.read();
  double worst = 0;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double want = C[i * 8 + j];
      for (int k = 0; k < 16; ++k) want += double(Af[i * 16 + k]) * Bf[k * 8 + j];
      worst = std::max(worst, std::fabs(D[i * 8 + j] - want));
    }
  return worst;
}

TEST(SimtEmulator, MmaM16N8K16PlacesFragmentsAsThePtxIsa) {
  auto m = build(kMmaSource);
  ASSERT_NE(m, nullptr);
  std::mt19937_64 rng(seed());
  uint64_t flops = 0;
  for (int trial = 0; trial < 4; ++trial) EXPECT_EQ(mmaError(*m, rng, &flops), 0.0);
  EXPECT_EQ(flops, 2u * 16 * 8 * 16) << "one warp-level MMA";
}

TEST(SimtEmulator, AScrambledFragmentLayoutIsCaught) {
  // The mutation the kernel tests must catch: with the A rows' lane groups rotated the very
  // test above fails.
  auto m = build(kMmaSource);
  ASSERT_NE(m, nullptr);
  std::mt19937_64 rng(seed());
  uint64_t flops = 0;
  setScrambledFragmentLayout(true);
  const double error = mmaError(*m, rng, &flops);
  setScrambledFragmentLayout(false);
  EXPECT_GT(error, 0.1);
}

TEST(SimtEmulator, WmmaLoadMmaStoreComputeTheProduct) {
  auto m = build(R"(
#include <mma.h>
extern "C" __global__ void wmmaKernel(const __nv_bfloat16 *A, const __nv_bfloat16 *Bt,
                                      const float *C, float *D, int colMajorStore) {
  namespace wmma = nvcuda::wmma;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::load_matrix_sync(a, A, 24);   // row-major, padded rows
  wmma::load_matrix_sync(b, Bt, 16);  // B stored column-major: Bt[n][k]
  wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D, c, 20, colMajorStore ? wmma::mem_col_major : wmma::mem_row_major);
})");
  ASSERT_NE(m, nullptr);
  std::mt19937_64 rng(seed());
  std::uniform_int_distribution<int> small(-32, 32);
  std::vector<float> Af(16 * 24), Btf(256), C(256);
  std::vector<uint16_t> A(16 * 24), Bt(256);
  for (size_t i = 0; i < Af.size(); ++i) Af[i] = small(rng) / 8.0f, A[i] = bf16Bits(Af[i]);
  for (size_t i = 0; i < Btf.size(); ++i) Btf[i] = small(rng) / 8.0f, Bt[i] = bf16Bits(Btf[i]);
  for (float &c : C) c = small(rng) / 2.0f;
  for (int colMajor : {0, 1}) {
    DeviceArray<uint16_t> dA(A), dB(Bt);
    DeviceArray<float> dC(C), dD(20 * 16);
    LaunchResult r = run(*m, "wmmaKernel", {1, 1, 1}, {32, 1, 1}, 0, dA.get(), dB.get(), dC.get(),
                         dD.get(), colMajor);
    ASSERT_TRUE(r.ok) << r.report();
    EXPECT_EQ(r.counters.tensor_flops, 2u * 16 * 16 * 16);
    const std::vector<float> D = dD.read();
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) {
        double want = C[i * 16 + j];
        for (int k = 0; k < 16; ++k) want += double(Af[i * 24 + k]) * Btf[j * 16 + k];
        EXPECT_EQ(D[colMajor ? j * 20 + i : i * 20 + j], want) << i << "," << j;
      }
  }
}

// ---- counters -----------------------------------------------------------------------------------

TEST(SimtEmulator, CountersCountBytesFlopsAndBarriers) {
  auto m = build(R"(
extern "C" __global__ void saxpy(const float *x, float *y, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
  __syncthreads();
})");
  ASSERT_NE(m, nullptr);
  const int n = 1000;
  DeviceArray<float> x(std::vector<float>(n, 1.0f)), y(std::vector<float>(n, 2.0f));
  LaunchResult r = run(*m, "saxpy", {8, 1, 1}, {128, 1, 1}, 0, x.get(), y.get(), 3.0f, n);
  ASSERT_TRUE(r.ok) << r.report();
  EXPECT_EQ(r.counters.launches, 1u);
  EXPECT_EQ(r.counters.global_bytes_read, 2u * 4 * n);
  EXPECT_EQ(r.counters.global_bytes_written, 4u * n);
  EXPECT_EQ(r.counters.scalar_flops, 2u * n);  // a mul and an add (not contracted)
  EXPECT_EQ(r.counters.barriers, 8u);
  EXPECT_EQ(y.read()[n - 1], 5.0f);
}

TEST(SimtEmulator, FreshDeviceMemoryReadsAsNaN) {
  DeviceArray<float> a(100);
  for (float v : a.read()) EXPECT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace simt
}  // namespace ingot
