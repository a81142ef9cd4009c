// The decoder accepts well-formed region bytecode and rejects each kind of malformed input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/region/region_bytecode_builder.h"
#include "core/region/region_disassembler.h"
#include "core/region/region_examples.h"
#include "core/region/region_program.h"

namespace ingot {
namespace {

using Reg = RegionBytecodeBuilder::Reg;
constexpr uint8_t kIndex = static_cast<uint8_t>(RegionType::kIndex);
constexpr uint8_t kF32 = static_cast<uint8_t>(RegionType::kF32);
constexpr uint8_t kI1 = static_cast<uint8_t>(RegionType::kI1);
constexpr uint8_t kI32 = static_cast<uint8_t>(RegionType::kI32);
constexpr uint8_t op(RegionOpcode o) { return static_cast<uint8_t>(o); }

/// The decoder's message for `bytes`, or "ok".
std::string decodeMessage(const std::vector<uint8_t>& bytes) {
  auto program = decodeRegionBytecode(bytes);
  return program.ok() ? "ok" : program.status().message();
}

#define EXPECT_REJECTED(bytes, fragment)                                              \
  do {                                                                                \
    const std::string message_ = decodeMessage(bytes);                                \
    EXPECT_NE(message_, "ok");                                                        \
    EXPECT_NE(message_.find(fragment), std::string::npos) << "message: " << message_; \
    EXPECT_EQ(message_.find('\n'), std::string::npos) << "not one line: " << message_; \
  } while (0)

/// mask: %0 = arg q, %1 = arg kv, then `body` (raw), register count `regs`.
std::vector<uint8_t> rawMask(uint16_t regs, void (*body)(RegionBytecodeBuilder&)) {
  RegionBytecodeBuilder b(RegionKind::kMask);
  b.emitRaw(op(RegionOpcode::kArgument), 2, 0, {});
  b.emitRaw(op(RegionOpcode::kArgument), 3, 1, {});
  body(b);
  b.setRegisterCount(regs);
  return b.finish();
}

TEST(RegionDecoderTest, AcceptsAllExamples) {
  for (const RegionExample& example : regionExamples()) {
    auto program = decodeRegionBytecode(example.bytecode);
    ASSERT_TRUE(program.ok()) << example.name << ": " << program.status().message();
    EXPECT_EQ(program->kind(), example.kind) << example.name;
  }
}

TEST(RegionDecoderTest, DisassemblesCausalMask) {
  auto program = decodeRegionBytecode(causalMaskBytecode());
  ASSERT_TRUE(program.ok());
  EXPECT_EQ(disassembleRegion(*program),
            "mask region: 3 registers, 4 instructions, 0 operands\n"
            "%0 = arg q : index\n"
            "%1 = arg kv : index\n"
            "%2 = cmpi ule, %1, %0 : index\n"
            "yield %2 : i1\n");
}

TEST(RegionDecoderTest, DisassemblesLoadsConstantsAndCasts) {
  auto program = decodeRegionBytecode(treeMaskBytecode());
  ASSERT_TRUE(program.ok());
  const std::string text = disassembleRegion(*program);
  EXPECT_NE(text.find("operand #1: i32, rank 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("= region_load #0[%0] : i32\n"), std::string::npos) << text;
  EXPECT_NE(text.find("= constant 32 : index\n"), std::string::npos) << text;
  EXPECT_NE(text.find("= index_cast %"), std::string::npos) << text;
  auto softcap = decodeRegionBytecode(softcapScoreBytecode(30.0f));
  ASSERT_TRUE(softcap.ok());
  EXPECT_NE(disassembleRegion(*softcap).find("%1 = constant 30 : f32\n"), std::string::npos);
}

TEST(RegionDecoderTest, RejectsEmptyAndTruncatedHeader) {
  EXPECT_REJECTED(std::vector<uint8_t>{}, "truncated header");
  std::vector<uint8_t> bytes = causalMaskBytecode();
  bytes.resize(10);
  EXPECT_REJECTED(bytes, "truncated header");
}

TEST(RegionDecoderTest, RejectsEveryTruncationAndTrailingBytes) {
  for (const RegionExample& example : regionExamples()) {
    const std::vector<uint8_t>& full = example.bytecode;
    for (size_t n = 0; n < full.size(); ++n) {
      std::vector<uint8_t> cut(full.begin(), full.begin() + n);
      EXPECT_NE(decodeMessage(cut), "ok") << example.name << " cut at " << n;
    }
    std::vector<uint8_t> longer = full;
    longer.push_back(0);
    EXPECT_REJECTED(longer, "code size");
  }
  // A consistent header whose code stops inside an instruction.
  RegionBytecodeBuilder b(RegionKind::kMask);
  Reg q = b.argument(2);
  b.yield(b.cmpi(CmpIPredicate::kEq, q, q));
  std::vector<uint8_t> bytes = b.finish();
  bytes.pop_back();
  bytes[12] = static_cast<uint8_t>(bytes[12] - 1);  // shrink the code size to match
  EXPECT_REJECTED(bytes, "truncated");
}

TEST(RegionDecoderTest, RejectsBadMagicVersionAndKind) {
  std::vector<uint8_t> bytes = causalMaskBytecode();
  bytes[0] = 'X';
  EXPECT_REJECTED(bytes, "bad magic");
  bytes = causalMaskBytecode();
  bytes[4] = 2;
  EXPECT_REJECTED(bytes, "version 2 is not supported");
  EXPECT_EQ(decodeRegionBytecode(bytes).status().code(), StatusCode::kUnimplemented);
  bytes = causalMaskBytecode();
  bytes[6] = 7;
  EXPECT_REJECTED(bytes, "unknown region kind 7");
}

TEST(RegionDecoderTest, RejectsUnknownOpcode) {
  for (uint8_t bad : {0x00, 0x04, 0x22, 0x3b, 0x4b, 0x51, 0x69, 0x80, 0xff}) {
    RegionBytecodeBuilder b(RegionKind::kMask);
    b.emitRaw(bad, 0, 0, {});
    b.setRegisterCount(1);
    EXPECT_REJECTED(b.finish(), "unknown opcode");
  }
}

TEST(RegionDecoderTest, RejectsRegisterOutOfRange) {
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kCmpI), 0, 2, {0, 9});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "register %9 out of range");
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kCmpI), 0, 3, {0, 1});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 3, {});
                  }),
                  "destination %3 out of range");
  std::vector<uint8_t> bytes = causalMaskBytecode();
  bytes[8] = 0x01;
  bytes[9] = 0x10;  // 4097 registers
  EXPECT_REJECTED(bytes, "exceed the limit");
}

