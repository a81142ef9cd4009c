// libFuzzer target: the artifact reader, inspect printer and checksum verifier on arbitrary bytes.
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <xxhash.h>

#include "core/artifact/artifact_reader.h"
#include "core/artifact/kernel_binary.h"
#include "runtime/cli/inspect_command.h"

namespace {

/// The reader's contract: every error is one non-empty line.
void checkOneLine(const ingot::Status& status) {
  if (status.ok()) return;
  const std::string& message = status.message();
  if (message.empty() || message.find('\n') != std::string::npos) __builtin_trap();
}

/// Everything a user could do with an artifact that opened.
void exercise(const ingot::Artifact& artifact) {
  std::ostringstream out;
  ingot::InspectOptions options;
  options.maxRows = 16;
  ingot::printArtifact(artifact, options, out);
  checkOneLine(artifact.verifyChecksums());
  for (size_t i = 0; i < artifact.numTensors(); ++i) {
    ingot::ByteSpan bytes = artifact.tensorBytes(i);
    if (bytes.size) {
      volatile uint8_t sink = bytes.data[0] ^ bytes.data[bytes.size - 1];
      (void)sink;
    }
  }
  if (const auto* kernels = artifact.manifest().kernels())
    for (const ingot::schema::KernelDef* kernel : *kernels)
      for (ingot::GpuTarget gpu : {ingot::GpuTarget{9, 0, "H200"}, ingot::GpuTarget{8, 6, "A10"}})
        checkOneLine(ingot::selectKernelBinary(*kernel, gpu).status());
}

void putLE64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t getLE64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // 1. The bytes as given: header checks, checksums, and anything that survives them.
  ingot::StatusOr<ingot::Artifact> artifact = ingot::Artifact::openFromMemory(data, size);
  checkOneLine(artifact.status());
  if (artifact.ok()) exercise(*artifact);

  // 2. The same bytes with the header and manifest checksums repaired, so mutations of
  //    the manifest reach the FlatBuffers verifier and the semantic checks behind it.
  if (size < ingot::artifact::kHeaderSize) return 0;
  std::vector<uint8_t> fixed(data, data + size);
  uint64_t manifestOffset = getLE64(fixed.data() + 16);
  uint64_t manifestSize = getLE64(fixed.data() + 24);
  if (manifestOffset <= size && manifestSize <= size - manifestOffset)
    putLE64(fixed.data() + 48, XXH64(fixed.data() + manifestOffset, manifestSize, 0));
  putLE64(fixed.data() + 56, XXH64(fixed.data(), 56, 0));
  if (std::memcmp(fixed.data(), data, size) == 0) return 0;
  ingot::StatusOr<ingot::Artifact> repaired = ingot::Artifact::openFromMemory(fixed);
  checkOneLine(repaired.status());
  if (repaired.ok()) exercise(*repaired);
  return 0;
}
