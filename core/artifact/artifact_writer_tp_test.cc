//===- ArtifactWriterTpTest.cpp - the tensor-parallel blob layout and its checks -===//
#include "core/artifact/artifact_writer.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "core/artifact/artifact_reader.h"

namespace ingot {
namespace {

/// A tensor of `rows` x 16 f32 with random bytes, owned by `rank` (-1 = replicated).
struct RandomTensor {
  std::string name;
  int32_t rank;
  std::vector<uint8_t> bytes;
};

RandomTensor randomTensor(std::mt19937_64 &rng, std::string name, int32_t rank) {
  int64_t rows = 1 + static_cast<int64_t>(rng() % 300); // some tensors span several pages
  RandomTensor t{std::move(name), rank, std::vector<uint8_t>(rows * 16 * 4)};
  for (uint8_t &b : t.bytes)
    b = static_cast<uint8_t>(rng());
  return t;
}

int32_t add(ArtifactWriter &writer, const RandomTensor &t) {
  TensorSpec spec;
  spec.name = t.name;
  spec.dtype = schema::DType::F32;
  spec.shape = {static_cast<int64_t>(t.bytes.size() / 64), 16};
  spec.tpRank = t.rank;
  return writer.addTensor(std::move(spec), t.bytes);
}

TEST(ArtifactWriterTensorParallel, EachShardCoversExactlyItsRanksTensorsAfterTheReplicated) {
  std::mt19937_64 rng(std::random_device{}());
  for (int32_t world : {2, 3, 4}) {
    // Tensors added in a random rank order; sharded names repeat on every rank.
    std::vector<RandomTensor> tensors;
    for (int i = 0; i < 4; ++i)
      tensors.push_back(randomTensor(rng, "norm." + std::to_string(i), -1));
    for (int i = 0; i < 5; ++i)
      for (int32_t r = 0; r < world; ++r)
        tensors.push_back(randomTensor(rng, "proj." + std::to_string(i), r));
    std::shuffle(tensors.begin(), tensors.end(), rng);
    ArtifactWriter writer;
    writer.setTensorParallel(world);
    for (const RandomTensor &t : tensors)
      add(writer, t);
    for (int32_t r = 0; r < world; ++r) {
      Program program;
      program.name = "step_tp" + std::to_string(r);
      program.tpRank = r;
      writer.addProgram(std::move(program));
    }
    StatusOr<std::vector<uint8_t>> file = writer.writeToBuffer();
    ASSERT_TRUE(file.ok()) << file.status().message();
    StatusOr<Artifact> artifact = Artifact::openFromMemory(*file);
    ASSERT_TRUE(artifact.ok()) << artifact.status().message();
    ASSERT_TRUE(artifact->verifyChecksums().ok());

    uint64_t replicatedEnd = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const schema::TensorDef &t = artifact->tensor(i);
      EXPECT_EQ(t.tp_rank(), tensors[i].rank);
      ByteSpan bytes = artifact->tensorBytes(i);
      ASSERT_EQ(bytes.size, tensors[i].bytes.size());
      EXPECT_TRUE(std::equal(bytes.data, bytes.data + bytes.size, tensors[i].bytes.begin()))
          << tensors[i].name << " rank " << tensors[i].rank;
      if (t.tp_rank() < 0)
        replicatedEnd = std::max(replicatedEnd, t.offset() + t.size());
    }
    const schema::TensorParallelDef *tp = artifact->manifest().tensor_parallel();
    ASSERT_EQ(tp->world_size(), world);
    ASSERT_EQ(tp->shards()->size(), static_cast<size_t>(world));
    uint64_t previousEnd = replicatedEnd;
    for (int32_t r = 0; r < world; ++r) {
      const schema::ShardDef *shard = tp->shards()->Get(r);
      EXPECT_EQ(shard->rank(), r);
      uint64_t first = UINT64_MAX, end = 0;
      for (size_t i = 0; i < tensors.size(); ++i) {
        const schema::TensorDef &t = artifact->tensor(i);
        if (t.tp_rank() != r)
          continue;
        first = std::min(first, t.offset());
        end = std::max(end, t.offset() + t.size());
      }
      EXPECT_EQ(shard->blob_offset(), first) << "rank " << r;
      EXPECT_EQ(shard->blob_offset() + shard->blob_size(), end) << "rank " << r;
      EXPECT_GE(shard->blob_offset(), previousEnd) << "rank " << r << " overlaps the one before";
      previousEnd = end;
    }
    ASSERT_EQ(artifact->manifest().programs()->size(), static_cast<size_t>(world));
    for (int32_t r = 0; r < world; ++r)
      EXPECT_EQ(artifact->manifest().programs()->Get(r)->tp_rank(), r);
  }
}

/// The message write() fails with for the tensors and one program of rank `programRank`
/// using every tensor.
std::string writeError(const std::vector<RandomTensor> &tensors, int32_t programRank,
                       int32_t world = 2) {
  ArtifactWriter writer;
  writer.setTensorParallel(world);
  Program program;
  program.name = "step";
  program.tpRank = programRank;
  ProgramStep step;
  step.op = schema::OpKind::Linear;
  for (const RandomTensor &t : tensors)
    step.weights.push_back(add(writer, t));
  program.steps.push_back(step);
  writer.addProgram(std::move(program));
  StatusOr<std::vector<uint8_t>> file = writer.writeToBuffer();
  return file.ok() ? std::string() : file.status().message();
}

TEST(ArtifactWriterTensorParallel, NamesAreUniquePerRankNotPerArtifact) {
  std::mt19937_64 rng(std::random_device{}());
  EXPECT_EQ(writeError({randomTensor(rng, "w", 0), randomTensor(rng, "w", 1)}, -1), "");
  EXPECT_EQ(writeError({randomTensor(rng, "w", 1), randomTensor(rng, "w", 1)}, -1),
            "duplicate tensor name 'w' on rank 1");
  EXPECT_EQ(writeError({randomTensor(rng, "w", -1), randomTensor(rng, "w", -1)}, -1),
            "duplicate tensor name 'w'");
  EXPECT_EQ(writeError({randomTensor(rng, "w", -1), randomTensor(rng, "w", 0)}, -1),
            "tensor name 'w' is both replicated and held by a rank");
}

TEST(ArtifactWriterTensorParallel, ARanksProgramUsesOnlyItsOwnAndReplicatedTensors) {
  std::mt19937_64 rng(std::random_device{}());
  EXPECT_EQ(writeError({randomTensor(rng, "a", -1), randomTensor(rng, "b", 1)}, 1), "");
  EXPECT_EQ(writeError({randomTensor(rng, "a", -1), randomTensor(rng, "b", 1)}, 0),
            "program 0 step 0: weight tensor 1 'b' belongs to rank 1, the program to rank 0");
  EXPECT_EQ(writeError({randomTensor(rng, "a", -1)}, 2),
            "program 0: tp_rank 2 outside world size 2");
  EXPECT_EQ(writeError({randomTensor(rng, "a", 3)}, 0, 4),
            "program 0 step 0: weight tensor 0 'a' belongs to rank 3, the program to rank 0");
}

} // namespace
} // namespace ingot
