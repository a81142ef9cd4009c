//===- ingot-variant-opcases.cpp - One attention variant per region op, as CUDA C++ ===//
//
// Build-time generator for the host test of the CUDA region emitter: builds, with
// RegionBytecodeBuilder, a small region per (opcode, type) the bytecode supports, emits
// each as a variant struct and writes them with a table the test walks. Integer results
// are observed one bit at a time (the mask yields bit `h` of the result), so every bit of
// every op is compared with the CPU evaluator. Plain C++: no MLIR.
//
//   ingot-variant-opcases <output.h>
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "codegen/cuda/AttentionRegionEmitter.h"
#include "core/region/region_bytecode_builder.h"

namespace {

using ingot::CmpFPredicate;
using ingot::CmpIPredicate;
using ingot::RegionBytecodeBuilder;
using ingot::RegionKind;
using ingot::RegionOpcode;
using ingot::RegionType;
using Reg = RegionBytecodeBuilder::Reg;
using Op = RegionOpcode;

/// One generated case: its struct name, how the test observes it, its bytecode.
struct Case {
  std::string name;
  RegionKind kind;
  int observedBits;  ///< mask cases: bits of the result read through `h` (0: yields i1)
  std::string operandType;  ///< what the test fills operand #0 with ("" none, "f32", "i8"...)
  std::vector<uint8_t> bytes;
};

std::string typeName(RegionType t) {
  if (t == RegionType::kIndex) return "index";
  if (t == RegionType::kF32) return "f32";
  return "i" + std::to_string(static_cast<int>(t));
}
int bits(RegionType t) { return t == RegionType::kIndex ? 64 : static_cast<int>(t); }

/// Mask argument `n` (index) as type `t`: index_cast truncates to iN.
Reg intArg(RegionBytecodeBuilder &b, uint8_t n, RegionType t) {
  Reg a = b.argument(n);
  return t == RegionType::kIndex ? a : b.cast(Op::kIndexCast, t, a);
}

/// Yields bit `h` (mask argument 1) of integer register `r` of type `t`.
void yieldBit(RegionBytecodeBuilder &b, Reg r, RegionType t) {
  if (t == RegionType::kI1) return b.yield(r);
  Reg shifted = b.binary(Op::kShRUI, r, intArg(b, 1, t));
  b.yield(t == RegionType::kIndex ? b.cast(Op::kIndexCast, RegionType::kI1, shifted)
                                  : b.cast(Op::kTruncI, RegionType::kI1, shifted));
}

const std::vector<RegionType> kIntTypes = {RegionType::kI1,  static_cast<RegionType>(7),
                                           RegionType::kI8,  RegionType::kI16,
                                           RegionType::kI32, static_cast<RegionType>(33),
                                           RegionType::kI64, RegionType::kIndex};

/// Collects the cases: one region per case, built by `body`.
struct CaseList {
  std::vector<Case> cases;
  /// A mask region whose yielded bit is bit `bits(observed)` of a value (0 for an i1).
  void mask(const std::string &name, RegionType observed, const std::string &operand,
            const std::function<void(RegionBytecodeBuilder &)> &body) {
    RegionBytecodeBuilder b(RegionKind::kMask);
    body(b);
    cases.push_back({name, RegionKind::kMask, observed == RegionType::kI1 ? 0 : bits(observed),
                     operand, b.finish()});
  }
  /// A score region (it yields the float).
  void score(const std::string &name, const std::string &operand,
             const std::function<void(RegionBytecodeBuilder &)> &body) {
    RegionBytecodeBuilder b(RegionKind::kScore);
    body(b);
    cases.push_back({name, RegionKind::kScore, 0, operand, b.finish()});
  }
};

void addIntegerCases(CaseList &list) {
  // Integer binary ops on x = q, y = kv (truncated to the type), every bit of the result.
  const std::pair<const char *, Op> intBinary[] = {
      {"addi", Op::kAddI},   {"subi", Op::kSubI},   {"muli", Op::kMulI},
      {"divsi", Op::kDivSI}, {"divui", Op::kDivUI}, {"remsi", Op::kRemSI},
      {"remui", Op::kRemUI}, {"andi", Op::kAndI},   {"ori", Op::kOrI},
      {"xori", Op::kXOrI},   {"shli", Op::kShLI},   {"shrsi", Op::kShRSI},
      {"shrui", Op::kShRUI}, {"maxsi", Op::kMaxSI}, {"minsi", Op::kMinSI},
      {"maxui", Op::kMaxUI}, {"minui", Op::kMinUI}};
  for (auto [name, op] : intBinary)
    for (RegionType t : kIntTypes)
      list.mask(std::string(name) + "_" + typeName(t), t, "", [&](RegionBytecodeBuilder &b) {
        yieldBit(b, b.binary(op, intArg(b, 2, t), intArg(b, 3, t)), t);
      });
  for (RegionType t : kIntTypes)
    list.mask("absi_" + typeName(t), t, "", [&](RegionBytecodeBuilder &b) {
      yieldBit(b, b.unary(Op::kAbsI, intArg(b, 2, t)), t);
    });
  for (uint8_t p = 0; p < ingot::kCmpIPredicateCount; ++p)
    for (RegionType t : kIntTypes)
      list.mask("cmpi" + std::to_string(p) + "_" + typeName(t), RegionType::kI1, "",
           [&](RegionBytecodeBuilder &b) {
             b.yield(b.cmpi(static_cast<CmpIPredicate>(p), intArg(b, 2, t), intArg(b, 3, t)));
           });
  for (RegionType t : kIntTypes)
    list.mask("select_" + typeName(t), t, "", [&](RegionBytecodeBuilder &b) {
      Reg c = b.cmpi(CmpIPredicate::kSlt, b.argument(0), b.argument(2));
      yieldBit(b, b.select(c, intArg(b, 2, t), intArg(b, 3, t)), t);
    });
}

void addIntegerCastCases(CaseList &list) {
  // Integer casts: from q truncated to `from`.
  for (RegionType from : kIntTypes)
    for (RegionType to : kIntTypes) {
      if (from == to) continue;
      auto cast = [&](const char *name, Op op) {
        list.mask(std::string(name) + "_" + typeName(from) + "_" + typeName(to), to, "",
             [&](RegionBytecodeBuilder &b) { yieldBit(b, b.cast(op, to, intArg(b, 2, from)), to); });
      };
      const bool index = from == RegionType::kIndex || to == RegionType::kIndex;
      if (index) {
        cast("index_cast", Op::kIndexCast);
        cast("index_castui", Op::kIndexCastUI);
      } else if (bits(to) > bits(from)) {
        cast("extsi", Op::kExtSI);
        cast("extui", Op::kExtUI);
      } else {
        cast("trunci", Op::kTruncI);
      }
    }
}

void addIntFloatCastCases(CaseList &list) {
  // Int -> f32 (score yields the float) and f32 -> int (operand #0 f32 at [b]).
  for (RegionType t : kIntTypes) {
    if (t == RegionType::kIndex) continue;
    list.score("sitofp_" + typeName(t), "", [&](RegionBytecodeBuilder &b) {
      b.yield(b.cast(Op::kSIToFP, RegionType::kF32, b.cast(Op::kIndexCast, t, b.argument(3))));
    });
    list.score("uitofp_" + typeName(t), "", [&](RegionBytecodeBuilder &b) {
      b.yield(b.cast(Op::kUIToFP, RegionType::kF32, b.cast(Op::kIndexCast, t, b.argument(3))));
    });
    for (auto [name, op] : {std::pair{"fptosi", Op::kFPToSI}, std::pair{"fptoui", Op::kFPToUI}})
      list.mask(std::string(name) + "_" + typeName(t), t, "f32", [&](RegionBytecodeBuilder &b) {
        b.addOperand(RegionType::kF32, 1);
        yieldBit(b, b.cast(op, t, b.load(0, {b.argument(0)})), t);
      });
  }
}

void addFloatCases(CaseList &list) {
  // Float ops on s and operand #0 (f32) at [b].
  const std::pair<const char *, Op> floatBinary[] = {
      {"addf", Op::kAddF},         {"subf", Op::kSubF},         {"mulf", Op::kMulF},
      {"divf", Op::kDivF},         {"maximumf", Op::kMaximumF}, {"minimumf", Op::kMinimumF},
      {"maxnumf", Op::kMaxNumF},   {"minnumf", Op::kMinNumF},   {"powf", Op::kPowF},
      {"copysign", Op::kCopySign}};
  for (auto [name, op] : floatBinary)
    list.score(name, "f32", [&](RegionBytecodeBuilder &b) {
      b.addOperand(RegionType::kF32, 1);
      b.yield(b.binary(op, b.argument(0), b.load(0, {b.argument(1)})));
    });
  const std::pair<const char *, Op> floatUnary[] = {
      {"negf", Op::kNegF}, {"absf", Op::kAbsF}, {"sqrt", Op::kSqrt},   {"rsqrt", Op::kRsqrt},
      {"exp", Op::kExp},   {"exp2", Op::kExp2}, {"log", Op::kLog},     {"log2", Op::kLog2},
      {"tanh", Op::kTanh}, {"floor", Op::kFloor}, {"ceil", Op::kCeil}};
  for (auto [name, op] : floatUnary)
    list.score(name, "", [&](RegionBytecodeBuilder &b) { b.yield(b.unary(op, b.argument(0))); });
  for (uint8_t p = 0; p < ingot::kCmpFPredicateCount; ++p)
    list.mask("cmpf" + std::to_string(p), RegionType::kI1, "f32", [&](RegionBytecodeBuilder &b) {
      b.addOperand(RegionType::kF32, 1);
      b.yield(b.cmpf(static_cast<CmpFPredicate>(p), b.load(0, {b.argument(0)}),
                     b.load(0, {b.argument(3)})));
    });
  list.score("select_f32", "f32", [&](RegionBytecodeBuilder &b) {
    b.addOperand(RegionType::kF32, 1);
    Reg c = b.cmpi(CmpIPredicate::kUlt, b.argument(3), b.argument(4));
    b.yield(b.select(c, b.argument(0), b.load(0, {b.argument(1)})));
  });
  list.score("constants_f32", "", [&](RegionBytecodeBuilder &b) {
    Reg x = b.binary(Op::kMulF, b.argument(0), b.constantF32(0.1f));
    x = b.binary(Op::kAddF, x, b.constantF32(-3.5e-39f));  // a subnormal
    x = b.binary(Op::kMaxNumF, x, b.constantF32(-__builtin_inff()));
    b.yield(b.binary(Op::kAddF, x, b.constantF32(1e30f)));
  });
  list.mask("constants_int", RegionType::kI64, "", [&](RegionBytecodeBuilder &b) {
    Reg x = b.binary(Op::kXOrI, intArg(b, 2, RegionType::kI64),
                     b.constantInt(RegionType::kI64, 0x8000000000000001ull));
    yieldBit(b, b.binary(Op::kAddI, x, b.constantInt(RegionType::kI64, 0xfedcba9876543210ull)),
             RegionType::kI64);
  });
}

void addLoadCases(CaseList &list) {
  // Loads of every element type, rank 2 at [q, kv]; rank 0 and rank 3 of i32.
  for (RegionType t : {RegionType::kI1, RegionType::kI8, RegionType::kI16, RegionType::kI32,
                       RegionType::kI64})
    list.mask("load_" + typeName(t), t, typeName(t), [&](RegionBytecodeBuilder &b) {
      b.addOperand(t, 2);
      yieldBit(b, b.load(0, {b.argument(2), b.argument(3)}), t);
    });
  list.mask("load_rank0_i32", RegionType::kI32, "i32", [&](RegionBytecodeBuilder &b) {
    b.addOperand(RegionType::kI32, 0);
    yieldBit(b, b.load(0, {}), RegionType::kI32);
  });
  list.mask("load_rank3_i32", RegionType::kI32, "i32", [&](RegionBytecodeBuilder &b) {
    b.addOperand(RegionType::kI32, 3);
    Reg zero = b.constantIndex(0);
    yieldBit(b, b.load(0, {b.argument(2), zero, b.argument(3)}), RegionType::kI32);
  });
}

void addPoisonCases(CaseList &list) {
  // Poison: a shift whose amount may be out of range, guarded or not by a select.
  list.mask("poison_guarded", RegionType::kI1, "", [&](RegionBytecodeBuilder &b) {
    Reg x = intArg(b, 2, RegionType::kI32), y = intArg(b, 3, RegionType::kI32);
    Reg shifted = b.cast(Op::kTruncI, RegionType::kI1, b.binary(Op::kShLI, x, y));
    Reg inRange = b.cmpi(CmpIPredicate::kUlt, y, b.constantInt(RegionType::kI32, 32));
    b.yield(b.select(inRange, shifted, b.constantBool(false)));
  });
  list.mask("poison_load_index", RegionType::kI32, "i32", [&](RegionBytecodeBuilder &b) {
    b.addOperand(RegionType::kI32, 1);
    Reg amount = b.argument(3);
    Reg index = b.binary(Op::kShRUI, b.argument(2), amount);
    yieldBit(b, b.load(0, {index}), RegionType::kI32);
  });
}

std::vector<Case> buildCases() {
  CaseList list;
  addIntegerCases(list);
  addIntegerCastCases(list);
  addIntFloatCastCases(list);
  addFloatCases(list);
  addLoadCases(list);
  addPoisonCases(list);
  return list.cases;
}

} // namespace

