// Every region opcode against a direct C++ reference on random inputs, at many widths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "core/region/region_bytecode_builder.h"
#include "core/region/region_disassembler.h"
#include "core/region/region_program.h"
#include "testing/test_seed.h"

namespace ingot {
namespace {

using Reg = RegionBytecodeBuilder::Reg;
using Int128 = __int128;  // wide enough for every iN (N <= 64) result before wrapping

constexpr int kSamples = 300;
const RegionType kIntTypes[] = {RegionType::kI1, static_cast<RegionType>(2),
                                static_cast<RegionType>(7), RegionType::kI8,
                                static_cast<RegionType>(13), RegionType::kI16,
                                static_cast<RegionType>(31), RegionType::kI32,
                                static_cast<RegionType>(33), static_cast<RegionType>(48),
                                static_cast<RegionType>(63), RegionType::kI64,
                                RegionType::kIndex};

/// A reference result: trapped (MLIR: undefined behaviour), poison, or the canonical
/// (zero-extended) bits.
struct IntRef {
  bool traps;
  uint64_t bits;
  bool poison = false;
};
const IntRef kPoison{false, 0, true};

/// Reference arithmetic on exact integers: wraps modulo 2^w at the end only.
struct Ref {
  unsigned w;
  Int128 mod() const { return Int128{1} << w; }
  Int128 s(uint64_t v) const {  // signed value of canonical bits
    Int128 x = v;
    return ((v >> (w - 1)) & 1) ? x - mod() : x;
  }
  uint64_t wrap(Int128 v) const {
    Int128 r = v % mod();
    if (r < 0) r += mod();
    return static_cast<uint64_t>(r);
  }
  Int128 smin() const { return -(Int128{1} << (w - 1)); }
  Int128 smax() const { return (Int128{1} << (w - 1)) - 1; }
};

IntRef referenceBinary(RegionOpcode op, unsigned w, uint64_t a, uint64_t b) {
  Ref r{w};
  Int128 sa = r.s(a), sb = r.s(b);
  switch (op) {
    case RegionOpcode::kAddI: return {false, r.wrap(Int128(a) + Int128(b))};
    case RegionOpcode::kSubI: return {false, r.wrap(Int128(a) - Int128(b))};
    case RegionOpcode::kMulI: return {false, r.wrap(sa * sb)};
    case RegionOpcode::kDivSI: {
      if (sb == 0) return {true, 0};
      Int128 q = sa / sb;
      if (q > r.smax()) return {true, 0};
      return {false, r.wrap(q)};
    }
    case RegionOpcode::kRemSI:
      if (sb == 0 || (sa == r.smin() && sb == -1)) return {true, 0};
      return {false, r.wrap(sa % sb)};
    case RegionOpcode::kDivUI: return b == 0 ? IntRef{true, 0} : IntRef{false, a / b};
    case RegionOpcode::kRemUI: return b == 0 ? IntRef{true, 0} : IntRef{false, a % b};
    case RegionOpcode::kAndI: return {false, a & b};
    case RegionOpcode::kOrI: return {false, a | b};
    case RegionOpcode::kXOrI: return {false, a ^ b};
    case RegionOpcode::kShLI: return b >= w ? kPoison : IntRef{false, r.wrap(Int128(a) << b)};
    case RegionOpcode::kShRUI: return b >= w ? kPoison : IntRef{false, a >> b};
    case RegionOpcode::kShRSI: return b >= w ? kPoison : IntRef{false, r.wrap(sa >> b)};
    case RegionOpcode::kMaxSI: return {false, r.wrap(sa > sb ? sa : sb)};
    case RegionOpcode::kMinSI: return {false, r.wrap(sa < sb ? sa : sb)};
    case RegionOpcode::kMaxUI: return {false, a > b ? a : b};
    case RegionOpcode::kMinUI: return {false, a < b ? a : b};
    default: return {true, 0};
  }
}

bool referenceCmpI(uint8_t p, unsigned w, uint64_t a, uint64_t b) {
  Ref r{w};
  Int128 sa = r.s(a), sb = r.s(b);
  const bool results[] = {a == b, a != b, sa < sb, sa <= sb, sa > sb,
                          sa >= sb, a < b, a <= b, a > b, a >= b};
  return results[p];
}

bool referenceCmpF(uint8_t p, float a, float b) {
  bool uno = std::isnan(a) || std::isnan(b);
  // Ordered predicates compare only non-NaN values; unordered ones are their negation's
  // complement: u<op> == !(o<inverse op>).
  const bool results[] = {false,  !uno && a == b, !uno && a > b,  !uno && a >= b,
                          !uno && a < b,         !uno && a <= b, !uno && a != b, !uno,
                          !(!uno && a != b),     !(!uno && a <= b), !(!uno && a < b),
                          !(!uno && a >= b),     !(!uno && a > b), !(!uno && a == b), uno,
                          true};
  return results[p];
}

class RandomValues {
 public:
  explicit RandomValues(uint32_t seed) : rng_(seed) {}
  /// A canonical iN value, biased toward edge cases.
  uint64_t integer(unsigned w) {
    const uint64_t m = w >= 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
    const uint64_t top = uint64_t{1} << (w - 1);
    switch (rng_() % 8) {
      case 0: return 0;
      case 1: return 1 & m;
      case 2: return m;          // -1
      case 3: return top;        // signed min
      case 4: return top - 1;    // signed max
      case 5: return rng_() % 70 & m;  // small (shift amounts)
      default: return rng_() & m;
    }
  }
  float real() {
    switch (rng_() % 10) {
      case 0: return std::numeric_limits<float>::quiet_NaN();
      case 1: return (rng_() & 1) ? 0.0f : -0.0f;
      case 2: return (rng_() & 1) ? INFINITY : -INFINITY;
      case 3: return std::numeric_limits<float>::denorm_min() * static_cast<float>(rng_() % 100);
      case 4: {
        uint32_t bits = static_cast<uint32_t>(rng_());
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
      }
      case 5: return static_cast<float>(static_cast<int64_t>(rng_() % 2000) - 1000);
      default: return std::uniform_real_distribution<float>(-50.0f, 50.0f)(rng_);
    }
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// Same value, or both NaN.
bool sameFloat(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || bitsOf(a) == bitsOf(b);
}

/// Builds `result = <make>(...)`; the mask yields `result == expected` (or anything if the
/// op is expected to trap), then evaluates it.
template <typename Make>
StatusOr<bool> evalIntEquals(RegionType type, uint64_t expected, Make make) {
  RegionBytecodeBuilder b(RegionKind::kMask);
  Reg r = make(b);
  Reg e = b.constantInt(type, expected);
  b.yield(b.cmpi(CmpIPredicate::kEq, r, e));
  auto program = decodeRegionBytecode(b.finish());
  if (!program.ok()) return program.status();
  return program->evalMask(0, 0, 0, 0);
}

/// Builds a score program whose yield is `<make>(s)` and evaluates it with s = `s`.
template <typename Make>
StatusOr<float> evalFloat(float s, Make make) {
  RegionBytecodeBuilder b(RegionKind::kScore);
  Reg x = b.argument(0);
  b.yield(make(b, x));
  auto program = decodeRegionBytecode(b.finish());
  if (!program.ok()) return program.status();
  return program->evalScore(s, 0, 0, 0, 0);
}

TEST(RegionOpcodeTest, IntegerBinaryOpsMatchReferenceAtEveryWidth) {
  const RegionOpcode ops[] = {
      RegionOpcode::kAddI,  RegionOpcode::kSubI,  RegionOpcode::kMulI,  RegionOpcode::kDivSI,
      RegionOpcode::kDivUI, RegionOpcode::kRemSI, RegionOpcode::kRemUI, RegionOpcode::kAndI,
      RegionOpcode::kOrI,   RegionOpcode::kXOrI,  RegionOpcode::kShLI,  RegionOpcode::kShRSI,
      RegionOpcode::kShRUI, RegionOpcode::kMaxSI, RegionOpcode::kMinSI, RegionOpcode::kMaxUI,
      RegionOpcode::kMinUI};
  RandomValues values(ingot::testing::testSeed());
  for (RegionOpcode op : ops) {
    for (RegionType type : kIntTypes) {
      const unsigned w = typeBitWidth(type);
      for (int i = 0; i < kSamples; ++i) {
        const uint64_t a = values.integer(w), c = values.integer(w);
        const IntRef want = referenceBinary(op, w, a, c);
        auto got = evalIntEquals(type, want.bits, [&](RegionBytecodeBuilder& b) {
          return b.binary(op, b.constantInt(type, a), b.constantInt(type, c));
        });
        const std::string what = std::string(regionOpcodeName(op)) + " " + regionTypeName(type) +
                                 " " + std::to_string(a) + ", " + std::to_string(c);
        if (want.traps) {
          ASSERT_FALSE(got.ok()) << what << " should trap";
          EXPECT_NE(got.status().message().find(regionOpcodeName(op)), std::string::npos);
        } else if (want.poison) {
          // The poison flows through cmpi into the yield, which reports it.
          ASSERT_FALSE(got.ok()) << what << " should be poison";
          EXPECT_NE(got.status().message().find("poison"), std::string::npos);
        } else {
          ASSERT_TRUE(got.ok()) << what << ": " << got.status().message();
          ASSERT_TRUE(*got) << what << " != " << want.bits;
        }
      }
    }
  }
}

TEST(RegionOpcodeTest, AbsIMatchesReferenceAndWrapsIntMin) {
  RandomValues values(ingot::testing::testSeed());
  for (RegionType type : kIntTypes) {
    const unsigned w = typeBitWidth(type);
    Ref r{w};
    for (int i = 0; i < kSamples; ++i) {
      const uint64_t a = values.integer(w);
      const Int128 sa = r.s(a);
      const uint64_t want = r.wrap(sa < 0 ? -sa : sa);
      auto got = evalIntEquals(type, want, [&](RegionBytecodeBuilder& b) {
        return b.unary(RegionOpcode::kAbsI, b.constantInt(type, a));
      });
      ASSERT_TRUE(got.ok() && *got) << "absi " << regionTypeName(type) << " " << a;
    }
  }
}

TEST(RegionOpcodeTest, ArithmeticWrapsToWidthLikeMlir) {
  struct Case {
    RegionOpcode op;
    RegionType type;
    uint64_t a, b, want;
  };
  const Case cases[] = {
      {RegionOpcode::kAddI, RegionType::kI8, 127, 1, 0x80},                // 127 + 1 = -128
      {RegionOpcode::kAddI, RegionType::kI1, 1, 1, 0},                     // i1: 1 + 1 = 0
      {RegionOpcode::kSubI, RegionType::kI16, 0, 1, 0xffff},               // 0 - 1 = -1
      {RegionOpcode::kMulI, RegionType::kI32, 0x10000, 0x10000, 0},        // 2^32 wraps to 0
      {RegionOpcode::kMulI, static_cast<RegionType>(4), 7, 7, 1},          // 49 mod 16
      {RegionOpcode::kShLI, RegionType::kI8, 0x81, 1, 0x02},               // high bit drops
      {RegionOpcode::kShRSI, RegionType::kI8, 0x80, 7, 0xff},              // sign fills
      {RegionOpcode::kShRUI, RegionType::kI8, 0x80, 7, 0x01},
      {RegionOpcode::kDivSI, RegionType::kI8, 0x80, 2, 0xc0},              // -128 / 2 = -64
      {RegionOpcode::kRemSI, RegionType::kI8, 0xf9, 2, 0xff},              // -7 % 2 = -1
      {RegionOpcode::kAddI, RegionType::kIndex, ~uint64_t{0}, 2, 1},       // index is 64-bit
      {RegionOpcode::kMaxSI, RegionType::kI1, 0, 1, 0},                    // i1 1 is -1
      {RegionOpcode::kMaxUI, RegionType::kI1, 0, 1, 1},
  };
  for (const Case& c : cases) {
    auto got = evalIntEquals(c.type, c.want, [&](RegionBytecodeBuilder& b) {
      return b.binary(c.op, b.constantInt(c.type, c.a), b.constantInt(c.type, c.b));
    });
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(*got) << regionOpcodeName(c.op) << " " << regionTypeName(c.type);
  }
}

TEST(RegionOpcodeTest, CmpIMatchesReferenceForAllPredicates) {
  RandomValues values(ingot::testing::testSeed());
  for (uint8_t p = 0; p < kCmpIPredicateCount; ++p) {
    for (RegionType type : kIntTypes) {
      const unsigned w = typeBitWidth(type);
      for (int i = 0; i < kSamples / 3; ++i) {
        const uint64_t a = values.integer(w), c = (i % 4 == 0) ? a : values.integer(w);
        RegionBytecodeBuilder b(RegionKind::kMask);
        b.yield(b.cmpi(static_cast<CmpIPredicate>(p), b.constantInt(type, a),
                       b.constantInt(type, c)));
        auto program = decodeRegionBytecode(b.finish());
        ASSERT_TRUE(program.ok()) << program.status().message();
        auto got = program->evalMask(0, 0, 0, 0);
        ASSERT_TRUE(got.ok());
        ASSERT_EQ(*got, referenceCmpI(p, w, a, c))
            << "cmpi " << cmpIPredicateName(p) << " " << regionTypeName(type) << " " << a
            << ", " << c;
      }
    }
  }
}

TEST(RegionOpcodeTest, FloatBinaryOpsMatchReference) {
  auto maximum = [](float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
    if (a == 0 && b == 0) return (std::signbit(a) && std::signbit(b)) ? -0.0f : 0.0f;
    return std::fmax(a, b);
  };
  auto minimum = [](float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
    if (a == 0 && b == 0) return (std::signbit(a) || std::signbit(b)) ? -0.0f : 0.0f;
    return std::fmin(a, b);
  };
  auto maxnum = [&](float a, float b) {
    return std::isnan(a) ? b : std::isnan(b) ? a : maximum(a, b);
  };
  auto minnum = [&](float a, float b) {
    return std::isnan(a) ? b : std::isnan(b) ? a : minimum(a, b);
  };
  struct Op {
    RegionOpcode op;
    std::function<float(float, float)> ref;
  };
  const std::vector<Op> ops = {
      {RegionOpcode::kAddF, [](float a, float b) { return a + b; }},
      {RegionOpcode::kSubF, [](float a, float b) { return a - b; }},
      {RegionOpcode::kMulF, [](float a, float b) { return a * b; }},
      {RegionOpcode::kDivF, [](float a, float b) { return a / b; }},
      {RegionOpcode::kMaximumF, maximum},
      {RegionOpcode::kMinimumF, minimum},
      {RegionOpcode::kMaxNumF, maxnum},
      {RegionOpcode::kMinNumF, minnum},
      {RegionOpcode::kPowF, [](float a, float b) { return std::pow(a, b); }},
      {RegionOpcode::kCopySign, [](float a, float b) { return std::copysign(a, b); }},
  };
  RandomValues values(ingot::testing::testSeed());
  for (const Op& op : ops) {
    for (int i = 0; i < kSamples; ++i) {
      const float a = values.real(), c = values.real();
      auto got = evalFloat(a, [&](RegionBytecodeBuilder& b, Reg x) {
        return b.binary(op.op, x, b.constantF32(c));
      });
      ASSERT_TRUE(got.ok()) << got.status().message();
      const float want = op.ref(a, c);
      ASSERT_TRUE(sameFloat(*got, want))
          << regionOpcodeName(op.op) << "(" << a << ", " << c << ") = " << *got << ", want "
          << want;
    }
  }
}

TEST(RegionOpcodeTest, FloatUnaryOpsMatchReference) {
  struct Op {
    RegionOpcode op;
    float (*ref)(float);
  };
  const Op ops[] = {
      {RegionOpcode::kNegF, [](float a) { return -a; }},
      {RegionOpcode::kAbsF, [](float a) { return std::fabs(a); }},
      {RegionOpcode::kSqrt, [](float a) { return std::sqrt(a); }},
      {RegionOpcode::kRsqrt, [](float a) { return 1.0f / std::sqrt(a); }},
      {RegionOpcode::kExp, [](float a) { return std::exp(a); }},
      {RegionOpcode::kExp2, [](float a) { return std::exp2(a); }},
      {RegionOpcode::kLog, [](float a) { return std::log(a); }},
      {RegionOpcode::kLog2, [](float a) { return std::log2(a); }},
      {RegionOpcode::kTanh, [](float a) { return std::tanh(a); }},
      {RegionOpcode::kFloor, [](float a) { return std::floor(a); }},
      {RegionOpcode::kCeil, [](float a) { return std::ceil(a); }},
  };
  RandomValues values(ingot::testing::testSeed());
  for (const Op& op : ops) {
    for (int i = 0; i < kSamples; ++i) {
      const float a = values.real();
      auto got = evalFloat(a, [&](RegionBytecodeBuilder& b, Reg x) { return b.unary(op.op, x); });
      ASSERT_TRUE(got.ok()) << got.status().message();
      ASSERT_TRUE(sameFloat(*got, op.ref(a))) << regionOpcodeName(op.op) << "(" << a << ")";
    }
  }
}

TEST(RegionOpcodeTest, CmpFMatchesReferenceForAllPredicatesIncludingNaN) {
  RandomValues values(ingot::testing::testSeed());
  for (uint8_t p = 0; p < kCmpFPredicateCount; ++p) {
    for (int i = 0; i < kSamples; ++i) {
      const float a = values.real(), c = (i % 4 == 0) ? a : values.real();
      RegionBytecodeBuilder b(RegionKind::kMask);
      b.yield(b.cmpf(static_cast<CmpFPredicate>(p), b.constantF32(a), b.constantF32(c)));
      auto program = decodeRegionBytecode(b.finish());
      ASSERT_TRUE(program.ok()) << program.status().message();
      auto got = program->evalMask(0, 0, 0, 0);
      ASSERT_TRUE(got.ok());
      ASSERT_EQ(*got, referenceCmpF(p, a, c))
          << "cmpf " << cmpFPredicateName(p) << " " << a << ", " << c;
    }
  }
}

TEST(RegionOpcodeTest, SelectPicksByCondition) {
  RandomValues values(ingot::testing::testSeed());
  for (int i = 0; i < kSamples; ++i) {
    const bool cond = values.rng()() & 1;
    const float a = values.real(), c = values.real();
    auto got = evalFloat(a, [&](RegionBytecodeBuilder& b, Reg x) {
      return b.select(b.constantBool(cond), x, b.constantF32(c));
    });
    ASSERT_TRUE(got.ok());
    ASSERT_TRUE(sameFloat(*got, cond ? a : c));
    const uint64_t u = values.integer(32), v = values.integer(32);
    auto got_int = evalIntEquals(RegionType::kI32, cond ? u : v, [&](RegionBytecodeBuilder& b) {
      return b.select(b.constantBool(cond), b.constantInt(RegionType::kI32, u),
                      b.constantInt(RegionType::kI32, v));
    });
    ASSERT_TRUE(got_int.ok() && *got_int);
  }
}

TEST(RegionOpcodeTest, IntegerCastsMatchReference) {
  RandomValues values(ingot::testing::testSeed());
  const RegionType* begin = std::begin(kIntTypes);
  const RegionType* end = std::end(kIntTypes) - 1;  // signless types only (no index)
  for (const RegionType* from = begin; from != end; ++from) {
    const unsigned fw = typeBitWidth(*from);
    Ref rf{fw};
    for (const RegionType* to = begin; to != std::end(kIntTypes); ++to) {
      const unsigned tw = typeBitWidth(*to);
      Ref rt{tw};
      for (int i = 0; i < kSamples / 10; ++i) {
        const uint64_t a = values.integer(fw);
        auto check = [&](RegionOpcode op, RegionType src_type, uint64_t src, RegionType dst,
                         uint64_t want) {
          auto got = evalIntEquals(dst, want, [&](RegionBytecodeBuilder& b) {
            return b.cast(op, dst, b.constantInt(src_type, src));
          });
          ASSERT_TRUE(got.ok()) << got.status().message();
          ASSERT_TRUE(*got) << regionOpcodeName(op) << " " << src << " : "
                            << regionTypeName(src_type) << " to " << regionTypeName(dst);
        };
        if (*to == RegionType::kIndex) {
          check(RegionOpcode::kIndexCast, *from, a, *to, rt.wrap(rf.s(a)));
          check(RegionOpcode::kIndexCastUI, *from, a, *to, a);
          const uint64_t idx = values.integer(64);
          check(RegionOpcode::kIndexCast, RegionType::kIndex, idx, *from, rf.wrap(idx));
          check(RegionOpcode::kIndexCastUI, RegionType::kIndex, idx, *from, rf.wrap(idx));
        } else if (tw > fw) {
          check(RegionOpcode::kExtSI, *from, a, *to, rt.wrap(rf.s(a)));
          check(RegionOpcode::kExtUI, *from, a, *to, a);
        } else if (tw < fw) {
          check(RegionOpcode::kTruncI, *from, a, *to, rt.wrap(a));
        }
      }
    }
  }
}

TEST(RegionOpcodeTest, IntFloatCastsMatchReferenceAndTrapOutOfRange) {
  RandomValues values(ingot::testing::testSeed());
  for (const RegionType type : kIntTypes) {
    if (type == RegionType::kIndex) continue;
    const unsigned w = typeBitWidth(type);
    Ref r{w};
    for (int i = 0; i < kSamples; ++i) {
      const uint64_t a = values.integer(w);
      // sitofp / uitofp: round to nearest from the exact integer.
      for (bool is_signed : {true, false}) {
        RegionBytecodeBuilder b(RegionKind::kScore);
        b.argument(0);
        b.yield(b.cast(is_signed ? RegionOpcode::kSIToFP : RegionOpcode::kUIToFP,
                       RegionType::kF32, b.constantInt(type, a)));
        auto program = decodeRegionBytecode(b.finish());
        ASSERT_TRUE(program.ok()) << program.status().message();
        auto got = program->evalScore(0, 0, 0, 0, 0);
        const float want = is_signed ? static_cast<float>(static_cast<int64_t>(r.s(a)))
                                     : static_cast<float>(a);
        ASSERT_TRUE(got.ok() && sameFloat(*got, want)) << a << " to f32";
      }
      // fptosi / fptoui: toward zero; NaN or out of range is poison (an error at the yield).
      const float f = (i % 2) ? values.real() : static_cast<float>(static_cast<int64_t>(r.s(a)));
      for (bool is_signed : {true, false}) {
        const float t = std::trunc(f);
        const float lo = is_signed ? -std::ldexp(1.0f, static_cast<int>(w) - 1) : 0.0f;
        const float hi = std::ldexp(1.0f, is_signed ? static_cast<int>(w) - 1 : static_cast<int>(w));
        const bool traps = std::isnan(f) || !(t >= lo && t < hi);
        const uint64_t want = traps ? 0 : r.wrap(static_cast<Int128>(t));
        auto got = evalIntEquals(type, want, [&](RegionBytecodeBuilder& b) {
          return b.cast(is_signed ? RegionOpcode::kFPToSI : RegionOpcode::kFPToUI, type,
                        b.constantF32(f));
        });
        if (traps) {
          ASSERT_FALSE(got.ok()) << f << " to " << regionTypeName(type) << " should be poison";
          EXPECT_NE(got.status().message().find("poison"), std::string::npos);
        } else {
          ASSERT_TRUE(got.ok() && *got) << f << " to " << regionTypeName(type);
        }
      }
    }
  }
}

TEST(RegionOpcodeTest, ArgumentsArriveInOrder) {
  // mask (b, h, q, kv): yield b*1000 + h*100 + q*10 + kv == expected.
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t b0 = trial % 3, h0 = trial % 5, q0 = trial % 7, kv0 = trial % 9;
    RegionBytecodeBuilder b(RegionKind::kMask);
    Reg acc = b.constantIndex(0);
    const int64_t scale[] = {1000, 100, 10, 1};
    for (uint8_t n = 0; n < 4; ++n) {
      acc = b.binary(RegionOpcode::kAddI, acc,
                     b.binary(RegionOpcode::kMulI, b.argument(n), b.constantIndex(scale[n])));
    }
    b.yield(b.cmpi(CmpIPredicate::kEq, acc, b.constantIndex(b0 * 1000 + h0 * 100 + q0 * 10 + kv0)));
    auto program = decodeRegionBytecode(b.finish());
    ASSERT_TRUE(program.ok());
    auto got = program->evalMask(b0, h0, q0, kv0);
    ASSERT_TRUE(got.ok() && *got);
  }
}

}  // namespace
}  // namespace ingot
