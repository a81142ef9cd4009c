// GPT-2's byte-to-unicode mapping and its inverse.
#include "runtime/tokenizer/byte_level.h"

#include <array>
#include <vector>

namespace ingot {
namespace {

/// Code point GPT-2 assigns to each byte.
std::array<uint32_t, 256> makeByteToCodePoint() {
  std::array<uint32_t, 256> map{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    map[b] = printable ? b : next++;
  }
  return map;
}

struct Tables {
  std::array<std::string, 256> byteToChar;
  std::vector<int16_t> codePointToByte;  // -1 where a code point is not in the mapping
  Tables() {
    std::array<uint32_t, 256> cps = makeByteToCodePoint();
    codePointToByte.assign(512, -1);
    for (uint32_t b = 0; b < 256; ++b) {
      appendUtf8(cps[b], &byteToChar[b]);
      codePointToByte[cps[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

void appendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

const std::string& byteLevelChar(uint8_t byte) { return tables().byteToChar[byte]; }

std::string byteLevelEncode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += byteLevelChar(static_cast<uint8_t>(c));
  return out;
}

std::string byteLevelDecode(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    // The mapping only uses code points below U+0200: one or two UTF-8 bytes.
    if (c < 0x80) {
      int16_t b = t.codePointToByte[c];
      if (b >= 0) out += static_cast<char>(b); else out += static_cast<char>(c);
      ++i;
      continue;
    }
    if ((c >> 5) == 0x6 && i + 1 < text.size()) {
      uint32_t cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);
      if (cp < t.codePointToByte.size() && t.codePointToByte[cp] >= 0) {
        out += static_cast<char>(t.codePointToByte[cp]);
        i += 2;
        continue;
      }
    }
    // Not part of the mapping: copy the whole UTF-8 sequence unchanged.
    size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (i + n > text.size()) n = text.size() - i;
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace ingot
