//===- AttentionKernelPlanTest.cpp - which kernels an attention shape gets ===//
#include "codegen/cuda/AttentionKernelPlan.h"

#include <random>
#include <regex>

#include <gtest/gtest.h>

#include "core/region/region_examples.h"

#ifdef INGOT_TEST_NVRTC
#include "codegen/cuda/NvrtcCompiler.h"
#endif

namespace ingot::codegen {
namespace {

std::vector<uint8_t> causalMask() { return causalMaskBytecode(); }

/// Names of the extern "C" kernels a translation unit defines.
std::vector<std::string> kernelsIn(const std::string &source) {
  static const std::regex kernel(R"(extern "C" __global__ void __launch_bounds__\([^)]*\) (\w+)\()");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), kernel);
       it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  return names;
}

TEST(AttentionKernelPlan, Bf16GetsDecodeCombinePrefillAndBlockMaskEachAloneInItsUnit) {
  std::mt19937 rng(std::random_device{}());
  const int headDim = std::uniform_int_distribution<int>(0, 1)(rng) ? 64 : 128;
  const int group = std::uniform_int_distribution<int>(1, 16)(rng);
  StatusOr<std::vector<AttentionKernelUnit>> units = attentionKernelUnits(
      "Causal", causalMask(), {}, {AttentionDtype::kBF16, headDim, group});
  ASSERT_TRUE(units.ok()) << units.status().message();
  const std::string d = std::to_string(headDim), g = std::to_string(group);
  const std::vector<std::pair<std::string, uint32_t>> expected = {
      {"ingot_decode_Causal_bf16_d" + d + "_g" + g, kDecodeThreads},
      {"ingot_decode_combine_bf16_d" + d, static_cast<uint32_t>(headDim)},
      {"ingot_prefill_Causal_bf16_d" + d + "_g" + g, kPrefillThreads},
      {"ingot_block_mask_Causal_d" + d + "_g" + g, kPrefillThreads}};
  ASSERT_EQ(units->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const AttentionKernelUnit &u = (*units)[i];
    EXPECT_EQ(u.name, expected[i].first);
    EXPECT_EQ(u.blockDim, (std::array<uint32_t, 3>{expected[i].second, 1, 1})) << u.name;
    EXPECT_EQ(u.dynamicSharedBytes, 0u);
    EXPECT_EQ(kernelsIn(u.source), std::vector<std::string>{u.name}) << "one kernel per unit";
    // The combine kernel does not depend on the variant, so its unit does not carry it and
    // every variant shares one cached binary.
    EXPECT_EQ(u.source.find("struct Causal") != std::string::npos,
              u.kind != AttentionKernelKind::kCombine)
        << u.name;
  }
}

TEST(AttentionKernelPlan, F32GetsDecodeAndCombineOnly) {
  StatusOr<std::vector<AttentionKernelUnit>> units =
      attentionKernelUnits("dense", {}, {}, {AttentionDtype::kF32, 64, 3});
  ASSERT_TRUE(units.ok()) << units.status().message();
  ASSERT_EQ(units->size(), 2u);
  EXPECT_EQ((*units)[0].name, "ingot_decode_dense_f32_d64_g3");
  EXPECT_EQ((*units)[1].name, "ingot_decode_combine_f32_d64");
  // Head dim 32 has a decode kernel but no prefill tile.
  units = attentionKernelUnits("dense", {}, {}, {AttentionDtype::kBF16, 32, 1});
  ASSERT_TRUE(units.ok());
  EXPECT_EQ(units->size(), 2u);
}