TEST(RegionDecoderTest, RejectsUseBeforeDefinitionAndRedefinition) {
  EXPECT_REJECTED(rawMask(4, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kCmpI), 0, 2, {0, 3});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "register %3 used before definition");
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kCmpI), 0, 2, {2, 0});  // reads itself
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "used before definition");
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kCmpI), 0, 1, {0, 0});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 1, {});
                  }),
                  "register %1 defined twice");
}

TEST(RegionDecoderTest, RejectsWrongOperandTypes) {
  // addi on index registers declared as f32 result.
  EXPECT_REJECTED(rawMask(4, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kAddI), kF32, 2, {0, 1});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "result type f32 not allowed");
  // addf on index registers.
  EXPECT_REJECTED(rawMask(4, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kAddF), kF32, 2, {0, 1});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "register %0 has type index, expected f32");
  // cmpi of index against i32.
  EXPECT_REJECTED(rawMask(4, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kConstant), kI32, 2, {}, true, 5);
                    b.emitRaw(op(RegionOpcode::kCmpI), 0, 3, {0, 2});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 3, {});
                  }),
                  "register %2 has type i32, expected index");
  // cmpf on integers.
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kCmpF), 1, 2, {0, 1});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "operand type index not allowed");
  // select with a non-i1 condition.
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kSelect), kIndex, 2, {0, 0, 1});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "expected i1");
  // an invalid type byte.
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kAddI), 65, 2, {0, 1});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "invalid type byte");
}

TEST(RegionDecoderTest, RejectsInvalidCasts) {
  struct Case {
    RegionOpcode op;
    uint8_t from, to;
  };
  const Case cases[] = {
      {RegionOpcode::kExtSI, kI32, 8},        {RegionOpcode::kExtUI, kI32, kI32},
      {RegionOpcode::kTruncI, 8, kI32},       {RegionOpcode::kIndexCast, kI32, 64},
      {RegionOpcode::kIndexCastUI, kIndex, kIndex}, {RegionOpcode::kSIToFP, kIndex, kF32},
      {RegionOpcode::kFPToSI, kF32, kIndex},  {RegionOpcode::kUIToFP, kI32, kI32},
      {RegionOpcode::kExtSI, kIndex, 64},
  };
  for (const Case& c : cases) {
    RegionBytecodeBuilder b(RegionKind::kMask);
    b.emitRaw(op(RegionOpcode::kConstant), c.from, 0, {}, true, 0);
    b.emitRaw(op(c.op), c.to, 1, {0});
    b.emitRaw(op(RegionOpcode::kConstant), kI1, 2, {}, true, 0);
    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
    b.setRegisterCount(3);
    EXPECT_REJECTED(b.finish(), "cannot cast");
  }
}

