// libFuzzer target: decode arbitrary bytes as region bytecode; evaluate whatever decodes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/region/region_disassembler.h"
#include "core/region/region_program.h"

namespace {

using ingot::RegionOperandView;
using ingot::RegionProgram;

// Every operand gets this shape's first `rank` extents: small, so in-range and out-of-range
// indices are both easy to reach. 3*3*2^6 = 576 elements of up to 8 bytes.
constexpr int64_t kShape[ingot::region_bytecode::kMaxOperandRank] = {3, 3, 2, 2, 2, 2, 2, 2};
constexpr size_t kMaxElements = 576;

struct OperandStorage {
  OperandStorage() {
    for (size_t i = 0; i < sizeof(bytes); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  }
  alignas(8) uint8_t bytes[kMaxElements * 8];
};

const OperandStorage& storage() {
  static const OperandStorage s;
  return s;
}

struct Tuple {
  int64_t b, h, q, kv;
};
// In range, on the edge, past the edge, negative and huge.
constexpr Tuple kTuples[] = {{0, 0, 0, 0}, {1, 2, 2, 1}, {2, 1, 0, 2}, {0, 0, 3, 3},
                             {-1, 0, 1, 0}, {0, 7, std::numeric_limits<int64_t>::max(), 1},
                             {0, 0, std::numeric_limits<int64_t>::min(), -1}};
const float kScores[] = {0.0f, 1.5f, -3.0e38f, std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN()};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ingot::StatusOr<RegionProgram> program = ingot::decodeRegionBytecode(data, size);
  if (!program.ok()) {
    // Errors must be one line.
    if (program.status().message().find('\n') != std::string::npos) __builtin_trap();
    return 0;
  }
  std::string text = ingot::disassembleRegion(*program);
  if (text.empty()) __builtin_trap();

  std::vector<RegionOperandView> views;
  for (const ingot::RegionOperandSpec& spec : program->operandSpecs()) {
    views.push_back({spec.element_type, kShape, spec.rank, storage().bytes});
  }
  for (size_t i = 0; i < sizeof(kTuples) / sizeof(kTuples[0]); ++i) {
    const Tuple& t = kTuples[i];
    if (program->kind() == ingot::RegionKind::kMask) {
      auto r = program->evalMask(t.b, t.h, t.q, t.kv, views.data(), views.size());
      (void)r;
    } else {
      auto r = program->evalScore(kScores[i % 5], t.b, t.h, t.q, t.kv, views.data(), views.size());
      (void)r;
    }
  }
  // Too few operands must be an error, never a read.
  if (!views.empty()) {
    auto r = program->kind() == ingot::RegionKind::kMask
                 ? program->evalMask(0, 0, 0, 0, views.data(), views.size() - 1).ok()
                 : program->evalScore(0, 0, 0, 0, 0, views.data(), views.size() - 1).ok();
    if (r) __builtin_trap();
  }
  return 0;
}
