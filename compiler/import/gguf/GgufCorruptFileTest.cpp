//===- GgufCorruptFileTest.cpp - Corrupt and truncated GGUF files are refused ===//
//
// Each test mutates the bytes of the reference file (or crafts a small file) and checks
// that open fails with one line naming the file and the problem. Run under the
// sanitizer build these also show that no corrupt input reads out of bounds.
//
//===----------------------------------------------------------------------===//
#include <random>

#include <gtest/gtest.h>

#include "compiler/import/gguf/GgufFile.h"
#include "compiler/import/gguf/GgufTestFile.h"

namespace ingot::gguf {
namespace {

using namespace ingot::gguf::testing;

constexpr const char *kName = "corrupt.gguf";

std::vector<uint8_t> reference() { return readFileBytes(testDataPath(kAllTypesFile)); }

// Opens `bytes` and expects an error whose message contains every one of `parts`.
void expectError(std::vector<uint8_t> bytes, std::initializer_list<std::string> parts,
                 StatusCode code = StatusCode::kDataLoss) {
  StatusOr<GgufFile> file = GgufFile::fromBuffer(std::move(bytes), kName);
  ASSERT_FALSE(file.ok()) << "a corrupt file was accepted";
  const std::string &message = file.status().message();
  EXPECT_EQ(file.status().code(), code) << message;
  EXPECT_EQ(message.rfind(std::string(kName) + ": ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  for (const std::string &part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

// Offset of a tensor info's n_dims field, and of its type and offset fields.
size_t dimsOf(const std::vector<uint8_t> &bytes, const char *name) {
  size_t at = offsetAfterString(bytes, name);
  EXPECT_NE(at, std::string::npos) << name;
  return at;
}
size_t typeOf(const std::vector<uint8_t> &bytes, const char *name) {
  size_t dims = dimsOf(bytes, name);
  return dims + 4 + 8 * getU32(bytes, dims);
}
size_t offsetOf(const std::vector<uint8_t> &bytes, const char *name) { return typeOf(bytes, name) + 4; }

TEST(GgufCorruptFileTest, RejectsBadMagic) {
  std::vector<uint8_t> bytes = reference();
  bytes[0] = 'X';
  bytes[3] = 0x01;
  expectError(bytes, {"not a GGUF file", "magic 'XGU\\x01'"});
}

TEST(GgufCorruptFileTest, RejectsUnsupportedVersions) {
  for (uint32_t version : {0u, 1u, 4u, 1000u}) {
    std::vector<uint8_t> bytes = reference();
    putU32(bytes, 4, version);
    expectError(bytes, {"unsupported GGUF version " + std::to_string(version), "2 and 3"},
                StatusCode::kUnimplemented);
  }
  std::vector<uint8_t> bigEndian = reference();
  putU32(bigEndian, 4, 0x03000000);
  expectError(bigEndian, {"big-endian"}, StatusCode::kUnimplemented);
}

TEST(GgufCorruptFileTest, RejectsTruncatedHeader) {
  std::vector<uint8_t> bytes = reference();
  expectError({}, {"truncated in header (file has 0 bytes)"});
  expectError({bytes.begin(), bytes.begin() + 3}, {"truncated in header"});
  expectError({bytes.begin(), bytes.begin() + 6}, {"truncated at header", "version"});
  expectError({bytes.begin(), bytes.begin() + 20}, {"truncated at header", "metadata count"});
}

TEST(GgufCorruptFileTest, RejectsTruncationInMetadata) {
  std::vector<uint8_t> bytes = reference();
  // Cut inside the value of the 23rd key, "test.array.string" = ["a", "", "\u00fc", ...].
  size_t at = offsetAfterString(bytes, "test.array.string");
  expectError({bytes.begin(), bytes.begin() + at + 6},
              {"truncated at metadata key 23 of 28 ('test.array.string')", "array element type"});
  // Its last string's 12 bytes run past the end.
  expectError({bytes.begin(), bytes.begin() + at + 4 + 4 + 8 + (8 + 1) + 8 + (8 + 2) + 8 + 5},
              {"metadata key 23 of 28 ('test.array.string')", "array string of 12 bytes",
               "extends past end of file"});
}

TEST(GgufCorruptFileTest, RejectsTruncationInTensorInfos) {
  std::vector<uint8_t> bytes = reference();
  size_t dims = dimsOf(bytes, "t.bf16");
  expectError({bytes.begin(), bytes.begin() + dims + 10},
              {"truncated at tensor info 3 of 12 ('t.bf16')", "dimensions"});
  expectError({bytes.begin(), bytes.begin() + dims - 2},
              {"tensor info 3 of 12", "tensor name of 6 bytes", "extends past end of file"});
}

TEST(GgufCorruptFileTest, RejectsTruncatedTensorData) {
  std::vector<uint8_t> bytes = reference();
  expectError({bytes.begin(), bytes.end() - 1}, {"tensor 't.f32_3d' extends past end of file"});
  // Cut right after the tensor infos: the data section is missing.
  size_t end = offsetOf(bytes, "t.f32_3d") + 8;
  expectError({bytes.begin(), bytes.begin() + end + 1},
              {"truncated before the tensor data section"});
}

TEST(GgufCorruptFileTest, RejectsTensorBeyondEndOfFile) {
  for (uint64_t offset : {uint64_t{1} << 63, ~uint64_t{31}, uint64_t{1} << 20}) {
    std::vector<uint8_t> bytes = reference();
    putU64(bytes, offsetOf(bytes, "t.q4_0"), offset);
    expectError(bytes, {"tensor 't.q4_0' extends past end of file",
                        "data offset " + std::to_string(offset)});
  }
}

TEST(GgufCorruptFileTest, RejectsHugeCounts) {
  std::vector<uint8_t> bytes = reference();
  putU64(bytes, 8, uint64_t{1} << 62);
  expectError(bytes, {"header claims 4611686018427387904 tensors", "truncated or corrupt"});
  bytes = reference();
  putU64(bytes, 16, ~uint64_t{0});
  expectError(bytes, {"header claims 18446744073709551615 metadata entries"});
  bytes = reference();
  putU64(bytes, offsetAfterString(bytes, "test.array.u32") + 8, uint64_t{1} << 61);
  expectError(bytes, {"('test.array.u32')", "array of 2305843009213693952 u32 elements",
                      "extends past end of file"});
  bytes = reference();
  putU64(bytes, offsetAfterString(bytes, "test.array.string") + 8, uint64_t{1} << 61);
  expectError(bytes, {"array of 2305843009213693952 string elements"});
  bytes = reference();
  putU64(bytes, offsetAfterString(bytes, "test.string") + 4, ~uint64_t{0});
  expectError(bytes, {"('test.string')", "string of 18446744073709551615 bytes"});
  bytes = reference();
  putU64(bytes, offsetAfterString(bytes, "test.array.nested") + 8, uint64_t{1} << 60);
  expectError(bytes, {"array of 1152921504606846976 array elements"});
}

TEST(GgufCorruptFileTest, RejectsOverflowingAndOversizedShapes) {
  std::vector<uint8_t> bytes = reference();
  size_t dims = dimsOf(bytes, "t.f32");
  putU64(bytes, dims + 4 + 8, uint64_t{1} << 62); // ne[1]: 64 * 2^62 overflows
  expectError(bytes, {"tensor info 1 of 12 ('t.f32')", "dimensions overflow"});
  bytes = reference();
  putU64(bytes, dims + 4 + 8, uint64_t{1} << 56); // 2^62 elements: 2^64 bytes
  expectError(bytes, {"('t.f32')", "more than 2^64 bytes"});
  bytes = reference();
  putU64(bytes, dims + 4 + 8, uint64_t{1} << 40); // fits 64 bits, not the file
  expectError(bytes, {"tensor 't.f32' extends past end of file"});
  bytes = reference();
  putU64(bytes, dims + 4, ~uint64_t{0}); // negative as ggml's int64
  expectError(bytes, {"dimensions overflow"});
}

TEST(GgufCorruptFileTest, RejectsTooManyDimensions) {
  std::vector<uint8_t> bytes = reference();
  putU32(bytes, dimsOf(bytes, "t.q6_k"), 5);
  expectError(bytes, {"tensor info 9 of 12 ('t.q6_k')", "5 dimensions, at most 4"});
}

TEST(GgufCorruptFileTest, RejectsUnknownTensorType) {
  for (uint32_t type : {4u, 31u, 42u, 1000u, 0xFFFFFFFFu}) {
    std::vector<uint8_t> bytes = reference();
    putU32(bytes, typeOf(bytes, "t.q8_0"), type);
    expectError(bytes, {"('t.q8_0')", "unknown ggml type " + std::to_string(type)});
  }
}

TEST(GgufCorruptFileTest, RejectsPartialBlocks) {
  std::vector<uint8_t> bytes = reference();
  putU64(bytes, dimsOf(bytes, "t.q4_0") + 4, 48);
  expectError(bytes, {"('t.q4_0')", "rows of 48 elements are not a whole number of Q4_0 blocks of 32"});
}

TEST(GgufCorruptFileTest, RejectsMisalignedOffset) {
  std::vector<uint8_t> bytes = reference();
  size_t at = offsetOf(bytes, "t.q4_1");
  putU64(bytes, at, getU64(bytes, at) + 4);
  expectError(bytes, {"('t.q4_1')", "is not a multiple of the alignment 32"});
}

TEST(GgufCorruptFileTest, RejectsOverlappingTensors) {
  std::vector<uint8_t> bytes = reference();
  putU64(bytes, offsetOf(bytes, "t.f16"), getU64(bytes, offsetOf(bytes, "t.f32")) + 32);
  expectError(bytes, {"tensors 't.f32' and 't.f16' overlap"});
}

TEST(GgufCorruptFileTest, RejectsDuplicateTensorName) {
  std::vector<uint8_t> bytes = reference();
  size_t name = dimsOf(bytes, "t.q4_0") - 6;
  bytes[name + 5] = '1'; // "t.q4_0" -> "t.q4_1"
  expectError(bytes, {"duplicate tensor name 't.q4_1' (tensor infos 5 and 6)"});
}

TEST(GgufCorruptFileTest, RejectsDuplicateMetadataKey) {
  std::vector<uint8_t> bytes = reference();
  size_t key = offsetAfterString(bytes, "test.u8") - 7;
  bytes[key + 5] = 'i'; // "test.u8" -> "test.i8"
  expectError(bytes, {"duplicate metadata key 'test.i8'"});
}

TEST(GgufCorruptFileTest, RejectsUnknownValueTypes) {
  std::vector<uint8_t> bytes = reference();
  putU32(bytes, offsetAfterString(bytes, "test.u16"), 13);
  expectError(bytes, {"metadata key 4 of 28 ('test.u16')", "unknown value type 13"});
  bytes = reference();
  putU32(bytes, offsetAfterString(bytes, "test.array.i16") + 4, 99);
  expectError(bytes, {"('test.array.i16')", "array of unknown value type 99"});
}

TEST(GgufCorruptFileTest, RejectsBoolsOtherThanZeroOrOne) {
  std::vector<uint8_t> bytes = reference();
  bytes[offsetAfterString(bytes, "test.bool") + 4] = 2;
  expectError(bytes, {"('test.bool')", "bool value 2 is neither 0 nor 1"});
  bytes = reference();
  bytes[offsetAfterString(bytes, "test.array.bool") + 4 + 4 + 8 + 1] = 7;
  expectError(bytes, {"bool array element 1 has value 7"});
}

TEST(GgufCorruptFileTest, RejectsDeeplyNestedArrays) {
  ByteWriter kv;
  kv.str("deep").u32(9);
  for (uint32_t level = 0; level < kMaxArrayNesting; ++level)
    kv.u32(9).u64(1); // an array holding one array
  kv.u32(5).u64(0);
  expectError(craftGguf(1, kv.bytes, {}), {"('deep')", "nested deeper than 8 levels"});
}

TEST(GgufCorruptFileTest, RejectsBadAlignment) {
  ByteWriter notPowerOfTwo;
  notPowerOfTwo.str("general.alignment").u32(4).u32(48);
  expectError(craftGguf(1, notPowerOfTwo.bytes, {{"a", {4}}}, 16),
              {"general.alignment 48 is not a power of two"});
  ByteWriter wrongType;
  wrongType.str("general.alignment").u32(8).str("32");
  expectError(craftGguf(1, wrongType.bytes, {{"a", {4}}}),
              {"key 'general.alignment' has type string, expected u32"});
}

TEST(GgufCorruptFileTest, RejectsEmptyTensorName) {
  expectError(craftGguf(0, {}, {{"", {4}}}), {"tensor info 1 of 1", "tensor name is empty"});
}

// Every prefix of the reference file that cuts off any part of it is refused.
TEST(GgufCorruptFileTest, EveryTruncationIsRefused) {
  std::vector<uint8_t> bytes = reference();
  for (size_t length = 0; length < bytes.size(); ++length) {
    StatusOr<GgufFile> file =
        GgufFile::fromBuffer(std::vector<uint8_t>(bytes.begin(), bytes.begin() + length), kName);
    ASSERT_FALSE(file.ok()) << "prefix of " << length << " bytes accepted";
    ASSERT_EQ(file.status().code(), StatusCode::kDataLoss) << file.status().message();
  }
}

// Random byte changes in the structured part of the file either fail cleanly or give a
// file whose every tensor can be read (the sanitizer build checks the bounds).
TEST(GgufCorruptFileTest, RandomCorruptionFailsCleanlyOrStaysReadable) {
  const std::vector<uint8_t> original = reference();
  size_t structured = offsetOf(original, "t.f32_3d") + 8;
  std::mt19937 rng(2026);
  int accepted = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<uint8_t> bytes = original;
    int changes = 1 + static_cast<int>(rng() % 4);
    for (int c = 0; c < changes; ++c)
      bytes[rng() % structured] = static_cast<uint8_t>(rng());
    StatusOr<GgufFile> file = GgufFile::fromBuffer(std::move(bytes), kName);
    if (!file.ok()) {
      ASSERT_FALSE(file.status().message().empty());
      continue;
    }
    ++accepted;
    for (const GgufTensorInfo &t : file->tensors()) {
      if (!canDequantize(t.type) || t.numElements > (1u << 20))
        continue;
      std::vector<float> out(t.numElements);
      ASSERT_TRUE(file->dequantizeTensor(t, out.data()).ok()) << t.name;
    }
    for (const GgufKeyValue &kv : file->metadata())
      (void)kv.value.describe();
  }
  EXPECT_GT(accepted, 0); // some changes hit values, not structure
}

} // namespace
} // namespace ingot::gguf