TEST(RegionDecoderTest, RejectsMissingMisplacedOrMistypedYield) {
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kCmpI), 0, 2, {0, 1});
                  }),
                  "the last instruction must be yield");
  EXPECT_REJECTED(rawMask(4, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kCmpI), 0, 2, {0, 1});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                    b.emitRaw(op(RegionOpcode::kCmpI), 0, 3, {0, 1});
                  }),
                  "yield before the last instruction");
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kYield), 0, 0, {});
                  }),
                  "register %0 has type index, expected i1");
  // A score region must yield f32.
  RegionBytecodeBuilder b(RegionKind::kScore);
  Reg h = b.argument(2);
  b.yield(h);
  EXPECT_REJECTED(b.finish(), "expected f32");
  // No instructions at all.
  RegionBytecodeBuilder empty(RegionKind::kMask);
  EXPECT_REJECTED(empty.finish(), "no instructions");
}

TEST(RegionDecoderTest, RejectsBadArgumentPredicateAndConstant) {
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kArgument), 4, 2, {});  // mask has 4 args
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "argument 4 out of range");
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kCmpI), 10, 2, {0, 1});
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "predicate 10 out of range");
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kConstant), kI1, 2, {}, true, 2);
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "bits above its i1 width");
  EXPECT_REJECTED(rawMask(3, [](RegionBytecodeBuilder& b) {
                    b.emitRaw(op(RegionOpcode::kConstant), kF32, 2, {}, true, uint64_t{1} << 40);
                    b.emitRaw(op(RegionOpcode::kYield), 0, 2, {});
                  }),
                  "bits above its f32 width");
}

TEST(RegionDecoderTest, RejectsBadOperandNumberRankOrType) {
  auto build = [](uint8_t operand, uint8_t type, std::vector<uint16_t> idx) {
    RegionBytecodeBuilder b(RegionKind::kMask);
    b.addOperand(RegionType::kI32, 2);
    b.argument(2);  // %0
    std::vector<uint8_t> bytes = b.finish();
    // Append the load and a yield by hand: simpler than going through emitRaw.
    std::vector<uint8_t> code = {op(RegionOpcode::kRegionLoad), type, 1, 0, operand,
                                 static_cast<uint8_t>(idx.size())};
    for (uint16_t r : idx) {
      code.push_back(static_cast<uint8_t>(r));
      code.push_back(static_cast<uint8_t>(r >> 8));
    }
    const std::vector<uint8_t> tail = {op(RegionOpcode::kConstant), kI1, 2, 0, 1, 0, 0, 0,
                                       0, 0, 0, 0, op(RegionOpcode::kYield), 0, 2, 0};
    code.insert(code.end(), tail.begin(), tail.end());
    bytes.insert(bytes.end(), code.begin(), code.end());
    bytes[8] = 3;   // registers
    bytes[10] = 4;  // instructions
    const uint32_t code_size = static_cast<uint32_t>(bytes.size() - 18);
    bytes[12] = static_cast<uint8_t>(code_size);
    bytes[13] = static_cast<uint8_t>(code_size >> 8);
    return bytes;
  };
  EXPECT_EQ(decodeMessage(build(0, kI32, {0, 0})), "ok");
  EXPECT_REJECTED(build(1, kI32, {0, 0}), "operand #1 out of range");
  EXPECT_REJECTED(build(0, kI32, {0}), "has rank 2, load gives 1 indices");
  EXPECT_REJECTED(build(0, kF32, {0, 0}), "does not match operand #0 element type i32");
  EXPECT_REJECTED(build(0, kI32, {0, 7}), "register %7 out of range");

  std::vector<uint8_t> bad_table = documentMaskBytecode();
  bad_table[16] = static_cast<uint8_t>(RegionType::kIndex);  // index tensors are not allowed
  EXPECT_REJECTED(bad_table, "element type 128 not allowed");
  bad_table = documentMaskBytecode();
  bad_table[17] = 9;
  EXPECT_REJECTED(bad_table, "rank 9 exceeds the limit");
}

TEST(RegionDecoderTest, SurvivesEveryByteFlipOfTheExamples) {
  // Each mutated program is either rejected or decodes to something that evaluates (maybe
  // with an error) without crashing; ASan/UBSan builds make this a memory-safety check.
  const int64_t shape[region_bytecode::kMaxOperandRank] = {4, 8, 1, 1, 1, 1, 1, 1};
  int64_t data[32] = {};  // 4 * 8 elements of up to 8 bytes
  for (const RegionExample& example : regionExamples()) {
    for (size_t i = 0; i < example.bytecode.size(); ++i) {
      for (uint8_t flip : {0x01, 0x80, 0xff}) {
        std::vector<uint8_t> bytes = example.bytecode;
        bytes[i] ^= flip;
        auto program = decodeRegionBytecode(bytes);
        if (!program.ok()) continue;
        std::vector<RegionOperandView> views;
        for (const RegionOperandSpec& spec : program->operandSpecs()) {
          views.push_back({spec.element_type, shape, spec.rank, data});
        }
        if (program->kind() == RegionKind::kMask) {
          (void)program->evalMask(1, 0, 3, 2, views.data(), views.size());
        } else {
          (void)program->evalScore(1.5f, 1, 0, 3, 2, views.data(), views.size());
        }
      }
    }
  }
}

}  // namespace
}  // namespace ingot
