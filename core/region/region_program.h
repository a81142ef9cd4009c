// RegionProgram: a validated attention mask/score region, ready for the CPU evaluator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/base/status.h"
#include "schemas/region_bytecode.h"

namespace ingot {

/// What a program expects of one extra operand: element type and rank.
struct RegionOperandSpec {
  RegionType element_type = RegionType::kInvalid;
  uint8_t rank = 0;
};

/// A caller's extra operand: a dense row-major tensor (i1 stored as one byte per element).
/// `shape` holds `rank` non-negative extents; `data` holds their product of elements.
struct RegionOperandView {
  RegionType element_type = RegionType::kInvalid;
  const int64_t* shape = nullptr;
  uint32_t rank = 0;
  const void* data = nullptr;
};

/// One decoded instruction. Types are resolved at decode time so the evaluator does no
/// type checks; `src` holds register numbers, all defined by earlier instructions.
struct RegionInstruction {
  RegionOpcode opcode = RegionOpcode::kInvalid;
  /// Predicate (cmpi/cmpf), argument number (kArgument) or operand number (kRegionLoad).
  uint8_t a8 = 0;
  /// Result type (kYield: the yielded type).
  RegionType type = RegionType::kInvalid;
  /// Type of src[0] (used by casts and compares).
  RegionType src_type = RegionType::kInvalid;
  /// Destination register (kYield: unused).
  uint16_t dst = 0;
  /// Source registers: unary/cast/yield use src[0]; binary/compare src[0..1]; select
  /// src[0] = condition, src[1] = true value, src[2] = false value.
  uint16_t src[3] = {0, 0, 0};
  /// How many of src[] are read (for poison propagation); kSelect: 3, handled specially.
  uint8_t num_src = 0;
  /// kRegionLoad: rank and first position of the index registers in loadIndices().
  uint8_t rank = 0;
  uint32_t first_index = 0;
  /// kConstant: the canonical value bits.
  uint64_t imm = 0;
};

/// A fully validated region program. Evaluation never allocates (apart from building an
/// error message) and never reads out of bounds: operands are checked on every load.
/// Thread-safe: evaluation uses an on-stack register file (value and poison bit per register).
class RegionProgram {
 public:
  RegionKind kind() const { return kind_; }
  uint32_t registerCount() const { return register_count_; }
  /// The operands the program expects, in operand-number order.
  const std::vector<RegionOperandSpec>& operandSpecs() const { return operands_; }
  /// Instructions in program order; the last one is the kYield.
  const std::vector<RegionInstruction>& instructions() const { return instructions_; }
  /// Index registers of every kRegionLoad, concatenated (see RegionInstruction::first_index).
  const std::vector<uint16_t>& loadIndices() const { return load_indices_; }

  /// Checks that `operands` has at least as many entries as the program expects, each with
  /// the expected element type and rank, non-negative extents and data when non-empty.
  Status checkOperands(const RegionOperandView* operands, size_t num_operands) const;

  /// Evaluates a mask program at one (b, h, q, kv); true = visible. Errors: a kScore
  /// program, bad operands, an out-of-range region_load, a trapping op, or poison reaching
  /// a load index or the yield.
  StatusOr<bool> evalMask(int64_t b, int64_t h, int64_t q, int64_t kv,
                          const RegionOperandView* operands = nullptr,
                          size_t num_operands = 0) const;

  /// Evaluates a score program at one (s, b, h, q, kv) and returns the new score.
  StatusOr<float> evalScore(float s, int64_t b, int64_t h, int64_t q, int64_t kv,
                            const RegionOperandView* operands = nullptr,
                            size_t num_operands = 0) const;

  /// As evalMask/evalScore, for operands that already passed checkOperands(): attention
  /// checks once per call and then evaluates per (query, head, key) without re-checking.
  StatusOr<bool> evalMaskPrechecked(int64_t b, int64_t h, int64_t q, int64_t kv,
                                    const RegionOperandView* operands, size_t num_operands) const;
  StatusOr<float> evalScorePrechecked(float s, int64_t b, int64_t h, int64_t q, int64_t kv,
                                      const RegionOperandView* operands,
                                      size_t num_operands) const;
  /// The value of integer register `reg` of a mask program at (b, h, q, kv), sign-extended
  /// from its type; only the instructions up to the one defining it run. Lets a backend
  /// evaluate a sub-expression once (e.g. a per-request bound that reads only `b`).
  /// Errors as evalMask, and when `reg` is poison or defined by no instruction.
  StatusOr<int64_t> evalRegisterPrechecked(uint16_t reg, int64_t b, int64_t h, int64_t q,
                                           int64_t kv, const RegionOperandView* operands,
                                           size_t num_operands) const;

 private:
  friend StatusOr<RegionProgram> decodeRegionBytecode(const uint8_t* data, size_t size);

  /// Runs the program with the given argument bits (operands already checked); writes the
  /// yielded register's bits.
  /// With `stop_reg` >= 0, stops after the instruction that defines that register and
  /// writes its bits instead.
  Status run(const uint64_t* args, const RegionOperandView* operands, size_t num_operands,
             uint64_t* result, int stop_reg = -1) const;

  RegionKind kind_ = RegionKind::kMask;
  uint32_t register_count_ = 0;
  std::vector<RegionOperandSpec> operands_;
  std::vector<RegionInstruction> instructions_;
  std::vector<uint16_t> load_indices_;
};

/// Decodes and completely validates region bytecode (see schemas/region_bytecode.h):
/// lengths, magic and version, opcodes, types, register numbers, SSA order, operand numbers
/// and ranks, and one final yield of the region's type. Errors are one line naming the
/// problem (and the instruction). Never reads outside [data, data + size).
StatusOr<RegionProgram> decodeRegionBytecode(const uint8_t* data, size_t size);

/// Convenience overload for a byte vector.
inline StatusOr<RegionProgram> decodeRegionBytecode(const std::vector<uint8_t>& bytes) {
  return decodeRegionBytecode(bytes.data(), bytes.size());
}

}  // namespace ingot
