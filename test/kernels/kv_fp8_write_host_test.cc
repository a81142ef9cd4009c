// The CUDA fp8 KV write (codegen/cuda/kernels/kv_fp8.cuh) run on the host against the CPU
// pool's bytes: the kernel's own code (appendKvRunFp8) over the runs packKvRuns plans, on
// random steps of chunked prefill, decode, block reuse and scale growth; with one host lane
// holding every column, and on a warp of 32 host threads splitting the columns as the
// device's lanes do.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/kernels/kv_fp8.cuh"
#include "runtime/backend/cpu/kv_fp8.h"
#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cuda/step_pack.h"
#include "testing/test_seed.h"

namespace ingot {
namespace {

using kvfp8::KvFp8LanesHost;
using kvfp8::KvFp8WriteParams;

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(KvFp8WriteHost, CodesValuesAndScalesMatchTheCpuBitForBit) {
  for (unsigned c = 0; c < 256; ++c)
    if ((c & 0x7f) != 0x7f)
      EXPECT_EQ(bitsOf(kvfp8::kvFp8Value(c)), bitsOf(e4m3fnToF32(static_cast<uint8_t>(c)))) << c;
  std::mt19937 rng(ingot::testing::testSeed());
  // Every f32 class: random bit patterns (NaN, infinities, subnormals), the E4M3 range
  // densely, and the rounding boundaries (halfway points between codes).
  std::vector<float> xs = {0.0f, -0.0f, 448.0f, 464.0f, 463.99f, 480.0f, 0.015625f, 0.0156249f,
                           std::numeric_limits<float>::infinity(), std::nanf("")};
  for (unsigned c = 0; c < 126; ++c) {
    const float a = e4m3fnToF32(static_cast<uint8_t>(c)), b = e4m3fnToF32(static_cast<uint8_t>(c + 1));
    xs.push_back((a + b) / 2);
    xs.push_back(-(a + b) / 2);
  }
  std::uniform_real_distribution<float> e4m3Range(-500.0f, 500.0f);
  for (int i = 0; i < 200000; ++i) {
    xs.push_back(fromBits(static_cast<uint32_t>(rng())));
    xs.push_back(e4m3Range(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 24) - 20));
  }
  for (float x : xs)
    ASSERT_EQ(kvfp8::kvFp8Code(x), f32ToE4m3fn(x)) << x << " bits " << std::hex << bitsOf(x);
  // Scales: any finite absmax, the powers of two and their neighbours, the clamps.
  std::vector<float> absmaxes = {0.0f, std::numeric_limits<float>::max(),
                                 std::numeric_limits<float>::denorm_min(), 448.0f, 224.0f};
  for (int e = -149; e < 128; ++e) {
    const float p = std::ldexp(1.0f, e) * 448.0f;
    absmaxes.push_back(p);
    absmaxes.push_back(std::nextafter(p, 0.0f));
    absmaxes.push_back(std::nextafter(p, std::numeric_limits<float>::infinity()));
  }
  for (int i = 0; i < 100000; ++i) {
    const float a = std::fabs(fromBits(static_cast<uint32_t>(rng())));
    if (std::isfinite(a)) absmaxes.push_back(a);
  }
  for (float a : absmaxes)
    if (std::isfinite(a)) ASSERT_EQ(bitsOf(kvfp8::kvFp8ScaleFor(a)), bitsOf(fp8KvScaleFor(a))) << a;
  EXPECT_EQ(bitsOf(kvfp8::kvFp8MinScale()), bitsOf(fp8KvMinScale()));
}

/// A pool twice over: the CPU's and the emulated kernel's, starting from the same bytes.
struct TwoPools {
  KvCacheLayout layout;
  int64_t blocks = 0;
  std::vector<uint8_t> cpu_codes, gpu_codes;
  std::vector<float> cpu_scales, gpu_scales;

