// The grid rules of Ingot's kernel families and their evaluation (launch_grid.h).
#include "core/artifact/launch_grid.h"

#include <algorithm>

#include "core/kernels/quant_params.h"

namespace ingot {

using schema::GridCount;

namespace {

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

GridRule rule(schema::GridAxisDef x, schema::GridAxisDef y = gridAxis(GridCount::One),
              schema::GridAxisDef z = gridAxis(GridCount::One)) {
  return {x, y, z};
}

/// A grid-stride kernel over `Elements`: one element per thread, at most 32 CTAs per SM (8
/// resident 256-thread CTAs per SM, four waves; the loop covers the rest).
GridRule gridStride(uint32_t threads) {
  return rule(gridAxis(GridCount::Elements, threads, 0, 32));
}

/// The most CTAs of a grid's y and z axes (a kernel that strides past them is capped).
constexpr uint32_t kMaxGridYz = 65535;

}  // namespace

std::optional<GridRule> kernelGridRule(std::string_view name, uint32_t threads) {
  if (threads == 0) return std::nullopt;
  // Attention (codegen/cuda/AttentionKernelPlan.cpp): the combine of split-KV partials has
  // a CTA per (token, query head); the paged decode / prefill kernel one per (kv head,
  // request, split).
  if (startsWith(name, "ingot_decode_combine_"))
    return rule(gridAxis(GridCount::Tokens), gridAxis(GridCount::Heads));
  // bf16 prefill: a CTA per (query row tile, kv head, request); its block mask one per
  // (query row tile, key tile, request x kv head).
  if (startsWith(name, "ingot_prefill_"))
    return rule(gridAxis(GridCount::QueryTiles), gridAxis(GridCount::KvHeads),
                gridAxis(GridCount::Requests));
  if (startsWith(name, "ingot_block_mask_"))
    return rule(gridAxis(GridCount::QueryTiles), gridAxis(GridCount::KeyTiles),
                gridAxis(GridCount::Requests, 1, 0, 0, 1, GridCount::KvHeads));
  if (startsWith(name, "ingot_decode_"))
    return rule(gridAxis(GridCount::KvHeads), gridAxis(GridCount::Requests),
                gridAxis(GridCount::Splits));
  // Fused elementwise kernels (codegen/cuda/kernels/fused_ops.cuh, kv_fp8.cuh).
  if (startsWith(name, "ingot_fused_kv_write_fp8_"))  // a warp per (K/V, kv head), y over runs
    return rule(gridAxis(GridCount::KvHeads, std::max<uint32_t>(1, threads / 32), 0, 0, 2),
                gridAxis(GridCount::Tokens, 1, kMaxGridYz));
  for (std::string_view perToken : {"ingot_fused_embedding_", "ingot_fused_rms_norm",
                                    "ingot_fused_rope_kv"})
    if (startsWith(name, perToken)) return rule(gridAxis(GridCount::Tokens));
  for (std::string_view perRow : {"ingot_fused_gather_rows_", "ingot_fused_sample_"})
    if (startsWith(name, perRow)) return rule(gridAxis(GridCount::Rows));
  for (std::string_view stride : {"ingot_fused_add", "ingot_fused_silu_mul_",
                                  "ingot_fused_to_bf16_", "ingot_fused_scale_",
                                  "ingot_fused_gelu_mul_"})
    if (startsWith(name, stride)) return gridStride(threads);
  // Weight-only quantized products (codegen/cuda/kernels/quant_gemv.cuh, quant_gemm.cuh).
  if (startsWith(name, "ingot_quant_gemv_"))
    return rule(gridAxis(GridCount::Features, quantgemv::kQuantRowsPerCta));
  if (startsWith(name, "ingot_quant_gemm_"))
    return rule(gridAxis(GridCount::Features, quantgemm::kGemmTileN),
                gridAxis(GridCount::Rows, quantgemm::kGemmTileT));
  // W8A8 (codegen/cuda/kernels/fp8_w8a8.cuh, fp8_producers.cuh): producers and the quantizer
  // a CTA per row; the scale epilogue grid-strides over rows x N with at most 4096 CTAs.
  if (startsWith(name, "ingot_fp8_scale_epilogue"))
    return rule(gridAxis(GridCount::Elements, threads, 4096));
  for (std::string_view perRow : {"ingot_fp8_quantize_rows", "ingot_fp8_rms_norm_quant",
                                  "ingot_fp8_silu_mul_quant"})
    if (startsWith(name, perRow)) return rule(gridAxis(GridCount::Rows));
  return std::nullopt;
}

std::string gridRuleProblem(const GridRule& rule) {
  static const char* kAxes[] = {"x", "y", "z"};
  for (size_t i = 0; i < rule.size(); ++i) {
    const schema::GridAxisDef& a = rule[i];
    const std::string axis = std::string("grid axis ") + kAxes[i];
    for (GridCount c : {a.count(), a.times()})
      if (c > GridCount::MAX)
        return axis + " counts " + std::to_string(static_cast<int>(c)) +
               ", a count this runtime does not know (an artifact from a newer compiler)";
    if (a.divisor() == 0) return axis + " has divisor 0";
    if (a.multiplier() == 0) return axis + " has multiplier 0";
  }
  return "";
}

StatusOr<GridDims> evaluateGrid(const GridRule& rule, const GridCounts& counts, int sms) {
  GridDims dims;
  unsigned* out[] = {&dims.x, &dims.y, &dims.z};
  for (size_t i = 0; i < rule.size(); ++i) {
    const schema::GridAxisDef& a = rule[i];
    int64_t n = 1;
    for (GridCount c : {a.count(), a.times()}) {
      if (c == GridCount::One) continue;
      const int64_t v = counts.get(c);
      if (v < 0)
        return internalError(std::string("its grid reads the count '") +
                             schema::EnumNameGridCount(c) + "', which this launch does not give");
      n *= v;
    }
    const int64_t divisor = a.divisor();
    int64_t ctas = (n * a.multiplier() + divisor - 1) / divisor;
    if (a.max_ctas() != 0) ctas = std::min<int64_t>(ctas, a.max_ctas());
    if (a.max_ctas_per_sm() != 0)
      ctas = std::min<int64_t>(ctas, int64_t{a.max_ctas_per_sm()} * std::max(1, sms));
    *out[i] = static_cast<unsigned>(std::min<int64_t>(ctas, 0x7fffffff));
  }
  return dims;
}

std::string describeGridAxis(const schema::GridAxisDef& a) {
  auto name = [](GridCount c) {
    return c > GridCount::MAX ? "count " + std::to_string(static_cast<int>(c))
                              : std::string(schema::EnumNameGridCount(c));
  };
  std::string s = a.count() == GridCount::One ? std::to_string(a.multiplier()) : name(a.count());
  if (a.times() != GridCount::One) s += " x " + name(a.times());
  if (a.count() != GridCount::One && a.multiplier() != 1)
    s = std::to_string(a.multiplier()) + " " + s;
  if (a.divisor() != 1) s += " / " + std::to_string(a.divisor());
  if (a.max_ctas() != 0) s += " (<= " + std::to_string(a.max_ctas()) + ")";
  if (a.max_ctas_per_sm() != 0) s += " (<= " + std::to_string(a.max_ctas_per_sm()) + " per SM)";
  return s;
}

}  // namespace ingot
