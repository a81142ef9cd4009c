// Round-trip tests: what ArtifactWriter writes, Artifact reads back field for field.
#include "core/artifact/artifact_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <fstream>

#include "testing/sample_artifact.h"

namespace ingot {
namespace {

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "ingot_reader_test_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<int64_t> shapeOf(const schema::TensorDef& t) {
  return t.shape() ? std::vector<int64_t>(t.shape()->begin(), t.shape()->end())
                   : std::vector<int64_t>{};
}

template <typename T>
std::vector<T> toVector(const flatbuffers::Vector<T>* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>{};
}

/// Checks each tensor's definition (and, with a blob, its bytes) against the writer's.
void expectTensorsMatch(const Artifact& a, const ArtifactContents& c,
                        const std::vector<std::vector<uint8_t>>& bytes) {
  ASSERT_EQ(a.numTensors(), c.tensors.size());
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    SCOPED_TRACE(c.tensors[i].name);
    const schema::TensorDef& t = a.tensor(i);
    EXPECT_EQ(t.name()->str(), c.tensors[i].name);
    EXPECT_EQ(t.dtype(), c.tensors[i].dtype);
    EXPECT_EQ(shapeOf(t), c.tensors[i].shape);
    EXPECT_EQ(t.tp_rank(), c.tensors[i].tpRank);
    const QuantScheme& q = c.tensors[i].quant;
    ASSERT_NE(t.quant(), nullptr);
    EXPECT_EQ(t.quant()->kind(), q.kind);
    EXPECT_EQ(t.quant()->block_size(), q.blockSize);
    EXPECT_EQ(t.quant()->zero_kind(), q.zeroKind);
    EXPECT_EQ(t.quant()->scale_tensor(), q.scaleTensor);
    EXPECT_EQ(t.quant()->zero_tensor(), q.zeroTensor);
    EXPECT_EQ(t.quant()->global_scale_tensor(), q.globalScaleTensor);
    EXPECT_EQ(t.size(), bytes[i].size());
    if (a.hasBlob()) {
      EXPECT_EQ(t.offset() % artifact::kBlobAlignment, 0u);
      ByteSpan span = a.tensorBytes(i);
      ASSERT_EQ(span.size, bytes[i].size());
      EXPECT_EQ(0, std::memcmp(span.data, bytes[i].data(), span.size));
      EXPECT_EQ(reinterpret_cast<uintptr_t>(span.data) % artifact::kBlobAlignment, 0u)
          << "tensor bytes must be page-aligned in the mapping";
      EXPECT_EQ(t.xxh64(), XXH64(bytes[i].data(), bytes[i].size(), 0));
    }
  }
}

/// Checks the manifest's model config against the writer's.
void expectConfigMatches(const schema::Manifest& m, const ModelConfig& cfg) {
  ASSERT_NE(m.config(), nullptr);
  EXPECT_EQ(m.config()->architecture()->str(), cfg.architecture);
  EXPECT_EQ(m.config()->name()->str(), cfg.name);
  EXPECT_EQ(m.config()->vocab_size(), cfg.vocabSize);
  EXPECT_EQ(m.config()->hidden_size(), cfg.hiddenSize);
  EXPECT_EQ(m.config()->intermediate_size(), cfg.intermediateSize);
  EXPECT_EQ(m.config()->num_layers(), cfg.numLayers);
  EXPECT_EQ(m.config()->num_heads(), cfg.numHeads);
  EXPECT_EQ(m.config()->num_kv_heads(), cfg.numKvHeads);
  EXPECT_EQ(m.config()->head_dim(), cfg.headDim);
  EXPECT_EQ(m.config()->max_context(), cfg.maxContext);
  EXPECT_FLOAT_EQ(m.config()->rms_norm_eps(), cfg.rmsNormEps);
  EXPECT_DOUBLE_EQ(m.config()->rope()->theta(), cfg.rope.theta);
  EXPECT_EQ(m.config()->rope()->scaling(), cfg.rope.scaling);
  EXPECT_DOUBLE_EQ(m.config()->rope()->factor(), cfg.rope.factor);
  EXPECT_EQ(m.config()->compute_dtype(), cfg.computeDtype);
  EXPECT_EQ(m.config()->kv_dtype(), cfg.kvDtype);
  EXPECT_EQ(m.config()->kv_block_size(), cfg.kvBlockSize);
  EXPECT_EQ(m.config()->bos_token_id(), cfg.bosTokenId);
  EXPECT_EQ(toVector(m.config()->eos_token_ids()), cfg.eosTokenIds);
}

