// Prints region programs as text, one instruction per line, in MLIR-like syntax.
#include "core/region/region_disassembler.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

namespace ingot {
namespace {

const char* const kMaskArgNames[] = {"b", "h", "q", "kv"};
const char* const kScoreArgNames[] = {"s", "b", "h", "q", "kv"};

std::string reg(uint16_t r) { return "%" + std::to_string(r); }

float asFloat(uint64_t bits) {
  uint32_t b32 = static_cast<uint32_t>(bits);
  float f;
  static_assert(sizeof(f) == sizeof(b32), "f32 is 32 bits");
  std::memcpy(&f, &b32, sizeof(f));
  return f;
}

std::string constantText(RegionType type, uint64_t bits) {
  char buf[64];
  if (type == RegionType::kF32) {
    std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(asFloat(bits)));
    return buf;
  }
  if (type == RegionType::kI1) return bits ? "true" : "false";
  unsigned width = typeBitWidth(type);
  int64_t v = static_cast<int64_t>(bits);
  if (width < 64) {
    unsigned shift = 64 - width;
    v = static_cast<int64_t>(bits << shift) >> shift;
  }
  std::snprintf(buf, sizeof(buf), "%" PRId64, v);
  return buf;
}

}  // namespace

const char* regionOpcodeName(RegionOpcode opcode) {
  switch (opcode) {
    case RegionOpcode::kInvalid: return "?";
    case RegionOpcode::kConstant: return "constant";
    case RegionOpcode::kArgument: return "arg";
    case RegionOpcode::kRegionLoad: return "region_load";
    case RegionOpcode::kAddI: return "addi";
    case RegionOpcode::kSubI: return "subi";
    case RegionOpcode::kMulI: return "muli";
    case RegionOpcode::kDivSI: return "divsi";
    case RegionOpcode::kDivUI: return "divui";
    case RegionOpcode::kRemSI: return "remsi";
    case RegionOpcode::kRemUI: return "remui";
    case RegionOpcode::kAndI: return "andi";
    case RegionOpcode::kOrI: return "ori";
    case RegionOpcode::kXOrI: return "xori";
    case RegionOpcode::kShLI: return "shli";
    case RegionOpcode::kShRSI: return "shrsi";
    case RegionOpcode::kShRUI: return "shrui";
    case RegionOpcode::kMaxSI: return "maxsi";
    case RegionOpcode::kMinSI: return "minsi";
    case RegionOpcode::kMaxUI: return "maxui";
    case RegionOpcode::kMinUI: return "minui";
    case RegionOpcode::kCmpI: return "cmpi";
    case RegionOpcode::kAbsI: return "absi";
    case RegionOpcode::kAddF: return "addf";
    case RegionOpcode::kSubF: return "subf";
    case RegionOpcode::kMulF: return "mulf";
    case RegionOpcode::kDivF: return "divf";
    case RegionOpcode::kMaximumF: return "maximumf";
    case RegionOpcode::kMinimumF: return "minimumf";
    case RegionOpcode::kMaxNumF: return "maxnumf";
    case RegionOpcode::kMinNumF: return "minnumf";
    case RegionOpcode::kPowF: return "powf";
    case RegionOpcode::kCopySign: return "copysign";
    case RegionOpcode::kCmpF: return "cmpf";
    case RegionOpcode::kNegF: return "negf";
    case RegionOpcode::kAbsF: return "absf";
    case RegionOpcode::kSqrt: return "sqrt";
    case RegionOpcode::kRsqrt: return "rsqrt";
    case RegionOpcode::kExp: return "exp";
    case RegionOpcode::kExp2: return "exp2";
    case RegionOpcode::kLog: return "log";
    case RegionOpcode::kLog2: return "log2";
    case RegionOpcode::kTanh: return "tanh";
    case RegionOpcode::kFloor: return "floor";
    case RegionOpcode::kCeil: return "ceil";
    case RegionOpcode::kSelect: return "select";
    case RegionOpcode::kIndexCast: return "index_cast";
    case RegionOpcode::kIndexCastUI: return "index_castui";
    case RegionOpcode::kSIToFP: return "sitofp";
    case RegionOpcode::kUIToFP: return "uitofp";
    case RegionOpcode::kFPToSI: return "fptosi";
    case RegionOpcode::kFPToUI: return "fptoui";
    case RegionOpcode::kExtSI: return "extsi";
    case RegionOpcode::kExtUI: return "extui";
    case RegionOpcode::kTruncI: return "trunci";
    case RegionOpcode::kYield: return "yield";
  }
  return "?";
}

