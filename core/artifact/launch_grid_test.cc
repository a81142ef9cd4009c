// The kernel families' grid rules give the grids their kernels' ABI headers define, and the
// rule evaluation handles caps, empty launches, missing counts and bad rules.
#include "core/artifact/launch_grid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/kernels/fused_params.h"
#include "core/kernels/kv_fp8_params.h"
#include "core/kernels/quant_params.h"
#include "core/kernels/w8a8_params.h"

namespace ingot {
namespace {

using schema::GridCount;

GridDims grid(const std::string& name, uint32_t threads, const GridCounts& counts, int sms = 132) {
  std::optional<GridRule> rule = kernelGridRule(name, threads);
  EXPECT_TRUE(rule) << name;
  if (!rule) return {};
  EXPECT_EQ(gridRuleProblem(*rule), "") << name;
  StatusOr<GridDims> d = evaluateGrid(*rule, counts, sms);
  EXPECT_TRUE(d.ok()) << name << ": " << d.status().message();
  return d.ok() ? *d : GridDims{};
}

TEST(LaunchGrid, QuantizedProductsTileTheirOutputs) {
  for (int n : {1, 4, 5, 127, 128, 129, 576, 1536, 49152}) {
    for (int rows : {1, 31, 32, 64, 65, 80, 4096}) {
      const GridCounts c =
          GridCounts().set(GridCount::Features, n).set(GridCount::Rows, rows);
      const GridDims gemv = grid("ingot_quant_gemv_int4zero_bf16", 128, c);
      EXPECT_EQ(gemv.x, quantgemv::quantGemvGridSize(n));
      EXPECT_EQ(gemv.y * gemv.z, 1u);
      const GridDims gemm = grid("ingot_quant_gemm_fp8", 256, c);
      EXPECT_EQ(gemm.x, quantgemm::quantGemmGridX(n)) << n;
      EXPECT_EQ(gemm.y, quantgemm::quantGemmGridY(rows)) << rows;
      EXPECT_EQ(gemm.z, 1u);
    }
  }
}

TEST(LaunchGrid, GridStrideKernelsCoverTheirElementsUpTo32CtasPerSm) {
  for (const char* name : {"ingot_fused_add_f32", "ingot_fused_add_bias_bf16",
                           "ingot_fused_silu_mul_f32", "ingot_fused_to_bf16_f32",
                           "ingot_fused_scale_bf16", "ingot_fused_gelu_mul_f32"}) {
    for (int64_t n : {1L, 255L, 256L, 257L, 576L * 80, 1536L * 4096}) {
      const int64_t ctas = (n + fused::kFusedThreads - 1) / fused::kFusedThreads;
      for (int sms : {1, 8, 132}) {
        const GridDims d =
            grid(name, fused::kFusedThreads, GridCounts().set(GridCount::Elements, n), sms);
        EXPECT_EQ(d.x, static_cast<unsigned>(std::min<int64_t>(ctas, 32L * sms))) << name << n;
        EXPECT_EQ(d.y * d.z, 1u);
      }
    }
  }
}

TEST(LaunchGrid, W8a8KernelsTakeARowEachAndTheEpilogueAtMost4096Ctas) {
  for (int64_t rows : {1L, 32L, 80L, 8192L}) {
    for (int64_t n : {1L, 576L, 49152L}) {
      const GridCounts c =
          GridCounts().set(GridCount::Rows, rows).set(GridCount::Elements, rows * n);
      for (const char* name :
           {"ingot_fp8_quantize_rows", "ingot_fp8_rms_norm_quant", "ingot_fp8_silu_mul_quant"})
        EXPECT_EQ(grid(name, w8a8::kW8a8Threads, c).x, static_cast<unsigned>(rows)) << name;
      EXPECT_EQ(grid("ingot_fp8_scale_epilogue", w8a8::kW8a8Threads, c).x,
                w8a8::epilogueGridSize(rows * n));
    }
  }
}

TEST(LaunchGrid, Fp8KvWriteGivesAWarpPerKvHeadOfKAndVAndStridesPastTheYLimit) {
  for (int kvHeads : {1, 3, 4, 8, 9}) {
    for (int tokens : {1, 80, 65535, 70000}) {
      const GridCounts c =
          GridCounts().set(GridCount::KvHeads, kvHeads).set(GridCount::Tokens, tokens);
      const GridDims d = grid("ingot_fused_kv_write_fp8_f32", 256, c);
      EXPECT_EQ(d.x, kvfp8::kvFp8WriteGridX(kvHeads, 8));
      EXPECT_EQ(d.y, kvfp8::kvFp8WriteGridY(tokens));
      EXPECT_EQ(d.z, 1u);
    }
  }
}

TEST(LaunchGrid, AttentionAndTheOneCtaPerRowKernels) {
  const GridCounts c = GridCounts()
                           .set(GridCount::KvHeads, 3)
                           .set(GridCount::Heads, 9)
                           .set(GridCount::Requests, 5)
                           .set(GridCount::Splits, 4)
                           .set(GridCount::Tokens, 80)
                           .set(GridCount::Rows, 7);
  const GridDims a = grid("ingot_decode_variant0_f32_kvfp8_d64_g3", 128, c);
  EXPECT_EQ(std::vector<unsigned>({a.x, a.y, a.z}), std::vector<unsigned>({3, 5, 4}));
  const GridDims combine = grid("ingot_decode_combine_f32_d64", 64, c);
  EXPECT_EQ(std::vector<unsigned>({combine.x, combine.y, combine.z}),
            std::vector<unsigned>({80, 9, 1}));
  for (const char* name : {"ingot_fused_embedding_f32", "ingot_fused_rms_norm_residual_bf16",
                           "ingot_fused_rope_kv_write_f32"})
    EXPECT_EQ(grid(name, 256, c).x, 80u) << name;
  for (const char* name : {"ingot_fused_gather_rows_f32", "ingot_fused_sample_f32"})
    EXPECT_EQ(grid(name, 256, c).x, 7u) << name;
  // bf16 prefill (test/gpu/attention_launch.h launches these by hand).
  GridCounts tiles = c;
  tiles.set(GridCount::QueryTiles, 6).set(GridCount::KeyTiles, 11);
  const GridDims prefill = grid("ingot_prefill_variant0_bf16_d128_g4", 128, tiles);
  EXPECT_EQ(std::vector<unsigned>({prefill.x, prefill.y, prefill.z}),
            std::vector<unsigned>({6, 3, 5}));
  const GridDims mask = grid("ingot_block_mask_variant0_d128_g4", 128, tiles);
  EXPECT_EQ(std::vector<unsigned>({mask.x, mask.y, mask.z}), std::vector<unsigned>({6, 11, 15}));
  EXPECT_EQ(describeGridAxis((*kernelGridRule("ingot_block_mask_dense_d64_g1", 128))[2]),
            "Requests x KvHeads");
}

TEST(LaunchGrid, ALaunchWithoutWorkHasAnEmptyAxis) {
  const GridCounts none = GridCounts()
                              .set(GridCount::Elements, 0)
                              .set(GridCount::Rows, 0)
                              .set(GridCount::Features, 576);
  EXPECT_EQ(grid("ingot_fused_add_f32", 256, none).x, 0u);
  EXPECT_EQ(grid("ingot_quant_gemm_int4min_f16", 256, none).y, 0u);
  EXPECT_EQ(grid("ingot_fp8_scale_epilogue", 256, none).x, 0u);
}

TEST(LaunchGrid, ACountTheLaunchDoesNotGiveIsAnError) {
  const StatusOr<GridDims> d = evaluateGrid(*kernelGridRule("ingot_quant_gemm_fp8", 256),
                                            GridCounts().set(GridCount::Features, 576), 132);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("'Rows'"), std::string::npos) << d.status().message();
}

TEST(LaunchGrid, BadRulesAndUnknownKernelsAreNamed) {
  EXPECT_FALSE(kernelGridRule("ingot_rms_norm_bf16", 256));
  EXPECT_FALSE(kernelGridRule("ingot_fused_add_f32", 0));
  GridRule rule = *kernelGridRule("ingot_fused_add_f32", 256);
  rule[1] = gridAxis(static_cast<GridCount>(200));
  EXPECT_NE(gridRuleProblem(rule).find("grid axis y counts 200"), std::string::npos)
      << gridRuleProblem(rule);
  rule[1] = gridAxis(GridCount::Tokens, 0);
  EXPECT_EQ(gridRuleProblem(rule), "grid axis y has divisor 0");
  rule[1] = gridAxis(GridCount::Tokens, 1, 0, 0, 0);
  EXPECT_EQ(gridRuleProblem(rule), "grid axis y has multiplier 0");
  rule[1] = gridAxis(GridCount::Tokens);
  rule[2] = gridAxis(GridCount::Tokens, 1, 0, 0, 1, static_cast<GridCount>(99));
  EXPECT_NE(gridRuleProblem(rule).find("counts 99"), std::string::npos);
}

TEST(LaunchGrid, AxesAreDescribedForInspect) {
  const GridRule add = *kernelGridRule("ingot_fused_add_f32", 256);
  EXPECT_EQ(describeGridAxis(add[0]), "Elements / 256 (<= 32 per SM)");
  EXPECT_EQ(describeGridAxis(add[1]), "1");
  const GridRule kv = *kernelGridRule("ingot_fused_kv_write_fp8_f32", 256);
  EXPECT_EQ(describeGridAxis(kv[0]), "2 KvHeads / 8");
  EXPECT_EQ(describeGridAxis(kv[1]), "Tokens (<= 65535)");
}

}  // namespace
}  // namespace ingot
