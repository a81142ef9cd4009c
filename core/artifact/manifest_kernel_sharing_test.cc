//===- ManifestKernelSharingTest.cpp - identical kernel binaries are stored once ---===//
//
// Kernels compiled from one translation unit carry the same binary bytes; the manifest
// stores them once and each KernelBinaryDef points at that vector. Read back with the
// runtime's reader: every kernel still has its full, correct binaries.
//
//===----------------------------------------------------------------------===//
#include <random>

#include <gtest/gtest.h>

#include "core/artifact/artifact_writer.h"
#include "core/artifact/artifact_reader.h"

namespace ingot {
namespace {

std::vector<uint8_t> randomBytes(std::mt19937_64 &rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (uint8_t &b : v)
    b = static_cast<uint8_t>(rng());
  return v;
}

Kernel kernelWith(const std::string &name, const std::vector<KernelBinary> &binaries) {
  Kernel k;
  k.name = name;
  k.blockDim = {256, 1, 1};
  k.binaries = binaries;
  return k;
}

TEST(ManifestKernelSharing, IdenticalBinariesAreStoredOnceAndReadBackWhole) {
  std::mt19937_64 rng(std::random_device{}());
  const size_t moduleBytes = 64 * 1024 + rng() % 1024;
  const std::vector<KernelBinary> shared = {
      {"sm_90a", schema::BinaryFormat::Cubin, randomBytes(rng, moduleBytes)},
      {"compute_80", schema::BinaryFormat::Ptx, randomBytes(rng, moduleBytes + 7)}};
  std::vector<KernelBinary> other = shared;
  other[0].data[rng() % other[0].data.size()] ^= 0x5a;  // one byte differs: its own copy
  ArtifactWriter writer;
  const int kSharing = 8;
  for (int i = 0; i < kSharing; ++i)
    writer.addKernel(kernelWith("shared_" + std::to_string(i), shared));
  writer.addKernel(kernelWith("other", other));
  StatusOr<std::vector<uint8_t>> file = writer.writeToBuffer();
  ASSERT_TRUE(file.ok()) << file.status().message();
  // Three distinct byte vectors: the two shared ones and the other's cubin (its PTX is the
  // shared PTX), so far less than nine kernels' worth.
  const size_t distinct = 2 * shared[0].data.size() + shared[1].data.size();
  EXPECT_LT(file->size(), distinct + 16 * 1024) << "identical binaries were stored again";
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*file);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  const auto *kernels = artifact->manifest().kernels();
  ASSERT_EQ(kernels->size(), static_cast<size_t>(kSharing + 1));
  for (size_t i = 0; i < kernels->size(); ++i) {
    const schema::KernelDef *k = kernels->Get(i);
    const std::vector<KernelBinary> &want = i < kSharing ? shared : other;
    ASSERT_EQ(k->binaries()->size(), want.size()) << k->name()->str();
    for (size_t b = 0; b < want.size(); ++b) {
      const schema::KernelBinaryDef *bin = k->binaries()->Get(b);
      EXPECT_EQ(bin->target()->str(), want[b].target);
      EXPECT_EQ(bin->format(), want[b].format);
      ASSERT_EQ(std::vector<uint8_t>(bin->data()->begin(), bin->data()->end()), want[b].data)
          << k->name()->str() << " binary " << b;
      // Identical bytes are one vector in the file; the other's cubin is its own.
      const uint8_t *first = kernels->Get(0)->binaries()->Get(b)->data()->data();
      if (i < kSharing || b == 1)
        EXPECT_EQ(bin->data()->data(), first) << k->name()->str() << " binary " << b;
      else
        EXPECT_NE(bin->data()->data(), first) << k->name()->str() << " binary " << b;
    }
  }
}

} // namespace
} // namespace ingot
