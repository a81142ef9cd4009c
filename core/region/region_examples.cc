// Builds the example attention variants (causal, sliding window, ALiBi, soft-cap, document,
// tree) as region bytecode.
#include "core/region/region_examples.h"

#include "core/region/region_bytecode_builder.h"

namespace ingot {
namespace {

using Reg = RegionBytecodeBuilder::Reg;
// Mask argument numbers (b, h, q, kv) and score argument numbers (s, b, h, q, kv).
constexpr uint8_t kMaskB = 0, kMaskQ = 2, kMaskKv = 3;
constexpr uint8_t kScoreS = 0, kScoreH = 2, kScoreQ = 3, kScoreKv = 4;

}  // namespace

std::vector<uint8_t> causalMaskBytecode() {
  RegionBytecodeBuilder b(RegionKind::kMask);
  Reg q = b.argument(kMaskQ);
  Reg kv = b.argument(kMaskKv);
  b.yield(b.cmpi(CmpIPredicate::kUle, kv, q));
  return b.finish();
}

std::vector<uint8_t> slidingWindowMaskBytecode(int64_t window) {
  RegionBytecodeBuilder b(RegionKind::kMask);
  Reg q = b.argument(kMaskQ);
  Reg kv = b.argument(kMaskKv);
  Reg causal = b.cmpi(CmpIPredicate::kUle, kv, q);
  Reg distance = b.binary(RegionOpcode::kSubI, q, kv);
  Reg width = b.constantIndex(window);
  Reg in_window = b.cmpi(CmpIPredicate::kSlt, distance, width);
  b.yield(b.binary(RegionOpcode::kAndI, causal, in_window));
  return b.finish();
}

std::vector<uint8_t> alibiScoreBytecode(int64_t num_heads) {
  RegionBytecodeBuilder b(RegionKind::kScore);
  Reg s = b.argument(kScoreS);
  Reg h = b.argument(kScoreH);
  Reg q = b.argument(kScoreQ);
  Reg kv = b.argument(kScoreKv);
  // One value per statement, so the instruction order does not depend on the C++
  // compiler's argument evaluation order.
  auto toF32 = [&b](Reg index) {
    Reg i64 = b.cast(RegionOpcode::kIndexCast, RegionType::kI64, index);
    return b.cast(RegionOpcode::kSIToFP, RegionType::kF32, i64);
  };
  Reg one = b.constantIndex(1);
  Reg h1 = toF32(b.binary(RegionOpcode::kAddI, h, one));
  Reg minus_eight = b.constantF32(-8.0f);
  Reg heads = b.constantF32(static_cast<float>(num_heads));
  Reg exponent = b.binary(RegionOpcode::kDivF, b.binary(RegionOpcode::kMulF, minus_eight, h1),
                          heads);
  Reg slope = b.unary(RegionOpcode::kExp2, exponent);
  Reg distance = toF32(b.binary(RegionOpcode::kSubI, q, kv));
  Reg bias = b.binary(RegionOpcode::kMulF, slope, distance);
  b.yield(b.binary(RegionOpcode::kSubF, s, bias));
  return b.finish();
}

std::vector<uint8_t> softcapScoreBytecode(float cap) {
  RegionBytecodeBuilder b(RegionKind::kScore);
  Reg s = b.argument(kScoreS);
  Reg c = b.constantF32(cap);
  Reg scaled = b.binary(RegionOpcode::kDivF, s, c);
  Reg t = b.unary(RegionOpcode::kTanh, scaled);
  b.yield(b.binary(RegionOpcode::kMulF, c, t));
  return b.finish();
}

std::vector<uint8_t> documentMaskBytecode() {
  RegionBytecodeBuilder b(RegionKind::kMask);
  uint8_t doc_ids = b.addOperand(RegionType::kI32, 2);
  Reg req = b.argument(kMaskB);
  Reg q = b.argument(kMaskQ);
  Reg kv = b.argument(kMaskKv);
  Reg causal = b.cmpi(CmpIPredicate::kUle, kv, q);
  Reg doc_q = b.load(doc_ids, {req, q});
  Reg doc_kv = b.load(doc_ids, {req, kv});
  Reg same = b.cmpi(CmpIPredicate::kEq, doc_q, doc_kv);
  b.yield(b.binary(RegionOpcode::kAndI, causal, same));
  return b.finish();
}

std::vector<uint8_t> treeMaskBytecode(int64_t window) {
  RegionBytecodeBuilder b(RegionKind::kMask);
  uint8_t tree_start = b.addOperand(RegionType::kI32, 1);
  uint8_t tree_bits = b.addOperand(RegionType::kI32, 3);
  Reg req = b.argument(kMaskB);
  Reg q = b.argument(kMaskQ);
  Reg kv = b.argument(kMaskKv);
  Reg zero = b.constantIndex(0);
  Reg thirty_two = b.constantIndex(32);
  Reg one = b.constantInt(RegionType::kI32, 1);
  Reg zero_i32 = b.constantInt(RegionType::kI32, 0);
  Reg start_i32 = b.load(tree_start, {req});
  Reg start = b.cast(RegionOpcode::kIndexCast, RegionType::kIndex, start_i32);
  // Node numbers of q and kv within the tree, clamped to 0 so the load stays in bounds
  // for prefix slots (straight-line code evaluates every load).
  Reg node_q = b.binary(RegionOpcode::kMaxSI, b.binary(RegionOpcode::kSubI, q, start), zero);
  Reg node_kv = b.binary(RegionOpcode::kMaxSI, b.binary(RegionOpcode::kSubI, kv, start), zero);
  Reg word = b.binary(RegionOpcode::kDivUI, node_kv, thirty_two);
  Reg bit = b.binary(RegionOpcode::kRemUI, node_kv, thirty_two);
  Reg bits = b.load(tree_bits, {req, node_q, word});
  Reg bit_i32 = b.cast(RegionOpcode::kIndexCast, RegionType::kI32, bit);
  Reg shifted = b.binary(RegionOpcode::kShRUI, bits, bit_i32);
  Reg ancestor = b.cmpi(CmpIPredicate::kNe, b.binary(RegionOpcode::kAndI, shifted, one), zero_i32);
  Reg kv_in_prefix = b.cmpi(CmpIPredicate::kSlt, kv, start);
  Reg causal = b.cmpi(CmpIPredicate::kUle, kv, q);
  // A prefix slot follows the causal rule; a tree slot also needs its ancestor bit.
  Reg allowed = b.binary(RegionOpcode::kOrI, kv_in_prefix, ancestor);
  Reg visible = b.binary(RegionOpcode::kAndI, causal, allowed);
  if (window > 0) {
    Reg distance = b.binary(RegionOpcode::kSubI, q, kv);
    Reg in_window = b.cmpi(CmpIPredicate::kUlt, distance, b.constantIndex(window));
    visible = b.binary(RegionOpcode::kAndI, visible, in_window);
  }
  b.yield(visible);
  return b.finish();
}

std::vector<RegionExample> regionExamples() {
  return {
      {"causal", RegionKind::kMask, causalMaskBytecode()},
      {"sliding_window", RegionKind::kMask, slidingWindowMaskBytecode(4)},
      {"alibi", RegionKind::kScore, alibiScoreBytecode(8)},
      {"softcap", RegionKind::kScore, softcapScoreBytecode(30.0f)},
      {"document_mask", RegionKind::kMask, documentMaskBytecode()},
      {"tree_mask", RegionKind::kMask, treeMaskBytecode()},
  };
}

}  // namespace ingot