std::string regionTypeName(RegionType type) {
  if (type == RegionType::kIndex) return "index";
  if (type == RegionType::kF32) return "f32";
  if (isSignlessIntegerType(type)) return "i" + std::to_string(static_cast<unsigned>(type));
  return "?";
}

const char* cmpIPredicateName(uint8_t predicate) {
  static const char* const kNames[] = {"eq",  "ne",  "slt", "sle", "sgt",
                                       "sge", "ult", "ule", "ugt", "uge"};
  return predicate < kCmpIPredicateCount ? kNames[predicate] : "?";
}

const char* cmpFPredicateName(uint8_t predicate) {
  static const char* const kNames[] = {"false", "oeq", "ogt", "oge", "olt", "ole",
                                       "one",   "ord", "ueq", "ugt", "uge", "ult",
                                       "ule",   "une", "uno", "true"};
  return predicate < kCmpFPredicateCount ? kNames[predicate] : "?";
}

std::string disassembleRegion(const RegionProgram& program) {
  const bool is_mask = program.kind() == RegionKind::kMask;
  const auto& insts = program.instructions();
  std::string text = std::string(is_mask ? "mask" : "score") + " region: " +
                     std::to_string(program.registerCount()) + " registers, " +
                     std::to_string(insts.size()) + " instructions, " +
                     std::to_string(program.operandSpecs().size()) + " operands\n";
  for (size_t i = 0; i < program.operandSpecs().size(); ++i) {
    const RegionOperandSpec& spec = program.operandSpecs()[i];
    text += "operand #" + std::to_string(i) + ": " + regionTypeName(spec.element_type) +
            ", rank " + std::to_string(spec.rank) + "\n";
  }
  for (const RegionInstruction& in : insts) {
    const std::string type = regionTypeName(in.type);
    const std::string name = regionOpcodeName(in.opcode);
    std::string line;
    switch (opcodeFormat(static_cast<uint8_t>(in.opcode))) {
      case RegionOpFormat::kConstant:
        line = "constant " + constantText(in.type, in.imm) + " : " + type;
        break;
      case RegionOpFormat::kArgument:
        line = std::string("arg ") + (is_mask ? kMaskArgNames[in.a8] : kScoreArgNames[in.a8]) +
               " : " + type;
        break;
      case RegionOpFormat::kUnary:
        line = name + " " + reg(in.src[0]) + " : " + type;
        break;
      case RegionOpFormat::kBinary:
        line = name + " " + reg(in.src[0]) + ", " + reg(in.src[1]) + " : " + type;
        break;
      case RegionOpFormat::kCompare:
        line = name + " " +
               (in.opcode == RegionOpcode::kCmpI ? cmpIPredicateName(in.a8)
                                                 : cmpFPredicateName(in.a8)) +
               ", " + reg(in.src[0]) + ", " + reg(in.src[1]) + " : " +
               regionTypeName(in.src_type);
        break;
      case RegionOpFormat::kSelect:
        line = name + " " + reg(in.src[0]) + ", " + reg(in.src[1]) + ", " + reg(in.src[2]) +
               " : " + type;
        break;
      case RegionOpFormat::kCast:
        line = name + " " + reg(in.src[0]) + " : " + regionTypeName(in.src_type) + " to " + type;
        break;
      case RegionOpFormat::kLoad: {
        line = name + " #" + std::to_string(in.a8) + "[";
        for (uint32_t d = 0; d < in.rank; ++d) {
          if (d) line += ", ";
          line += reg(program.loadIndices()[in.first_index + d]);
        }
        line += "] : " + type;
        break;
      }
      case RegionOpFormat::kYield:
        text += "yield " + reg(in.src[0]) + " : " + type + "\n";
        continue;
      case RegionOpFormat::kInvalid:
        line = "?";
        break;
    }
    text += reg(in.dst) + " = " + line + "\n";
  }
  return text;
}

}  // namespace ingot
