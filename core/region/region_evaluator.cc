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

// The helpers below run once per instruction of the evaluator's dispatch loop: they are
// forced inline so every case stays straight-line code under the one switch, and the
// errors they report are built by separate cold functions.

/// Element `offset` of operand data of element type `type`, zero-extended (i1 as 0 or 1).
[[gnu::always_inline]] inline uint64_t loadElement(const uint8_t* base, uint64_t offset,
                                                   RegionType type) {
  switch (type) {
    case RegionType::kI1: return base[offset] != 0;
    case RegionType::kI8: return base[offset];
    case RegionType::kI16: {
      uint16_t v;
      std::memcpy(&v, base + offset * 2, 2);
      return v;
    }
    case RegionType::kI32:
    case RegionType::kF32: {
      uint32_t v;
      std::memcpy(&v, base + offset * 4, 4);
      return v;
    }
    default: {
      uint64_t v;
      std::memcpy(&v, base + offset * 8, 8);
      return v;
    }
  }
}

/// Row-major offset of the element kRegionLoad `in` reads from `view`, into `*offset`.
/// Returns the first dimension whose index is poison or out of range, or -1 when none is.
[[gnu::always_inline]] inline int elementOffset(const RegionInstruction& in,
                                                const RegionOperandView& view,
                                                const uint16_t* load_indices, const uint64_t* reg,
                                                const bool* poison, uint64_t* offset) {
  uint64_t result = 0;
  for (uint32_t d = 0; d < in.rank; ++d) {
    const uint16_t index_reg = load_indices[in.first_index + d];
    if (poison[index_reg]) return static_cast<int>(d);
    const int64_t i = static_cast<int64_t>(reg[index_reg]);
    if (i < 0 || i >= view.shape[d]) return static_cast<int>(d);
    result = result * static_cast<uint64_t>(view.shape[d]) + static_cast<uint64_t>(i);
  }
  *offset = result;
  return -1;
}

/// Performs kRegionLoad `in` of `view` into `*out`; false (reading nothing) when an index
/// is poison or out of range.
[[gnu::always_inline]] inline bool loadOperand(const RegionInstruction& in,
                                               const RegionOperandView& view,
                                               const uint16_t* load_indices, const uint64_t* reg,
                                               const bool* poison, uint64_t* out) {
  uint64_t offset = 0;
  if (elementOffset(in, view, load_indices, reg, poison, &offset) >= 0) return false;
  *out = loadElement(static_cast<const uint8_t*>(view.data), offset, in.type);
  return true;
}

/// The error of kRegionLoad `in` (instruction `n`) when loadOperand() failed: names the
/// first index that is poison or out of range.
[[gnu::cold, gnu::noinline]] Status loadError(size_t n, const RegionInstruction& in,
                                               const RegionOperandView& view,
                                               const uint16_t* load_indices,
                                               const uint64_t* reg, const bool* poison) {
  uint64_t offset = 0;
  const uint32_t d =
      static_cast<uint32_t>(elementOffset(in, view, load_indices, reg, poison, &offset));
  const uint16_t index_reg = load_indices[in.first_index + d];
  if (poison[index_reg]) {
    return invalidArgument("region evaluation: instruction " + std::to_string(n) +
                           " (region_load): index of dim " + std::to_string(d) + " is poison");
  }
  const int64_t i = static_cast<int64_t>(reg[index_reg]);
  return invalidArgument("region evaluation: instruction " + std::to_string(n) +
                         " (region_load): index " + std::to_string(i) + " of dim " +
                         std::to_string(d) + " of operand #" + std::to_string(in.a8) +
                         " out of range [0, " + std::to_string(view.shape[d]) + ")");
}

/// kDivSI / kRemSI of `w`-bit values into `*out`; returns why it traps, or nullptr.
[[gnu::always_inline]] inline const char* divideSigned(RegionOpcode op, uint64_t x, uint64_t y,
                                                       unsigned w, uint64_t m, uint64_t* out) {
  const int64_t a = signExtend(x, w), b = signExtend(y, w);
  if (b == 0) return "division by zero";
  const int64_t min = w >= 64 ? std::numeric_limits<int64_t>::min()
                              : -static_cast<int64_t>(uint64_t{1} << (w - 1));
  if (a == min && b == -1) return "signed division overflow";
  *out = static_cast<uint64_t>(op == RegionOpcode::kDivSI ? a / b : a % b) & m;
  return nullptr;
}

/// kShLI / kShRSI / kShRUI of a `w`-bit value; an amount >= w sets `*out_poison` (MLIR:
/// poison, not undefined behaviour) and gives 0.
[[gnu::always_inline]] inline uint64_t shift(RegionOpcode op, uint64_t x, uint64_t y, unsigned w,
                                             uint64_t m, bool* out_poison) {
  if (y >= w) {
    *out_poison = true;
    return 0;
  }
  if (op == RegionOpcode::kShLI) return (x << y) & m;
  if (op == RegionOpcode::kShRUI) return x >> y;
  return static_cast<uint64_t>(signExtend(x, w) >> y) & m;
}

/// kMaximumF / kMinimumF of f32 bits: NaN if either is NaN.
[[gnu::always_inline]] inline uint64_t nanPropagatingMinMax(uint64_t x, uint64_t y, bool max) {
  const float a = asFloat(x), b = asFloat(y);
  if (std::isnan(a) || std::isnan(b)) return fromFloat(std::numeric_limits<float>::quiet_NaN());
  return fromFloat(max ? maxOrdered(a, b) : minOrdered(a, b));
}

/// kMaxNumF / kMinNumF of f32 bits: the other operand if one is NaN.
[[gnu::always_inline]] inline uint64_t nanIgnoringMinMax(uint64_t x, uint64_t y, bool max) {
  const float a = asFloat(x), b = asFloat(y);
  if (std::isnan(a)) return y;
  if (std::isnan(b)) return x;
  return fromFloat(max ? maxOrdered(a, b) : minOrdered(a, b));
}