int main(int argc, char **argv) {
  const std::string usage = "usage: ingot-variant-opcases <output.h>\n"
                            "Writes the attention variants of every region op and type, with "
                            "the table the CUDA region emitter's host test walks.\n";
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << usage;
    return 0;
  }
  // Never take an option for the output path.
  if (argc != 2 || argv[1][0] == '-') {
    std::cerr << usage;
    return 2;
  }
  std::vector<Case> cases = buildCases();
  std::string text =
      "// One attention variant per region op and type (generated by "
      "ingot-variant-opcases; do not edit).\n#pragma once\n\n"
      "#include \"codegen/cuda/kernels/region_ops.h\"\n\nnamespace opcases {\n\n";
  std::string table;
  for (const Case &c : cases) {
    const std::string structName = "Op_" + c.name;
    const bool isMask = c.kind == RegionKind::kMask;
    ingot::StatusOr<std::string> body = ingot::codegen::emitAttentionVariantStruct(
        structName, isMask ? c.bytes : std::vector<uint8_t>{},
        isMask ? std::vector<uint8_t>{} : c.bytes);
    if (!body.ok()) {
      std::cerr << "ingot-variant-opcases: " << c.name << ": " << body.status().message()
                << "\n";
      return 1;
    }
    text += *body + "\n";
    table += "    {\"" + c.name + "\", " + (isMask ? "true" : "false") + ", " +
             std::to_string(c.observedBits) + ", \"" + c.operandType + "\", &" + structName +
             "::mask, &" + structName + "::score, " + structName + "::k" +
             (isMask ? "Mask" : "Score") + "Bytecode, " + structName + "::k" +
             (isMask ? "Mask" : "Score") + "BytecodeSize},\n";
  }
  text += "/// How the host test drives one case.\nstruct OpCase {\n"
          "  const char *name;\n  bool isMask;\n"
          "  int observedBits;  ///< mask: bits of the result read through h (0: an i1)\n"
          "  const char *operandType;  ///< element type of operand #0 (\"\": none)\n"
          "  bool (*mask)(const ::ingot::rgn::RegionOperands &, long long, long long, "
          "long long, long long);\n"
          "  float (*score)(const ::ingot::rgn::RegionOperands &, float, long long, "
          "long long, long long, long long);\n"
          "  const unsigned char *bytecode;\n  unsigned bytecodeSize;\n};\n\n"
          "inline const OpCase kOpCases[] = {\n" +
          table + "};\n\n} // namespace opcases\n";
  std::ofstream out(argv[1], std::ios::binary);
  out << text;
  if (!out) {
    std::cerr << "ingot-variant-opcases: cannot write " << argv[1] << "\n";
    return 1;
  }
  return 0;
}
