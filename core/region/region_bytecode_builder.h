// RegionBytecodeBuilder: writes region bytecode (used by the MLIR emitter, tests, fuzz seeds).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "schemas/region_bytecode.h"

namespace ingot {

/// Appends instructions in SSA order, numbering result registers 0, 1, 2, ... and tracking
/// their types, then serializes header + operand table + code. It does not validate: the
/// decoder is the single judge, so tests can also build malformed programs with emitRaw().
/// Plain C++ without exceptions, so MLIR code (built with -fno-exceptions) can use it.
class RegionBytecodeBuilder {
 public:
  using Reg = uint16_t;

  explicit RegionBytecodeBuilder(RegionKind kind) : kind_(kind) {}

  RegionKind kind() const { return kind_; }

  /// Declares the next extra operand (element type, rank); returns its operand number.
  uint8_t addOperand(RegionType element_type, uint8_t rank);

  /// Region argument `n` (mask: b,h,q,kv = 0..3; score: s,b,h,q,kv = 0..4).
  Reg argument(uint8_t n);
  /// An integer constant of type iN/index; `value` is wrapped to the width.
  Reg constantInt(RegionType type, uint64_t value);
  Reg constantIndex(int64_t value) { return constantInt(RegionType::kIndex, value); }
  Reg constantBool(bool value) { return constantInt(RegionType::kI1, value ? 1 : 0); }
  Reg constantF32(float value);

  /// A binary op (integer or float); the result type is lhs's type.
  Reg binary(RegionOpcode op, Reg lhs, Reg rhs);
  /// A unary op (absi or a float op); the result type is src's type.
  Reg unary(RegionOpcode op, Reg src);
  Reg cmpi(CmpIPredicate predicate, Reg lhs, Reg rhs);
  Reg cmpf(CmpFPredicate predicate, Reg lhs, Reg rhs);
  Reg select(Reg cond, Reg if_true, Reg if_false);
  /// A cast of `src` to `to`.
  Reg cast(RegionOpcode op, RegionType to, Reg src);
  /// ingot.region_load of operand `operand` at `indices` (index registers).
  Reg load(uint8_t operand, const std::vector<Reg>& indices);
  /// The terminator.
  void yield(Reg value);

  /// Type of a register made by this builder (kInvalid if unknown).
  RegionType typeOf(Reg r) const;

  /// Appends one raw instruction: prefix (opcode, a8, d16) then `regs` as u16 and `imm` as
  /// u64 if `has_imm`. No checks, no type tracking; for tests and fuzz seeds.
  void emitRaw(uint8_t opcode, uint8_t a8, uint16_t d16, std::initializer_list<uint16_t> regs,
               bool has_imm = false, uint64_t imm = 0);
  /// Overrides the register count written by finish() (default: registers allocated).
  void setRegisterCount(uint16_t count) { register_count_override_ = count; }

  /// Serializes the program (header, operand table, code).
  std::vector<uint8_t> finish() const;

 private:
  Reg define(RegionType type);
  void prefix(RegionOpcode op, uint8_t a8, uint16_t d16);
  void putU16(uint16_t v);
  void putU64(uint64_t v);

  RegionKind kind_;
  std::vector<uint8_t> operands_;  // {element type, rank} pairs
  std::vector<uint8_t> code_;
  std::vector<RegionType> types_;
  uint32_t instruction_count_ = 0;
  int32_t register_count_override_ = -1;
};

}  // namespace ingot
