//===- GgufTestFile.h - Reference data and byte builders for GGUF tests ------===//
//
// Loads test/data/gguf/ (written by scripts/make_gguf_test_data.py) and crafts GGUF
// images byte by byte, so tests can write files a correct writer never would.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ingot::gguf::testing {

/// Path of a file under test/data/gguf/.
std::string testDataPath(const std::string &name);
/// The whole file; fails the current test (and returns empty) if it cannot be read.
std::vector<uint8_t> readFileBytes(const std::string &path);

/// The reference file and gguf-py's dequantization of its tensors.
inline const char *kAllTypesFile = "all_types.gguf";
inline const char *kAllTypesExpected = "all_types.dequantized.f32";

/// Offset of the first byte after `u64 length + text` where that string is encoded in
/// `bytes` (keys and tensor names are unique in the reference file); npos if absent.
size_t offsetAfterString(const std::vector<uint8_t> &bytes, std::string_view text);

void putU32(std::vector<uint8_t> &bytes, size_t offset, uint32_t value);
void putU64(std::vector<uint8_t> &bytes, size_t offset, uint64_t value);
uint32_t getU32(const std::vector<uint8_t> &bytes, size_t offset);
uint64_t getU64(const std::vector<uint8_t> &bytes, size_t offset);

/// Appends little-endian GGUF encodings.
class ByteWriter {
public:
  ByteWriter &u8(uint8_t v);
  ByteWriter &u32(uint32_t v);
  ByteWriter &u64(uint64_t v);
  ByteWriter &str(std::string_view s); // u64 length + bytes
  ByteWriter &raw(const void *data, size_t size);
  ByteWriter &padTo(size_t alignment);
  size_t size() const { return bytes.size(); }
  std::vector<uint8_t> bytes;
};

/// A GGUF image: header, the given pre-encoded key/values, tensor infos for `tensors`
/// (each F32 with the given ne, laid out consecutively at `alignment`), then data
/// filled with element index as float.
struct CraftedTensor {
  std::string name;
  std::vector<uint64_t> ne;
};
std::vector<uint8_t> craftGguf(uint64_t numKeyValues, const std::vector<uint8_t> &keyValues,
                               const std::vector<CraftedTensor> &tensors, uint32_t alignment = 32);

} // namespace ingot::gguf::testing
