// Region bytecode: the byte format of one attention mask/score region (compiler -> CPU runtime).
#ifndef INGOT_SCHEMAS_REGION_BYTECODE_H_
#define INGOT_SCHEMAS_REGION_BYTECODE_H_

// This header is the whole contract between the bytecode emitter (codegen/cpu, MLIR) and the
// decoder/evaluator (core/region, no MLIR). It holds only constants, enums and tiny
// inline helpers. The bytes are stored in `AttentionVariantDef.mask_bytecode` /
// `score_bytecode` of the artifact manifest (schemas/artifact.fbs).
//
// Layout (all multi-byte fields little-endian, no padding, no alignment requirement):
//
//   offset  size  field
//   0       4     magic "IRBC"
//   4       2     version (region_bytecode::kVersion); a decoder refuses any other version
//   6       1     region kind (RegionKind: 0 = mask, 1 = score)
//   7       1     number of extra operands the program expects (<= kMaxOperands)
//   8       2     register count (<= kMaxRegisters)
//   10      2     instruction count (including the final yield)
//   12      4     code size in bytes (the instruction stream that follows the operand table)
//   16      2*n   operand table: per extra operand {element type (RegionType), rank}
//   16+2n   code  instruction stream; the file ends exactly where the code ends
//
// Every instruction starts with the same 4-byte prefix:
//
//   byte 0   opcode (RegionOpcode)
//   byte 1   a8: the result type (RegionType) for most opcodes, the predicate for cmpi/cmpf,
//            the argument number for kArgument, 0 for kYield
//   byte 2-3 d16: the destination register (for kYield: the yielded register)
//
// and continues with a format fixed by the opcode (see RegionOpFormat / opcodeFormat):
//
//   kConstant  +8  u64 value bits (iN: zero-extended N bits; index: 64 bits;
//                  f32: the IEEE bits in the low 32 bits, high 32 bits zero)
//   kArgument  +0  a8 = argument number (mask: b,h,q,kv = 0..3, all index;
//                  score: s = 0 (f32), b,h,q,kv = 1..4 (index))
//   kUnary     +2  src
//   kBinary    +4  lhs, rhs
//   kCompare   +4  lhs, rhs (a8 = predicate; both operands of one type; result i1)
//   kSelect    +6  cond (i1), true value, false value (a8 = their type)
//   kCast      +2  src (a8 = destination type; the source type is the register's)
//   kLoad      +2+2r  operand number u8, rank r u8, r index registers (each index)
//   kYield     +0  d16 = yielded register (mask: i1, score: f32); must be last
//
// Registers are SSA: each register is defined by exactly one instruction, before any use, and
// its type is the result type of that instruction. A value of type iN is held as its N low
// bits, zero-extended (the canonical form); every integer result wraps to its width exactly as
// MLIR `arith` does. `index` is a 64-bit integer. Undefined behaviour and poison follow
// MLIR, made safe:
//  - *trapping* ops (MLIR: undefined behaviour): division or remainder by zero, and signed
//    division/remainder of INT_MIN by -1. Evaluation stops with an error status.
//  - *poison-producing* ops (MLIR: poison): shifts by an amount >= the width, and
//    fptosi/fptoui of NaN or of a value outside the destination's range. The evaluator
//    tracks poison per register: it propagates through every op, `select` passes it only
//    from the condition or the chosen value, and it is an error only where MLIR would have
//    undefined behaviour or an unusable result: as a region_load index or as the yielded
//    value. So `select %in_range, %x, %maybe_poison` is well defined, as in MLIR.
//
// Extra operands are dense row-major tensors of element type i1 (one byte per element, any
// nonzero byte reads as 1), i8, i16, i32, i64 or f32. A region_load names the operand, gives
// one index register per dimension, and yields the element as the operand's element type.
// Out-of-range indices are an evaluation error, never an out-of-bounds read.

#include <cstddef>
#include <cstdint>