/// kFPToSI / kFPToUI of f32 bits to a `w`-bit integer, toward zero; NaN or a value out of
/// range sets `*out_poison` and gives 0.
[[gnu::always_inline]] inline uint64_t floatToInt(uint64_t x, bool is_signed, unsigned w,
                                                  uint64_t m, bool* out_poison) {
  const float f = asFloat(x);
  if (std::isnan(f)) {
    *out_poison = true;
    return 0;
  }
  const double t = std::trunc(static_cast<double>(f));
  // Representable range of the destination: signed [-2^(w-1), 2^(w-1)), unsigned
  // [0, 2^w); the bounds are powers of two, so exact in double.
  const double lo = is_signed ? -std::ldexp(1.0, static_cast<int>(w) - 1) : 0.0;
  const double hi = std::ldexp(1.0, is_signed ? static_cast<int>(w) - 1 : static_cast<int>(w));
  if (!(t >= lo && t < hi)) {
    *out_poison = true;
    return 0;
  }
  return is_signed ? static_cast<uint64_t>(static_cast<int64_t>(t)) & m
                   : static_cast<uint64_t>(t) & m;
}

/// The error when poison reaches the yield.
[[gnu::cold, gnu::noinline]] Status yieldPoisonError() {
  return invalidArgument(
      "region evaluation: the yielded value is poison (an out-of-range shift or "
      "float-to-integer conversion reached it)");
}

/// The error when the register evalRegisterPrechecked() asked for is poison.
[[gnu::cold, gnu::noinline]] Status registerPoisonError(int reg) {
  return invalidArgument("region evaluation: register %" + std::to_string(reg) + " is poison");
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
      case RegionOpcode::kRegionLoad:
        if (!loadOperand(in, operands[in.a8], load_indices_.data(), reg, poison, &out)) {
          return loadError(n, in, operands[in.a8], load_indices_.data(), reg, poison);
        }
        break;
      case RegionOpcode::kAddI: out = (x + y) & m; break;
      case RegionOpcode::kSubI: out = (x - y) & m; break;
      case RegionOpcode::kMulI: out = (x * y) & m; break;
      case RegionOpcode::kDivSI:
      case RegionOpcode::kRemSI:
        if (const char* what = divideSigned(in.opcode, x, y, w, m, &out)) {
          return trap(n, in.opcode, what);
        }
        break;
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
      case RegionOpcode::kShRUI: out = shift(in.opcode, x, y, w, m, &out_poison); break;
      case RegionOpcode::kMaxSI: out = signExtend(x, w) >= signExtend(y, w) ? x : y; break;
      case RegionOpcode::kMinSI: out = signExtend(x, w) <= signExtend(y, w) ? x : y; break;
      case RegionOpcode::kMaxUI: out = x >= y ? x : y; break;
      case RegionOpcode::kMinUI: out = x <= y ? x : y; break;
      case RegionOpcode::kCmpI: out = compareInt(in.a8, x, y, typeBitWidth(in.src_type)); break;
      case RegionOpcode::kAbsI: out = (signExtend(x, w) < 0 ? uint64_t{0} - x : x) & m; break;
      case RegionOpcode::kAddF: out = fromFloat(asFloat(x) + asFloat(y)); break;
      case RegionOpcode::kSubF: out = fromFloat(asFloat(x) - asFloat(y)); break;
      case RegionOpcode::kMulF: out = fromFloat(asFloat(x) * asFloat(y)); break;
      case RegionOpcode::kDivF: out = fromFloat(asFloat(x) / asFloat(y)); break;
      case RegionOpcode::kMaximumF: out = nanPropagatingMinMax(x, y, true); break;
      case RegionOpcode::kMinimumF: out = nanPropagatingMinMax(x, y, false); break;
      case RegionOpcode::kMaxNumF: out = nanIgnoringMinMax(x, y, true); break;
      case RegionOpcode::kMinNumF: out = nanIgnoringMinMax(x, y, false); break;
      case RegionOpcode::kPowF: out = fromFloat(std::pow(asFloat(x), asFloat(y))); break;
      case RegionOpcode::kCopySign: out = fromFloat(std::copysign(asFloat(x), asFloat(y))); break;
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
      case RegionOpcode::kIndexCast:  // iN -> index sign-extends; index -> iN truncates
      case RegionOpcode::kExtSI:
        out = static_cast<uint64_t>(signExtend(x, typeBitWidth(in.src_type))) & m;
        break;
      case RegionOpcode::kIndexCastUI:
      case RegionOpcode::kExtUI:
      case RegionOpcode::kTruncI: out = x & m; break;
      case RegionOpcode::kSIToFP:
        out = fromFloat(static_cast<float>(signExtend(x, typeBitWidth(in.src_type))));
        break;
      case RegionOpcode::kUIToFP: out = fromFloat(static_cast<float>(x)); break;
      case RegionOpcode::kFPToSI: out = floatToInt(x, true, w, m, &out_poison); break;
      case RegionOpcode::kFPToUI: out = floatToInt(x, false, w, m, &out_poison); break;
      case RegionOpcode::kYield:
        if (out_poison) return yieldPoisonError();
        *result = x;
        return okStatus();
      case RegionOpcode::kInvalid: break;
    }
    reg[in.dst] = out;
    poison[in.dst] = out_poison;
    if (static_cast<int>(in.dst) == stop_reg) {
      if (out_poison) return registerPoisonError(stop_reg);
      *result = out;
      return okStatus();
    }
  }
  return internalError("region evaluation: program ended without yield");
}

}  // namespace ingot
