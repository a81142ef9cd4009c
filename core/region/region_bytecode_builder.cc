// Serializes region programs into the byte format of schemas/region_bytecode.h.
#include "core/region/region_bytecode_builder.h"

#include <cstring>

namespace ingot {

namespace rb = region_bytecode;

uint8_t RegionBytecodeBuilder::addOperand(RegionType element_type, uint8_t rank) {
  operands_.push_back(static_cast<uint8_t>(element_type));
  operands_.push_back(rank);
  return static_cast<uint8_t>(operands_.size() / 2 - 1);
}

RegionBytecodeBuilder::Reg RegionBytecodeBuilder::define(RegionType type) {
  types_.push_back(type);
  return static_cast<Reg>(types_.size() - 1);
}

RegionType RegionBytecodeBuilder::typeOf(Reg r) const {
  return r < types_.size() ? types_[r] : RegionType::kInvalid;
}

void RegionBytecodeBuilder::putU16(uint16_t v) {
  code_.push_back(static_cast<uint8_t>(v));
  code_.push_back(static_cast<uint8_t>(v >> 8));
}

void RegionBytecodeBuilder::putU64(uint64_t v) {
  for (int i = 0; i < 8; ++i) code_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void RegionBytecodeBuilder::prefix(RegionOpcode op, uint8_t a8, uint16_t d16) {
  code_.push_back(static_cast<uint8_t>(op));
  code_.push_back(a8);
  putU16(d16);
  ++instruction_count_;
}

RegionBytecodeBuilder::Reg RegionBytecodeBuilder::argument(uint8_t n) {
  bool is_score_value = kind_ == RegionKind::kScore && n == 0;
  Reg r = define(is_score_value ? RegionType::kF32 : RegionType::kIndex);
  prefix(RegionOpcode::kArgument, n, r);
  return r;
}

RegionBytecodeBuilder::Reg RegionBytecodeBuilder::constantInt(RegionType type, uint64_t value) {
  unsigned width = typeBitWidth(type);
  if (width > 0 && width < 64) value &= (uint64_t{1} << width) - 1;
  Reg r = define(type);
  prefix(RegionOpcode::kConstant, static_cast<uint8_t>(type), r);
  putU64(value);
  return r;
}

RegionBytecodeBuilder::Reg RegionBytecodeBuilder::constantF32(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  Reg r = define(RegionType::kF32);
  prefix(RegionOpcode::kConstant, static_cast<uint8_t>(RegionType::kF32), r);
  putU64(bits);
  return r;
}

RegionBytecodeBuilder::Reg RegionBytecodeBuilder::binary(RegionOpcode op, Reg lhs, Reg rhs) {
  RegionType type = typeOf(lhs);
  Reg r = define(type);
  prefix(op, static_cast<uint8_t>(type), r);
  putU16(lhs);
  putU16(rhs);
  return r;
}

RegionBytecodeBuilder::Reg RegionBytecodeBuilder::unary(RegionOpcode op, Reg src) {
  RegionType type = typeOf(src);
  Reg r = define(type);
  prefix(op, static_cast<uint8_t>(type), r);
  putU16(src);
  return r;
}

RegionBytecodeBuilder::Reg RegionBytecodeBuilder::cmpi(CmpIPredicate predicate, Reg lhs,
                                                        Reg rhs) {
  Reg r = define(RegionType::kI1);
  prefix(RegionOpcode::kCmpI, static_cast<uint8_t>(predicate), r);
  putU16(lhs);
  putU16(rhs);
  return r;
}

RegionBytecodeBuilder::Reg RegionBytecodeBuilder::cmpf(CmpFPredicate predicate, Reg lhs,
                                                        Reg rhs) {
  Reg r = define(RegionType::kI1);
  prefix(RegionOpcode::kCmpF, static_cast<uint8_t>(predicate), r);
  putU16(lhs);
  putU16(rhs);
  return r;
}

RegionBytecodeBuilder::Reg RegionBytecodeBuilder::select(Reg cond, Reg if_true, Reg if_false) {
  RegionType type = typeOf(if_true);
  Reg r = define(type);
  prefix(RegionOpcode::kSelect, static_cast<uint8_t>(type), r);
  putU16(cond);
  putU16(if_true);
  putU16(if_false);
  return r;
}

RegionBytecodeBuilder::Reg RegionBytecodeBuilder::cast(RegionOpcode op, RegionType to, Reg src) {
  Reg r = define(to);
  prefix(op, static_cast<uint8_t>(to), r);
  putU16(src);
  return r;
}

RegionBytecodeBuilder::Reg RegionBytecodeBuilder::load(uint8_t operand,
                                                        const std::vector<Reg>& indices) {
  size_t entry = static_cast<size_t>(operand) * 2;
  RegionType type = entry < operands_.size() ? static_cast<RegionType>(operands_[entry])
                                             : RegionType::kInvalid;
  Reg r = define(type);
  prefix(RegionOpcode::kRegionLoad, static_cast<uint8_t>(type), r);
  code_.push_back(operand);
  code_.push_back(static_cast<uint8_t>(indices.size()));
  for (Reg i : indices) putU16(i);
  return r;
}

void RegionBytecodeBuilder::yield(Reg value) { prefix(RegionOpcode::kYield, 0, value); }

void RegionBytecodeBuilder::emitRaw(uint8_t opcode, uint8_t a8, uint16_t d16,
                                    std::initializer_list<uint16_t> regs, bool has_imm,
                                    uint64_t imm) {
  prefix(static_cast<RegionOpcode>(opcode), a8, d16);
  for (uint16_t r : regs) putU16(r);
  if (has_imm) putU64(imm);
}

std::vector<uint8_t> RegionBytecodeBuilder::finish() const {
  std::vector<uint8_t> out;
  out.reserve(rb::kHeaderSize + operands_.size() + code_.size());
  for (uint8_t c : rb::kMagic) out.push_back(c);
  auto u16 = [&out](uint32_t v) {
    out.push_back(static_cast<uint8_t>(v));
    out.push_back(static_cast<uint8_t>(v >> 8));
  };
  u16(rb::kVersion);
  out.push_back(static_cast<uint8_t>(kind_));
  out.push_back(static_cast<uint8_t>(operands_.size() / 2));
  u16(register_count_override_ >= 0 ? static_cast<uint32_t>(register_count_override_)
                                    : static_cast<uint32_t>(types_.size()));
  u16(instruction_count_);
  uint32_t code_size = static_cast<uint32_t>(code_.size());
  u16(code_size & 0xffff);
  u16(code_size >> 16);
  out.insert(out.end(), operands_.begin(), operands_.end());
  out.insert(out.end(), code_.begin(), code_.end());
  return out;
}

}  // namespace ingot