/// Checks the manifest's tokenizer against the writer's.
void expectTokenizerMatches(const schema::Manifest& m, const Tokenizer& tok) {
  ASSERT_NE(m.tokenizer(), nullptr);
  EXPECT_EQ(m.tokenizer()->kind(), tok.kind);
  EXPECT_EQ(m.tokenizer()->pre_tokenizer()->str(), tok.preTokenizer);
  ASSERT_EQ(m.tokenizer()->tokens()->size(), tok.tokens.size());
  for (size_t i = 0; i < tok.tokens.size(); ++i)
    EXPECT_EQ(m.tokenizer()->tokens()->Get(i)->str(), tok.tokens[i]);
  ASSERT_EQ(m.tokenizer()->merges()->size(), tok.merges.size());
  for (size_t i = 0; i < tok.merges.size(); ++i)
    EXPECT_EQ(m.tokenizer()->merges()->Get(i)->str(), tok.merges[i]);
  ASSERT_EQ(m.tokenizer()->token_attrs()->size(), tok.tokenAttrs.size());
  EXPECT_EQ(m.tokenizer()->token_attrs()->Get(1), schema::TokenAttr::Control);
  EXPECT_EQ(m.tokenizer()->bos_token_id(), tok.bosTokenId);
  EXPECT_EQ(m.tokenizer()->eos_token_id(), tok.eosTokenId);
  EXPECT_EQ(m.tokenizer()->add_bos(), tok.addBos);
  EXPECT_EQ(m.tokenizer()->chat_template()->str(), tok.chatTemplate);
}

/// Checks the manifest's kernels (the first one field by field) against the writer's.
void expectKernelsMatch(const schema::Manifest& m, const ArtifactContents& c) {
  ASSERT_EQ(m.kernels()->size(), c.kernels.size());
  const schema::KernelDef* k = m.kernels()->Get(0);
  EXPECT_EQ(k->name()->str(), c.kernels[0].name);
  EXPECT_EQ(toVector(k->block_dim()), c.kernels[0].blockDim);
  EXPECT_EQ(k->shared_mem_bytes(), c.kernels[0].sharedMemBytes);
  ASSERT_TRUE(k->grid());
  ASSERT_EQ(k->grid()->size(), 3u);
  EXPECT_EQ(k->grid()->Get(0)->count(), schema::GridCount::Rows);
  EXPECT_EQ(k->grid()->Get(1)->count(), schema::GridCount::One);
  ASSERT_EQ(k->binaries()->size(), c.kernels[0].binaries.size());
  for (size_t i = 0; i < c.kernels[0].binaries.size(); ++i) {
    EXPECT_EQ(k->binaries()->Get(i)->target()->str(), c.kernels[0].binaries[i].target);
    EXPECT_EQ(k->binaries()->Get(i)->format(), c.kernels[0].binaries[i].format);
    EXPECT_EQ(toVector(k->binaries()->Get(i)->data()), c.kernels[0].binaries[i].data);
  }
}