  TwoPools(KvCacheLayout l, int64_t n, std::mt19937& rng) : layout(l), blocks(n) {
    // A former owner's rows: any code a write can produce (never 0x7F / 0xFF), and scales
    // it may have left; a block's first row must start afresh over them.
    cpu_codes.resize(static_cast<size_t>(n * l.blockFloats()));
    for (uint8_t& c : cpu_codes) {
      c = static_cast<uint8_t>(rng());
      if ((c & 0x7f) == 0x7f) c ^= 1;
    }
    cpu_scales.resize(static_cast<size_t>(n * l.blockScales()));
    for (float& s : cpu_scales) s = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 30);
    gpu_codes = cpu_codes;
    gpu_scales = cpu_scales;
  }
};

/// One step's K/V rows: mostly unit-scale noise, some rows much larger (a block's scale
/// grows, its earlier rows are re-encoded) and some tiny ones (E4M3's subnormal range).
std::vector<float> randomRows(std::mt19937& rng, int64_t T, int64_t width) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(T * width));
  for (int64_t t = 0; t < T; ++t) {
    const int kind = static_cast<int>(rng() % 8);
    const float mag = kind == 0 ? std::ldexp(1.0f, static_cast<int>(rng() % 16))
                      : kind == 1 ? std::ldexp(1.0f, -static_cast<int>(rng() % 24)) : 1.0f;
    for (int64_t i = 0; i < width; ++i) x[static_cast<size_t>(t * width + i)] = normal(rng) * mag;
  }
  return x;
}

/// The write's parameters for `layer` of the GPU-side pool: K and V rows of `rowFloats()`
/// floats, the step's packed inputs `packed` (laid out by `sl` for `dims`), errors to `error`.
KvFp8WriteParams writeParams(TwoPools& pools, int64_t layer, const std::vector<float>& k,
                             const std::vector<float>& v, const std::vector<int32_t>& packed,
                             const StepLayout& sl, const StepDims& dims,
                             unsigned long long* error) {
  const KvCacheLayout& l = pools.layout;
  KvFp8WriteParams p{};
  p.k = k.data();
  p.v = v.data();
  p.codes = pools.gpu_codes.data();
  p.scales = pools.gpu_scales.data();
  p.slot_mapping = packed.data() + sl.slot_mapping;
  p.run_tokens = packed.data() + sl.run_tokens;
  p.run_starts = packed.data() + sl.run_starts;
  p.error = error;
  p.num_kv_heads = static_cast<int>(l.num_kv_heads);
  p.head_dim = static_cast<int>(l.head_dim);
  p.k_stride = p.v_stride = static_cast<int>(l.rowFloats());
  p.num_layers = static_cast<int>(l.num_layers);
  p.layer = static_cast<int>(layer);
  p.block_size = static_cast<int>(l.block_size);
  p.max_runs = dims.tokens;
  return p;
}

/// Runs the write of one layer through the kernel's code: every (item, run) CTA of the
/// launch grid, in a random order (they touch different block-heads).
unsigned long long emulateKernel(TwoPools& pools, int64_t layer, const std::vector<float>& k,
                                 const std::vector<float>& v, const StepInputs& in,
                                 const StepDims& dims, std::mt19937& rng) {
  const KvCacheLayout& l = pools.layout;
  // The packed inputs as the backend uploads them: slots (padding -1) and the runs.
  const StepLayout sl = stepLayout(dims);
  std::vector<int32_t> packed(static_cast<size_t>(sl.words), -777);
  for (int32_t t = 0; t < dims.tokens; ++t)
    packed[static_cast<size_t>(sl.slot_mapping + t)] =
        t < static_cast<int32_t>(in.slot_mapping.size()) ? in.slot_mapping[static_cast<size_t>(t)] : -1;
  packKvRuns(in, dims, static_cast<int32_t>(l.block_size), packed.data());
  unsigned long long error = kvfp8::kKvFp8NoError;
  const KvFp8WriteParams p = writeParams(pools, layer, k, v, packed, sl, dims, &error);
  std::vector<std::pair<int, int>> ctas;
  for (int item = 0; item < 2 * p.num_kv_heads; ++item)
    for (int run = 0; run < dims.tokens; ++run) ctas.push_back({item, run});
  std::shuffle(ctas.begin(), ctas.end(), rng);
  for (auto [item, run] : ctas) kvfp8::appendKvRunFp8(p, item, run, KvFp8LanesHost{});
  return error;
}

