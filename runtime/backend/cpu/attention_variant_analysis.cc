// The mask shapes the CPU attention runs without the region interpreter: causal, a
// speculative tree's prefix bound, a sliding window (AttentionVariantPrograms::analyze).
#include "runtime/backend/cpu/paged_attention.h"

#include <cstdint>
#include <vector>

#include "core/region/mask_shapes.h"

namespace ingot {
namespace {

/// Whether register `reg` depends on no mask argument but `b` (constants, loads indexed by
/// such values and arithmetic on them).
bool readsOnlyRequest(const RegionProgram& program,
                      const std::vector<const RegionInstruction*>& def, uint16_t reg) {
  std::vector<uint16_t> work{reg};
  std::vector<bool> seen(def.size(), false);
  while (!work.empty()) {
    const uint16_t r = work.back();
    work.pop_back();
    if (seen[r]) continue;
    seen[r] = true;
    const RegionInstruction* ins = def[r];
    if (!ins) return false;
    if (ins->opcode == RegionOpcode::kArgument) {
      if (ins->a8 != kMaskArgB) return false;
      continue;
    }
    for (uint8_t i = 0; i < ins->num_src && i < 3; ++i) work.push_back(ins->src[i]);
    if (ins->opcode == RegionOpcode::kRegionLoad)
      for (uint32_t d = 0; d < ins->rank; ++d)
        work.push_back(program.loadIndices()[ins->first_index + d]);
  }
  return true;
}

/// E when `reg` is the compare kv < E (signed) or E > kv with E reading only `b`; else -1.
/// (Unsigned compares are left alone: a negative E would then make every key visible.)
int prefixBound(const RegionProgram& program, const std::vector<const RegionInstruction*>& def,
                uint16_t reg) {
  const RegionInstruction* cmp = def[reg];
  if (!cmp || cmp->opcode != RegionOpcode::kCmpI) return -1;
  auto isKv = [&](uint16_t r) { return isMaskArgument(def, r, kMaskArgKv); };
  const auto p = static_cast<CmpIPredicate>(cmp->a8);
  int bound = -1;
  if (p == CmpIPredicate::kSlt && isKv(cmp->src[0])) bound = cmp->src[1];
  if (p == CmpIPredicate::kSgt && isKv(cmp->src[1])) bound = cmp->src[0];
  if (bound < 0 || !readsOnlyRequest(program, def, static_cast<uint16_t>(bound))) return -1;
  return bound;
}

/// True when `program` is exactly: q, kv arguments, one compare meaning kv <= q, yield.
bool isCausalMask(const RegionProgram& program) {
  int qReg = -1, kvReg = -1, cmpReg = -1;
  const RegionInstruction* cmp = nullptr;
  for (const RegionInstruction& ins : program.instructions()) {
    switch (ins.opcode) {
      case RegionOpcode::kArgument:
        if (ins.a8 == kMaskArgQ) qReg = ins.dst;
        else if (ins.a8 == kMaskArgKv) kvReg = ins.dst;
        break;
      case RegionOpcode::kCmpI:
        if (cmp) return false;
        cmp = &ins;
        cmpReg = ins.dst;
        break;
      case RegionOpcode::kYield:
        if (!cmp || ins.src[0] != cmpReg) return false;
        break;
      default:
        return false;
    }
  }
  if (!cmp || qReg < 0 || kvReg < 0) return false;
  const auto p = static_cast<CmpIPredicate>(cmp->a8);
  const int lhs = cmp->src[0], rhs = cmp->src[1];
  // q and kv are non-negative, so signed and unsigned orders agree.
  if ((p == CmpIPredicate::kUle || p == CmpIPredicate::kSle) && lhs == kvReg && rhs == qReg)
    return true;
  if ((p == CmpIPredicate::kUge || p == CmpIPredicate::kSge) && lhs == qReg && rhs == kvReg)
    return true;
  return false;
}

}  // namespace

void AttentionVariantPrograms::analyze() {
  mask_reads_head = false;
  mask_is_causal = false;
  window = 0;
  if (!mask) return;
  for (const RegionInstruction& ins : mask->instructions())
    if (ins.opcode == RegionOpcode::kArgument && ins.a8 == kMaskArgHead) mask_reads_head = true;
  mask_is_causal = isCausalMask(*mask);
  mask_implies_causal = mask_is_causal;
  prefix_bound_reg = -1;
  if (mask_is_causal) return;
  const std::vector<const RegionInstruction*> def = registerDefinitions(*mask);
  // yield(andi(rest, window)) in either order, the window (q - kv) < W or q < kv + W
  // (windowCompareWidth): `rest` is analyzed below.
  uint16_t root = mask->instructions().back().src[0];
  if (const RegionInstruction* outer = def[root]; outer && outer->opcode == RegionOpcode::kAndI)
    for (int side = 0; side < 2 && window == 0; ++side)
      if (int64_t w = windowCompareWidth(def, outer->src[side]); w > 0) {
        window = w;
        root = outer->src[1 - side];
      }
  if (window > 0 && isCausalCompare(def, root)) {
    mask_is_causal = mask_implies_causal = true;
    return;
  }
  // andi(causal, rest) in either order; rest = ori(kv < E, ...) in either order.
  const RegionInstruction* conj = def[root];
  if (!conj || conj->opcode != RegionOpcode::kAndI) return;
  for (int side = 0; side < 2; ++side) {
    if (!isCausalCompare(def, conj->src[side])) continue;
    mask_implies_causal = true;
    const RegionInstruction* disj = def[conj->src[1 - side]];
    if (!disj || disj->opcode != RegionOpcode::kOrI) return;
    for (int alt = 0; alt < 2 && prefix_bound_reg < 0; ++alt)
      prefix_bound_reg = prefixBound(*mask, def, disj->src[alt]);
    return;
  }
}

}  // namespace ingot
