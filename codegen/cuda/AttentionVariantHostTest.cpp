//===- AttentionVariantHostTest.cpp - generated CUDA variants vs the CPU evaluator ===//
//
// The variant structs the CUDA region emitter writes are `__host__ __device__` code; here
// they are compiled as plain C++ and compared with the CPU backend's bytecode evaluation
// on fresh random (b, h, q, kv, s, operands): masks bit for bit, scores as identical floats,
// and the evaluator's errors (traps, out-of-range loads, poison) as RegionError bits with a
// dropped key. Covers every example variant, the compiled Llama tree mask and one variant
// per region op and type (op_cases.h, from ingot-variant-opcases).
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/AttentionRegionEmitter.h"
#include "codegen/cuda/variants/op_cases.h"
#include "core/region/region_bytecode_builder.h"
#include "core/region/region_examples.h"
#include "core/region/region_program.h"
#if INGOT_CUDA_HAVE_EXAMPLE_VARIANTS
#include "codegen/cuda/variants/alibi.h"
#include "codegen/cuda/variants/causal.h"
#include "codegen/cuda/variants/chunked_local.h"
#include "codegen/cuda/variants/document_mask.h"
#include "codegen/cuda/variants/llama_tree_mask.h"
#include "codegen/cuda/variants/sliding_window.h"
#include "codegen/cuda/variants/softcap.h"
#include "codegen/cuda/variants/tree_mask.h"
#endif

