// The generated paged attention kernels on a GPU against the CPU backend's pagedAttention:
// decode (FlashDecoding, split-KV; f32 and bf16; one split and many) and prefill (FA2 with
// mma.sync, bf16; with and without the block mask) on fresh random paged inputs with
// shuffled blocks, the example variants (causal, sliding window, ALiBi, soft-capping,
// speculative tree, document mask), GQA ratios 1, 3, 4, 8, head dims 64 and 128, through the cubin and the
// PTX JIT. Variants go the runtime's way: region bytecode -> AttentionRegionEmitter ->
// NVRTC -> driver API. Label `gpu`: skips, saying why, without a driver or a device.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <numeric>
#include <random>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "codegen/cuda/AttentionKernelSource.h"
#include "codegen/cuda/AttentionRegionEmitter.h"
#include "codegen/cuda/NvrtcCompiler.h"
#include "core/kernels/attention_params.h"
#include "core/kernels/region_operands.h"
#include "core/region/region_examples.h"
#include "runtime/backend/cpu/kernels.h"
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

constexpr int kLayers = 2, kLayer = 1, kBlockSize = 16;

/// A random step: requests with KV lengths and new tokens, shuffled blocks, q and the pool.
struct Batch {
  int R = 0, T = 0, H = 0, Hkv = 0, D = 0, maxBlocks = 0, numBlocks = 0, maxLen = 0;
  std::vector<int32_t> blockTables, seqLens, queryStart;
  std::vector<float> q, pool;
  // Tree operands (region_examples treeMaskBytecode): start slot [R], bits [R, 8, 1].
  std::vector<int32_t> treeStart, treeBits;
  // The document mask's operand (documentMaskBytecode): the document of every KV slot,
  // [R, maxLen], documents of 1..80 slots packed one after another.
  std::vector<int32_t> docIds;
};

