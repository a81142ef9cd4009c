// Decodes region bytecode and validates every field before anything evaluates it.
#include <cstring>
#include <string>

#include "core/region/region_disassembler.h"
#include "core/region/region_program.h"

namespace ingot {
namespace {

namespace rb = region_bytecode;

uint16_t readU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t readU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t readU64(const uint8_t* p) {
  return static_cast<uint64_t>(readU32(p)) | (static_cast<uint64_t>(readU32(p + 4)) << 32);
}

Status corrupt(const std::string& message) { return dataLoss("region bytecode: " + message); }

/// Validates one instruction stream against the header; fills the program as it goes.
class Validator {
 public:
  Validator(RegionKind kind, uint32_t register_count, const std::vector<RegionOperandSpec>& ops)
      : kind_(kind), register_count_(register_count), operands_(ops),
        types_(register_count, RegionType::kInvalid) {}

  /// Decodes instruction number `n` at `p` (`left` bytes remain); sets `*consumed`.
  Status decode(uint32_t n, uint32_t count, const uint8_t* p, size_t left, size_t* consumed,
                RegionInstruction* out, std::vector<uint16_t>* load_indices) {
    prefix_ = "instruction " + std::to_string(n);
    if (left < rb::kInstructionPrefixSize) return fail("truncated");
    uint8_t op = p[0];
    RegionOpFormat format = opcodeFormat(op);
    if (format == RegionOpFormat::kInvalid) {
      return fail("unknown opcode 0x" + hex(op));
    }
    prefix_ += " (" + std::string(regionOpcodeName(static_cast<RegionOpcode>(op))) + ")";
    size_t size = rb::kInstructionPrefixSize + formatOperandBytes(format);
    if (left < size) return fail("truncated");
    if (format == RegionOpFormat::kLoad) {
      size += 2 * static_cast<size_t>(p[5]);
      if (left < size) return fail("truncated");
    }
    *consumed = size;

    RegionInstruction& inst = *out;
    inst.opcode = static_cast<RegionOpcode>(op);
    inst.a8 = p[1];
    uint16_t d16 = readU16(p + 2);
    const uint8_t* rest = p + rb::kInstructionPrefixSize;
    bool is_last = n + 1 == count;
    if (format == RegionOpFormat::kYield) {
      if (!is_last) return fail("yield before the last instruction");
      if (inst.a8 != 0) return fail("nonzero reserved byte");
      RegionType want = kind_ == RegionKind::kMask ? RegionType::kI1 : RegionType::kF32;
      INGOT_RETURN_IF_ERROR(use(d16, want, &inst.src[0]));
      inst.num_src = 1;
      inst.type = want;
      inst.src_type = want;
      return okStatus();
    }
    if (is_last) return fail("the last instruction must be yield");

    switch (format) {
      case RegionOpFormat::kConstant:
        INGOT_RETURN_IF_ERROR(decodeConstant(rest, &inst));
        break;
      case RegionOpFormat::kArgument:
        INGOT_RETURN_IF_ERROR(decodeArgument(&inst));
        break;
      case RegionOpFormat::kUnary:
      case RegionOpFormat::kBinary:
        INGOT_RETURN_IF_ERROR(decodeArithmetic(format, op, rest, &inst));
        break;
      case RegionOpFormat::kCompare:
        INGOT_RETURN_IF_ERROR(decodeCompare(rest, &inst));
        break;
      case RegionOpFormat::kSelect:
        INGOT_RETURN_IF_ERROR(decodeSelect(rest, &inst));
        break;
      case RegionOpFormat::kCast:
        INGOT_RETURN_IF_ERROR(decodeCast(rest, &inst));
        break;
      case RegionOpFormat::kLoad:
        INGOT_RETURN_IF_ERROR(decodeLoad(rest, &inst, load_indices));
        break;
      default:
        return fail("internal: unhandled format");
    }
    return define(d16, inst.type, &inst.dst);
  }