namespace ingot {
namespace {

using rgn::RegionOperands;

/// Random-input source shared by the tests; seeded from the clock unless INGOT_TEST_SEED is
/// set, and the seed is printed so a failure can be replayed.
std::mt19937_64 &rng() {
  static std::mt19937_64 engine = [] {
    const char *env = std::getenv("INGOT_TEST_SEED");
    const uint64_t seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("INGOT_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return engine;
}
int64_t uniform(int64_t lo, int64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng());
}
bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng()) < p; }

/// An integer that often sits on an edge of some width (0, +-1, 2^k, 2^k - 1, -2^k), else
/// small, else any 64 bits.
int64_t edgyInt() {
  switch (uniform(0, 5)) {
  case 0: return uniform(-2, 2);
  case 1: return int64_t(uint64_t{1} << uniform(0, 63));
  case 2: return int64_t((uint64_t{1} << uniform(0, 63)) - 1);
  case 3: return int64_t(uint64_t{0} - (uint64_t{1} << uniform(0, 63)));  // -2^63 too
  case 4: return uniform(0, 70);
  default: return int64_t(rng()());
  }
}

float edgyFloat() {
  static const float kSpecial[] = {0.0f,     -0.0f,    1.0f,    -1.0f,   0.5f,
                                   2.5f,     -2.5f,    1e-40f,  -1e-40f, INFINITY,
                                   -INFINITY, NAN,     -NAN,    3e9f,    -3e9f,
                                   2147483648.0f, -2147483648.0f, 9.3e18f, 1.9e19f,
                                   65535.7f, 127.9f,   -128.5f, 1e30f,   88.7f};
  if (chance(0.4))
    return kSpecial[uniform(0, std::size(kSpecial) - 1)];
  if (chance(0.5))
    return std::normal_distribution<float>(0.0f, 4.0f)(rng());
  uint32_t bits = static_cast<uint32_t>(rng()());
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// One extra operand: storage plus the views both sides read.
struct Operand {
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Random contents for an operand of `spec`; extents from `extent(d)`; integers mostly
/// small (so loads chained through them stay in range), sometimes edge values.
Operand randomOperand(const RegionOperandSpec &spec, const std::function<int64_t(int)> &extent,
                      int64_t smallMax) {
  Operand op;
  int64_t n = 1;
  for (int d = 0; d < spec.rank; ++d) {
    op.shape.push_back(extent(d));
    n *= op.shape.back();
  }
  const size_t size = operandElementSize(spec.element_type);
  op.bytes.assign(n * size, 0);
  for (int64_t i = 0; i < n; ++i) {
    uint8_t *p = op.bytes.data() + i * size;
    if (spec.element_type == RegionType::kF32) {
      const float f = edgyFloat();
      std::memcpy(p, &f, 4);
    } else if (spec.element_type == RegionType::kI1) {
      *p = chance(0.5) ? 0 : static_cast<uint8_t>(uniform(1, 255));  // any nonzero is true
    } else {
      const int64_t v = chance(0.8) ? uniform(0, smallMax) : edgyInt();
      std::memcpy(p, &v, size);  // little-endian: the low bytes
    }
  }
  return op;
}

/// Builds both views of `operands`: the evaluator's and the generated code's.
void makeViews(const std::vector<RegionOperandSpec> &specs, std::vector<Operand> &operands,
               std::vector<RegionOperandView> &views, RegionOperands &ops, uint32_t *err) {
  views.clear();
  std::memset(&ops, 0xA5, sizeof(ops));  // poison: every field the code reads is set below
  for (size_t i = 0; i < specs.size(); ++i) {
    views.push_back({specs[i].element_type, operands[i].shape.data(), specs[i].rank,
                     operands[i].bytes.data()});
    ops.operand[i].data = operands[i].bytes.data();
    for (int d = 0; d < specs[i].rank; ++d) ops.operand[i].shape[d] = operands[i].shape[d];
  }
  ops.error = err;
}

/// Tallies of one comparison run: evaluations that succeeded, and by result.
struct Tally {
  int64_t ok = 0, errors = 0, trues = 0, falses = 0;
};

/// Compares one mask evaluation; returns false (after a gtest failure) on a mismatch.
template <class MaskFn>
bool compareMask(const RegionProgram &program, MaskFn fn, const RegionOperands &ops,
                 uint32_t &err, const std::vector<RegionOperandView> &views, int64_t b,
                 int64_t h, int64_t q, int64_t kv, Tally &tally, const char *name) {
  err = 0;
  StatusOr<bool> expected = program.evalMask(b, h, q, kv, views.data(), views.size());
  const bool actual = fn(ops, b, h, q, kv);
  if (!expected.ok()) {
    ++tally.errors;
    EXPECT_NE(err, 0u) << name << " at b=" << b << " h=" << h << " q=" << q << " kv=" << kv
                       << ": the evaluator failed (" << expected.status().message()
                       << ") but the generated code reported nothing";
    EXPECT_FALSE(actual) << name << ": a failed evaluation must drop the key";
    return err != 0 && !actual;
  }
  ++tally.ok;
  ++(*expected ? tally.trues : tally.falses);
  EXPECT_EQ(err, 0u) << name << " at b=" << b << " h=" << h << " q=" << q << " kv=" << kv;
  EXPECT_EQ(actual, *expected) << name << " at b=" << b << " h=" << h << " q=" << q
                               << " kv=" << kv;
  return err == 0 && actual == *expected;
}

template <class ScoreFn>
bool compareScore(const RegionProgram &program, ScoreFn fn, const RegionOperands &ops,
                  uint32_t &err, const std::vector<RegionOperandView> &views, float s, int64_t b,
                  int64_t h, int64_t q, int64_t kv, Tally &tally, const char *name) {
  err = 0;
  StatusOr<float> expected = program.evalScore(s, b, h, q, kv, views.data(), views.size());
  const float actual = fn(ops, s, b, h, q, kv);
  if (!expected.ok()) {
    ++tally.errors;
    EXPECT_NE(err, 0u) << name << ": the evaluator failed (" << expected.status().message()
                       << ") but the generated code reported nothing";
    EXPECT_EQ(bitsOf(actual), bitsOf(-INFINITY)) << name << ": a failed score drops the key";
    return err != 0;
  }
  ++tally.ok;
  EXPECT_EQ(err, 0u) << name;
  // Bit-identical; two NaNs count as equal (their payload is the hardware's business).
  const bool same =
      bitsOf(actual) == bitsOf(*expected) || (std::isnan(actual) && std::isnan(*expected));
  EXPECT_TRUE(same) << name << " at s=" << s << " (0x" << std::hex << bitsOf(s) << std::dec
                    << ") b=" << b << " h=" << h << " q=" << q << " kv=" << kv
                    << ": generated " << actual << " (0x" << std::hex << bitsOf(actual)
                    << "), evaluator " << *expected << " (0x" << bitsOf(*expected) << ")";
  return same && err == 0;
}

RegionProgram decodeOrDie(const unsigned char *bytes, unsigned size) {
  StatusOr<RegionProgram> program = decodeRegionBytecode(bytes, size);
  EXPECT_TRUE(program.ok()) << program.status().message();
  return std::move(program).value();
}

// ---- one variant per region op ----

RegionType typeFromName(const std::string &name) {
  if (name == "f32") return RegionType::kF32;
  return static_cast<RegionType>(std::stoi(name.substr(1)));
}

TEST(AttentionVariantHost, EveryRegionOpMatchesTheEvaluator) {
  constexpr int kTrials = 120;
  for (const opcases::OpCase &c : opcases::kOpCases) {
    SCOPED_TRACE(c.name);
    const RegionProgram program = decodeOrDie(c.bytecode, c.bytecodeSize);
    const std::vector<RegionOperandSpec> &specs = program.operandSpecs();
    Tally tally;
    int mismatches = 0;
    for (int trial = 0; trial < kTrials && mismatches < 3; ++trial) {
      // Operand #0: small shapes so both in-range and out-of-range loads happen.
      std::vector<Operand> operands;
      for (const RegionOperandSpec &spec : specs) {
        ASSERT_EQ(spec.element_type, typeFromName(c.operandType));
        const int64_t extents[4] = {spec.rank == 1 ? 16 : 4, spec.rank == 3 ? 2 : 5, 5, 1};
        operands.push_back(randomOperand(spec, [&](int d) { return extents[d]; }, 1000));
      }
      std::vector<RegionOperandView> views;
      RegionOperands ops;
      uint32_t err = 0;
      makeViews(specs, operands, views, ops, &err);
      // Half the time small, so loads of the [4, 5] operands land in range too.
      const int64_t b = uniform(-1, 16);
      const int64_t q = chance(0.5) ? uniform(-1, 5) : edgyInt();
      const int64_t kv = chance(0.5) ? uniform(-1, 5) : edgyInt();
      if (c.isMask) {
        // h selects the observed bit of the result: sweep them all.
        const int bitsToSee = c.observedBits == 0 ? 1 : c.observedBits;
        for (int h = 0; h < bitsToSee; ++h)
          mismatches += !compareMask(program, c.mask, ops, err, views, b, h, q, kv, tally,
                                     c.name);
      } else {
        mismatches += !compareScore(program, c.score, ops, err, views, edgyFloat(), b,
                                    uniform(0, 7), q, kv, tally, c.name);
      }
    }
    // Not vacuous: most cases evaluate successfully most of the time.
    EXPECT_GT(tally.ok, 0) << c.name << ": no evaluation succeeded";
  }
}

// ---- the emitter's refusals ----

TEST(AttentionRegionEmitter, RefusesWhatTheKernelsCannotTake) {
  auto message = [](const StatusOr<std::string> &s) {
    return s.ok() ? std::string("(ok)") : s.status().message();
  };
  const std::vector<uint8_t> causal = causalMaskBytecode(), softcap = softcapScoreBytecode(30);
  EXPECT_NE(message(codegen::emitAttentionVariantStruct("2x", causal, {})).find("'2x' is not a C++ identifier"),
            std::string::npos);
  EXPECT_NE(message(codegen::emitAttentionVariantStruct("A", softcap, {})).find("the mask program is a score"),
            std::string::npos);
  EXPECT_NE(message(codegen::emitAttentionVariantStruct("A", {}, causal)).find("the score program is a mask"),
            std::string::npos);
  std::vector<uint8_t> truncated(causal.begin(), causal.end() - 1);
  EXPECT_NE(message(codegen::emitAttentionVariantStruct("A", truncated, {})).find("the mask bytecode does not decode"),
            std::string::npos);
  // Nine operands, and an operand of rank 5.
  RegionBytecodeBuilder nine(RegionKind::kMask);
  for (int i = 0; i < 9; ++i) nine.addOperand(RegionType::kI32, 1);
  nine.yield(nine.constantBool(true));
  EXPECT_NE(message(codegen::emitAttentionVariantStruct("A", nine.finish(), {})).find("at most 8"),
            std::string::npos);
  RegionBytecodeBuilder rank5(RegionKind::kMask);
  rank5.addOperand(RegionType::kI8, 5);
  rank5.yield(rank5.constantBool(true));
  EXPECT_NE(message(codegen::emitAttentionVariantStruct("A", rank5.finish(), {})).find("rank 5"),
            std::string::npos);
  // Mask and score must read the same extra operands.
  RegionBytecodeBuilder scoreWithOperand(RegionKind::kScore);
  scoreWithOperand.addOperand(RegionType::kF32, 1);
  scoreWithOperand.yield(scoreWithOperand.argument(0));
  EXPECT_NE(message(codegen::emitAttentionVariantStruct("A", causal, scoreWithOperand.finish()))
                .find("disagree on the extra operands"),
            std::string::npos);
  EXPECT_TRUE(codegen::emitAttentionVariantStruct("A", causal, softcap).ok());
}

#if INGOT_CUDA_HAVE_EXAMPLE_VARIANTS
// ---- the example variants and the compiled Llama tree mask ----

/// Random (b, h, q, kv, s, operands) against variant V; operands shaped [4, 64, ...] with
/// small values, so the loads of realistic masks mostly stay in range.
template <class V>
void checkVariant(const char *name, int trials) {
  SCOPED_TRACE(name);
  std::optional<RegionProgram> mask, score;
  if (V::kHasMask) mask = decodeOrDie(V::kMaskBytecode, V::kMaskBytecodeSize);
  if (V::kHasScore) score = decodeOrDie(V::kScoreBytecode, V::kScoreBytecodeSize);
  const RegionProgram &any = mask ? *mask : *score;
  ASSERT_EQ(static_cast<int>(any.operandSpecs().size()), V::kNumOperands);
  Tally maskTally, scoreTally;
  int mismatches = 0;
  for (int trial = 0; trial < trials && mismatches < 3; ++trial) {
    std::vector<Operand> operands;
    for (const RegionOperandSpec &spec : any.operandSpecs())
      operands.push_back(randomOperand(spec, [](int d) { return d == 0 ? 4 : 64; }, 12));
    std::vector<RegionOperandView> views;
    RegionOperands ops;
    uint32_t err = 0;
    makeViews(any.operandSpecs(), operands, views, ops, &err);
    for (int k = 0; k < 64; ++k) {
      const bool wild = chance(0.05);
      const int64_t b = wild ? edgyInt() : uniform(0, 3);
      const int64_t h = wild ? edgyInt() : uniform(0, 15);
      const int64_t q = wild ? edgyInt() : uniform(0, 60);
      const int64_t kv = wild ? edgyInt() : uniform(0, 60);
      if (mask)
        mismatches += !compareMask(*mask, &V::mask, ops, err, views, b, h, q, kv, maskTally,
                                   name);
      if (score)
        mismatches += !compareScore(*score, &V::score, ops, err, views, edgyFloat(), b, h, q,
                                    kv, scoreTally, name);
    }
  }
  if (mask) {
    EXPECT_GT(maskTally.trues, trials) << name << ": too few visible keys to mean much";
    EXPECT_GT(maskTally.falses, trials) << name << ": too few hidden keys to mean much";
  }
  if (score) {
    EXPECT_GT(scoreTally.ok, trials) << name;
  }
}

TEST(AttentionVariantHost, CausalMatchesTheEvaluator) { checkVariant<Causal>("causal", 200); }
TEST(AttentionVariantHost, SlidingWindowMatchesTheEvaluator) {
  checkVariant<SlidingWindow>("sliding_window", 200);
}
TEST(AttentionVariantHost, ChunkedLocalMatchesTheEvaluator) {
  checkVariant<ChunkedLocal>("chunked_local", 200);
}
TEST(AttentionVariantHost, AlibiMatchesTheEvaluator) { checkVariant<Alibi>("alibi", 200); }
TEST(AttentionVariantHost, SoftcapMatchesTheEvaluator) { checkVariant<Softcap>("softcap", 200); }
TEST(AttentionVariantHost, DocumentMaskMatchesTheEvaluator) {
  checkVariant<DocumentMask>("document_mask", 200);
}
TEST(AttentionVariantHost, TreeMaskMatchesTheEvaluator) {
  checkVariant<TreeMask>("tree_mask", 200);
}
TEST(AttentionVariantHost, CompiledLlamaTreeMaskMatchesTheEvaluator) {
  checkVariant<LlamaTreeMask0>("llama_tree_mask", 200);
}

TEST(AttentionVariantHost, StructFlagsDescribeTheRegions) {
  EXPECT_TRUE(Causal::kHasMask);
  EXPECT_FALSE(Causal::kHasScore);
  EXPECT_FALSE(Causal::kMaskReadsHead);
  EXPECT_TRUE(Softcap::kHasScore);
  EXPECT_TRUE(Alibi::kHasMask && Alibi::kHasScore);
  EXPECT_EQ(TreeMask::kNumOperands, 2);
  EXPECT_EQ(LlamaTreeMask0::kNumOperands, 2);
  EXPECT_EQ(LlamaTreeMask0::kOperandRank[1], 3);
}
#endif

}  // namespace
}  // namespace ingot