/// Checks the manifest's programs, with their buffers and steps, against the writer's.
void expectProgramsMatch(const schema::Manifest& m, const ArtifactContents& c) {
  ASSERT_EQ(m.programs()->size(), c.programs.size());
  for (size_t p = 0; p < c.programs.size(); ++p) {
    const schema::ProgramDef* prog = m.programs()->Get(p);
    const Program& want = c.programs[p];
    EXPECT_EQ(prog->name()->str(), want.name);
    EXPECT_EQ(prog->role(), want.role);
    EXPECT_EQ(toVector(prog->layers()), want.layers);
    ASSERT_EQ(prog->buffers()->size(), want.buffers.size());
    for (size_t b = 0; b < want.buffers.size(); ++b) {
      EXPECT_EQ(prog->buffers()->Get(b)->name()->str(), want.buffers[b].name);
      EXPECT_EQ(prog->buffers()->Get(b)->kind(), want.buffers[b].kind);
      EXPECT_EQ(prog->buffers()->Get(b)->dtype(), want.buffers[b].dtype);
      EXPECT_EQ(toVector(prog->buffers()->Get(b)->shape()), want.buffers[b].shape);
    }
    ASSERT_EQ(prog->steps()->size(), want.steps.size());
    for (size_t s = 0; s < want.steps.size(); ++s) {
      const schema::ProgramStepDef* step = prog->steps()->Get(s);
      EXPECT_EQ(step->op(), want.steps[s].op);
      EXPECT_EQ(step->kernel(), want.steps[s].kernel);
      EXPECT_EQ(toVector(step->inputs()), want.steps[s].inputs);
      EXPECT_EQ(toVector(step->outputs()), want.steps[s].outputs);
      EXPECT_EQ(toVector(step->weights()), want.steps[s].weights);
      EXPECT_EQ(step->attention_variant(), want.steps[s].attentionVariant);
      ASSERT_EQ(step->params()->size(), want.steps[s].params.size());
      for (size_t i = 0; i < want.steps[s].params.size(); ++i) {
        EXPECT_EQ(step->params()->Get(i)->name()->str(), want.steps[s].params[i].name);
        EXPECT_EQ(step->params()->Get(i)->i(), want.steps[s].params[i].i);
        EXPECT_DOUBLE_EQ(step->params()->Get(i)->f(), want.steps[s].params[i].f);
      }
    }
  }
}

/// Checks the manifest's attention variants against the writer's.
void expectAttentionVariantsMatch(const schema::Manifest& m, const ArtifactContents& c) {
  ASSERT_EQ(m.attention_variants()->size(), c.attentionVariants.size());
  for (size_t v = 0; v < c.attentionVariants.size(); ++v) {
    const schema::AttentionVariantDef* var = m.attention_variants()->Get(v);
    EXPECT_EQ(var->name()->str(), c.attentionVariants[v].name);
    EXPECT_EQ(toVector(var->mask_bytecode()), c.attentionVariants[v].maskBytecode);
    EXPECT_EQ(toVector(var->score_bytecode()), c.attentionVariants[v].scoreBytecode);
    EXPECT_EQ(var->device_function()->str(), c.attentionVariants[v].deviceFunction);
  }
}

/// Checks provenance, the tensor-parallel world size and the dummy-weights fields.
void expectProvenanceMatches(const schema::Manifest& m, const ArtifactContents& c) {
  ASSERT_NE(m.provenance(), nullptr);
  EXPECT_EQ(m.provenance()->compiler_version()->str(), c.provenance.compilerVersion);
  ASSERT_EQ(m.provenance()->options()->size(), c.provenance.options.size());
  EXPECT_EQ(m.provenance()->options()->Get(0)->str(), c.provenance.options[0]);
  EXPECT_EQ(m.provenance()->source()->str(), c.provenance.source);
  EXPECT_EQ(m.provenance()->source_xxh64(), c.provenance.sourceXxh64);
  EXPECT_EQ(m.provenance()->created()->str(), c.provenance.created);
  EXPECT_EQ(m.tensor_parallel()->world_size(), c.tpWorldSize);
  EXPECT_EQ(m.dummy_weights(), c.dummyWeights);
  EXPECT_EQ(m.dummy_seed(), c.dummySeed);
}

/// Checks every manifest field against what the writer was given. As when these checks
/// were one function, the first fatal failure (a failed ASSERT_*) ends them.
void expectMatches(const Artifact& a, const ArtifactContents& c,
                   const std::vector<std::vector<uint8_t>>& bytes) {
  const schema::Manifest& m = a.manifest();
  expectTensorsMatch(a, c, bytes);
  if (::testing::Test::HasFatalFailure()) return;
  expectConfigMatches(m, c.config);
  if (::testing::Test::HasFatalFailure()) return;
  expectTokenizerMatches(m, c.tokenizer);
  if (::testing::Test::HasFatalFailure()) return;
  expectKernelsMatch(m, c);
  if (::testing::Test::HasFatalFailure()) return;
  expectProgramsMatch(m, c);
  if (::testing::Test::HasFatalFailure()) return;
  expectAttentionVariantsMatch(m, c);
  if (::testing::Test::HasFatalFailure()) return;
  expectProvenanceMatches(m, c);
}

