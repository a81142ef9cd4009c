// The six example attention variants as region bytecode, built with RegionBytecodeBuilder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schemas/region_bytecode.h"

namespace ingot {

/// One example variant: a name and the bytecode of its mask or score region.
struct RegionExample {
  std::string name;
  RegionKind kind;
  std::vector<uint8_t> bytecode;
};

/// mask: kv <= q.
std::vector<uint8_t> causalMaskBytecode();
/// mask: kv <= q && q - kv < window.
std::vector<uint8_t> slidingWindowMaskBytecode(int64_t window);
/// score: s - slope(h) * (q - kv), slope(h) = exp2(-8 * (h + 1) / num_heads) (ALiBi).
std::vector<uint8_t> alibiScoreBytecode(int64_t num_heads);
/// score: cap * tanh(s / cap) (tanh soft-capping).
std::vector<uint8_t> softcapScoreBytecode(float cap);
/// mask with operand #0 doc_ids: i32[b, slot]: kv <= q && doc_ids[b, q] == doc_ids[b, kv].
std::vector<uint8_t> documentMaskBytecode();
/// Speculative tree mask with operands #0 tree_start: i32[b] (first tree slot of request b)
/// and #1 tree_bits: i32[b, node, word] (bit j of node i: tree node j is an ancestor-or-self
/// of node i). Slots before the tree are causal; a tree slot sees a tree slot only through
/// its bit. Load indices are clamped to 0 so every (q, kv) evaluates without error. A
/// positive `window` also requires q - kv < window (Gemma 3's local layers, as the importer
/// writes them).
std::vector<uint8_t> treeMaskBytecode(int64_t window = 0);

/// All six with small parameters (window 4, 8 heads, cap 30), for tests and fuzz seeds.
std::vector<RegionExample> regionExamples();

}  // namespace ingot