 private:
  /// Checks a constant's type byte and that its immediate fits the type's width.
  Status decodeConstant(const uint8_t* rest, RegionInstruction* out) const {
    RegionInstruction& inst = *out;
    INGOT_RETURN_IF_ERROR(validType(inst.a8));
    inst.type = static_cast<RegionType>(inst.a8);
    inst.imm = readU64(rest);
    unsigned width = typeBitWidth(inst.type);
    if (width < 64 && (inst.imm >> width) != 0) {
      return fail("constant has bits above its " + regionTypeName(inst.type) + " width");
    }
    return okStatus();
  }

  /// Checks an argument number against the region kind and sets the argument's type.
  Status decodeArgument(RegionInstruction* out) const {
    RegionInstruction& inst = *out;
    uint32_t args = kind_ == RegionKind::kMask ? rb::kMaskArgumentCount
                                               : rb::kScoreArgumentCount;
    if (inst.a8 >= args) return fail("argument " + std::to_string(inst.a8) + " out of range");
    bool is_score_value = kind_ == RegionKind::kScore && inst.a8 == 0;
    inst.type = is_score_value ? RegionType::kF32 : RegionType::kIndex;
    return okStatus();
  }

  /// Checks a unary or binary op: its result type and its operands of that same type.
  Status decodeArithmetic(RegionOpFormat format, uint8_t op, const uint8_t* rest,
                          RegionInstruction* out) const {
    RegionInstruction& inst = *out;
    INGOT_RETURN_IF_ERROR(validType(inst.a8));
    inst.type = static_cast<RegionType>(inst.a8);
    if (isIntegerOpcode(op) ? !isIntegerType(inst.type) : inst.type != RegionType::kF32) {
      return fail("result type " + regionTypeName(inst.type) + " not allowed");
    }
    INGOT_RETURN_IF_ERROR(use(readU16(rest), inst.type, &inst.src[0]));
    inst.num_src = 1;
    if (format == RegionOpFormat::kBinary) {
      INGOT_RETURN_IF_ERROR(use(readU16(rest + 2), inst.type, &inst.src[1]));
      inst.num_src = 2;
    }
    inst.src_type = inst.type;
    return okStatus();
  }

  /// Checks a comparison: its predicate and two operands of one allowed type (result i1).
  Status decodeCompare(const uint8_t* rest, RegionInstruction* out) const {
    RegionInstruction& inst = *out;
    bool is_int = inst.opcode == RegionOpcode::kCmpI;
    uint8_t limit = is_int ? kCmpIPredicateCount : kCmpFPredicateCount;
    if (inst.a8 >= limit) return fail("predicate " + std::to_string(inst.a8) + " out of range");
    INGOT_RETURN_IF_ERROR(use(readU16(rest), RegionType::kInvalid, &inst.src[0]));
    inst.src_type = types_[inst.src[0]];
    if (is_int ? !isIntegerType(inst.src_type) : inst.src_type != RegionType::kF32) {
      return fail("operand type " + regionTypeName(inst.src_type) + " not allowed");
    }
    INGOT_RETURN_IF_ERROR(use(readU16(rest + 2), inst.src_type, &inst.src[1]));
    inst.num_src = 2;
    inst.type = RegionType::kI1;
    return okStatus();
  }

  /// Checks a select: an i1 condition and two operands of the result type.
  Status decodeSelect(const uint8_t* rest, RegionInstruction* out) const {
    RegionInstruction& inst = *out;
    INGOT_RETURN_IF_ERROR(validType(inst.a8));
    inst.type = static_cast<RegionType>(inst.a8);
    INGOT_RETURN_IF_ERROR(use(readU16(rest), RegionType::kI1, &inst.src[0]));
    INGOT_RETURN_IF_ERROR(use(readU16(rest + 2), inst.type, &inst.src[1]));
    INGOT_RETURN_IF_ERROR(use(readU16(rest + 4), inst.type, &inst.src[2]));
    inst.num_src = 3;
    inst.src_type = inst.type;
    return okStatus();
  }

  /// Checks a cast: its result type, its operand and that the cast between them is allowed.
  Status decodeCast(const uint8_t* rest, RegionInstruction* out) const {
    RegionInstruction& inst = *out;
    INGOT_RETURN_IF_ERROR(validType(inst.a8));
    inst.type = static_cast<RegionType>(inst.a8);
    INGOT_RETURN_IF_ERROR(use(readU16(rest), RegionType::kInvalid, &inst.src[0]));
    inst.src_type = types_[inst.src[0]];
    inst.num_src = 1;
    return checkCast(inst.opcode, inst.src_type, inst.type);
  }