TEST(ArtifactRoundTrip, FileReadsBackEveryFieldAndByte) {
  ArtifactWriter writer;
  auto bytes = populateSampleArtifact(writer, {});
  std::string path = tempPath("roundtrip.ingot");
  ASSERT_TRUE(writer.write(path).ok());
  StatusOr<Artifact> artifact = Artifact::open(path);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  EXPECT_TRUE(artifact->hasBlob());
  EXPECT_EQ(artifact->header().format_major, artifact::kFormatMajor);
  EXPECT_EQ(artifact->header().format_minor, artifact::kFormatMinor);
  EXPECT_EQ(artifact->header().manifest_offset, artifact::kHeaderSize);
  EXPECT_EQ(artifact->header().blob_offset % artifact::kBlobAlignment, 0u);
  EXPECT_GE(artifact->header().blob_offset,
            artifact->header().manifest_offset + artifact->header().manifest_size);
  EXPECT_EQ(artifact->header().blob_offset + artifact->header().blob_size,
            artifact->fileSize());
  expectMatches(*artifact, writer.contents(), bytes);
  EXPECT_TRUE(artifact->verifyChecksums().ok());
  ::unlink(path.c_str());
}

TEST(ArtifactRoundTrip, StreamedTensorsMatchOwnedTensors) {
  ArtifactWriter owned, streamed;
  auto bytes = populateSampleArtifact(owned, {});
  SampleOptions options;
  options.streamTensors = true;
  populateSampleArtifact(streamed, options);
  StatusOr<std::vector<uint8_t>> a = owned.writeToBuffer();
  StatusOr<std::vector<uint8_t>> b = streamed.writeToBuffer();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b) << "streaming must not change a single byte";
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*b);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  expectMatches(*artifact, streamed.contents(), bytes);
}

TEST(ArtifactRoundTrip, EveryTensorStartsOnAPageInsideTheBlob) {
  ArtifactWriter writer;
  populateSampleArtifact(writer, {});
  StatusOr<std::vector<uint8_t>> file = writer.writeToBuffer();
  ASSERT_TRUE(file.ok());
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*file);
  ASSERT_TRUE(artifact.ok());
  uint64_t previousEnd = 0;
  for (size_t i = 0; i < artifact->numTensors(); ++i) {
    const schema::TensorDef& t = artifact->tensor(i);
    EXPECT_EQ(t.offset() % 4096, 0u);
    EXPECT_GE(t.offset(), previousEnd) << "tensors must not overlap";
    previousEnd = t.offset() + t.size();
  }
  EXPECT_EQ(previousEnd, artifact->header().blob_size);
}

TEST(ArtifactRoundTrip, DummyWeightsHaveNoBlob) {
  ArtifactWriter writer;
  SampleOptions options;
  options.dummyWeights = true;
  options.seed = 42;
  auto bytes = populateSampleArtifact(writer, options);
  StatusOr<std::vector<uint8_t>> file = writer.writeToBuffer();
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->size(), 64 + (*file)[24] + 256u * (*file)[25])
      << "a dummy artifact is header and manifest only";
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*file);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  EXPECT_FALSE(artifact->hasBlob());
  EXPECT_TRUE(artifact->header().flags & artifact::kFlagNoBlob);
  EXPECT_EQ(artifact->header().blob_size, 0u);
  EXPECT_TRUE(artifact->manifest().dummy_weights());
  EXPECT_EQ(artifact->manifest().dummy_seed(), 42u);
  EXPECT_EQ(artifact->tensorBytes(0).data, nullptr);
  EXPECT_TRUE(artifact->verifyChecksums().ok());
  expectMatches(*artifact, writer.contents(), bytes);
}

