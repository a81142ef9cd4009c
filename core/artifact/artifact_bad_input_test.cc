// Bad inputs: every corrupt, truncated, foreign or newer file is refused with one line.
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <fstream>

#include "testing/sample_artifact.h"
#include "core/artifact/artifact_reader.h"
#include "core/region/region_examples.h"

namespace ingot {
namespace {

std::vector<uint8_t> sampleBytes(SampleOptions options = {}) {
  ArtifactWriter writer;
  populateSampleArtifact(writer, options);
  StatusOr<std::vector<uint8_t>> bytes = writer.writeToBuffer();
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

uint64_t readU64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}

void writeU64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

/// Recomputes the header checksum so a test reaches the checks behind it.
void rehashHeader(std::vector<uint8_t>& b) { writeU64(b, 56, XXH64(b.data(), 56, 0)); }

/// Opens `bytes` and expects an error whose single-line message contains `needle`.
void expectRejected(const std::vector<uint8_t>& bytes, const std::string& needle) {
  StatusOr<Artifact> artifact = Artifact::openFromMemory(bytes);
  ASSERT_FALSE(artifact.ok()) << "expected an error containing: " << needle;
  const std::string& message = artifact.status().message();
  EXPECT_NE(message.find(needle), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
}

std::vector<uint8_t> writeWith(const std::function<void(ArtifactWriter&)>& tweak) {
  ArtifactWriter writer;
  populateSampleArtifact(writer, {});
  tweak(writer);
  StatusOr<std::vector<uint8_t>> bytes = writer.writeToBuffer();
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

std::string writeTempFile(const std::string& name, const std::string& contents) {
  std::string path =
      ::testing::TempDir() + "ingot_bad_input_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(ArtifactBadInput, RejectsAttentionVariantWithInvalidBytecode) {
  // Well-formed manifest, but the region bytecode is garbage behind a valid magic.
  std::vector<uint8_t> bytes = writeWith([](ArtifactWriter& w) {
    AttentionVariant bad;
    bad.name = "bad";
    bad.maskBytecode = {'I', 'R', 'B', 'C', 1, 0, 0, 0, 5, 6, 7};
    w.addAttentionVariant(bad);
  });
  expectRejected(bytes, "attention variant 2 mask bytecode:");
}

TEST(ArtifactBadInput, RejectsScoreProgramInTheMaskSlot) {
  std::vector<uint8_t> bytes = writeWith([](ArtifactWriter& w) {
    AttentionVariant swapped;
    swapped.name = "swapped";
    swapped.maskBytecode = softcapScoreBytecode(30.0f);
    w.addAttentionVariant(swapped);
  });
  expectRejected(bytes, "attention variant 2 mask bytecode holds a program of the other");
}

TEST(ArtifactBadInput, RejectsEmptyFile) {
  expectRejected({}, "the file is empty");
  std::string path = writeTempFile("empty.ingot", "");
  StatusOr<Artifact> artifact = Artifact::open(path);
  ASSERT_FALSE(artifact.ok());
  EXPECT_EQ(artifact.status().message(), path + ": not an Ingot artifact: the file is empty");
  ::unlink(path.c_str());
}

TEST(ArtifactBadInput, RejectsMissingFileNamingIt) {
  StatusOr<Artifact> artifact = Artifact::open("/nonexistent/dir/model.ingot");
  ASSERT_FALSE(artifact.ok());
  EXPECT_EQ(artifact.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(artifact.status().message(),
            "/nonexistent/dir/model.ingot: cannot open: No such file or directory");
}

TEST(ArtifactBadInput, RejectsDirectory) {
  StatusOr<Artifact> artifact = Artifact::open(::testing::TempDir());
  ASSERT_FALSE(artifact.ok());
  EXPECT_NE(artifact.status().message().find("not a regular file"), std::string::npos);
}

TEST(ArtifactBadInput, RejectsTextFile) {
  std::string text = "hello, this is a text file and certainly no model\n";
  std::string path = writeTempFile("text.txt", text);
  StatusOr<Artifact> artifact = Artifact::open(path);
  ASSERT_FALSE(artifact.ok());
  EXPECT_NE(artifact.status().message().find("not an Ingot artifact"), std::string::npos)
      << artifact.status().message();
  ::unlink(path.c_str());
}

TEST(ArtifactBadInput, RejectsGgufFile) {
  std::vector<uint8_t> gguf = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
  gguf.resize(4096, 0);
  expectRejected(gguf, "this is a GGUF file");
}

TEST(ArtifactBadInput, RejectsFileTruncatedInHeaderManifestAndBlob) {
  std::vector<uint8_t> full = sampleBytes();
  const uint64_t manifestEnd = 64 + readU64(full, 24);
  const uint64_t blobOffset = readU64(full, 32);
  struct Cut {
    uint64_t size;
    const char* needle;
  };
  for (Cut cut : {Cut{3, "not an Ingot artifact"}, Cut{8, "shorter than the 64-byte header"},
                  Cut{40, "shorter than the 64-byte header"},
                  Cut{64, "manifest [64"}, Cut{manifestEnd - 1, "manifest [64"},
                  Cut{manifestEnd, "blob ["}, Cut{blobOffset, "blob ["},
                  Cut{blobOffset + 5000, "blob ["}, Cut{full.size() - 1, "blob ["}}) {
    SCOPED_TRACE(cut.size);
    expectRejected(std::vector<uint8_t>(full.begin(), full.begin() + cut.size), cut.needle);
  }
}

TEST(ArtifactBadInput, RejectsEveryTruncation) {
  std::vector<uint8_t> full = sampleBytes();
  for (size_t size = 0; size < full.size(); size += 37) {
    StatusOr<Artifact> artifact =
        Artifact::openFromMemory(std::vector<uint8_t>(full.begin(), full.begin() + size));
    EXPECT_FALSE(artifact.ok()) << "truncated to " << size << " bytes was accepted";
  }
}

TEST(ArtifactBadInput, RejectsFlippedByteInHeader) {
  std::vector<uint8_t> bytes = sampleBytes();
  bytes[20] ^= 0x10;  // inside manifest_offset
  expectRejected(bytes, "header checksum mismatch: file is corrupt");
  bytes = sampleBytes();
  bytes[3] ^= 0x01;  // inside the magic
  expectRejected(bytes, "not an Ingot artifact");
}

TEST(ArtifactBadInput, RejectsFlippedByteInManifest) {
  std::vector<uint8_t> bytes = sampleBytes();
  bytes[64 + readU64(bytes, 24) / 2] ^= 0x40;
  expectRejected(bytes, "manifest checksum mismatch: file is corrupt");
}

TEST(ArtifactBadInput, EveryFlippedHeaderOrManifestByteIsRefused) {
  std::vector<uint8_t> clean = sampleBytes();
  uint64_t manifestEnd = 64 + readU64(clean, 24);
  for (uint64_t at = 0; at < manifestEnd; ++at) {
    std::vector<uint8_t> bytes = clean;
    bytes[at] ^= 0x5a;
    StatusOr<Artifact> artifact = Artifact::openFromMemory(bytes);
    EXPECT_FALSE(artifact.ok()) << "flipped byte " << at << " was accepted";
  }
}

TEST(ArtifactBadInput, FlippedTensorByteIsCaughtByVerifyNamingTheTensor) {
  std::vector<uint8_t> bytes = sampleBytes();
  StatusOr<Artifact> clean = Artifact::openFromMemory(bytes);
  ASSERT_TRUE(clean.ok());
  size_t index = *clean->findTensor("layers.0.mlp.down_proj.weight");
  uint64_t at = clean->header().blob_offset + clean->tensor(index).offset() + 17;
  bytes[at] ^= 0x01;
  StatusOr<Artifact> artifact = Artifact::openFromMemory(bytes);
  ASSERT_TRUE(artifact.ok()) << "opening does not hash the weights";
  Status status = artifact->verifyChecksums();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("tensor 8 'layers.0.mlp.down_proj.weight': checksum mismatch"),
            std::string::npos)
      << status.message();
}

TEST(ArtifactBadInput, RejectsNewerMajorVersionNamingBothVersions) {
  std::vector<uint8_t> bytes =
      writeWith([](ArtifactWriter& w) { w.setFormatVersionForTesting(2, 3); });
  expectRejected(bytes, "artifact format version 2.3 is newer than this runtime supports (1." +
                           std::to_string(artifact::kFormatMinor) + ")");
  // Even with the rest of the header in a layout we do not know, the version wins.
  bytes[56] ^= 0xff;
  expectRejected(bytes, "2.3 is newer");
}

TEST(ArtifactBadInput, AcceptsNewerMinorVersion) {
  std::vector<uint8_t> bytes =
      writeWith([](ArtifactWriter& w) { w.setFormatVersionForTesting(1, 7); });
  StatusOr<Artifact> artifact = Artifact::openFromMemory(bytes);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  EXPECT_EQ(artifact->header().format_minor, 7);
}

TEST(ArtifactBadInput, RejectsMajorVersionZero) {
  std::vector<uint8_t> bytes =
      writeWith([](ArtifactWriter& w) { w.setFormatVersionForTesting(0, 9); });
  expectRejected(bytes, "version 0.9 is not supported");
}

TEST(ArtifactBadInput, RejectsManifestExtentsOutOfRange) {
  std::vector<uint8_t> bytes = sampleBytes();
  writeU64(bytes, 24, bytes.size());  // manifest_size past the end
  rehashHeader(bytes);
  expectRejected(bytes, "extends past the end of the file");

  bytes = sampleBytes();
  writeU64(bytes, 16, uint64_t{1} << 62);  // manifest_offset far away
  rehashHeader(bytes);
  expectRejected(bytes, "extends past the end of the file");

  bytes = sampleBytes();
  writeU64(bytes, 16, UINT64_MAX - 7);  // offset + size overflows
  rehashHeader(bytes);
  expectRejected(bytes, "extends past the end of the file");

  bytes = sampleBytes();
  writeU64(bytes, 16, 68);
  rehashHeader(bytes);
  expectRejected(bytes, "invalid manifest offset 68");

  bytes = sampleBytes();
  writeU64(bytes, 24, uint64_t{1} << 40);
  rehashHeader(bytes);
  expectRejected(bytes, "invalid manifest size");

  bytes = sampleBytes();
  writeU64(bytes, 24, readU64(bytes, 24) - 8);  // shorter: checksum no longer matches
  rehashHeader(bytes);
  expectRejected(bytes, "manifest checksum mismatch");
}

TEST(ArtifactBadInput, RejectsBlobExtentsOutOfRange) {
  std::vector<uint8_t> bytes = sampleBytes();
  writeU64(bytes, 32, readU64(bytes, 32) + 100);
  rehashHeader(bytes);
  expectRejected(bytes, "is not a multiple of 4096");

  bytes = sampleBytes();
  writeU64(bytes, 32, 0);
  rehashHeader(bytes);
  expectRejected(bytes, "overlaps the manifest");

  bytes = sampleBytes();
  writeU64(bytes, 40, UINT64_MAX);
  rehashHeader(bytes);
  expectRejected(bytes, "extends past the end of the file");
}

TEST(ArtifactBadInput, RejectsTensorOffsetBeyondBlob) {
  expectRejected(writeWith([](ArtifactWriter& w) {
                   w.overrideTensorOffsetForTesting(3, uint64_t{1} << 40);
                 }),
                 "tensor 3 'layers.0.mlp.up_proj.weight': bytes [");
  // offset + size wraps around 2^64: must not pass the bounds check.
  expectRejected(writeWith([](ArtifactWriter& w) {
                   w.overrideTensorOffsetForTesting(0, UINT64_MAX - 4095);
                 }),
                 "lie outside the");
}

TEST(ArtifactBadInput, RejectsMisalignedTensorOffset) {
  expectRejected(
      writeWith([](ArtifactWriter& w) { w.overrideTensorOffsetForTesting(1, 4096 + 64); }),
      "tensor 1 'layers.0.attn.q_proj.weight': blob offset 4160 is not a multiple of 4096");
}

TEST(ArtifactBadInput, RejectsSizeThatDisagreesWithDtypeAndShape) {
  expectRejected(
      writeWith([](ArtifactWriter& w) { w.overrideTensorSizeForTesting(0, 100); }),
      "tensor 0 'embed_tokens.weight': size 100 bytes does not match bf16 shape (1024 bytes)");
}

TEST(ArtifactBadInput, RejectsBadIndicesAndDtypes) {
  struct Case {
    std::function<void(ArtifactWriter&)> tweak;
    const char* needle;
  };
  std::vector<Case> cases = {
      {[](ArtifactWriter& w) {
         QuantScheme q{schema::QuantKind::PerTensor, 0, schema::ZeroKind::None, 99};
         w.addTensor({"bad_scale", schema::DType::F8E4M3FN, {4}, q, -1}, std::vector<uint8_t>(4));
       },
       "quant tensor index 99 is out of range"},
      {[](ArtifactWriter& w) {
         w.addTensor({"bad_dtype", static_cast<schema::DType>(200), {4}, {}, -1},
                     std::vector<uint8_t>(4));
       },
       "unknown dtype 200"},
      {[](ArtifactWriter& w) {
         w.addTensor({"bad_shape", schema::DType::U8, {-4}, {}, -1}, std::vector<uint8_t>(4));
       },
       "negative dimension -4"},
      {[](ArtifactWriter& w) {
         w.addTensor({"bad_rank", schema::DType::U8, {4}, {}, 5}, std::vector<uint8_t>(4));
       },
       "tp_rank 5 outside world size 1"},
      {[](ArtifactWriter& w) {
         Program p;
         p.buffers.resize(1);
         p.steps.push_back({schema::OpKind::Linear, -1, {0}, {0}, {99}, {}, -1});
         w.addProgram(p);
       },
       "program 2 step 0: weight tensor index 99 out of range"},
      {[](ArtifactWriter& w) {
         Program p;
         p.steps.push_back({schema::OpKind::Add, -1, {3}, {}, {}, {}, -1});
         w.addProgram(p);
       },
       "input buffer index 3 out of range (0)"},
      {[](ArtifactWriter& w) {
         Program p;
         p.steps.push_back({schema::OpKind::RmsNorm, 7, {}, {}, {}, {}, -1});
         w.addProgram(p);
       },
       "kernel index 7 out of range (1)"},
      {[](ArtifactWriter& w) {
         Program p;
         p.steps.push_back({schema::OpKind::Attention, -1, {}, {}, {}, {}, -5});
         w.addProgram(p);
       },
       "attention variant index -5 out of range (2)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needle);
    expectRejected(writeWith([&](ArtifactWriter& w) {
                     c.tweak(w);
                     w.skipValidationForTesting();
                   }),
                   c.needle);
  }
}

TEST(ArtifactBadInput, RejectsHeaderAndManifestDisagreeingAboutDummyWeights) {
  std::vector<uint8_t> bytes = sampleBytes();
  bytes[12] |= 1;  // claims no blob ...
  writeU64(bytes, 32, 0);
  writeU64(bytes, 40, 0);
  rehashHeader(bytes);
  expectRejected(bytes, "disagree about dummy weights");

  SampleOptions dummy;
  dummy.dummyWeights = true;
  bytes = sampleBytes(dummy);
  bytes[12] &= ~1;  // ... or claims a blob the manifest says is absent
  uint64_t blobOffset = (64 + readU64(bytes, 24) + 4095) / 4096 * 4096;
  writeU64(bytes, 32, blobOffset);
  bytes.resize(blobOffset);
  rehashHeader(bytes);
  expectRejected(bytes, "disagree about dummy weights");
}

TEST(ArtifactBadInput, RejectsManifestThatIsNotAFlatBuffer) {
  std::vector<uint8_t> bytes(64 + 64, 0);
  std::memcpy(bytes.data(), artifact::kMagic, 8);
  bytes[8] = 1;
  bytes[12] = 1;  // no blob
  writeU64(bytes, 16, 64);
  writeU64(bytes, 24, 64);
  for (size_t i = 64; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31);
  bytes[68] = 'I', bytes[69] = 'N', bytes[70] = 'G', bytes[71] = 'T';
  writeU64(bytes, 48, XXH64(bytes.data() + 64, 64, 0));
  rehashHeader(bytes);
  expectRejected(bytes, "manifest fails FlatBuffers verification");
  bytes[68] = 'X';
  writeU64(bytes, 48, XXH64(bytes.data() + 64, 64, 0));
  rehashHeader(bytes);
  expectRejected(bytes, "lacks the INGT file identifier");
}

}  // namespace
}  // namespace ingot
