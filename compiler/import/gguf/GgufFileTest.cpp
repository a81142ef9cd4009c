//===- GgufFileTest.cpp - Reading metadata and tensor infos of GGUF files ----===//
#include "compiler/import/gguf/GgufFile.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "compiler/import/gguf/GgufTestFile.h"

namespace ingot::gguf {
namespace {

using namespace ingot::gguf::testing;

GgufFile openReference() {
  StatusOr<GgufFile> file = GgufFile::open(testDataPath(kAllTypesFile));
  EXPECT_TRUE(file.ok()) << file.status().message();
  return std::move(file).value();
}

TEST(GgufFileTest, ReadsHeaderOfReferenceFile) {
  GgufFile file = openReference();
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), kDefaultAlignment);
  EXPECT_EQ(file.metadata().size(), 28u);
  EXPECT_EQ(file.tensors().size(), 12u);
  EXPECT_EQ(file.dataOffset() % 32, 0u);
  EXPECT_EQ(file.fileSize(), readFileBytes(testDataPath(kAllTypesFile)).size());
  EXPECT_EQ(file.metadata().front().key, "general.architecture");
  EXPECT_EQ(*file.getString("general.architecture"), "ingot-test");
}

TEST(GgufFileTest, ReadsScalarsOfEveryType) {
  GgufFile file = openReference();
  EXPECT_EQ(file.find("test.u8")->type(), GgufValueType::UInt8);
  EXPECT_EQ(*file.getU32("test.u8"), 200u);
  EXPECT_EQ(*file.getI64("test.i8"), -100);
  EXPECT_EQ(*file.getU32("test.u16"), 60000u);
  EXPECT_EQ(*file.getI64("test.i16"), -30000);
  EXPECT_EQ(*file.getU32("test.u32"), 4000000000u);
  EXPECT_EQ(*file.getI64("test.i32"), -2000000000);
  EXPECT_EQ(*file.getU64("test.u64"), (uint64_t{1} << 63) + 5);
  EXPECT_EQ(*file.getI64("test.i64"), -(int64_t{1} << 62) - 3);
  EXPECT_EQ(*file.getF32("test.f32"), 0.1f);
  EXPECT_EQ(*file.find("test.f64")->asF64(), 2.718281828459045);
  EXPECT_EQ(*file.getF32("test.f64"), 2.718281828459045f);
  EXPECT_EQ(*file.getBool("test.bool"), true);
  EXPECT_EQ(*file.getString("test.string"), "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93");
  EXPECT_EQ(*file.getString("test.string_empty"), "");
  for (const char *key : {"test.u8", "test.i8", "test.u16", "test.i16", "test.u32", "test.i32",
                          "test.f32", "test.bool", "test.string", "test.u64", "test.i64",
                          "test.f64"})
    EXPECT_FALSE(file.find(key)->isArray()) << key;
}

TEST(GgufFileTest, IntegerGettersRejectValuesThatDoNotFit) {
  GgufFile file = openReference();
  StatusOr<uint32_t> negative = file.getU32("test.i8");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("key 'test.i8' has value -100 (i8), which does not fit in u32"),
            std::string::npos)
      << negative.status().message();
  EXPECT_FALSE(file.getU32("test.u64").ok());
  EXPECT_FALSE(file.getI64("test.u64").ok());
  EXPECT_FALSE(file.getU64("test.i64").ok());
}