TEST(ArtifactRoundTrip, TensorParallelShardsCoverEachRanksTensors) {
  ArtifactWriter writer;
  SampleOptions options;
  options.tpWorldSize = 2;
  auto bytes = populateSampleArtifact(writer, options);
  StatusOr<std::vector<uint8_t>> file = writer.writeToBuffer();
  ASSERT_TRUE(file.ok()) << file.status().message();
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*file);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  expectMatches(*artifact, writer.contents(), bytes);
  const schema::TensorParallelDef* tp = artifact->manifest().tensor_parallel();
  ASSERT_EQ(tp->shards()->size(), 2u);
  for (const schema::ShardDef* shard : *tp->shards()) {
    for (size_t i = 0; i < artifact->numTensors(); ++i) {
      const schema::TensorDef& t = artifact->tensor(i);
      if (t.tp_rank() != shard->rank()) continue;
      EXPECT_GE(t.offset(), shard->blob_offset());
      EXPECT_LE(t.offset() + t.size(), shard->blob_offset() + shard->blob_size());
    }
  }
}

TEST(ArtifactRoundTrip, FindsTensorsByName) {
  ArtifactWriter writer;
  populateSampleArtifact(writer, {});
  StatusOr<std::vector<uint8_t>> file = writer.writeToBuffer();
  ASSERT_TRUE(file.ok());
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*file);
  ASSERT_TRUE(artifact.ok());
  EXPECT_EQ(artifact->findTensor("norm.weight"), std::optional<size_t>(11));
  EXPECT_EQ(artifact->findTensor("no.such.tensor"), std::nullopt);
}

TEST(ArtifactWriter, WritesAtomicallyAndLeavesNoTemporaryOnFailure) {
  std::string path = tempPath("atomic.ingot");
  {
    std::ofstream old(path);
    old << "previous contents";
  }
  ArtifactWriter writer;
  TensorSpec spec{"w", schema::DType::F32, {4}, {}, -1};
  writer.addTensor(spec, 16, [](const TensorByteSink& sink) {
    float values[2] = {1, 2};
    INGOT_RETURN_IF_ERROR(sink(values, sizeof(values)));
    return ioError("checkpoint read failed");
  });
  Status status = writer.write(path);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "checkpoint read failed");
  std::ifstream in(path);
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(contents, "previous contents") << "a failed write must not touch the target";
  EXPECT_NE(::access((path + ".tmp-" + std::to_string(::getpid())).c_str(), F_OK), 0);
  ::unlink(path.c_str());
}

TEST(ArtifactWriter, RejectsBytesThatDoNotMatchDtypeAndShape) {
  ArtifactWriter writer;
  writer.addTensor({"w", schema::DType::BF16, {3, 4}, {}, -1}, std::vector<uint8_t>(23));
  StatusOr<std::vector<uint8_t>> file = writer.writeToBuffer();
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("'w'"), std::string::npos) << file.status().message();
}

TEST(ArtifactWriter, RejectsProducerThatEmitsTooFewBytes) {
  ArtifactWriter writer;
  writer.addTensor({"w", schema::DType::U8, {8}, {}, -1}, 8,
                   [](const TensorByteSink& sink) { return sink("abc", 3); });
  StatusOr<std::vector<uint8_t>> file = writer.writeToBuffer();
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("emitted 3 of 8"), std::string::npos)
      << file.status().message();
}

TEST(ArtifactWriter, RejectsOutOfRangeIndices) {
  ArtifactWriter writer;
  QuantScheme quant{schema::QuantKind::PerTensor, 0, schema::ZeroKind::None, 7};
  writer.addTensor({"w", schema::DType::F8E4M3FN, {2}, quant, -1}, std::vector<uint8_t>(2));
  EXPECT_FALSE(writer.writeToBuffer().ok());

  ArtifactWriter writer2;
  Program program;
  program.steps.push_back({schema::OpKind::Add, -1, {0}, {}, {}, {}, -1});
  writer2.addProgram(program);
  EXPECT_FALSE(writer2.writeToBuffer().ok());
}

TEST(ArtifactWriter, EmptyArtifactRoundTrips) {
  ArtifactWriter writer;
  StatusOr<std::vector<uint8_t>> file = writer.writeToBuffer();
  ASSERT_TRUE(file.ok());
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*file);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  EXPECT_EQ(artifact->numTensors(), 0u);
  EXPECT_EQ(artifact->manifest().config(), nullptr);
}

}  // namespace
}  // namespace ingot
