//===- SafetensorsFileTest.cpp - safetensors parsing and corrupt files ----===//
#include "compiler/import/hf/SafetensorsFile.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

namespace ingot::importer::hf {
namespace {

/// Writes `header` with an 8-byte length prefix (or `lengthOverride`) and `data` after it.
std::string writeFile(const std::string &name, const std::string &header,
                      const std::vector<uint8_t> &data, int64_t lengthOverride = -1) {
  std::string path = testing::TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  uint64_t length = lengthOverride >= 0 ? uint64_t(lengthOverride) : header.size();
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>((length >> (8 * i)) & 0xff));
  out << header;
  out.write(reinterpret_cast<const char *>(data.data()), std::streamsize(data.size()));
  return path;
}

std::vector<uint8_t> floatBytes(const std::vector<float> &values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

/// The error message of opening `path`, or "" when it opened.
std::string openError(const std::string &path) {
  StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
  return file.ok() ? "" : file.status().message();
}

TEST(SafetensorsFile, ReadsF32Bf16AndF16TensorsInOffsetOrder) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> a(6);
  for (float &v : a)
    v = dist(rng);
  std::vector<uint8_t> data = floatBytes(a);
  // bf16 1.5 = 0x3fc0, -2 = 0xc000; f16 0.5 = 0x3800, 1 subnormal = 0x0001 (2^-24).
  for (uint16_t h : {0x3fc0, 0xc000, 0x3800, 0x0001}) {
    data.push_back(h & 0xff);
    data.push_back(h >> 8);
  }
  std::string header = R"({"__metadata__":{"format":"pt"},)"
                       R"("z.f16":{"dtype":"F16","shape":[2],"data_offsets":[28,32]},)"
                       R"("a.bf16":{"dtype":"BF16","shape":[1,2],"data_offsets":[24,28]},)"
                       R"("m.f32":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  StatusOr<SafetensorsFile> file =
      SafetensorsFile::open(writeFile("valid.safetensors", header, data));
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_EQ(file->tensors().size(), 3u);
  EXPECT_EQ(file->tensors()[0].name, "m.f32");
  EXPECT_EQ(file->tensors()[1].name, "a.bf16");
  EXPECT_EQ(file->tensors()[2].name, "z.f16");

  const SafetensorsTensor *m = file->find("m.f32");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> out(6, std::nanf(""));
  file->toFloat(*m, out.data());
  EXPECT_EQ(out, a);

  std::vector<float> two(2, std::nanf(""));
  file->toFloat(*file->find("a.bf16"), two.data());
  EXPECT_EQ(two, (std::vector<float>{1.5f, -2.0f}));
  two.assign(2, std::nanf(""));
  file->toFloat(*file->find("z.f16"), two.data());
  EXPECT_EQ(two, (std::vector<float>{0.5f, std::ldexp(1.0f, -24)}));
  EXPECT_EQ(file->find("missing"), nullptr);

  // Released pages fault back in from the file with the same bytes.
  file->releaseTensorPages(*m);
  out.assign(6, std::nanf(""));
  file->toFloat(*m, out.data());
  EXPECT_EQ(out, a);
}

TEST(SafetensorsFile, RejectsTruncatedHeaderLength) {
  std::string path = testing::TempDir() + "/short.safetensors";
  std::ofstream(path, std::ios::binary) << "abc";
  EXPECT_NE(openError(path).find("shorter than the 8-byte header length"), std::string::npos);
}

TEST(SafetensorsFile, RejectsHeaderLengthPastEndOfFile) {
  std::string error = openError(writeFile("longheader.safetensors", "{}", {}, 1000));
  EXPECT_NE(error.find("runs past the end"), std::string::npos) << error;
  EXPECT_NE(error.find("longheader.safetensors"), std::string::npos) << error;
}

TEST(SafetensorsFile, RejectsBadJson) {
  std::string error = openError(writeFile("badjson.safetensors", R"({"a": {"dtype": )", {}));
  EXPECT_NE(error.find("not a JSON object"), std::string::npos) << error;
}

TEST(SafetensorsFile, RejectsTensorPastEndOfFile) {
  std::string error = openError(
      writeFile("pasteof.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                floatBytes({1, 2, 3})));
  EXPECT_NE(error.find("tensor 'w'"), std::string::npos) << error;
  EXPECT_NE(error.find("outside the data section"), std::string::npos) << error;
}

TEST(SafetensorsFile, RejectsSizeMismatch) {
  std::string error = openError(
      writeFile("size.safetensors", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})",
                floatBytes({1, 2, 3, 4})));
  EXPECT_NE(error.find("tensor 'w': holds 16 bytes, but its shape and dtype need 12"),
            std::string::npos)
      << error;
}

TEST(SafetensorsFile, RejectsUnknownDtypeByName) {
  std::string error = openError(
      writeFile("dtype.safetensors", R"({"w":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})",
                {1, 2, 3, 4}));
  EXPECT_NE(error.find("tensor 'w' has dtype I8"), std::string::npos) << error;
}

TEST(SafetensorsFile, RejectsOverlappingTensors) {
  std::string error =
      openError(writeFile("overlap.safetensors",
                          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          floatBytes({1, 2, 3})));
  EXPECT_NE(error.find("tensors 'a' and 'b' overlap"), std::string::npos) << error;
}

TEST(SafetensorsFile, RejectsMalformedEntries) {
  EXPECT_NE(openError(writeFile("neg.safetensors",
                                R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
                                floatBytes({1})))
                .find("non-negative"),
            std::string::npos);
  EXPECT_NE(openError(writeFile("noofs.safetensors", R"({"w":{"dtype":"F32","shape":[1]}})",
                                floatBytes({1})))
                .find("data_offsets"),
            std::string::npos);
  EXPECT_NE(openError(writeFile("arr.safetensors", "[1,2]", {})).find("not a JSON object"),
            std::string::npos);
}

} // namespace
} // namespace ingot::importer::hf
