// The mask shapes both backends run without evaluating the region per (query, key): facts
// read off a mask program's registers, shared by the CPU's AttentionVariantPrograms and the
// CUDA variant emitter so that both recognize the same masks.
#pragma once

#include <cstdint>
#include <vector>

#include "core/region/region_program.h"

namespace ingot {

/// Mask region argument numbers (schemas/region_bytecode.h).
inline constexpr uint8_t kMaskArgB = 0;
inline constexpr uint8_t kMaskArgHead = 1;
inline constexpr uint8_t kMaskArgQ = 2;
inline constexpr uint8_t kMaskArgKv = 3;

/// The instruction defining each register of `program` (null where none does).
std::vector<const RegionInstruction*> registerDefinitions(const RegionProgram& program);

/// Whether register `r` holds mask argument `arg`.
bool isMaskArgument(const std::vector<const RegionInstruction*>& def, uint16_t r, uint8_t arg);

/// Whether register `reg` is the compare kv <= q (or q >= kv) of the mask's arguments.
bool isCausalCompare(const std::vector<const RegionInstruction*>& def, uint16_t reg);

/// W when register `reg` is a compare hiding every key W or more slots before its query:
/// (q - kv) < W (signed or unsigned; what the importers write for a local layer) or
/// q < kv + W, W a positive constant; else 0.
int64_t windowCompareWidth(const std::vector<const RegionInstruction*>& def, uint16_t reg);

}  // namespace ingot
