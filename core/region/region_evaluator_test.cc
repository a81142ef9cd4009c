// Evaluating the example variants, operand loads and their bounds checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/region/region_bytecode_builder.h"
#include "core/region/region_examples.h"
#include "core/region/region_program.h"
#include "testing/test_seed.h"

namespace ingot {
namespace {

using Reg = RegionBytecodeBuilder::Reg;

RegionProgram decodeOrDie(const std::vector<uint8_t>& bytes) {
  auto program = decodeRegionBytecode(bytes);
  EXPECT_TRUE(program.ok()) << program.status().message();
  return std::move(program).value();
}

TEST(RegionEvaluatorTest, CausalAndSlidingWindowMatchReference) {
  RegionProgram causal = decodeOrDie(causalMaskBytecode());
  RegionProgram window = decodeOrDie(slidingWindowMaskBytecode(4));
  for (int64_t q = 0; q < 12; ++q) {
    for (int64_t kv = 0; kv < 12; ++kv) {
      auto c = causal.evalMask(0, 0, q, kv);
      auto w = window.evalMask(1, 3, q, kv);
      ASSERT_TRUE(c.ok() && w.ok());
      EXPECT_EQ(*c, kv <= q);
      EXPECT_EQ(*w, kv <= q && q - kv < 4) << q << "," << kv;
    }
  }
}

TEST(RegionEvaluatorTest, AlibiAndSoftcapMatchReference) {
  RegionProgram alibi = decodeOrDie(alibiScoreBytecode(8));
  RegionProgram softcap = decodeOrDie(softcapScoreBytecode(30.0f));
  std::mt19937 rng(ingot::testing::testSeed());
  std::uniform_real_distribution<float> scores(-100.0f, 100.0f);
  for (int i = 0; i < 500; ++i) {
    const float s = scores(rng);
    const int64_t h = rng() % 8, q = rng() % 64, kv = rng() % 64;
    auto a = alibi.evalScore(s, 0, h, q, kv);
    ASSERT_TRUE(a.ok()) << a.status().message();
    const float slope = std::exp2(-8.0f * static_cast<float>(h + 1) / 8.0f);
    EXPECT_EQ(*a, s - slope * static_cast<float>(q - kv));
    auto c = softcap.evalScore(s, 0, h, q, kv);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(*c, 30.0f * std::tanh(s / 30.0f));
    EXPECT_LE(std::fabs(*c), 30.0f);
  }
}

TEST(RegionEvaluatorTest, DocumentMaskReadsDocumentIds) {
  RegionProgram program = decodeOrDie(documentMaskBytecode());
  // Two requests, 6 slots each: request 1 has documents [0 0 1 1 1 2].
  const int64_t shape[] = {2, 6};
  const int32_t docs[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2};
  RegionOperandView view{RegionType::kI32, shape, 2, docs};
  for (int64_t q = 0; q < 6; ++q) {
    for (int64_t kv = 0; kv < 6; ++kv) {
      auto got = program.evalMask(1, 0, q, kv, &view, 1);
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_EQ(*got, kv <= q && docs[6 + q] == docs[6 + kv]) << q << "," << kv;
    }
  }
}

TEST(RegionEvaluatorTest, TreeMaskFollowsAncestorBits) {
  RegionProgram program = decodeOrDie(treeMaskBytecode());
  // One request: 3 prefix slots, then a tree of 4 nodes: 0 root, 1 and 2 children of 0,
  // 3 child of 1. Row i has bit j set when j is an ancestor-or-self of i.
  const int64_t start_shape[] = {1};
  const int32_t start[] = {3};
  const int64_t bits_shape[] = {1, 4, 1};
  const int32_t bits[] = {0b0001, 0b0011, 0b0101, 0b1011};
  const RegionOperandView views[] = {{RegionType::kI32, start_shape, 1, start},
                                     {RegionType::kI32, bits_shape, 3, bits}};
  for (int64_t q = 0; q < 7; ++q) {
    for (int64_t kv = 0; kv < 7; ++kv) {
      bool want = kv <= q;
      if (kv >= 3) want = want && q >= 3 && ((bits[q - 3] >> (kv - 3)) & 1);
      auto got = program.evalMask(0, 0, q, kv, views, 2);
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_EQ(*got, want) << q << "," << kv;
    }
  }
}

TEST(RegionEvaluatorTest, OutOfBoundsLoadIsAnError) {
  RegionProgram program = decodeOrDie(documentMaskBytecode());
  const int64_t shape[] = {2, 6};
  const int32_t docs[12] = {};
  RegionOperandView view{RegionType::kI32, shape, 2, docs};
  auto past_end = program.evalMask(0, 0, 6, 0, &view, 1);
  ASSERT_FALSE(past_end.ok());
  EXPECT_NE(past_end.status().message().find("index 6 of dim 1 of operand #0 out of range [0, 6)"),
            std::string::npos)
      << past_end.status().message();
  EXPECT_FALSE(program.evalMask(2, 0, 0, 0, &view, 1).ok());   // request out of range
  EXPECT_FALSE(program.evalMask(-1, 0, 0, 0, &view, 1).ok());  // negative index
  const int64_t empty_shape[] = {0, 6};
  RegionOperandView empty{RegionType::kI32, empty_shape, 2, nullptr};
  EXPECT_FALSE(program.evalMask(0, 0, 0, 0, &empty, 1).ok());
}

TEST(RegionEvaluatorTest, RejectsMismatchedOperands) {
  RegionProgram program = decodeOrDie(documentMaskBytecode());
  const int64_t shape[] = {2, 6};
  const int32_t docs[12] = {};
  auto message = [&](const RegionOperandView* views, size_t n) {
    auto got = program.evalMask(0, 0, 0, 0, views, n);
    return got.ok() ? std::string("ok") : got.status().message();
  };
  EXPECT_NE(message(nullptr, 0).find("expects 1 operands, got 0"), std::string::npos);
  RegionOperandView wrong_type{RegionType::kF32, shape, 2, docs};
  EXPECT_NE(message(&wrong_type, 1).find("element type f32, expected i32"), std::string::npos);
  RegionOperandView wrong_rank{RegionType::kI32, shape, 1, docs};
  EXPECT_NE(message(&wrong_rank, 1).find("rank 1, expected 2"), std::string::npos);
  RegionOperandView no_data{RegionType::kI32, shape, 2, nullptr};
  EXPECT_NE(message(&no_data, 1).find("no data"), std::string::npos);
  const int64_t negative[] = {2, -1};
  RegionOperandView bad_shape{RegionType::kI32, negative, 2, docs};
  EXPECT_NE(message(&bad_shape, 1).find("negative extent"), std::string::npos);
}

TEST(RegionEvaluatorTest, LoadsEveryElementType) {
  // score: s + (f32)load(#n)[kv] for each element type, yielded as f32.
  const int64_t shape[] = {3};
  const uint8_t i1_data[] = {0, 7, 1};  // any nonzero byte is true
  const int8_t i8_data[] = {-5, 0, 127};
  const int16_t i16_data[] = {-300, 1, 2};
  const int32_t i32_data[] = {70000, -1, 3};
  const int64_t i64_data[] = {-(int64_t{1} << 40), 5, 6};
  const float f32_data[] = {0.5f, -2.25f, 8.0f};
  struct Case {
    RegionType type;
    const void* data;
    float (*expect)(int64_t kv, const void* data);
  };
  const Case cases[] = {
      {RegionType::kI1, i1_data,
       [](int64_t kv, const void* d) { return static_cast<const uint8_t*>(d)[kv] ? 1.0f : 0.0f; }},
      {RegionType::kI8, i8_data,
       [](int64_t kv, const void* d) { return static_cast<float>(static_cast<const int8_t*>(d)[kv]); }},
      {RegionType::kI16, i16_data,
       [](int64_t kv, const void* d) { return static_cast<float>(static_cast<const int16_t*>(d)[kv]); }},
      {RegionType::kI32, i32_data,
       [](int64_t kv, const void* d) { return static_cast<float>(static_cast<const int32_t*>(d)[kv]); }},
      {RegionType::kI64, i64_data,
       [](int64_t kv, const void* d) { return static_cast<float>(static_cast<const int64_t*>(d)[kv]); }},
      {RegionType::kF32, f32_data,
       [](int64_t kv, const void* d) { return static_cast<const float*>(d)[kv]; }},
  };
  for (const Case& c : cases) {
    RegionBytecodeBuilder b(RegionKind::kScore);
    uint8_t operand = b.addOperand(c.type, 1);
    Reg s = b.argument(0);
    Reg kv = b.argument(4);
    Reg value = b.load(operand, {kv});
    // i1 loads convert unsigned (true = 1); other integers signed.
    if (c.type != RegionType::kF32) {
      value = b.cast(c.type == RegionType::kI1 ? RegionOpcode::kUIToFP : RegionOpcode::kSIToFP,
                     RegionType::kF32, value);
    }
    b.yield(b.binary(RegionOpcode::kAddF, s, value));
    RegionProgram program = decodeOrDie(b.finish());
    RegionOperandView view{c.type, shape, 1, c.data};
    for (int64_t k = 0; k < 3; ++k) {
      auto got = program.evalScore(1.0f, 0, 0, 0, k, &view, 1);
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_EQ(*got, 1.0f + c.expect(k, c.data)) << static_cast<int>(c.type) << " at " << k;
    }
    EXPECT_FALSE(program.evalScore(1.0f, 0, 0, 0, 3, &view, 1).ok());
  }
}

TEST(RegionEvaluatorTest, RankZeroOperandIsAScalar) {
  RegionBytecodeBuilder b(RegionKind::kMask);
  uint8_t window = b.addOperand(RegionType::kI64, 0);
  Reg q = b.argument(2);
  Reg kv = b.argument(3);
  Reg w = b.cast(RegionOpcode::kIndexCast, RegionType::kIndex, b.load(window, {}));
  b.yield(b.cmpi(CmpIPredicate::kSlt, b.binary(RegionOpcode::kSubI, q, kv), w));
  RegionProgram program = decodeOrDie(b.finish());
  const int64_t value = 2;
  RegionOperandView view{RegionType::kI64, nullptr, 0, &value};
  auto near = program.evalMask(0, 0, 5, 4, &view, 1);
  auto far = program.evalMask(0, 0, 5, 3, &view, 1);
  ASSERT_TRUE(near.ok() && far.ok());
  EXPECT_TRUE(*near);
  EXPECT_FALSE(*far);
}

TEST(RegionEvaluatorTest, WrongEntryPointIsAnError) {
  RegionProgram mask = decodeOrDie(causalMaskBytecode());
  RegionProgram score = decodeOrDie(softcapScoreBytecode(30.0f));
  EXPECT_FALSE(mask.evalScore(0, 0, 0, 0, 0).ok());
  EXPECT_FALSE(score.evalMask(0, 0, 0, 0).ok());
}

TEST(RegionEvaluatorTest, TrappingOpsReportTheInstruction) {
  // mask: (q / kv) == 0 with divui; kv = 0 traps.
  RegionBytecodeBuilder b(RegionKind::kMask);
  Reg q = b.argument(2);
  Reg kv = b.argument(3);
  Reg quotient = b.binary(RegionOpcode::kDivSI, q, kv);  // instruction 2
  b.yield(b.cmpi(CmpIPredicate::kEq, quotient, b.constantIndex(0)));
  RegionProgram program = decodeOrDie(b.finish());
  auto ok = program.evalMask(0, 0, 1, 2);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(*ok);
  auto zero = program.evalMask(0, 0, 1, 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(), "region evaluation: instruction 2 (divsi): division by zero");
  auto overflow = program.evalMask(0, 0, INT64_MIN, -1);
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.status().message().find("signed division overflow"), std::string::npos);
}

TEST(RegionEvaluatorTest, PoisonIsAnErrorOnlyAtTheYieldOrALoadIndex) {
  // mask: select(kv < 8, (1 << kv) != 0, true) in i8. For kv >= 8 the shift is poison (as
  // in MLIR) but the select does not choose it, so the result is defined.
  RegionBytecodeBuilder b(RegionKind::kMask);
  Reg kv = b.argument(3);
  Reg eight = b.constantIndex(8);
  Reg one = b.constantInt(RegionType::kI8, 1);
  Reg zero = b.constantInt(RegionType::kI8, 0);
  Reg yes = b.constantBool(true);
  Reg amount = b.cast(RegionOpcode::kIndexCast, RegionType::kI8, kv);
  Reg shifted = b.binary(RegionOpcode::kShLI, one, amount);
  Reg nonzero = b.cmpi(CmpIPredicate::kNe, shifted, zero);
  Reg in_range = b.cmpi(CmpIPredicate::kUlt, kv, eight);
  Reg guarded = b.select(in_range, nonzero, yes);
  b.yield(guarded);
  RegionProgram program = decodeOrDie(b.finish());
  for (int64_t k = 0; k < 20; ++k) {
    auto got = program.evalMask(0, 0, 0, k);
    ASSERT_TRUE(got.ok()) << k << ": " << got.status().message();
    EXPECT_TRUE(*got);
  }

  // Yielding the unguarded value: poison reaches the result.
  RegionBytecodeBuilder unguarded(RegionKind::kMask);
  Reg kv2 = unguarded.argument(3);
  Reg one2 = unguarded.constantInt(RegionType::kI8, 1);
  Reg zero2 = unguarded.constantInt(RegionType::kI8, 0);
  Reg amount2 = unguarded.cast(RegionOpcode::kIndexCast, RegionType::kI8, kv2);
  Reg shifted2 = unguarded.binary(RegionOpcode::kShRUI, one2, amount2);
  unguarded.yield(unguarded.cmpi(CmpIPredicate::kNe, shifted2, zero2));
  RegionProgram bad = decodeOrDie(unguarded.finish());
  ASSERT_TRUE(bad.evalMask(0, 0, 0, 0).ok());
  auto poisoned = bad.evalMask(0, 0, 0, 8);
  ASSERT_FALSE(poisoned.ok());
  EXPECT_NE(poisoned.status().message().find("yielded value is poison"), std::string::npos);

  // A poison load index is an error, even if the load's value would be discarded.
  RegionBytecodeBuilder load(RegionKind::kMask);
  uint8_t table = load.addOperand(RegionType::kI32, 1);
  Reg nan = load.constantF32(std::nanf(""));
  Reg index_i64 = load.cast(RegionOpcode::kFPToSI, RegionType::kI64, nan);
  Reg index = load.cast(RegionOpcode::kIndexCast, RegionType::kIndex, index_i64);
  Reg value = load.load(table, {index});
  Reg zero_i32 = load.constantInt(RegionType::kI32, 0);
  Reg no = load.constantBool(false);
  Reg unused = load.cmpi(CmpIPredicate::kEq, value, zero_i32);
  load.yield(load.select(no, unused, no));
  RegionProgram load_program = decodeOrDie(load.finish());
  const int64_t shape[] = {4};
  const int32_t data[4] = {};
  RegionOperandView view{RegionType::kI32, shape, 1, data};
  auto load_result = load_program.evalMask(0, 0, 0, 0, &view, 1);
  ASSERT_FALSE(load_result.ok());
  EXPECT_NE(load_result.status().message().find("is poison"), std::string::npos);
}

}  // namespace
}  // namespace ingot