TEST(AttentionKernelPlan, Fp8KvGetsItsOwnDecodeTheSharedCombineAndNoPrefill) {
  StatusOr<std::vector<AttentionKernelUnit>> units =
      attentionKernelUnits("dense", {}, {}, {AttentionDtype::kF32, 64, 3, true});
  ASSERT_TRUE(units.ok()) << units.status().message();
  ASSERT_EQ(units->size(), 2u);
  EXPECT_EQ((*units)[0].name, "ingot_decode_dense_f32_kvfp8_d64_g3");
  EXPECT_NE((*units)[0].source.find("ingot::attn::pagedDecode<dense, float, 64, 3, true>"),
            std::string::npos);
  EXPECT_NE((*units)[0].source.find("storeFp8Vec"), std::string::npos) << "kv_fp8.cuh inlined";
  EXPECT_EQ((*units)[1].name, "ingot_decode_combine_f32_d64") << "partials are f32 either way";
  // bf16 queries with an fp8 pool: the tensor-core prefill reads fp8 too; the block mask
  // reads no KV and is the f32-pool one (same name, same source).
  units = attentionKernelUnits("dense", {}, {}, {AttentionDtype::kBF16, 128, 4, true});
  ASSERT_TRUE(units.ok());
  ASSERT_EQ(units->size(), 4u);
  EXPECT_EQ((*units)[0].name, "ingot_decode_dense_bf16_kvfp8_d128_g4");
  EXPECT_EQ((*units)[2].name, "ingot_prefill_dense_bf16_kvfp8_d128_g4");
  EXPECT_NE((*units)[2].source.find("ingot::attn::pagedPrefill<dense, 128, 4, true>"),
            std::string::npos);
  EXPECT_EQ((*units)[3].name, "ingot_block_mask_dense_d128_g4");
  StatusOr<std::vector<AttentionKernelUnit>> plain =
      attentionKernelUnits("dense", {}, {}, {AttentionDtype::kBF16, 128, 4});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)[3].source, (*units)[3].source);
}

TEST(AttentionKernelPlan, UnsupportedShapesSayWhy) {
  EXPECT_EQ(unsupportedAttentionShape({AttentionDtype::kBF16, 128, 4}), "");
  EXPECT_EQ(unsupportedAttentionShape({AttentionDtype::kBF16, 256, 4}), "");
  EXPECT_EQ(unsupportedAttentionShape({AttentionDtype::kBF16, 256, 16}),
            "the kernels take 1..8 query heads per kv head at head dim 256, not 16");
  EXPECT_EQ(unsupportedAttentionShape({AttentionDtype::kBF16, 96, 4}),
            "the kernels take head dim 32, 64, 128 or 256, not 96");
  EXPECT_EQ(unsupportedAttentionShape({AttentionDtype::kF32, 64, 32}),
            "the kernels take 1..16 query heads per kv head at head dim 64, not 32");
  StatusOr<std::vector<AttentionKernelUnit>> units =
      attentionKernelUnits("Causal", causalMask(), {}, {AttentionDtype::kBF16, 16, 2});
  ASSERT_FALSE(units.ok());
  EXPECT_NE(units.status().message().find("Causal"), std::string::npos);
  EXPECT_NE(units.status().message().find("not 16"), std::string::npos);
}

TEST(AttentionKernelPlan, BytecodeTheEmitterRefusesFailsNamingTheVariant) {
  std::vector<uint8_t> garbage = causalMask();
  ASSERT_FALSE(garbage.empty());
  garbage.resize(garbage.size() / 2);
  StatusOr<std::vector<AttentionKernelUnit>> units =
      attentionKernelUnits("Broken", garbage, {}, {AttentionDtype::kBF16, 64, 1});
  ASSERT_FALSE(units.ok());
  EXPECT_NE(units.status().message().find("Broken"), std::string::npos)
      << units.status().message();
}

#ifdef INGOT_TEST_NVRTC
TEST(AttentionKernelPlan, EveryUnitCompilesAloneToPtx) {
  StatusOr<std::vector<AttentionKernelUnit>> units = attentionKernelUnits(
      "Causal", causalMask(), {}, {AttentionDtype::kBF16, 128, 4});
  ASSERT_TRUE(units.ok()) << units.status().message();
  for (const AttentionKernelUnit &u : *units) {
    StatusOr<std::vector<CudaBinary>> ptx = compileCuda(u.source, u.name + ".cu", {"compute_80"});
    ASSERT_TRUE(ptx.ok()) << u.name << ": " << ptx.status().message();
    const std::string text(ptx->front().data.begin(), ptx->front().data.end());
    EXPECT_NE(text.find(".entry " + u.name), std::string::npos) << u.name;
  }
}
#endif

} // namespace
} // namespace ingot::codegen
