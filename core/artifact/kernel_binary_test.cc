// Kernel binary choice: exact cubin, then compatible cubin, then PTX, else a clear error.
#include "core/artifact/kernel_binary.h"

#include <gtest/gtest.h>

namespace ingot {
namespace {

/// Builds a KernelDef carrying one binary per target ("sm_*" are cubins, "compute_*" PTX).
class KernelBinaryTest : public ::testing::Test {
 protected:
  const schema::KernelDef& make(const std::vector<std::string>& targets) {
    fbb_.Clear();
    std::vector<flatbuffers::Offset<schema::KernelBinaryDef>> binaries;
    for (const std::string& t : targets)
      binaries.push_back(schema::CreateKernelBinaryDefDirect(
          fbb_, t.c_str(),
          t.rfind("compute_", 0) == 0 ? schema::BinaryFormat::Ptx : schema::BinaryFormat::Cubin));
    fbb_.Finish(schema::CreateKernelDefDirect(fbb_, "k", nullptr, 0, &binaries));
    return *flatbuffers::GetRoot<schema::KernelDef>(fbb_.GetBufferPointer());
  }
  std::string pick(const std::vector<std::string>& targets, int major, int minor) {
    StatusOr<const schema::KernelBinaryDef*> b =
        selectKernelBinary(make(targets), {major, minor, "GPU"});
    return b.ok() ? (*b)->target()->str() : "error: " + b.status().message();
  }
  flatbuffers::FlatBufferBuilder fbb_;
};

const std::vector<std::string> kAll = {"sm_80", "sm_89", "sm_90a", "sm_100f", "sm_120f",
                                       "compute_80"};

TEST_F(KernelBinaryTest, PrefersCubinForTheDevicesArch) {
  EXPECT_EQ(pick(kAll, 9, 0), "sm_90a");
  EXPECT_EQ(pick(kAll, 8, 9), "sm_89");
  EXPECT_EQ(pick(kAll, 8, 0), "sm_80");
  EXPECT_EQ(pick(kAll, 10, 3), "sm_100f");  // family target
  EXPECT_EQ(pick(kAll, 12, 1), "sm_120f");
}

TEST_F(KernelBinaryTest, UsesOlderMinorCubinOfTheSameMajor) {
  EXPECT_EQ(pick(kAll, 8, 6), "sm_80");
}

TEST_F(KernelBinaryTest, FallsBackToPtxWhenNoCubinRuns) {
  EXPECT_EQ(pick({"sm_80", "sm_90a", "compute_80"}, 10, 0), "compute_80");
  // sm_90a cubins run only on 9.0 exactly.
  EXPECT_EQ(pick({"sm_90a", "compute_80"}, 9, 1), "compute_80");
  EXPECT_EQ(pick({"compute_80", "compute_90a"}, 12, 0), "compute_80");
}

TEST_F(KernelBinaryTest, ErrorNamesGpuAndTargets) {
  EXPECT_EQ(pick({"sm_90a", "compute_80"}, 7, 5),
            "error: kernel 'k' has no binary for GPU GPU (sm_75); the artifact carries: "
            "sm_90a, compute_80");
  EXPECT_EQ(pick({}, 9, 0).rfind("error:", 0), 0u);
}

}  // namespace
}  // namespace ingot