  /// Checks a load against its operand's rank and element type; appends its index registers.
  Status decodeLoad(const uint8_t* rest, RegionInstruction* out,
                    std::vector<uint16_t>* load_indices) const {
    RegionInstruction& inst = *out;
    uint8_t operand = rest[0];
    inst.rank = rest[1];
    if (operand >= operands_.size()) {
      return fail("operand #" + std::to_string(operand) + " out of range (program has " +
                  std::to_string(operands_.size()) + ")");
    }
    const RegionOperandSpec& spec = operands_[operand];
    if (inst.rank != spec.rank) {
      return fail("operand #" + std::to_string(operand) + " has rank " +
                  std::to_string(spec.rank) + ", load gives " + std::to_string(inst.rank) +
                  " indices");
    }
    if (inst.a8 != static_cast<uint8_t>(spec.element_type)) {
      return fail("result type does not match operand #" + std::to_string(operand) +
                  " element type " + regionTypeName(spec.element_type));
    }
    inst.type = spec.element_type;
    inst.a8 = operand;
    inst.first_index = static_cast<uint32_t>(load_indices->size());
    for (uint32_t i = 0; i < inst.rank; ++i) {
      uint16_t reg = 0;
      INGOT_RETURN_IF_ERROR(use(readU16(rest + 2 + 2 * i), RegionType::kIndex, &reg));
      load_indices->push_back(reg);
    }
    return okStatus();
  }

  static std::string hex(uint8_t v) {
    const char* digits = "0123456789abcdef";
    return std::string{digits[v >> 4], digits[v & 15]};
  }
  Status fail(const std::string& message) const { return corrupt(prefix_ + ": " + message); }

  Status validType(uint8_t t) const {
    if (!isValidType(t)) return fail("invalid type byte 0x" + hex(t));
    return okStatus();
  }

  /// A read of register `r`, which must be defined; `want` (unless kInvalid) is its type.
  Status use(uint16_t r, RegionType want, uint16_t* out) const {
    if (r >= register_count_) {
      return fail("register %" + std::to_string(r) + " out of range (" +
                  std::to_string(register_count_) + " registers)");
    }
    if (types_[r] == RegionType::kInvalid) {
      return fail("register %" + std::to_string(r) + " used before definition");
    }
    if (want != RegionType::kInvalid && types_[r] != want) {
      return fail("register %" + std::to_string(r) + " has type " + regionTypeName(types_[r]) +
                  ", expected " + regionTypeName(want));
    }
    *out = r;
    return okStatus();
  }

  Status define(uint16_t r, RegionType type, uint16_t* out) {
    if (r >= register_count_) {
      return fail("destination %" + std::to_string(r) + " out of range (" +
                  std::to_string(register_count_) + " registers)");
    }
    if (types_[r] != RegionType::kInvalid) {
      return fail("register %" + std::to_string(r) + " defined twice");
    }
    types_[r] = type;
    *out = r;
    return okStatus();
  }

  Status checkCast(RegionOpcode op, RegionType from, RegionType to) const {
    bool ok = false;
    switch (op) {
      case RegionOpcode::kIndexCast:
      case RegionOpcode::kIndexCastUI:
        ok = (from == RegionType::kIndex && isSignlessIntegerType(to)) ||
             (isSignlessIntegerType(from) && to == RegionType::kIndex);
        break;
      case RegionOpcode::kSIToFP:
      case RegionOpcode::kUIToFP:
        ok = isSignlessIntegerType(from) && to == RegionType::kF32;
        break;
      case RegionOpcode::kFPToSI:
      case RegionOpcode::kFPToUI:
        ok = from == RegionType::kF32 && isSignlessIntegerType(to);
        break;
      case RegionOpcode::kExtSI:
      case RegionOpcode::kExtUI:
        ok = isSignlessIntegerType(from) && isSignlessIntegerType(to) &&
             typeBitWidth(to) > typeBitWidth(from);
        break;
      case RegionOpcode::kTruncI:
        ok = isSignlessIntegerType(from) && isSignlessIntegerType(to) &&
             typeBitWidth(to) < typeBitWidth(from);
        break;
      default:
        break;
    }
    if (!ok) {
      return fail("cannot cast " + regionTypeName(from) + " to " + regionTypeName(to));
    }
    return okStatus();
  }

