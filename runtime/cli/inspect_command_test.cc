// `ingot inspect` output: key lines for a sample artifact, verify results and errors.
#include "runtime/cli/inspect_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "testing/sample_artifact.h"
#include "core/artifact/artifact_reader.h"

namespace ingot {
namespace {

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "ingot_inspect_test_" + std::to_string(::getpid()) + "_" + name;
}

std::string writeSample(const std::string& name, SampleOptions options = {}) {
  ArtifactWriter writer;
  populateSampleArtifact(writer, options);
  std::string path = tempPath(name);
  Status status = writer.write(path);
  EXPECT_TRUE(status.ok()) << status.message();
  return path;
}

void expectContains(const std::string& text, const std::string& needle) {
  EXPECT_NE(text.find(needle), std::string::npos) << "missing: " << needle << "\nin:\n" << text;
}

TEST(InspectCommand, PrintsEveryPartOfTheManifest) {
  std::string path = writeSample("sample.ingot");
  std::ostringstream out, err;
  EXPECT_EQ(runInspect(path, false, out, err), 0) << err.str();
  EXPECT_EQ(err.str(), "");
  std::string text = out.str();
  expectContains(text, "format: 1." + std::to_string(artifact::kFormatMinor) + ", manifest ");
  expectContains(text, "model: sample-tiny (llama)");
  expectContains(text, "vocab 32, hidden 16, intermediate 32, layers 1, heads 4 (kv 2), head_dim 4");
  expectContains(text, "rope: theta 100000, scaling llama3 (factor 8");
  expectContains(text, "compute bf16, kv cache bf16 in blocks of 16 tokens");
  expectContains(text, "tokenizer: byte-level BPE, pre-tokenizer smollm, vocab 32, merges 3");
  expectContains(text, "bos 1 \"<|im_start|>\", eos 2 \"<|im_end|>\"");
  expectContains(text, "chat template present (");
  expectContains(text, "tensors: 14, ");
  expectContains(text, "embed_tokens.weight");
  expectContains(text, "per_tensor s=#2");
  expectContains(text, "nvfp4/16 s=#4 g=#5");
  expectContains(text, "mxfp4/32 s=#7");
  expectContains(text, "int4_group/32 s=#9 z=#10");
  expectContains(text, "kernels: 1");
  expectContains(text,
                 "ingot_rms_norm_bf16: block [256, 1, 1], grid [Rows, 1, 1], shared 1024 B, "
                 "targets: sm_90a (cubin, 6 B), compute_80 (ptx, 8 B)");
  expectContains(text, "program 0 \"main\" (role main): 5 buffers, 7 steps");
  expectContains(text, "step 1: rms_norm [%1 hidden] -> [%1 hidden] weights [#11] kernel "
                       "ingot_rms_norm_bf16 epsilon=1e-05");
  expectContains(text, "variant causal layer=0 scale=0.5");
  expectContains(text, "program 1 \"draft\" (role draft): 0 buffers, 0 steps, layers [0]");
  expectContains(text, "0 causal: mask 36 B, score none (identity), device function ingot_mask_causal");
  // The bytecode is printed as the CPU backend runs it.
  expectContains(text, "      %2 = cmpi ule, %1, %0 : index\n      yield %2 : i1");
  expectContains(text, "1 softcap: mask none (all visible), score ");
  expectContains(text, "tanh");
  expectContains(text, "tensor parallel: world size 1");
  expectContains(text, "compiler: ingot 0.1.0 (sample)");
  expectContains(text, "source: /models/sample-tiny (xxh64 0123456789abcdef)");
  EXPECT_EQ(text.find("checksums:"), std::string::npos);
  ::unlink(path.c_str());
}

TEST(InspectCommand, TensorRowShowsOffsetSizeAndChecksumPrefix) {
  std::string path = writeSample("row.ingot");
  StatusOr<Artifact> artifact = Artifact::open(path);
  ASSERT_TRUE(artifact.ok());
  const schema::TensorDef& t = artifact->tensor(11);
  char prefix[17];
  std::snprintf(prefix, sizeof(prefix), "%016llx", static_cast<unsigned long long>(t.xxh64()));
  std::ostringstream out, err;
  ASSERT_EQ(runInspect(path, false, out, err), 0);
  std::istringstream lines(out.str());
  std::string line;
  bool found = false;
  while (std::getline(lines, line)) {
    if (line.find(" norm.weight ") == std::string::npos) continue;
    found = true;
    expectContains(line, " f32 ");
    expectContains(line, "[16]");
    expectContains(line, " " + std::to_string(t.offset()) + " ");
    expectContains(line, " 64 ");
    expectContains(line, std::string(prefix, 8));
  }
  EXPECT_TRUE(found) << out.str();
  ::unlink(path.c_str());
}

TEST(InspectCommand, VerifyReportsAllTensorsOk) {
  std::string path = writeSample("verify.ingot");
  std::ostringstream out, err;
  EXPECT_EQ(runInspect(path, true, out, err), 0) << err.str();
  expectContains(out.str(), "checksums: 14 tensors OK\n");
  ::unlink(path.c_str());
}

TEST(InspectCommand, VerifyFailsNamingTheCorruptTensor) {
  std::string path = writeSample("corrupt.ingot");
  uint64_t at;
  {
    StatusOr<Artifact> artifact = Artifact::open(path);
    ASSERT_TRUE(artifact.ok());
    at = artifact->header().blob_offset + artifact->tensor(0).offset() + 3;
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(c ^ 0x20));
  }
  std::ostringstream out, err;
  EXPECT_EQ(runInspect(path, true, out, err), 1);
  expectContains(out.str(), "checksums: FAILED");
  expectContains(err.str(), "ingot inspect: error: " + path +
                                ": tensor 0 'embed_tokens.weight': checksum mismatch");
  ::unlink(path.c_str());
}

