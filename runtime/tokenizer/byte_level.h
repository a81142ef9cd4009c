// GPT-2's byte-to-unicode mapping: every byte as a printable character for byte-level BPE.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ingot {

/// The UTF-8 text of the character GPT-2 assigns to `byte` (e.g. ' ' -> "Ġ", '\n' -> "Ċ").
/// Printable Latin-1 bytes map to themselves; the other 68 map to U+0100 onwards in order.
const std::string& byteLevelChar(uint8_t byte);

/// Encodes raw bytes as byte-level characters (the form byte-level vocabularies store).
std::string byteLevelEncode(std::string_view bytes);

/// Inverse of byteLevelEncode. A character outside the mapping is kept as its UTF-8.
std::string byteLevelDecode(std::string_view text);

/// Appends the UTF-8 encoding of code point `cp` to `out`.
void appendUtf8(uint32_t cp, std::string* out);

}  // namespace ingot