/// `newTokens`: new tokens of each request this step (the tree operands assume <= 8).
Batch makeBatch(std::mt19937 &rng, int Hkv, int G, int D, const std::vector<int> &newTokens) {
  Batch bt;
  bt.R = static_cast<int>(newTokens.size());
  bt.Hkv = Hkv;
  bt.H = Hkv * G;
  bt.D = D;
  std::uniform_int_distribution<int> lenDist(1, 300);
  bt.queryStart.push_back(0);
  for (int b = 0; b < bt.R; ++b) {
    const int n = newTokens[b];
    const int len = std::max(n, lenDist(rng));
    bt.seqLens.push_back(len);
    bt.queryStart.push_back(bt.queryStart.back() + n);
    bt.maxLen = std::max(bt.maxLen, len);
    // A random tree over the n new tokens: node i's parent is some j < i.
    bt.treeStart.push_back(len - n);
    std::vector<int32_t> bits(8, 0);
    for (int i = 0; i < 8; ++i) {
      bits[i] = 1 << i;
      if (i > 0 && i < n) bits[i] |= bits[std::uniform_int_distribution<int>(0, i - 1)(rng)];
    }
    bt.treeBits.insert(bt.treeBits.end(), bits.begin(), bits.end());
  }
  bt.T = bt.queryStart.back();
  bt.maxBlocks = (bt.maxLen + kBlockSize - 1) / kBlockSize;
  bt.numBlocks = bt.R * bt.maxBlocks + 3;
  std::vector<int32_t> perm(bt.numBlocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  bt.blockTables.assign(bt.R * bt.maxBlocks, -1);
  for (int b = 0, next = 0; b < bt.R; ++b)
    for (int k = 0; k < (bt.seqLens[b] + kBlockSize - 1) / kBlockSize; ++k)
      bt.blockTables[b * bt.maxBlocks + k] = perm[next++];
  bt.docIds.assign(static_cast<size_t>(bt.R) * bt.maxLen, 0);
  std::uniform_int_distribution<int> docLen(1, 80);
  for (int b = 0; b < bt.R; ++b)
    for (int s = 0, doc = 0, left = docLen(rng); s < bt.maxLen; ++s, --left) {
      if (left == 0) ++doc, left = docLen(rng);
      bt.docIds[static_cast<size_t>(b) * bt.maxLen + s] = doc;
    }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  bt.q.resize(static_cast<size_t>(bt.T) * bt.H * D);
  for (float &x : bt.q) x = normal(rng);
  bt.pool.resize(static_cast<size_t>(bt.numBlocks) * kLayers * 2 * kBlockSize * Hkv * D);
  for (float &x : bt.pool) x = normal(rng);
  return bt;
}

/// The extra operands a variant reads.
enum class Operands { kNone, kTree, kDocuments };

/// One variant as the runtime would get it: bytecode of a mask and/or a score region.
struct VariantCase {
  std::string name;
  std::vector<uint8_t> mask, score;
  Operands operands = Operands::kNone;
  /// A sliding window's width (its decode kernel must not read the blocks before it).
  int window = 0;
  bool treeOperands() const { return operands == Operands::kTree; }
};

/// `H`: the head count ALiBi's slopes assume (any head index works).
std::vector<VariantCase> variantCases(int H) {
  return {{"Causal", causalMaskBytecode(), {}},
          {"SlidingWindow", slidingWindowMaskBytecode(37), {}, Operands::kNone, 37},
          {"Alibi", {}, alibiScoreBytecode(H)},
          {"Softcap", causalMaskBytecode(), softcapScoreBytecode(30.0f)},
          {"Tree", treeMaskBytecode(), {}, Operands::kTree},
          {"DocumentMask", documentMaskBytecode(), {}, Operands::kDocuments}};
}

/// Device memory freed on scope exit.
/// The CPU backend's answer for `bt` under variant `v` (f32 everywhere).
std::vector<float> cpuAttention(const VariantCase &v, const Batch &bt) {
  std::vector<float> expected(bt.q.size(), NAN);
  StatusOr<RegionProgram> mask = v.mask.empty() ? StatusOr<RegionProgram>(RegionProgram())
                                                : decodeRegionBytecode(v.mask);
  StatusOr<RegionProgram> score = v.score.empty() ? StatusOr<RegionProgram>(RegionProgram())
                                                  : decodeRegionBytecode(v.score);
  EXPECT_TRUE(mask.ok() && score.ok());
  AttentionParams p;
  p.layer = kLayer;
  p.num_heads = bt.H;
  p.num_kv_heads = bt.Hkv;
  p.head_dim = bt.D;
  p.scale = 1.0f / std::sqrt(static_cast<float>(bt.D));
  p.variant.mask = v.mask.empty() ? nullptr : &*mask;
  p.variant.score = v.score.empty() ? nullptr : &*score;
  p.variant.analyze();
  const int64_t startShape[1] = {bt.R}, bitsShape[3] = {bt.R, 8, 1};
  const int64_t docShape[2] = {bt.R, bt.maxLen};
  std::vector<RegionOperandView> extra;
  if (v.operands == Operands::kTree) {
    extra.push_back({RegionType::kI32, startShape, 1, bt.treeStart.data()});
    extra.push_back({RegionType::kI32, bitsShape, 3, bt.treeBits.data()});
  } else if (v.operands == Operands::kDocuments) {
    extra.push_back({RegionType::kI32, docShape, 2, bt.docIds.data()});
  }
  p.extra = extra.data();
  p.num_extra = extra.size();
  KvCacheLayout layout{kLayers, kBlockSize, bt.Hkv, bt.D};
  AttentionBatch batch{bt.blockTables.data(), bt.maxBlocks, bt.seqLens.data(),
                       bt.queryStart.data(), bt.R, bt.T};
  ThreadPool pool(2);
  AttentionScratch scratch;
  KvCacheView view;
  view.f32 = bt.pool.data();
  Status st = pagedAttention(bt.q.data(), view, layout, batch, p, expected.data(), pool,
                             cpuKernels(detectSimdLevel()), scratch);
  EXPECT_TRUE(st.ok()) << st.message();
  return expected;
}

/// A batch in device memory (q and pool in bf16 or f32), the launch parameters without the
/// split/prefill fields, the variant's operands and the error word.
struct DeviceBatch {
  std::unique_ptr<DeviceBuffer> q, pool, tables, lens, start, treeStart, treeBits, docIds, error;
  attn::PagedAttentionParams params{};
  rgn::RegionOperands ops{};

  DeviceBatch(CudaDriver &cu, const Batch &bt, bool bf16, Operands operands) {
    auto upload = [&](const std::vector<float> &x) {
      if (!bf16) return std::make_unique<DeviceBuffer>(cu, x.data(), x.size() * 4);
      std::vector<uint16_t> h(x.size());
      for (size_t i = 0; i < x.size(); ++i) h[i] = bf16Bits(x[i]);
      return std::make_unique<DeviceBuffer>(cu, h.data(), h.size() * 2);
    };
    auto ints = [&](const std::vector<int32_t> &x) {
      return std::make_unique<DeviceBuffer>(cu, x.data(), x.size() * 4);
    };
    q = upload(bt.q);
    pool = upload(bt.pool);
    tables = ints(bt.blockTables);
    lens = ints(bt.seqLens);
    start = ints(bt.queryStart);
    treeStart = ints(bt.treeStart);
    treeBits = ints(bt.treeBits);
    docIds = ints(bt.docIds);
    const uint32_t zero = 0;
    error = std::make_unique<DeviceBuffer>(cu, &zero, 4);
    params.q = q->as<void>();
    params.kv_cache = pool->as<void>();
    params.block_tables = tables->as<int>();
    params.seq_lens = lens->as<int>();
    params.query_start = start->as<int>();
    params.num_requests = bt.R;
    params.num_tokens = bt.T;
    params.num_heads = bt.H;
    params.num_kv_heads = bt.Hkv;
    params.num_layers = kLayers;
    params.layer = kLayer;
    params.block_size = kBlockSize;
    params.max_blocks = bt.maxBlocks;
    params.scale = 1.0f / std::sqrt(static_cast<float>(bt.D));
    if (operands == Operands::kDocuments) {
      ops.operand[0].data = docIds->as<void>();
      ops.operand[0].shape[0] = bt.R;
      ops.operand[0].shape[1] = bt.maxLen;
    }
    if (operands == Operands::kTree) {
      ops.operand[0].data = treeStart->as<void>();
      ops.operand[0].shape[0] = bt.R;
      ops.operand[1].data = treeBits->as<void>();
      ops.operand[1].shape[0] = bt.R;
      ops.operand[1].shape[1] = 8;
      ops.operand[1].shape[2] = 1;
    }
    ops.error = error->as<uint32_t>();
  }
};

class PagedAttentionGpuTest : public AttentionGpuTest {
 protected:
  /// Reads `out` (bf16 or f32) and the error word back and compares with `expected`.
  void compare(const DeviceBuffer &out, const DeviceBatch &db, const std::vector<float> &expected,
               bool bf16, const Batch &bt) {
    ASSERT_TRUE(driver->check("cuCtxSynchronize", driver->ctxSynchronize()).ok());
    std::vector<uint8_t> raw(expected.size() * (bf16 ? 2 : 4));
    ASSERT_TRUE(driver->check("cuMemcpyDtoH",
                              driver->memcpyDtoH(raw.data(), out.ptr, raw.size())).ok());
    uint32_t err = 1;
    ASSERT_TRUE(driver->check("cuMemcpyDtoH", driver->memcpyDtoH(&err, db.error->ptr, 4)).ok());
    EXPECT_EQ(err, 0u) << "a region reported a trap";
    const double tol = bf16 ? 2e-2 : 1e-3;
    int bad = 0;
    for (size_t i = 0; i < expected.size() && bad < 5; ++i) {
      float got;
      if (bf16) {
        uint32_t b = static_cast<uint32_t>(reinterpret_cast<uint16_t *>(raw.data())[i]) << 16;
        std::memcpy(&got, &b, 4);
      } else {
        std::memcpy(&got, raw.data() + i * 4, 4);
      }
      if (!(std::fabs(got - expected[i]) <= tol * (1.0 + std::fabs(expected[i])))) {
        ++bad;
        ADD_FAILURE() << "out[token " << i / (bt.H * bt.D) << "][head " << i / bt.D % bt.H
                      << "][" << i % bt.D << "] = " << got << ", CPU " << expected[i];
      }
    }
  }

  void runDecode(const VariantCase &v, bool viaPtx);
  void runPrefill(const VariantCase &v, bool viaPtx);

  /// Fresh inputs each run, replayable with INGOT_TEST_SEED.
  std::mt19937 rng{ingot::testing::testSeed()};
};

/// NaN in the K and V rows (layer kLayer) of every block wholly before the first new token's
/// window of `window` slots: a kernel that loads them puts NaN into P.V (0 x NaN), so only
/// one that never reads them (as the CPU does not) gives finite outputs.
void poisonBlocksBeforeWindow(Batch &bt, int window) {
  const size_t block = static_cast<size_t>(kBlockSize) * bt.Hkv * bt.D;
  for (int b = 0; b < bt.R; ++b) {
    const int firstSlot = bt.seqLens[b] - (bt.queryStart[b + 1] - bt.queryStart[b]);
    const int before = std::max(0, firstSlot - (window - 1)) / kBlockSize;
    for (int k = 0; k < before; ++k) {
      const size_t physical = static_cast<size_t>(bt.blockTables[b * bt.maxBlocks + k]);
      const size_t base = (physical * kLayers + kLayer) * 2 * block;
      std::fill(bt.pool.begin() + base, bt.pool.begin() + base + 2 * block, NAN);
    }
  }
}

/// NaN in f32 and in bf16: the kernels must overwrite every output element.
std::vector<uint8_t> poisonOutput(const Batch &bt, bool bf16) {
  return std::vector<uint8_t>(bt.q.size() * (bf16 ? 2 : 4), 0xFF);
}

void PagedAttentionGpuTest::runDecode(const VariantCase &v, bool viaPtx) {
  SCOPED_TRACE(v.name + (viaPtx ? " decode (PTX JIT)" : " decode (cubin)"));
  std::vector<DecodeInstance> instances;
  for (AttentionDtype dtype : {AttentionDtype::kF32, AttentionDtype::kBF16})
    for (int d : {64, 128})
      for (int g : {1, 3, 4, 8}) instances.push_back({dtype, d, g});
  // Head dim 256 (Gemma: GQA 4), its 16-key tile, at both row tiles it allows (4 and 8).
  for (DecodeInstance in : std::initializer_list<DecodeInstance>{
           {AttentionDtype::kF32, 256, 4}, {AttentionDtype::kBF16, 256, 4},
           {AttentionDtype::kF32, 256, 8}})
    instances.push_back(in);
  StatusOr<std::string> text = codegen::emitAttentionVariantHeader(v.name, v.mask, v.score,
                                                                   "region_examples.cc");
  ASSERT_TRUE(text.ok()) << text.status().message();
  StatusOr<std::string> source = codegen::attentionKernelSource(*text, v.name, instances);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CUmodule module = load(*source, v.name, viaPtx);
  ASSERT_NE(module, nullptr);
  for (const DecodeInstance &in : instances) {
    const bool bf16 = in.dtype == AttentionDtype::kBF16;
    SCOPED_TRACE(codegen::decodeKernelName(v.name, in));
    Batch bt = makeBatch(rng, 2, in.group, in.headDim, {1, 1, 3, 8});
    if (v.window > 0) poisonBlocksBeforeWindow(bt, v.window);
    if (bf16) {  // the CPU sees exactly the values the GPU reads
      for (float &x : bt.q) x = bf16Round(x);
      for (float &x : bt.pool) x = bf16Round(x);
    }
    const std::vector<float> expected = cpuAttention(v, bt);
    DeviceBatch db(*driver, bt, bf16, v.operands);
    const std::vector<uint8_t> poison = poisonOutput(bt, bf16);
    for (int keysPerSplit : {1 << 20, 64}) {
      const int splits = (bt.maxLen + keysPerSplit - 1) / keysPerSplit;
      SCOPED_TRACE(std::to_string(splits) + " splits");
      DeviceBuffer out(*driver, poison.data(), poison.size());
      const size_t partials = static_cast<size_t>(bt.T) * bt.H * splits;
      DeviceBuffer po(*driver, nullptr, partials * bt.D * 4), pm(*driver, nullptr, partials * 4),
          ps(*driver, nullptr, partials * 4);
      attn::PagedAttentionParams params = db.params;
      params.out = out.as<void>();
      params.partial_out = po.as<float>();
      params.partial_max = pm.as<float>();
      params.partial_sum = ps.as<float>();
      params.num_splits = splits;
      params.keys_per_split = splits == 1 ? bt.maxLen + codegen::kDecodeKeyTile : keysPerSplit;
      Status launched = launchDecode(*driver, module, v.name, in, params, db.ops);
      ASSERT_TRUE(launched.ok()) << launched.message();
      compare(out, db, expected, bf16, bt);
    }
  }
  driver->moduleUnload(module);
}

void PagedAttentionGpuTest::runPrefill(const VariantCase &v, bool viaPtx) {
  SCOPED_TRACE(v.name + (viaPtx ? " prefill (PTX JIT)" : " prefill (cubin)"));
  std::vector<codegen::PrefillInstance> instances;
  for (int d : {64, 128})
    for (int g : {1, 3, 4, 8}) instances.push_back({d, g});
  StatusOr<std::string> text = codegen::emitAttentionVariantHeader(v.name, v.mask, v.score,
                                                                   "region_examples.cc");
  ASSERT_TRUE(text.ok()) << text.status().message();
  StatusOr<std::string> source = codegen::attentionKernelSource(*text, v.name, {}, instances);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CUmodule module = load(*source, v.name, viaPtx);
  ASSERT_NE(module, nullptr);
  for (const codegen::PrefillInstance &in : instances) {
    SCOPED_TRACE(codegen::prefillKernelName(v.name, in));
    // Whole prompts, chunk tails and decode rows in one step (tree operands cover <= 8).
    const std::vector<int> newTokens =
        v.treeOperands() ? std::vector<int>{8, 1, 5, 8} : std::vector<int>{300, 1, 77, 130};
    Batch bt = makeBatch(rng, 2, in.group, in.headDim, newTokens);
    for (float &x : bt.q) x = bf16Round(x);
    for (float &x : bt.pool) x = bf16Round(x);
    const std::vector<float> expected = cpuAttention(v, bt);
    DeviceBatch db(*driver, bt, true, v.operands);
    attn::PagedAttentionParams tiles{};
    setPrefillTiles(tiles, *std::max_element(newTokens.begin(), newTokens.end()), in.group,
                    bt.maxLen);
    const int qTiles = tiles.q_tiles, kTiles = tiles.k_tiles;
    const std::vector<uint8_t> poison = poisonOutput(bt, true);
    for (bool blockMask : {false, true}) {
      SCOPED_TRACE(blockMask ? "with the block mask" : "without a block mask");
      DeviceBuffer out(*driver, poison.data(), poison.size());
      std::vector<uint8_t> classesPoison(static_cast<size_t>(bt.R) * bt.Hkv * qTiles * kTiles,
                                         0xEE);
      DeviceBuffer classes(*driver, classesPoison.data(), classesPoison.size());
      attn::PagedAttentionParams params = db.params;
      params.out = out.as<void>();
      params.num_splits = 1;
      params.block_classes = blockMask ? classes.as<unsigned char>() : nullptr;
      params.q_tiles = qTiles;
      params.k_tiles = kTiles;
      if (blockMask) {
        Status masked = launchBlockMask(*driver, module, v.name, in, params, db.ops);
        ASSERT_TRUE(masked.ok()) << masked.message();
      }
      Status launched = launchPrefill(*driver, module, v.name, in, params, db.ops);
      ASSERT_TRUE(launched.ok()) << launched.message();
      compare(out, db, expected, true, bt);
    }
  }
  driver->moduleUnload(module);
}

TEST_F(PagedAttentionGpuTest, DecodeMatchesCpuPagedAttentionThroughTheCubin) {
  std::cout << "[ gpu ] sm_" << major << minor << "\n";
  for (const VariantCase &v : variantCases(16)) runDecode(v, false);
}

TEST_F(PagedAttentionGpuTest, DecodeMatchesCpuPagedAttentionThroughThePtxJit) {
  if (driver->emulated()) GTEST_SKIP() << noPtxJit(GpuTarget{0, 0, "", true});
  for (const VariantCase &v : variantCases(16)) runDecode(v, true);
}

TEST_F(PagedAttentionGpuTest, PrefillMatchesCpuPagedAttentionThroughTheCubin) {
  for (const VariantCase &v : variantCases(16)) runPrefill(v, false);
}

TEST_F(PagedAttentionGpuTest, PrefillMatchesCpuPagedAttentionThroughThePtxJit) {
  if (driver->emulated()) GTEST_SKIP() << noPtxJit(GpuTarget{0, 0, "", true});
  for (const VariantCase &v : variantCases(16)) runPrefill(v, true);
}

// The mutation test of the SIMT emulator's tensor cores: with a deliberately wrong mma.sync
// fragment layout the prefill comparison above must fail (on a GPU there is nothing to
// mutate).
TEST_F(PagedAttentionGpuTest, AScrambledTensorCoreLayoutFailsThePrefillComparison) {
  if (!driver->emulated()) GTEST_SKIP() << "a mutation of the SIMT emulator's tensor cores";
  ScrambledTensorCores scrambled;
  ASSERT_TRUE(scrambled.ok());
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    runPrefill(variantCases(16)[0], false);
  }
  EXPECT_GT(failures.size(), 0) << "the prefill comparison did not notice a scrambled layout";
}

}  // namespace
}  // namespace ingot