/// Requests filling blocks from a shared free list (freed blocks are reused by others), in
/// prefill chunks and decode steps, several per step.
struct Workload {
  int64_t block_size;
  std::vector<int32_t> free_blocks;
  struct Request {
    std::vector<int32_t> blocks;
    int32_t len = 0;
    int32_t target = 0;
  };
  std::vector<Request> live;

  /// The next step's slot_mapping (all the write reads of a step's inputs).
  StepInputs next(std::mt19937& rng) {
    while (live.size() < 3) {
      Request r;
      r.target = 1 + static_cast<int32_t>(rng() % 70);
      live.push_back(r);
    }
    StepInputs in;
    for (Request& r : live) {
      // A chunk of prefill (1..24 tokens) or a single decode token.
      const int32_t n = std::min<int32_t>(r.target - r.len, rng() % 2 ? 1 : 1 + rng() % 24);
      for (int32_t i = 0; i < n; ++i, ++r.len) {
        if (r.len % block_size == 0) {
          r.blocks.push_back(free_blocks.back());
          free_blocks.pop_back();
        }
        in.slot_mapping.push_back(static_cast<int32_t>(r.blocks.back() * block_size + r.len % block_size));
      }
    }
    for (size_t i = 0; i < live.size();)
      if (live[i].len == live[i].target) {
        free_blocks.insert(free_blocks.begin(), live[i].blocks.begin(), live[i].blocks.end());
        live.erase(live.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    return in;
  }
};

class KvFp8WriteHostSteps : public ::testing::TestWithParam<int> {};

TEST_P(KvFp8WriteHostSteps, RandomStepsLeaveTheCpuPoolsBytes) {
  std::mt19937 rng(ingot::testing::testSeed());
  KvCacheLayout l;
  l.num_layers = 2;
  l.block_size = 8;  // small blocks: many fresh starts, reuse and cross-block chunks
  l.num_kv_heads = 3;
  l.head_dim = GetParam();
  const int64_t numBlocks = 48;
  TwoPools pools(l, numBlocks, rng);
  Workload w{l.block_size, {}, {}};
  for (int32_t b = 0; b < numBlocks; ++b) w.free_blocks.push_back(b);
  std::shuffle(w.free_blocks.begin(), w.free_blocks.end(), rng);
  int growths = 0;
  for (int step = 0; step < 60; ++step) {
    StepInputs in = w.next(rng);
    const int64_t T = static_cast<int64_t>(in.slot_mapping.size());
    if (T == 0) continue;
    // Graph buckets pad a step: its slots past T are -1 and its runs past the real ones empty.
    StepDims dims{static_cast<int32_t>(T + rng() % 5), 1, 1, 1};
    const std::vector<float> before = pools.cpu_scales;
    for (int64_t layer = 0; layer < l.num_layers; ++layer) {
      const std::vector<float> k = randomRows(rng, T, l.rowFloats());
      const std::vector<float> v = randomRows(rng, T, l.rowFloats());
      ASSERT_TRUE(checkKvRowsFinite(k.data(), v.data(), T, l.rowFloats(), layer).ok());
      kvWriteRowsFp8({pools.cpu_codes.data(), pools.cpu_scales.data()}, l, layer, k.data(), v.data(),
                     in.slot_mapping.data(), T, 0, 2 * l.num_kv_heads);
      ASSERT_EQ(emulateKernel(pools, layer, k, v, in, dims, rng), kvfp8::kKvFp8NoError);
      ASSERT_EQ(pools.gpu_codes, pools.cpu_codes) << "step " << step << " layer " << layer;
      for (size_t i = 0; i < pools.cpu_scales.size(); ++i)
        ASSERT_EQ(bitsOf(pools.gpu_scales[i]), bitsOf(pools.cpu_scales[i])) << "scale " << i;
    }
    for (size_t i = 0; i < before.size(); ++i) growths += pools.cpu_scales[i] > before[i];
  }
  EXPECT_GT(growths, 0) << "no block-head's scale grew: the re-encoding went untested";
}

INSTANTIATE_TEST_SUITE_P(HeadDims, KvFp8WriteHostSteps, ::testing::Values(32, 64, 128));

TEST(KvFp8WriteHost, NonFiniteRowsReportTheCpusLayerKvAndTokenAndStopTheirRun) {
  std::mt19937 rng(ingot::testing::testSeed());
  KvCacheLayout l;
  l.num_layers = 3;
  l.block_size = 16;
  l.num_kv_heads = 2;
  l.head_dim = 64;
  TwoPools pools(l, 8, rng);
  StepInputs in;
  for (int32_t s = 0; s < 10; ++s) in.slot_mapping.push_back(3 * 16 + s);  // block 3
  const int64_t T = 10, W = l.rowFloats();
  std::vector<float> k = randomRows(rng, T, W), v = randomRows(rng, T, W);
  // V of token 4 holds an infinity, K of token 7 a NaN: the CPU names the key first.
  v[static_cast<size_t>(4 * W + 70)] = -std::numeric_limits<float>::infinity();
  k[static_cast<size_t>(7 * W + 3)] = std::nanf("");
  const Status cpu = checkKvRowsFinite(k.data(), v.data(), T, W, 2);
  ASSERT_FALSE(cpu.ok());
  const unsigned long long key = emulateKernel(pools, 2, k, v, in, StepDims{16, 1, 1, 1}, rng);
  ASSERT_NE(key, kvfp8::kKvFp8NoError);
  EXPECT_EQ(kvfp8::kvFp8ErrorLayer(key), 2);
  EXPECT_EQ(kvfp8::kvFp8ErrorKv(key), 0);
  EXPECT_EQ(kvfp8::kvFp8ErrorToken(key), 7);
  EXPECT_TRUE(kvfp8::kvFp8ErrorIsNaN(key));
  EXPECT_NE(cpu.message().find("key of token 7 holds NaN"), std::string::npos) << cpu.message();
  // The run of K head 0 stopped at token 7: the block-head is what the CPU's appends of
  // tokens 0..6 alone make of it (rows 7.. keep the former owner's values, re-encoded to
  // the grown scale); V head 1 stopped at token 4 the same way.
  TwoPools fresh = pools;
  kvWriteRowsFp8({fresh.cpu_codes.data(), fresh.cpu_scales.data()}, l, 2, k.data(), v.data(),
                 in.slot_mapping.data(), 7, 0, 1);  // K head 0, tokens 0..6
  const int64_t row0 = l.rowOffset(3, 2, 0, 0);
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t d = 0; d < l.head_dim; ++d) {
      const size_t i = static_cast<size_t>(row0 + r * W + d);
      EXPECT_EQ(pools.gpu_codes[i], fresh.cpu_codes[i]) << r << " " << d;
    }
  EXPECT_EQ(pools.gpu_scales[static_cast<size_t>(l.scaleIndex(3, 2, 0, 0))],
            fresh.cpu_scales[static_cast<size_t>(l.scaleIndex(3, 2, 0, 0))]);
  // K head 1 (finite throughout) holds all ten rows.
  kvWriteRowsFp8({fresh.cpu_codes.data(), fresh.cpu_scales.data()}, l, 2, k.data(), v.data(),
                 in.slot_mapping.data(), T, 1, 2);
  const int64_t head1 = l.rowOffset(3, 2, 0, 0) + l.head_dim;
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t d = 0; d < l.head_dim; ++d) {
      const size_t i = static_cast<size_t>(head1 + r * W + d);
      EXPECT_EQ(pools.gpu_codes[i], fresh.cpu_codes[i]) << r << " " << d;
    }
}

