// Mask shapes read off a mask program's registers (mask_shapes.h).
#include "core/region/mask_shapes.h"

namespace ingot {
namespace {

/// The positive constant in register `r`, else 0.
int64_t positiveConstant(const std::vector<const RegionInstruction*>& def, uint16_t r) {
  if (r >= def.size() || !def[r] || def[r]->opcode != RegionOpcode::kConstant) return 0;
  const auto w = static_cast<int64_t>(def[r]->imm);
  return w > 0 ? w : 0;
}

}  // namespace

bool isMaskArgument(const std::vector<const RegionInstruction*>& def, uint16_t r, uint8_t arg) {
  return r < def.size() && def[r] && def[r]->opcode == RegionOpcode::kArgument &&
         def[r]->a8 == arg;
}

std::vector<const RegionInstruction*> registerDefinitions(const RegionProgram& program) {
  std::vector<const RegionInstruction*> def(program.registerCount(), nullptr);
  for (const RegionInstruction& ins : program.instructions())
    if (ins.opcode != RegionOpcode::kYield && ins.dst < def.size()) def[ins.dst] = &ins;
  return def;
}

bool isCausalCompare(const std::vector<const RegionInstruction*>& def, uint16_t reg) {
  const RegionInstruction* cmp = reg < def.size() ? def[reg] : nullptr;
  if (!cmp || cmp->opcode != RegionOpcode::kCmpI) return false;
  const auto p = static_cast<CmpIPredicate>(cmp->a8);
  const uint16_t lhs = cmp->src[0], rhs = cmp->src[1];
  // q and kv are non-negative slot indices: signed and unsigned orders agree.
  if ((p == CmpIPredicate::kUle || p == CmpIPredicate::kSle) && isMaskArgument(def, lhs, kMaskArgKv) &&
      isMaskArgument(def, rhs, kMaskArgQ))
    return true;
  return (p == CmpIPredicate::kUge || p == CmpIPredicate::kSge) &&
         isMaskArgument(def, lhs, kMaskArgQ) && isMaskArgument(def, rhs, kMaskArgKv);
}

int64_t windowCompareWidth(const std::vector<const RegionInstruction*>& def, uint16_t reg) {
  const RegionInstruction* cmp = reg < def.size() ? def[reg] : nullptr;
  if (!cmp || cmp->opcode != RegionOpcode::kCmpI) return 0;
  const auto p = static_cast<CmpIPredicate>(cmp->a8);
  if (p != CmpIPredicate::kSlt && p != CmpIPredicate::kUlt) return 0;
  const uint16_t lhs = cmp->src[0], rhs = cmp->src[1];
  const RegionInstruction* l = lhs < def.size() ? def[lhs] : nullptr;
  const RegionInstruction* r = rhs < def.size() ? def[rhs] : nullptr;
  // (q - kv) < W
  if (l && l->opcode == RegionOpcode::kSubI && isMaskArgument(def, l->src[0], kMaskArgQ) &&
      isMaskArgument(def, l->src[1], kMaskArgKv))
    return positiveConstant(def, rhs);
  // q < kv + W (either operand order of the add)
  if (isMaskArgument(def, lhs, kMaskArgQ) && r && r->opcode == RegionOpcode::kAddI) {
    if (isMaskArgument(def, r->src[0], kMaskArgKv)) return positiveConstant(def, r->src[1]);
    if (isMaskArgument(def, r->src[1], kMaskArgKv)) return positiveConstant(def, r->src[0]);
  }
  return 0;
}

}  // namespace ingot
