// `--tp N` checks: accepted for the artifact's own world size or 0, refused otherwise.
#include "runtime/cli/tensor_parallel_flag.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "testing/sample_artifact.h"

namespace ingot {
namespace {

/// Writes the sample artifact sharded over `world` ranks and opens it.
Artifact openSample(int32_t world, std::string& path) {
  path = ::testing::TempDir() + "ingot_tp_flag_test_" + std::to_string(::getpid()) + "_" +
         std::to_string(world) + ".ingot";
  ArtifactWriter writer;
  SampleOptions options;
  options.tpWorldSize = world;
  populateSampleArtifact(writer, options);
  Status written = writer.write(path);
  EXPECT_TRUE(written.ok()) << written.message();
  StatusOr<Artifact> artifact = Artifact::open(path);
  EXPECT_TRUE(artifact.ok()) << artifact.status().message();
  return std::move(artifact).value();
}

TEST(TensorParallelFlag, AcceptsZeroAndTheArtifactsOwnWorldSize) {
  for (int32_t world : {1, 2}) {
    std::string path;
    Artifact artifact = openSample(world, path);
    EXPECT_TRUE(checkTensorParallelFlag(0, artifact, path).ok());
    Status own = checkTensorParallelFlag(world, artifact, path);
    EXPECT_TRUE(own.ok()) << own.message();
    ::unlink(path.c_str());
  }
}

TEST(TensorParallelFlag, RefusesAnotherWorldSizeNamingBoth) {
  std::string path;
  Artifact artifact = openSample(2, path);
  for (int32_t tp : {1, 3, 4}) {
    Status status = checkTensorParallelFlag(tp, artifact, path);
    ASSERT_FALSE(status.ok()) << tp;
    EXPECT_EQ(status.message(), "--tp " + std::to_string(tp) + " disagrees with " + path +
                                    ", compiled for tensor-parallel world size 2 (ingot "
                                    "compile --tp N sets it)");
  }
  Status negative = checkTensorParallelFlag(-1, artifact, path);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.message(), "--tp must be >= 0 (0 = any), not -1");
  ::unlink(path.c_str());
}

TEST(TensorParallelFlag, AnUnshardedArtifactHasWorldSizeOne) {
  std::string path;
  Artifact artifact = openSample(1, path);
  Status status = checkTensorParallelFlag(2, artifact, path);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("world size 1 "), std::string::npos) << status.message();
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace ingot