/// 32 host threads as one warp's lanes: lane L owns columns L, L + 32, ... as on the device,
/// and max / min go through a board and a barrier (the warp butterfly's value: max and min
/// do not depend on the order).
class EmulatedWarp {
 public:
  struct Lanes {
    EmulatedWarp* warp;
    int lane;
    int first() const { return lane; }
    int stride() const { return 32; }
    float max(float v) const {
      return warp->reduce(lane, v, [](float a, float b) { return std::fmax(a, b); });
    }
    int min(int v) const { return warp->reduce(lane, v, [](int a, int b) { return std::min(a, b); }); }
    bool leader() const { return lane == 0; }
    void report(unsigned long long* error, unsigned long long key) const {
      std::lock_guard<std::mutex> lock(warp->mu_);
      if (key < *error) *error = key;
    }
  };

  /// Every lane runs appendKvRunFp8 over `ctas` in order, as a warp striding over its runs.
  void run(const KvFp8WriteParams& p, const std::vector<std::pair<int, int>>& ctas) {
    std::vector<std::thread> lanes;
    for (int lane = 0; lane < 32; ++lane)
      lanes.emplace_back([&, lane] {
        for (auto [item, run] : ctas) kvfp8::appendKvRunFp8(p, item, run, Lanes{this, lane});
      });
    for (std::thread& t : lanes) t.join();
  }

