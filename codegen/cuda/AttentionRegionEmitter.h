//===- AttentionRegionEmitter.h - Attention regions to CUDA C++ --*- C++ -*-===//
//
// Turns the mask and score region of one `ingot.attention` (as validated region bytecode)
// into a CUDA C++ variant struct whose `__host__ __device__` functions the attention kernel
// templates in codegen/cuda/kernels/ call. Plain C++ (no MLIR, no CUDA).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/region/region_program.h"
#include "core/base/status.h"

namespace ingot::codegen {

/// Emits `struct <name>` with
///   static constexpr bool kHasMask, kHasScore, kMaskReadsHead, kMaskImpliesCausal;
///   static constexpr long long kMaskWindow;  // W > 0: keys before q - W + 1 are hidden
///   static constexpr int kNumOperands, kOperandRank[];
///   static constexpr unsigned char kMaskBytecode[], kScoreBytecode[];  (+ ...Size)
///   static bool mask(const rgn::RegionOperands&, i64 b, i64 h, i64 q, i64 kv);
///   static float score(const rgn::RegionOperands&, float s, i64 b, i64 h, i64 q, i64 kv);
/// (FlashInfer's LogitsMask / LogitsTransform) from the region bytecode of a mask and a
/// score region (schemas/region_bytecode.h; empty = no such region: the mask then returns
/// true, the score `s`). The struct carries the bytecode it was made from, so a runtime can
/// match a compiled kernel to an artifact's attention variant byte for byte.
///
/// The functions compute exactly what the CPU evaluator computes (same integer widths,
/// signedness, rounding and operation order, see kernels/region_ops.h); where the evaluator
/// fails (a trap, an out-of-range region_load, poison at a load index or the yield) they
/// return a dropped key (mask false, score -inf) and OR a RegionError bit into `ops.error`.
/// The text needs kernels/region_ops.h before it. Fails, naming the problem, on bytecode the
/// runtime decoder refuses, on more extra operands or a higher operand rank than
/// kernels/region_operands.h provides, and when the two regions disagree on the operands.
StatusOr<std::string> emitAttentionVariantStruct(const std::string &name,
                                                 const std::vector<uint8_t> &mask,
                                                 const std::vector<uint8_t> &score);

/// emitAttentionVariantStruct wrapped as a self-contained header: a banner, `#pragma once`
/// and the include of kernels/region_ops.h. `origin` names the source in the banner.
StatusOr<std::string> emitAttentionVariantHeader(const std::string &name,
                                                 const std::vector<uint8_t> &mask,
                                                 const std::vector<uint8_t> &score,
                                                 const std::string &origin);

} // namespace ingot::codegen