  RegionKind kind_;
  uint32_t register_count_;
  const std::vector<RegionOperandSpec>& operands_;
  std::vector<RegionType> types_;
  std::string prefix_;
};

}  // namespace

StatusOr<RegionProgram> decodeRegionBytecode(const uint8_t* data, size_t size) {
  if (data == nullptr && size != 0) return invalidArgument("region bytecode: null data");
  if (size < rb::kHeaderSize) {
    return corrupt("truncated header (" + std::to_string(size) + " bytes, need " +
                   std::to_string(rb::kHeaderSize) + ")");
  }
  if (std::memcmp(data, rb::kMagic, sizeof(rb::kMagic)) != 0) return corrupt("bad magic");
  uint16_t version = readU16(data + 4);
  if (version != rb::kVersion) {
    return unimplemented("region bytecode: version " + std::to_string(version) +
                         " is not supported (this runtime reads version " +
                         std::to_string(rb::kVersion) + ")");
  }
  uint8_t kind = data[6];
  if (kind > static_cast<uint8_t>(RegionKind::kScore)) {
    return corrupt("unknown region kind " + std::to_string(kind));
  }
  uint32_t operand_count = data[7];
  uint32_t register_count = readU16(data + 8);
  uint32_t instruction_count = readU16(data + 10);
  uint32_t code_size = readU32(data + 12);
  if (operand_count > rb::kMaxOperands) {
    return corrupt(std::to_string(operand_count) + " operands exceed the limit of " +
                   std::to_string(rb::kMaxOperands));
  }
  if (register_count > rb::kMaxRegisters) {
    return corrupt(std::to_string(register_count) + " registers exceed the limit of " +
                   std::to_string(rb::kMaxRegisters));
  }
  if (instruction_count == 0) return corrupt("no instructions (a yield is required)");
  if (instruction_count > rb::kMaxInstructions) {
    return corrupt(std::to_string(instruction_count) + " instructions exceed the limit of " +
                   std::to_string(rb::kMaxInstructions));
  }
  size_t table_end = rb::kHeaderSize + rb::kOperandEntrySize * operand_count;
  if (size < table_end) return corrupt("truncated operand table");
  if (size - table_end != code_size) {
    return corrupt("code size " + std::to_string(code_size) + " does not match the " +
                   std::to_string(size - table_end) + " bytes after the operand table");
  }

  RegionProgram program;
  program.kind_ = static_cast<RegionKind>(kind);
  program.register_count_ = register_count;
  for (uint32_t i = 0; i < operand_count; ++i) {
    const uint8_t* entry = data + rb::kHeaderSize + rb::kOperandEntrySize * i;
    if (!isValidOperandElementType(entry[0])) {
      return corrupt("operand #" + std::to_string(i) + ": element type " +
                     std::to_string(entry[0]) + " not allowed");
    }
    if (entry[1] > rb::kMaxOperandRank) {
      return corrupt("operand #" + std::to_string(i) + ": rank " + std::to_string(entry[1]) +
                     " exceeds the limit of " + std::to_string(rb::kMaxOperandRank));
    }
    program.operands_.push_back({static_cast<RegionType>(entry[0]), entry[1]});
  }

  Validator validator(program.kind_, register_count, program.operands_);
  program.instructions_.resize(instruction_count);
  const uint8_t* p = data + table_end;
  size_t left = code_size;
  for (uint32_t n = 0; n < instruction_count; ++n) {
    size_t consumed = 0;
    INGOT_RETURN_IF_ERROR(validator.decode(n, instruction_count, p, left, &consumed,
                                           &program.instructions_[n], &program.load_indices_));
    p += consumed;
    left -= consumed;
  }
  if (left != 0) {
    return corrupt(std::to_string(left) + " trailing bytes after the final yield");
  }
  return program;
}

}  // namespace ingot
