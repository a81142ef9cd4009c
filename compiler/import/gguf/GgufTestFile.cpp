//===- GgufTestFile.cpp - Reference data and byte builders for GGUF tests ----===//
#include "compiler/import/gguf/GgufTestFile.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

namespace ingot::gguf::testing {

std::string testDataPath(const std::string &name) {
  return std::string(INGOT_GGUF_TEST_DATA_DIR) + "/" + name;
}

std::vector<uint8_t> readFileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

size_t offsetAfterString(const std::vector<uint8_t> &bytes, std::string_view text) {
  ByteWriter pattern;
  pattern.str(text);
  auto it = std::search(bytes.begin(), bytes.end(), pattern.bytes.begin(), pattern.bytes.end());
  if (it == bytes.end())
    return std::string::npos;
  return static_cast<size_t>(it - bytes.begin()) + pattern.size();
}

void putU32(std::vector<uint8_t> &bytes, size_t offset, uint32_t value) {
  for (int b = 0; b < 4; ++b)
    bytes.at(offset + b) = static_cast<uint8_t>(value >> (8 * b));
}
void putU64(std::vector<uint8_t> &bytes, size_t offset, uint64_t value) {
  for (int b = 0; b < 8; ++b)
    bytes.at(offset + b) = static_cast<uint8_t>(value >> (8 * b));
}
uint32_t getU32(const std::vector<uint8_t> &bytes, size_t offset) {
  uint32_t v = 0;
  for (int b = 0; b < 4; ++b)
    v |= static_cast<uint32_t>(bytes.at(offset + b)) << (8 * b);
  return v;
}
uint64_t getU64(const std::vector<uint8_t> &bytes, size_t offset) {
  uint64_t v = 0;
  for (int b = 0; b < 8; ++b)
    v |= static_cast<uint64_t>(bytes.at(offset + b)) << (8 * b);
  return v;
}

ByteWriter &ByteWriter::u8(uint8_t v) {
  bytes.push_back(v);
  return *this;
}
ByteWriter &ByteWriter::u32(uint32_t v) {
  for (int b = 0; b < 4; ++b)
    bytes.push_back(static_cast<uint8_t>(v >> (8 * b)));
  return *this;
}
ByteWriter &ByteWriter::u64(uint64_t v) {
  for (int b = 0; b < 8; ++b)
    bytes.push_back(static_cast<uint8_t>(v >> (8 * b)));
  return *this;
}
ByteWriter &ByteWriter::str(std::string_view s) {
  u64(s.size());
  return raw(s.data(), s.size());
}
ByteWriter &ByteWriter::raw(const void *data, size_t size) {
  const auto *p = static_cast<const uint8_t *>(data);
  bytes.insert(bytes.end(), p, p + size);
  return *this;
}
ByteWriter &ByteWriter::padTo(size_t alignment) {
  while (bytes.size() % alignment != 0)
    bytes.push_back(0);
  return *this;
}

std::vector<uint8_t> craftGguf(uint64_t numKeyValues, const std::vector<uint8_t> &keyValues,
                               const std::vector<CraftedTensor> &tensors, uint32_t alignment) {
  ByteWriter w;
  w.raw("GGUF", 4).u32(3).u64(tensors.size()).u64(numKeyValues);
  w.raw(keyValues.data(), keyValues.size());
  uint64_t offset = 0;
  std::vector<uint64_t> counts;
  for (const CraftedTensor &t : tensors) {
    uint64_t n = 1;
    for (uint64_t e : t.ne)
      n *= e;
    counts.push_back(n);
    w.str(t.name).u32(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t e : t.ne)
      w.u64(e);
    w.u32(0 /* F32 */).u64(offset);
    offset = (offset + 4 * n + alignment - 1) / alignment * alignment;
  }
  w.padTo(alignment);
  for (uint64_t n : counts) {
    for (uint64_t i = 0; i < n; ++i) {
      float f = static_cast<float>(i);
      w.raw(&f, sizeof(f));
    }
    w.padTo(alignment);
  }
  return w.bytes;
}

} // namespace ingot::gguf::testing