TEST(GgufFileTest, ReadsArraysOfEveryElementType) {
  GgufFile file = openReference();
  EXPECT_EQ(*file.getIntArray("test.array.u8"), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(*file.getIntArray("test.array.i8"), (std::vector<int64_t>{-1, 2, -128}));
  EXPECT_EQ(*file.getIntArray("test.array.u16"), (std::vector<int64_t>{65535, 7}));
  EXPECT_EQ(*file.getIntArray("test.array.i16"), (std::vector<int64_t>{-32768, 32767}));
  EXPECT_EQ(*file.getIntArray("test.array.u32"), (std::vector<int64_t>{4294967295, 0}));
  EXPECT_EQ(*file.getIntArray("test.array.i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*file.getIntArray("test.array.i64"),
            (std::vector<int64_t>{INT64_MIN, INT64_MAX}));
  EXPECT_EQ(*file.getFloatArray("test.array.f32"), (std::vector<float>{0.5f, -1.25f, 3.0e38f}));
  EXPECT_EQ(*file.getFloatArray("test.array.f64"), (std::vector<float>{0.25f, -INFINITY}));
  EXPECT_EQ(*file.getStringArray("test.array.string"),
            (std::vector<std::string>{"a", "", "\xc3\xbc", "<|im_start|>"}));
  const GgufValue *bools = file.find("test.array.bool");
  ASSERT_NE(bools, nullptr);
  EXPECT_EQ(bools->typeName(), "array<bool>");
  EXPECT_EQ(bools->arrayLength(), 3u);
  // u64 elements above INT64_MAX cannot be returned as int64.
  StatusOr<std::vector<int64_t>> u64s = file.getIntArray("test.array.u64");
  ASSERT_FALSE(u64s.ok());
  EXPECT_NE(u64s.status().message().find("element 0 has value 18446744073709551615 (u64)"),
            std::string::npos)
      << u64s.status().message();
}

TEST(GgufFileTest, ReadsNestedArrays) {
  GgufFile file = openReference();
  const GgufValue *nested = file.find("test.array.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->typeName(), "array<array>");
  ASSERT_EQ(nested->nestedArrays().size(), 3u);
  EXPECT_EQ(*nested->nestedArrays()[0].asIntArray(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(*nested->nestedArrays()[1].asIntArray(), (std::vector<int64_t>{3}));
  EXPECT_EQ(*nested->nestedArrays()[2].asIntArray(), (std::vector<int64_t>{4, 5, 6}));
  const GgufValue *strings = file.find("test.array.nested_strings");
  ASSERT_NE(strings, nullptr);
  ASSERT_EQ(strings->nestedArrays().size(), 2u);
  EXPECT_EQ(*strings->nestedArrays()[0].asStringArray(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(*strings->nestedArrays()[1].asStringArray(), (std::vector<std::string>{"z"}));
}

TEST(GgufFileTest, TypedGettersNameTheKeyAndBothTypes) {
  GgufFile file = openReference();
  const std::string path = testDataPath(kAllTypesFile);
  StatusOr<uint32_t> u32 = file.getU32("test.string");
  ASSERT_FALSE(u32.ok());
  EXPECT_EQ(u32.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(u32.status().message(), path + ": key 'test.string' has type string, expected u32");
  EXPECT_EQ(file.getString("test.u32").status().message(),
            path + ": key 'test.u32' has type u32, expected string");
  EXPECT_EQ(file.getStringArray("test.array.i32").status().message(),
            path + ": key 'test.array.i32' has type array<i32>, expected array<string>");
  EXPECT_EQ(file.getF32("test.i32").status().message(),
            path + ": key 'test.i32' has type i32, expected f32");
  EXPECT_EQ(file.getBool("test.u8").status().message(),
            path + ": key 'test.u8' has type u8, expected bool");
  EXPECT_EQ(file.getFloatArray("test.array.bool").status().message(),
            path + ": key 'test.array.bool' has type array<bool>, expected an array of floats");
  StatusOr<std::string> missing = file.getString("llama.block_count");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), path + ": metadata key 'llama.block_count' not found");
  EXPECT_FALSE(file.has("llama.block_count"));
}

TEST(GgufFileTest, DescribesValuesForListings) {
  GgufFile file = openReference();
  EXPECT_EQ(file.find("test.i8")->describe(), "-100");
  EXPECT_EQ(file.find("test.bool")->describe(), "true");
  EXPECT_EQ(file.find("test.f32")->describe(), "0.100000001");
  EXPECT_EQ(file.find("general.architecture")->describe(), "\"ingot-test\"");
  EXPECT_EQ(file.find("general.architecture")->describe(3), "\"ing\"... (10 bytes)");
  EXPECT_EQ(file.find("test.array.string")->describe(), "array<string>[4]");
}

TEST(GgufFileTest, ListsTensorInfosInFileOrder) {
  GgufFile file = openReference();
  struct Expected {
    const char *name;
    GgmlType type;
    std::vector<uint64_t> ne;
    uint64_t bytes;
  };
  const Expected expected[] = {
      {"t.f32", GgmlType::F32, {64, 5}, 1280},   {"t.f16", GgmlType::F16, {64, 5}, 640},
      {"t.bf16", GgmlType::BF16, {64, 5}, 640},  {"t.q8_0", GgmlType::Q8_0, {64, 5}, 340},
      {"t.q4_0", GgmlType::Q4_0, {64, 5}, 180},  {"t.q4_1", GgmlType::Q4_1, {64, 5}, 200},
      {"t.q4_k", GgmlType::Q4_K, {256, 2}, 288}, {"t.q5_k", GgmlType::Q5_K, {256, 2}, 352},
      {"t.q6_k", GgmlType::Q6_K, {256, 2}, 420}, {"t.q5_0", GgmlType::Q5_0, {64, 5}, 220},
      {"t.q5_1", GgmlType::Q5_1, {64, 5}, 240},  {"t.f32_3d", GgmlType::F32, {8, 4, 3}, 384},
  };
  ASSERT_EQ(file.tensors().size(), std::size(expected));
  for (size_t i = 0; i < std::size(expected); ++i) {
    const GgufTensorInfo &t = file.tensors()[i];
    EXPECT_EQ(t.name, expected[i].name);
    EXPECT_EQ(t.type, expected[i].type) << t.name;
    EXPECT_EQ(t.ne, expected[i].ne) << t.name;
    EXPECT_EQ(t.numBytes, expected[i].bytes) << t.name;
    EXPECT_EQ(t.offset % file.alignment(), 0u) << t.name;
    EXPECT_EQ(file.findTensor(t.name), &t);
  }
  EXPECT_EQ(file.tensors()[11].shape(), (std::vector<int64_t>{3, 4, 8}));
  EXPECT_EQ(file.tensors()[11].numElements, 96u);
  EXPECT_EQ(file.tensors()[11].rowLength(), 8u);
  EXPECT_EQ(file.findTensor("t.missing"), nullptr);
}

TEST(GgufFileTest, BufferAndFileGiveTheSameTensors) {
  GgufFile mapped = openReference();
  StatusOr<GgufFile> buffered =
      GgufFile::fromBuffer(readFileBytes(testDataPath(kAllTypesFile)), "memory.gguf");
  ASSERT_TRUE(buffered.ok()) << buffered.status().message();
  EXPECT_EQ(buffered->path(), "memory.gguf");
  ASSERT_EQ(buffered->tensors().size(), mapped.tensors().size());
  for (size_t i = 0; i < mapped.tensors().size(); ++i) {
    const GgufTensorInfo &a = mapped.tensors()[i];
    const GgufTensorInfo &b = buffered->tensors()[i];
    EXPECT_EQ(std::memcmp(mapped.tensorData(a), buffered->tensorData(b), a.numBytes), 0) << a.name;
  }
}

TEST(GgufFileTest, MovedFileKeepsLookupsValid) {
  GgufFile first = openReference();
  GgufFile moved = std::move(first);
  EXPECT_EQ(*moved.getU32("test.u8"), 200u);
  ASSERT_NE(moved.findTensor("t.q4_1"), nullptr);
  EXPECT_EQ(*moved.getStringArray("test.array.string"),
            (std::vector<std::string>{"a", "", "\xc3\xbc", "<|im_start|>"}));
}

TEST(GgufFileTest, AcceptsVersion2) {
  std::vector<uint8_t> bytes = readFileBytes(testDataPath(kAllTypesFile));
  putU32(bytes, 4, 2);
  StatusOr<GgufFile> file = GgufFile::fromBuffer(std::move(bytes), "v2.gguf");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->version(), 2u);
}

TEST(GgufFileTest, HonorsGeneralAlignment) {
  ByteWriter kv;
  kv.str("general.alignment").u32(static_cast<uint32_t>(GgufValueType::UInt32)).u32(256);
  std::vector<uint8_t> bytes = craftGguf(1, kv.bytes, {{"a", {3}}, {"b", {5, 2}}}, 256);
  StatusOr<GgufFile> file = GgufFile::fromBuffer(std::move(bytes), "aligned.gguf");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->alignment(), 256u);
  EXPECT_EQ(file->dataOffset(), 256u);
  const GgufTensorInfo *b = file->findTensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset, 256u);
  std::vector<float> values(b->numElements, -1.0f);
  ASSERT_TRUE(file->dequantizeTensor(*b, values.data()).ok());
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(values[i], static_cast<float>(i));
}

TEST(GgufFileTest, AcceptsEmptyArraysAndNoTensors) {
  ByteWriter kv;
  kv.str("empty.strings").u32(9).u32(8).u64(0);
  kv.str("empty.ints").u32(9).u32(5).u64(0);
  StatusOr<GgufFile> file = GgufFile::fromBuffer(craftGguf(2, kv.bytes, {}), "empty.gguf");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_TRUE(file->getStringArray("empty.strings")->empty());
  EXPECT_TRUE(file->getIntArray("empty.ints")->empty());
}

TEST(GgufFileTest, AcceptsZeroDimensionalTensor) {
  StatusOr<GgufFile> file = GgufFile::fromBuffer(craftGguf(0, {}, {{"scalar", {}}}), "s.gguf");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->tensors()[0].numElements, 1u);
  EXPECT_TRUE(file->tensors()[0].shape().empty());
}

TEST(GgufFileTest, MissingFileIsNotFound) {
  StatusOr<GgufFile> file = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/model.gguf"), std::string::npos);
}

TEST(GgufFileTest, DirectoryIsNotAGgufFile) {
  StatusOr<GgufFile> file = GgufFile::open(INGOT_GGUF_TEST_DATA_DIR);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("not a regular file"), std::string::npos);
}

} // namespace
} // namespace ingot::gguf
