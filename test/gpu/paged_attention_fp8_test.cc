// The paged attention kernels reading an fp8 KV pool (codegen `_kvfp8_` instances) on a GPU
// against the CPU backend's pagedAttention over the same codes and scales (label gpu): the
// f32 decode kernel (one split and many) and the bf16 prefill kernel (with the block mask),
// causal and sliding-window masks, GQA 1/3/4/8, head dims 64 and 128. Every code a write can
// produce appears, with block-head scales across their range. Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "codegen/cuda/AttentionKernelSource.h"
#include "codegen/cuda/AttentionRegionEmitter.h"
#include "core/kernels/attention_params.h"
#include "core/kernels/region_operands.h"
#include "core/region/region_examples.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/kv_fp8.h"
#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/cpu/simd_level.h"
#include "runtime/backend/cpu/thread_pool.h"
#include "runtime/backend/cuda/cuda_driver.h"
#include "testing/test_seed.h"
#include "test/gpu/attention_launch.h"
#include "test/gpu/attention_test_util.h"

namespace ingot {
namespace {

using codegen::AttentionDtype;
using codegen::DecodeInstance;
using codegen::PrefillInstance;

constexpr int kLayers = 2, kLayer = 1, kBlockSize = 16;

/// A step over an fp8 pool: random codes (never the NaN ones) and power-of-two scales.
struct Fp8Batch {
  int R = 0, T = 0, H = 0, Hkv = 0, D = 0, maxBlocks = 0, numBlocks = 0, maxLen = 0;
  std::vector<int32_t> blockTables, seqLens, queryStart;
  std::vector<float> q, scales;
  std::vector<uint8_t> codes;
};

Fp8Batch makeBatch(std::mt19937& rng, int Hkv, int G, int D, const std::vector<int>& newTokens) {
  Fp8Batch bt;
  bt.R = static_cast<int>(newTokens.size());
  bt.Hkv = Hkv;
  bt.H = Hkv * G;
  bt.D = D;
  std::uniform_int_distribution<int> lenDist(1, 300);
  bt.queryStart.push_back(0);
  for (int n : newTokens) {
    const int len = std::max(n, lenDist(rng));
    bt.seqLens.push_back(len);
    bt.queryStart.push_back(bt.queryStart.back() + n);
    bt.maxLen = std::max(bt.maxLen, len);
  }
  bt.T = bt.queryStart.back();
  bt.maxBlocks = (bt.maxLen + kBlockSize - 1) / kBlockSize;
  bt.numBlocks = bt.R * bt.maxBlocks + 3;
  std::vector<int32_t> perm(bt.numBlocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  bt.blockTables.assign(static_cast<size_t>(bt.R) * bt.maxBlocks, -1);
  for (int b = 0, next = 0; b < bt.R; ++b)
    for (int k = 0; k < (bt.seqLens[b] + kBlockSize - 1) / kBlockSize; ++k)
      bt.blockTables[static_cast<size_t>(b) * bt.maxBlocks + k] = perm[next++];
  std::normal_distribution<float> normal(0.0f, 1.0f);
  bt.q.resize(static_cast<size_t>(bt.T) * bt.H * D);
  for (float& x : bt.q) x = bf16ToFloat(bf16Bits(normal(rng)));  // exact in bf16 for prefill
  const KvCacheLayout layout{kLayers, kBlockSize, Hkv, D};
  bt.codes.resize(static_cast<size_t>(bt.numBlocks * layout.blockFloats()));
  for (uint8_t& c : bt.codes) {
    c = static_cast<uint8_t>(rng());
    if ((c & 0x7f) == 0x7f) c ^= 1;
  }
  bt.scales.resize(static_cast<size_t>(bt.numBlocks * layout.blockScales()));
  for (float& s : bt.scales) s = std::ldexp(1.0f, static_cast<int>(rng() % 12) - 14);
  return bt;
}

std::vector<float> cpuAttention(const std::vector<uint8_t>& mask, const Fp8Batch& bt) {
  std::vector<float> expected(bt.q.size(), NAN);
  StatusOr<RegionProgram> program = decodeRegionBytecode(mask);
  EXPECT_TRUE(program.ok());
  AttentionParams p;
  p.layer = kLayer;
  p.num_heads = bt.H;
  p.num_kv_heads = bt.Hkv;
  p.head_dim = bt.D;
  p.scale = 1.0f / std::sqrt(static_cast<float>(bt.D));
  p.variant.mask = &*program;
  p.variant.analyze();
  KvCacheLayout layout{kLayers, kBlockSize, bt.Hkv, bt.D};
  AttentionBatch batch{bt.blockTables.data(), bt.maxBlocks, bt.seqLens.data(),
                       bt.queryStart.data(), bt.R, bt.T};
  ThreadPool pool(2);
  AttentionScratch scratch;
  KvCacheView view;
  view.codes = bt.codes.data();
  view.scales = bt.scales.data();
  view.decode = fp8RowsDecoder(detectSimdLevel());
  Status st = pagedAttention(bt.q.data(), view, layout, batch, p, expected.data(), pool,
                             cpuKernels(detectSimdLevel()), scratch);
  EXPECT_TRUE(st.ok()) << st.message();
  return expected;
}

class PagedAttentionFp8GpuTest : public AttentionGpuTest {
 protected:
  /// The launch parameters of `bt` with its buffers (kept alive in `keep`).
  attn::PagedAttentionParams params(const Fp8Batch& bt, bool bf16Q,
                                    std::vector<std::unique_ptr<DeviceBuffer>>& keep) {
    auto up = [&](const void* data, size_t bytes) {
      keep.push_back(std::make_unique<DeviceBuffer>(*driver, data, bytes));
      return keep.back()->ptr;
    };
    std::vector<uint16_t> qb(bt.q.size());
    for (size_t i = 0; i < qb.size(); ++i) qb[i] = bf16Bits(bt.q[i]);
    attn::PagedAttentionParams p{};
    p.q = reinterpret_cast<const void*>(bf16Q ? up(qb.data(), qb.size() * 2) : up(bt.q.data(), bt.q.size() * 4));
    p.kv_cache = reinterpret_cast<const void*>(up(bt.codes.data(), bt.codes.size()));
    p.kv_scales = reinterpret_cast<const float*>(up(bt.scales.data(), bt.scales.size() * 4));
    p.block_tables = reinterpret_cast<const int*>(up(bt.blockTables.data(), bt.blockTables.size() * 4));
    p.seq_lens = reinterpret_cast<const int*>(up(bt.seqLens.data(), bt.seqLens.size() * 4));
    p.query_start = reinterpret_cast<const int*>(up(bt.queryStart.data(), bt.queryStart.size() * 4));
    p.num_requests = bt.R;
    p.num_tokens = bt.T;
    p.num_heads = bt.H;
    p.num_kv_heads = bt.Hkv;
    p.num_layers = kLayers;
    p.layer = kLayer;
    p.block_size = kBlockSize;
    p.max_blocks = bt.maxBlocks;
    p.scale = 1.0f / std::sqrt(static_cast<float>(bt.D));
    p.num_splits = 1;
    return p;
  }

  /// `out` (bf16 or f32) against `expected`, within `tol` relative to 1 + |expected|, or with
  /// `magnitude` relative to 1e-2 + magnitude[i] (the same attention over |V|: the size of
  /// the terms an output sums, which bounds the error rounding P to bf16 makes in it).
  void compare(const DeviceBuffer& out, const std::vector<float>& expected, bool bf16, double tol,
               const std::vector<float>* magnitude = nullptr) {
    ASSERT_TRUE(driver->check("cuCtxSynchronize", driver->ctxSynchronize()).ok());
    std::vector<uint8_t> raw(expected.size() * (bf16 ? 2 : 4));
    ASSERT_TRUE(driver->check("cuMemcpyDtoH", driver->memcpyDtoH(raw.data(), out.ptr, raw.size())).ok());
    int bad = 0;
    for (size_t i = 0; i < expected.size() && bad < 5; ++i) {
      float got;
      if (bf16) got = bf16ToFloat(reinterpret_cast<const uint16_t*>(raw.data())[i]);
      else std::memcpy(&got, raw.data() + i * 4, 4);
      const double scale = magnitude ? 1e-2 + (*magnitude)[i] : 1.0 + std::fabs(expected[i]);
      if (!(std::fabs(got - expected[i]) <= tol * scale)) {
        ++bad;
        ADD_FAILURE() << "out[" << i << "] = " << got << ", CPU " << expected[i];
      }
    }
  }

  std::mt19937 rng{ingot::testing::testSeed()};
};

TEST_F(PagedAttentionFp8GpuTest, DecodeAndPrefillReadTheCpusFp8Values) {
  const std::pair<const char*, std::vector<uint8_t>> variants[] = {
      {"Causal", causalMaskBytecode()}, {"SlidingWindow", slidingWindowMaskBytecode(37)}};
  for (const auto& [name, mask] : variants) {
    SCOPED_TRACE(name);
    StatusOr<std::string> text = codegen::emitAttentionVariantHeader(name, mask, {}, "region_examples.cc");
    ASSERT_TRUE(text.ok()) << text.status().message();
    std::vector<DecodeInstance> decode;
    std::vector<PrefillInstance> prefill;
    for (int d : {64, 128})
      for (int g : {1, 3, 4, 8}) {
        decode.push_back({AttentionDtype::kF32, d, g, true});
        prefill.push_back({d, g, true});
      }
    StatusOr<std::string> source = codegen::attentionKernelSource(*text, name, decode, prefill);
    ASSERT_TRUE(source.ok()) << source.status().message();
    CUmodule module = load(*source, name, false);
    ASSERT_NE(module, nullptr);
    const uint32_t zero = 0;
    DeviceBuffer trap(*driver, &zero, 4);  // region traps (these masks have none)
    rgn::RegionOperands none{};
    none.error = trap.as<uint32_t>();
    for (const DecodeInstance& in : decode) {
      SCOPED_TRACE(codegen::decodeKernelName(name, in));
      const Fp8Batch bt = makeBatch(rng, 2, in.group, in.headDim, {1, 1, 3, 8});
      const std::vector<float> expected = cpuAttention(mask, bt);
      for (int keysPerSplit : {1 << 20, 64}) {
        std::vector<std::unique_ptr<DeviceBuffer>> keep;
        attn::PagedAttentionParams p = params(bt, false, keep);
        const std::vector<uint8_t> poison(bt.q.size() * 4, 0xFF);
        DeviceBuffer out(*driver, poison.data(), poison.size());
        const int splits = (bt.maxLen + keysPerSplit - 1) / keysPerSplit;
        const size_t partials = static_cast<size_t>(bt.T) * bt.H * splits;
        DeviceBuffer po(*driver, nullptr, partials * bt.D * 4), pm(*driver, nullptr, partials * 4),
            ps(*driver, nullptr, partials * 4);
        p.out = out.as<void>();
        p.partial_out = po.as<float>();
        p.partial_max = pm.as<float>();
        p.partial_sum = ps.as<float>();
        p.num_splits = splits;
        p.keys_per_split = splits == 1 ? bt.maxLen + codegen::kDecodeKeyTile : keysPerSplit;
        rgn::RegionOperands ops = none;
        ASSERT_TRUE(launchDecode(*driver, module, name, in, p, ops).ok());
        compare(out, expected, false, 1e-3);
      }
    }
    for (const PrefillInstance& in : prefill) {
      SCOPED_TRACE(codegen::prefillKernelName(name, in));
      const std::vector<int> newTokens = {300, 1, 77, 130};
      const Fp8Batch bt = makeBatch(rng, 2, in.group, in.headDim, newTokens);
      const std::vector<float> expected = cpuAttention(mask, bt);
      // The prefill rounds P to bf16 for its P.V products: an output that cancels large V
      // values (random codes reach 448 times the scale) moves by up to 2^-8 of the sum of
      // |p v|, far more than 2e-2 of itself. So the bound scales with attention over |V|.
      Fp8Batch absV = bt;
      const size_t rows = static_cast<size_t>(kBlockSize) * bt.Hkv * bt.D;  // one K or V
      for (size_t block = 0; block < static_cast<size_t>(bt.numBlocks) * kLayers; ++block)
        for (size_t i = 0; i < rows; ++i) absV.codes[(block * 2 + 1) * rows + i] &= 0x7f;
      const std::vector<float> magnitude = cpuAttention(mask, absV);
      std::vector<std::unique_ptr<DeviceBuffer>> keep;
      attn::PagedAttentionParams p = params(bt, true, keep);
      const std::vector<uint8_t> poison(bt.q.size() * 2, 0xFF);
      DeviceBuffer out(*driver, poison.data(), poison.size());
      setPrefillTiles(p, 300, in.group, bt.maxLen);
      std::vector<uint8_t> classes(static_cast<size_t>(bt.R) * bt.Hkv * p.q_tiles * p.k_tiles, 0xEE);
      DeviceBuffer cls(*driver, classes.data(), classes.size());
      p.out = out.as<void>();
      p.block_classes = cls.as<unsigned char>();
      rgn::RegionOperands ops = none;
      ASSERT_TRUE(launchBlockMask(*driver, module, name, in, p, ops).ok());
      ASSERT_TRUE(launchPrefill(*driver, module, name, in, p, ops).ok());
      compare(out, expected, true, 2e-2, &magnitude);
    }
    driver->moduleUnload(module);
  }
}

}  // namespace
}  // namespace ingot
