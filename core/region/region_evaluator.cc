// Evaluates a validated RegionProgram with a fixed on-stack register file (CPU reference).
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/region/region_disassembler.h"
#include "core/region/region_program.h"

namespace ingot {
namespace {

namespace rb = region_bytecode;

/// Bits of the low `width` bits (width in 1..64).
inline uint64_t widthMask(unsigned width) {
  return width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
}
/// Interprets the canonical `width`-bit value as signed.
inline int64_t signExtend(uint64_t v, unsigned width) {
  if (width >= 64) return static_cast<int64_t>(v);
  unsigned shift = 64 - width;
  return static_cast<int64_t>(v << shift) >> shift;
}
inline float asFloat(uint64_t bits) {
  uint32_t b32 = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &b32, sizeof(f));
  return f;
}
inline uint64_t fromFloat(float f) {
  uint32_t b32;
  std::memcpy(&b32, &f, sizeof(f));
  return b32;
}

/// IEEE-754 2019 maximum/minimum (NaN-propagating) and maximumNumber/minimumNumber
/// (NaN-ignoring); both order -0 below +0.
inline float maxOrdered(float a, float b) {
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
inline float minOrdered(float a, float b) {
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

bool compareInt(uint8_t predicate, uint64_t a, uint64_t b, unsigned width) {
  int64_t sa = signExtend(a, width), sb = signExtend(b, width);
  switch (static_cast<CmpIPredicate>(predicate)) {
    case CmpIPredicate::kEq: return a == b;
    case CmpIPredicate::kNe: return a != b;
    case CmpIPredicate::kSlt: return sa < sb;
    case CmpIPredicate::kSle: return sa <= sb;
    case CmpIPredicate::kSgt: return sa > sb;
    case CmpIPredicate::kSge: return sa >= sb;
    case CmpIPredicate::kUlt: return a < b;
    case CmpIPredicate::kUle: return a <= b;
    case CmpIPredicate::kUgt: return a > b;
    case CmpIPredicate::kUge: return a >= b;
  }
  return false;
}

bool compareFloat(uint8_t predicate, float a, float b) {
  bool unordered = std::isnan(a) || std::isnan(b);
  switch (static_cast<CmpFPredicate>(predicate)) {
    case CmpFPredicate::kFalse: return false;
    case CmpFPredicate::kOeq: return !unordered && a == b;
    case CmpFPredicate::kOgt: return !unordered && a > b;
    case CmpFPredicate::kOge: return !unordered && a >= b;
    case CmpFPredicate::kOlt: return !unordered && a < b;
    case CmpFPredicate::kOle: return !unordered && a <= b;
    case CmpFPredicate::kOne: return !unordered && a != b;
    case CmpFPredicate::kOrd: return !unordered;
    case CmpFPredicate::kUeq: return unordered || a == b;
    case CmpFPredicate::kUgt: return unordered || a > b;
    case CmpFPredicate::kUge: return unordered || a >= b;
    case CmpFPredicate::kUlt: return unordered || a < b;
    case CmpFPredicate::kUle: return unordered || a <= b;
    case CmpFPredicate::kUne: return unordered || a != b;
    case CmpFPredicate::kUno: return unordered;
    case CmpFPredicate::kTrue: return true;
  }
  return false;
}

Status trap(size_t n, RegionOpcode op, const char* what) {
  return invalidArgument("region evaluation: instruction " + std::to_string(n) + " (" +
                         regionOpcodeName(op) + "): " + what);
}

}  // namespace

Status RegionProgram::checkOperands(const RegionOperandView* operands,
                                    size_t num_operands) const {
  if (num_operands < operands_.size()) {
    return invalidArgument("region evaluation: program expects " +
                           std::to_string(operands_.size()) + " operands, got " +
                           std::to_string(num_operands));
  }
  // Messages are built only on failure: this runs on every evaluation.
  auto fail = [](size_t i, const std::string& what) {
    return invalidArgument("region evaluation: operand #" + std::to_string(i) + " " + what);
  };
  for (size_t i = 0; i < operands_.size(); ++i) {
    const RegionOperandView& view = operands[i];
    const RegionOperandSpec& spec = operands_[i];
    if (view.element_type != spec.element_type) {
      return fail(i, "has element type " + regionTypeName(view.element_type) + ", expected " +
                         regionTypeName(spec.element_type));
    }
    if (view.rank != spec.rank) {
      return fail(i, "has rank " + std::to_string(view.rank) + ", expected " +
                         std::to_string(spec.rank));
    }
    if (view.rank != 0 && view.shape == nullptr) return fail(i, "has no shape");
    bool empty = false;
    for (uint32_t d = 0; d < view.rank; ++d) {
      if (view.shape[d] < 0) return fail(i, "has a negative extent");
      empty = empty || view.shape[d] == 0;
    }
    if (!empty && view.data == nullptr) return fail(i, "has no data");
  }
  return okStatus();
}

StatusOr<bool> RegionProgram::evalMask(int64_t b, int64_t h, int64_t q, int64_t kv,
                                       const RegionOperandView* operands,
                                       size_t num_operands) const {
  if (!operands_.empty()) INGOT_RETURN_IF_ERROR(checkOperands(operands, num_operands));
  return evalMaskPrechecked(b, h, q, kv, operands, num_operands);
}

StatusOr<bool> RegionProgram::evalMaskPrechecked(int64_t b, int64_t h, int64_t q, int64_t kv,
                                                 const RegionOperandView* operands,
                                                 size_t num_operands) const {
  if (kind_ != RegionKind::kMask) {
    return invalidArgument("region evaluation: evalMask on a score program");
  }
  const uint64_t args[4] = {static_cast<uint64_t>(b), static_cast<uint64_t>(h),
                            static_cast<uint64_t>(q), static_cast<uint64_t>(kv)};
  uint64_t result = 0;
  INGOT_RETURN_IF_ERROR(run(args, operands, num_operands, &result));
  return result != 0;
}

StatusOr<float> RegionProgram::evalScore(float s, int64_t b, int64_t h, int64_t q, int64_t kv,
                                         const RegionOperandView* operands,
                                         size_t num_operands) const {
  if (!operands_.empty()) INGOT_RETURN_IF_ERROR(checkOperands(operands, num_operands));
  return evalScorePrechecked(s, b, h, q, kv, operands, num_operands);
}

StatusOr<float> RegionProgram::evalScorePrechecked(float s, int64_t b, int64_t h, int64_t q,
                                                   int64_t kv, const RegionOperandView* operands,
                                                   size_t num_operands) const {
  if (kind_ != RegionKind::kScore) {
    return invalidArgument("region evaluation: evalScore on a mask program");
  }
  const uint64_t args[5] = {fromFloat(s), static_cast<uint64_t>(b), static_cast<uint64_t>(h),
                            static_cast<uint64_t>(q), static_cast<uint64_t>(kv)};
  uint64_t result = 0;
  INGOT_RETURN_IF_ERROR(run(args, operands, num_operands, &result));
  return asFloat(result);
}

StatusOr<int64_t> RegionProgram::evalRegisterPrechecked(uint16_t reg, int64_t b, int64_t h,
                                                        int64_t q, int64_t kv,
                                                        const RegionOperandView* operands,
                                                        size_t num_operands) const {
  if (kind_ != RegionKind::kMask) {
    return invalidArgument("region evaluation: evalRegister on a score program");
  }
  const RegionInstruction* def = nullptr;
  for (const RegionInstruction& ins : instructions_)
    if (ins.opcode != RegionOpcode::kYield && ins.dst == reg) def = &ins;
  if (def == nullptr || def->type == RegionType::kF32) {
    return invalidArgument("region evaluation: no integer register %" + std::to_string(reg));
  }
  const uint64_t args[4] = {static_cast<uint64_t>(b), static_cast<uint64_t>(h),
                            static_cast<uint64_t>(q), static_cast<uint64_t>(kv)};
  uint64_t bits = 0;
  INGOT_RETURN_IF_ERROR(run(args, operands, num_operands, &bits, reg));
  return signExtend(bits, typeBitWidth(def->type));
}

Status RegionProgram::run(const uint64_t* args, const RegionOperandView* operands,
                          size_t num_operands, uint64_t* result, int stop_reg) const {
  // The decoder guarantees every register read below was written earlier in this run.
  // poison[r] marks MLIR poison (see schemas/region_bytecode.h); it becomes an error only
  // as a load index or as the yielded value.
  uint64_t reg[rb::kMaxRegisters];
  bool poison[rb::kMaxRegisters];
  std::memset(reg, 0, sizeof(uint64_t) * register_count_);  // src slots of unused operands
  std::memset(poison, 0, sizeof(bool) * register_count_);
  const size_t count = instructions_.size();
  for (size_t n = 0; n < count; ++n) {
    const RegionInstruction& in = instructions_[n];
    const uint64_t x = reg[in.src[0]];
    const uint64_t y = reg[in.src[1]];
    const unsigned w = typeBitWidth(in.type);
    const uint64_t m = widthMask(w);
    uint64_t out = 0;
    bool out_poison = false;
    switch (in.num_src) {
      case 3:  // select: the condition, and the chosen value only
        out_poison = poison[in.src[0]] || poison[x != 0 ? in.src[1] : in.src[2]];
        break;
      case 2: out_poison = poison[in.src[0]] || poison[in.src[1]]; break;
      case 1: out_poison = poison[in.src[0]]; break;
      default: break;
    }
    switch (in.opcode) {
      case RegionOpcode::kConstant: out = in.imm; break;
      case RegionOpcode::kArgument: out = args[in.a8]; break;
      case RegionOpcode::kRegionLoad: {
        const RegionOperandView& view = operands[in.a8];
        uint64_t offset = 0;
        for (uint32_t d = 0; d < in.rank; ++d) {
          const uint16_t index_reg = load_indices_[in.first_index + d];
          if (poison[index_reg]) {
            return invalidArgument("region evaluation: instruction " + std::to_string(n) +
                                   " (region_load): index of dim " + std::to_string(d) +
                                   " is poison");
          }
          const int64_t i = static_cast<int64_t>(reg[index_reg]);
          if (i < 0 || i >= view.shape[d]) {
            return invalidArgument("region evaluation: instruction " + std::to_string(n) +
                                   " (region_load): index " + std::to_string(i) + " of dim " +
                                   std::to_string(d) + " of operand #" +
                                   std::to_string(in.a8) + " out of range [0, " +
                                   std::to_string(view.shape[d]) + ")");
          }
          offset = offset * static_cast<uint64_t>(view.shape[d]) + static_cast<uint64_t>(i);
        }
        const uint8_t* base = static_cast<const uint8_t*>(view.data);
        switch (in.type) {
          case RegionType::kI1: out = base[offset] != 0; break;
          case RegionType::kI8: out = base[offset]; break;
          case RegionType::kI16: {
            uint16_t v;
            std::memcpy(&v, base + offset * 2, 2);
            out = v;
            break;
          }
          case RegionType::kI32:
          case RegionType::kF32: {
            uint32_t v;
            std::memcpy(&v, base + offset * 4, 4);
            out = v;
            break;
          }
          default: std::memcpy(&out, base + offset * 8, 8); break;
        }
        break;
      }
      case RegionOpcode::kAddI: out = (x + y) & m; break;
      case RegionOpcode::kSubI: out = (x - y) & m; break;
      case RegionOpcode::kMulI: out = (x * y) & m; break;
      case RegionOpcode::kDivSI:
      case RegionOpcode::kRemSI: {
        const int64_t a = signExtend(x, w), b = signExtend(y, w);
        if (b == 0) return trap(n, in.opcode, "division by zero");
        const int64_t min = w >= 64 ? std::numeric_limits<int64_t>::min()
                                    : -static_cast<int64_t>(uint64_t{1} << (w - 1));
        if (a == min && b == -1) return trap(n, in.opcode, "signed division overflow");
        out = static_cast<uint64_t>(in.opcode == RegionOpcode::kDivSI ? a / b : a % b) & m;
        break;
      }
      case RegionOpcode::kDivUI:
        if (y == 0) return trap(n, in.opcode, "division by zero");
        out = x / y;
        break;
      case RegionOpcode::kRemUI:
        if (y == 0) return trap(n, in.opcode, "division by zero");
        out = x % y;
        break;
      case RegionOpcode::kAndI: out = x & y; break;
      case RegionOpcode::kOrI: out = x | y; break;
      case RegionOpcode::kXOrI: out = x ^ y; break;
      case RegionOpcode::kShLI:
      case RegionOpcode::kShRSI:
      case RegionOpcode::kShRUI:
        if (y >= w) {
          out_poison = true;  // MLIR: poison, not undefined behaviour
        } else if (in.opcode == RegionOpcode::kShLI) {
          out = (x << y) & m;
        } else if (in.opcode == RegionOpcode::kShRUI) {
          out = x >> y;
        } else {
          out = static_cast<uint64_t>(signExtend(x, w) >> y) & m;
        }
        break;
      case RegionOpcode::kMaxSI: out = signExtend(x, w) >= signExtend(y, w) ? x : y; break;
      case RegionOpcode::kMinSI: out = signExtend(x, w) <= signExtend(y, w) ? x : y; break;
      case RegionOpcode::kMaxUI: out = x >= y ? x : y; break;
      case RegionOpcode::kMinUI: out = x <= y ? x : y; break;
      case RegionOpcode::kCmpI: out = compareInt(in.a8, x, y, typeBitWidth(in.src_type)); break;
      case RegionOpcode::kAbsI: {
        const int64_t a = signExtend(x, w);
        out = (a < 0 ? uint64_t{0} - x : x) & m;
        break;
      }
      case RegionOpcode::kAddF: out = fromFloat(asFloat(x) + asFloat(y)); break;
      case RegionOpcode::kSubF: out = fromFloat(asFloat(x) - asFloat(y)); break;
      case RegionOpcode::kMulF: out = fromFloat(asFloat(x) * asFloat(y)); break;
      case RegionOpcode::kDivF: out = fromFloat(asFloat(x) / asFloat(y)); break;
      case RegionOpcode::kMaximumF:
      case RegionOpcode::kMinimumF: {
        const float a = asFloat(x), b = asFloat(y);
        if (std::isnan(a) || std::isnan(b)) {
          out = fromFloat(std::numeric_limits<float>::quiet_NaN());
        } else {
          out = fromFloat(in.opcode == RegionOpcode::kMaximumF ? maxOrdered(a, b)
                                                                : minOrdered(a, b));
        }
        break;
      }
      case RegionOpcode::kMaxNumF:
      case RegionOpcode::kMinNumF: {
        const float a = asFloat(x), b = asFloat(y);
        if (std::isnan(a)) {
          out = y;
        } else if (std::isnan(b)) {
          out = x;
        } else {
          out = fromFloat(in.opcode == RegionOpcode::kMaxNumF ? maxOrdered(a, b)
                                                               : minOrdered(a, b));
        }
        break;
      }
      case RegionOpcode::kPowF: out = fromFloat(std::pow(asFloat(x), asFloat(y))); break;
      case RegionOpcode::kCopySign:
        out = fromFloat(std::copysign(asFloat(x), asFloat(y)));
        break;
      case RegionOpcode::kCmpF: out = compareFloat(in.a8, asFloat(x), asFloat(y)); break;
      case RegionOpcode::kNegF: out = x ^ 0x80000000u; break;
      case RegionOpcode::kAbsF: out = x & 0x7fffffffu; break;
      case RegionOpcode::kSqrt: out = fromFloat(std::sqrt(asFloat(x))); break;
      case RegionOpcode::kRsqrt: out = fromFloat(1.0f / std::sqrt(asFloat(x))); break;
      case RegionOpcode::kExp: out = fromFloat(std::exp(asFloat(x))); break;
      case RegionOpcode::kExp2: out = fromFloat(std::exp2(asFloat(x))); break;
      case RegionOpcode::kLog: out = fromFloat(std::log(asFloat(x))); break;
      case RegionOpcode::kLog2: out = fromFloat(std::log2(asFloat(x))); break;
      case RegionOpcode::kTanh: out = fromFloat(std::tanh(asFloat(x))); break;
      case RegionOpcode::kFloor: out = fromFloat(std::floor(asFloat(x))); break;
      case RegionOpcode::kCeil: out = fromFloat(std::ceil(asFloat(x))); break;
      case RegionOpcode::kSelect: out = x != 0 ? y : reg[in.src[2]]; break;
      case RegionOpcode::kIndexCast:
        // iN -> index sign-extends; index -> iN truncates.
        out = static_cast<uint64_t>(signExtend(x, typeBitWidth(in.src_type))) & m;
        break;
      case RegionOpcode::kIndexCastUI:
      case RegionOpcode::kExtUI:
      case RegionOpcode::kTruncI:
        out = x & m;
        break;
      case RegionOpcode::kExtSI:
        out = static_cast<uint64_t>(signExtend(x, typeBitWidth(in.src_type))) & m;
        break;
      case RegionOpcode::kSIToFP:
        out = fromFloat(static_cast<float>(signExtend(x, typeBitWidth(in.src_type))));
        break;
      case RegionOpcode::kUIToFP: out = fromFloat(static_cast<float>(x)); break;
      case RegionOpcode::kFPToSI:
      case RegionOpcode::kFPToUI: {
        const float f = asFloat(x);
        if (std::isnan(f)) {
          out_poison = true;
          break;
        }
        const double t = std::trunc(static_cast<double>(f));
        const bool is_signed = in.opcode == RegionOpcode::kFPToSI;
        // Representable range of the destination: signed [-2^(w-1), 2^(w-1)), unsigned
        // [0, 2^w); the bounds are powers of two, so exact in double.
        const double lo = is_signed ? -std::ldexp(1.0, static_cast<int>(w) - 1) : 0.0;
        const double hi = std::ldexp(1.0, is_signed ? static_cast<int>(w) - 1 : static_cast<int>(w));
        if (!(t >= lo && t < hi)) {
          out_poison = true;
          break;
        }
        out = is_signed ? static_cast<uint64_t>(static_cast<int64_t>(t)) & m
                        : static_cast<uint64_t>(t) & m;
        break;
      }
      case RegionOpcode::kYield:
        if (out_poison) {
          return invalidArgument(
              "region evaluation: the yielded value is poison (an out-of-range shift or "
              "float-to-integer conversion reached it)");
        }
        *result = x;
        return okStatus();
      case RegionOpcode::kInvalid:
        break;
    }
    reg[in.dst] = out;
    poison[in.dst] = out_poison;
    if (static_cast<int>(in.dst) == stop_reg) {
      if (out_poison) {
        return invalidArgument("region evaluation: register %" + std::to_string(stop_reg) +
                               " is poison");
      }
      *result = out;
      return okStatus();
    }
  }
  return internalError("region evaluation: program ended without yield");
}

}  // namespace ingot