TEST(InspectCommand, DummyWeightsSayThereIsNoBlob) {
  SampleOptions options;
  options.dummyWeights = true;
  options.seed = 7;
  std::string path = writeSample("dummy.ingot", options);
  std::ostringstream out, err;
  EXPECT_EQ(runInspect(path, true, out, err), 0) << err.str();
  expectContains(out.str(), "no blob (dummy weights, seed 7)");
  expectContains(out.str(), "checksums: dummy weights, no blob to verify");
  ::unlink(path.c_str());
}

TEST(InspectCommand, MissingFileIsOneErrorLineAndExitCodeOne) {
  std::ostringstream out, err;
  EXPECT_EQ(runInspect("/nonexistent/model.ingot", false, out, err), 1);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(err.str(),
            "ingot inspect: error: /nonexistent/model.ingot: cannot open: No such file or "
            "directory\n");
}

TEST(InspectCommand, ProgramHeaderShowsRoleAndTensorParallelRank) {
  // Names deliberately say nothing about the rank: the header must print the field itself.
  ArtifactWriter writer;
  writer.addTensor({"w", schema::DType::U8, {1}, {}, -1}, std::vector<uint8_t>{7});
  for (int32_t rank : {1, 0}) {
    Program program;
    program.name = "p" + std::to_string(rank * 7);
    program.role = rank ? schema::ProgramRole::Draft : schema::ProgramRole::Main;
    program.tpRank = rank;
    writer.addProgram(program);
  }
  writer.setTensorParallel(2);
  std::string path = tempPath("ranked.ingot");
  Status status = writer.write(path);
  ASSERT_TRUE(status.ok()) << status.message();
  std::ostringstream out, err;
  ASSERT_EQ(runInspect(path, false, out, err), 0) << err.str();
  expectContains(out.str(), "program 0 \"p7\" (role draft, tp_rank 1): 0 buffers, 0 steps\n");
  expectContains(out.str(), "program 1 \"p0\" (role main, tp_rank 0): 0 buffers, 0 steps\n");
  ::unlink(path.c_str());

  // Unsharded programs run on every rank and print no rank.
  std::string sample = writeSample("unranked.ingot");
  std::ostringstream plain;
  ASSERT_EQ(runInspect(sample, false, plain, err), 0) << err.str();
  EXPECT_EQ(plain.str().find("tp_rank"), std::string::npos) << plain.str();
  ::unlink(sample.c_str());
}

TEST(InspectCommand, LongTensorTablesAreElided) {
  ArtifactWriter writer;
  for (int i = 0; i < 300; ++i)
    writer.addTensor({"t" + std::to_string(i), schema::DType::U8, {1}, {}, -1},
                     std::vector<uint8_t>{static_cast<uint8_t>(i)});
  std::string path = tempPath("long.ingot");
  ASSERT_TRUE(writer.write(path).ok());
  std::ostringstream out, err;
  ASSERT_EQ(runInspect(path, false, out, err), 0);
  expectContains(out.str(), "tensors: 300, 300 B");
  expectContains(out.str(), "by dtype: ui8 x300 (300 B)");
  expectContains(out.str(), "... 236 more tensors ...");
  expectContains(out.str(), " t299 ");
  EXPECT_EQ(out.str().find(" t100 "), std::string::npos);

  StatusOr<Artifact> artifact = Artifact::open(path);
  ASSERT_TRUE(artifact.ok());
  std::ostringstream all;
  InspectOptions options;
  options.all = true;
  printArtifact(*artifact, options, all);
  expectContains(all.str(), " t100 ");
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace ingot