 private:
  template <class T, class Op> T reduce(int lane, T v, Op op) {
    std::memcpy(&board_[lane], &v, sizeof(T));
    arriveAndWait();
    T r;
    std::memcpy(&r, &board_[0], sizeof(T));
    for (int i = 1; i < 32; ++i) {
      T x;
      std::memcpy(&x, &board_[i], sizeof(T));
      r = op(r, x);
    }
    arriveAndWait();  // every lane has read the board before it is written again
    return r;
  }
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ == 32) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

  uint64_t board_[32] = {};
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

TEST(KvFp8WriteHost, AWarpOfHostThreadsWritesTheCpusBytesAndFindsTheFirstBadColumn) {
  std::mt19937 rng(ingot::testing::testSeed());
  KvCacheLayout l;
  l.num_layers = 1;
  l.block_size = 8;
  l.num_kv_heads = 2;
  l.head_dim = 64;  // two columns per lane
  TwoPools pools(l, 24, rng);
  Workload w{l.block_size, {}, {}};
  for (int32_t b = 0; b < 24; ++b) w.free_blocks.push_back(b);
  std::shuffle(w.free_blocks.begin(), w.free_blocks.end(), rng);
  EmulatedWarp warp;
  for (int step = 0; step < 5; ++step) {
    const StepInputs in = w.next(rng);
    const int64_t T = static_cast<int64_t>(in.slot_mapping.size());
    if (T == 0) continue;
    std::vector<float> k = randomRows(rng, T, l.rowFloats()), v = randomRows(rng, T, l.rowFloats());
    const bool poison = step == 4;  // the last step: a NaN in lane 8's second column
    if (poison) v[static_cast<size_t>((T - 1) * l.rowFloats() + l.head_dim + 40)] = std::nanf("");
    if (!poison)
      kvWriteRowsFp8({pools.cpu_codes.data(), pools.cpu_scales.data()}, l, 0, k.data(), v.data(),
                     in.slot_mapping.data(), T, 0, 2 * l.num_kv_heads);
    const StepDims dims{static_cast<int32_t>(T), 1, 1, 1};
    const StepLayout sl = stepLayout(dims);
    std::vector<int32_t> packed(static_cast<size_t>(sl.words), -777);
    std::copy(in.slot_mapping.begin(), in.slot_mapping.end(), packed.begin() + sl.slot_mapping);
    const int32_t runs = packKvRuns(in, dims, static_cast<int32_t>(l.block_size), packed.data());
    unsigned long long error = kvfp8::kKvFp8NoError;
    const KvFp8WriteParams p = writeParams(pools, 0, k, v, packed, sl, dims, &error);
    std::vector<std::pair<int, int>> ctas;
    for (int item = 0; item < 2 * p.num_kv_heads; ++item)
      for (int run = 0; run < runs; ++run) ctas.push_back({item, run});
    warp.run(p, ctas);
    if (poison) {
      ASSERT_NE(error, kvfp8::kKvFp8NoError);
      EXPECT_EQ(kvfp8::kvFp8ErrorKv(error), 1);
      EXPECT_EQ(kvfp8::kvFp8ErrorToken(error), static_cast<int>(T - 1));
      EXPECT_TRUE(kvfp8::kvFp8ErrorIsNaN(error));
      break;
    }
    ASSERT_EQ(error, kvfp8::kKvFp8NoError);
    ASSERT_EQ(pools.gpu_codes, pools.cpu_codes) << "step " << step;
    for (size_t i = 0; i < pools.cpu_scales.size(); ++i)
      ASSERT_EQ(bitsOf(pools.gpu_scales[i]), bitsOf(pools.cpu_scales[i])) << "scale " << i;
  }
}

}  // namespace
}  // namespace ingot