namespace ingot {
namespace region_bytecode {

/// "IRBC" — Ingot Region ByteCode.
constexpr uint8_t kMagic[4] = {'I', 'R', 'B', 'C'};
/// Bumped on any incompatible change; decoders accept exactly this version.
constexpr uint16_t kVersion = 1;
/// Size of the fixed header before the operand table.
constexpr size_t kHeaderSize = 16;
/// Bytes per operand-table entry: {element type, rank}.
constexpr size_t kOperandEntrySize = 2;
/// Bytes every instruction starts with: opcode, a8, d16.
constexpr size_t kInstructionPrefixSize = 4;

/// Limits a decoder enforces. They bound the evaluator's fixed, on-stack register file
/// (kMaxRegisters * 8 bytes); real regions use tens of registers.
constexpr uint32_t kMaxRegisters = 1024;
constexpr uint32_t kMaxInstructions = 4096;
constexpr uint32_t kMaxOperands = 16;
constexpr uint32_t kMaxOperandRank = 8;

/// Number of region arguments: mask (b, h, q, kv), score (s, b, h, q, kv).
constexpr uint32_t kMaskArgumentCount = 4;
constexpr uint32_t kScoreArgumentCount = 5;

}  // namespace region_bytecode

/// Which region a program implements; decides the arguments and the yielded type.
enum class RegionKind : uint8_t {
  kMask = 0,   ///< (b, h, q, kv: index) -> i1
  kScore = 1,  ///< (s: f32, b, h, q, kv: index) -> f32
};

/// Type of a register or an operand element. Values 1..64 are the integer widths iN
/// (signless, as in MLIR), so `kI1 == 1` and `kI32 == 32`; index and f32 sit above.
enum class RegionType : uint8_t {
  kInvalid = 0,
  kI1 = 1,
  kI8 = 8,
  kI16 = 16,
  kI32 = 32,
  kI64 = 64,
  kIndex = 0x80,  ///< MLIR `index`: a 64-bit integer.
  kF32 = 0x81,
};

/// True for iN (1 <= N <= 64) and index: the types integer ops accept.
constexpr bool isIntegerType(RegionType t) {
  uint8_t v = static_cast<uint8_t>(t);
  return (v >= 1 && v <= 64) || t == RegionType::kIndex;
}
/// True for iN only (not index).
constexpr bool isSignlessIntegerType(RegionType t) {
  uint8_t v = static_cast<uint8_t>(t);
  return v >= 1 && v <= 64;
}
/// Bit width of an integer type (index: 64); 32 for f32; 0 for anything else.
constexpr unsigned typeBitWidth(RegionType t) {
  uint8_t v = static_cast<uint8_t>(t);
  if (v >= 1 && v <= 64) return v;
  if (t == RegionType::kIndex) return 64;
  if (t == RegionType::kF32) return 32;
  return 0;
}
/// Whether a byte names a register type.
constexpr bool isValidType(uint8_t v) {
  return (v >= 1 && v <= 64) || v == 0x80 || v == 0x81;
}
/// Element types an extra operand may have: i1, i8, i16, i32, i64, f32.
constexpr bool isValidOperandElementType(uint8_t v) {
  return v == 1 || v == 8 || v == 16 || v == 32 || v == 64 || v == 0x81;
}
/// Bytes per element of an extra operand in memory (i1 takes one byte).
constexpr size_t operandElementSize(RegionType t) {
  switch (t) {
    case RegionType::kI1:
    case RegionType::kI8: return 1;
    case RegionType::kI16: return 2;
    case RegionType::kI32:
    case RegionType::kF32: return 4;
    case RegionType::kI64: return 8;
    default: return 0;
  }
}

/// The instruction encoding that follows the 4-byte prefix.
enum class RegionOpFormat : uint8_t {
  kInvalid,
  kConstant,  ///< +8: u64 value bits
  kArgument,  ///< +0
  kUnary,     ///< +2: src
  kBinary,    ///< +4: lhs, rhs
  kCompare,   ///< +4: lhs, rhs; a8 = predicate
  kSelect,    ///< +6: cond, true value, false value
  kCast,      ///< +2: src; a8 = destination type
  kLoad,      ///< +2+2*rank: operand u8, rank u8, index registers
  kYield,     ///< +0: d16 = yielded register
};

/// Opcodes. Names follow the MLIR op they encode (`arith.addi` -> kAddI, `math.tanh` ->
/// kTanh). Values are part of the format: never renumber, only add.
enum class RegionOpcode : uint8_t {
  kInvalid = 0x00,
  // Sources.
  kConstant = 0x01,    ///< arith.constant
  kArgument = 0x02,    ///< a region block argument
  kRegionLoad = 0x03,  ///< ingot.region_load
  // Integer binary ops (iN or index; operands and result of one type).
  kAddI = 0x10,
  kSubI = 0x11,
  kMulI = 0x12,
  kDivSI = 0x13,  ///< traps on x / 0 and INT_MIN / -1
  kDivUI = 0x14,  ///< traps on x / 0
  kRemSI = 0x15,  ///< traps on x % 0 and INT_MIN % -1 (as LLVM srem)
  kRemUI = 0x16,  ///< traps on x % 0
  kAndI = 0x17,
  kOrI = 0x18,
  kXOrI = 0x19,
  kShLI = 0x1A,   ///< poison when the (unsigned) shift amount >= width
  kShRSI = 0x1B,  ///< poison when the (unsigned) shift amount >= width
  kShRUI = 0x1C,  ///< poison when the (unsigned) shift amount >= width
  kMaxSI = 0x1D,
  kMinSI = 0x1E,
  kMaxUI = 0x1F,
  kMinUI = 0x20,
  kCmpI = 0x21,  ///< a8 = CmpIPredicate; result i1
  // Integer unary ops.
  kAbsI = 0x28,  ///< math.absi; abs(INT_MIN) wraps to INT_MIN
  // Float binary ops (f32).
  kAddF = 0x30,
  kSubF = 0x31,
  kMulF = 0x32,
  kDivF = 0x33,
  kMaximumF = 0x34,  ///< NaN if either is NaN; -0 < +0
  kMinimumF = 0x35,  ///< NaN if either is NaN; -0 < +0
  kMaxNumF = 0x36,   ///< the non-NaN operand if one is NaN; -0 < +0
  kMinNumF = 0x37,   ///< the non-NaN operand if one is NaN; -0 < +0
  kPowF = 0x38,      ///< math.powf
  kCopySign = 0x39,  ///< math.copysign
  kCmpF = 0x3A,      ///< a8 = CmpFPredicate; result i1
  // Float unary ops (f32).
  kNegF = 0x40,
  kAbsF = 0x41,
  kSqrt = 0x42,
  kRsqrt = 0x43,
  kExp = 0x44,
  kExp2 = 0x45,
  kLog = 0x46,
  kLog2 = 0x47,
  kTanh = 0x48,
  kFloor = 0x49,
  kCeil = 0x4A,
  // Select (a8 = type of the two values; cond is i1).
  kSelect = 0x50,
  // Casts (a8 = destination type).
  kIndexCast = 0x60,    ///< iN <-> index, sign-extending or truncating
  kIndexCastUI = 0x61,  ///< iN <-> index, zero-extending or truncating
  kSIToFP = 0x62,       ///< iN -> f32 (signed), round to nearest even
  kUIToFP = 0x63,       ///< iN -> f32 (unsigned), round to nearest even
  kFPToSI = 0x64,       ///< f32 -> iN, toward zero; poison on NaN / out of range
  kFPToUI = 0x65,       ///< f32 -> iN, toward zero; poison on NaN / out of range
  kExtSI = 0x66,        ///< iM -> iN, N > M
  kExtUI = 0x67,        ///< iM -> iN, N > M
  kTruncI = 0x68,       ///< iM -> iN, N < M
  // Terminator.
  kYield = 0x7F,
};

/// Integer comparison predicates, numbered as MLIR's arith::CmpIPredicate.
enum class CmpIPredicate : uint8_t {
  kEq = 0, kNe = 1, kSlt = 2, kSle = 3, kSgt = 4, kSge = 5, kUlt = 6, kUle = 7, kUgt = 8,
  kUge = 9,
};
constexpr uint8_t kCmpIPredicateCount = 10;

/// Float comparison predicates, numbered as MLIR's arith::CmpFPredicate. `o*` are false
/// when either operand is NaN, `u*` are true when either operand is NaN.
enum class CmpFPredicate : uint8_t {
  kFalse = 0, kOeq = 1, kOgt = 2, kOge = 3, kOlt = 4, kOle = 5, kOne = 6, kOrd = 7,
  kUeq = 8, kUgt = 9, kUge = 10, kUlt = 11, kUle = 12, kUne = 13, kUno = 14, kTrue = 15,
};
constexpr uint8_t kCmpFPredicateCount = 16;

/// The encoding an opcode uses; kInvalid for bytes that are not opcodes.
constexpr RegionOpFormat opcodeFormat(uint8_t op) {
  if (op == 0x01) return RegionOpFormat::kConstant;
  if (op == 0x02) return RegionOpFormat::kArgument;
  if (op == 0x03) return RegionOpFormat::kLoad;
  if (op >= 0x10 && op <= 0x20) return RegionOpFormat::kBinary;
  if (op == 0x21 || op == 0x3A) return RegionOpFormat::kCompare;
  if (op == 0x28) return RegionOpFormat::kUnary;
  if (op >= 0x30 && op <= 0x39) return RegionOpFormat::kBinary;
  if (op >= 0x40 && op <= 0x4A) return RegionOpFormat::kUnary;
  if (op == 0x50) return RegionOpFormat::kSelect;
  if (op >= 0x60 && op <= 0x68) return RegionOpFormat::kCast;
  if (op == 0x7F) return RegionOpFormat::kYield;
  return RegionOpFormat::kInvalid;
}

/// Bytes after the 4-byte prefix for a fixed-size format (kLoad: without the indices).
constexpr size_t formatOperandBytes(RegionOpFormat f) {
  switch (f) {
    case RegionOpFormat::kConstant: return 8;
    case RegionOpFormat::kUnary:
    case RegionOpFormat::kCast:
    case RegionOpFormat::kLoad: return 2;
    case RegionOpFormat::kBinary:
    case RegionOpFormat::kCompare: return 4;
    case RegionOpFormat::kSelect: return 6;
    default: return 0;
  }
}

/// True for integer-typed opcodes (binary ops and absi), false for float ones.
constexpr bool isIntegerOpcode(uint8_t op) { return (op >= 0x10 && op <= 0x20) || op == 0x28; }
/// True for the f32 binary/unary opcodes.
constexpr bool isFloatOpcode(uint8_t op) {
  return (op >= 0x30 && op <= 0x39) || (op >= 0x40 && op <= 0x4A);
}

}  // namespace ingot

#endif  // INGOT_SCHEMAS_REGION_BYTECODE_H_
