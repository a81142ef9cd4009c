//===- ArtifactWriter.h - Writes .ingot artifacts ---------------------------===//
//
// Collects the manifest contents and the tensors of a model and writes the artifact
// file: header | FlatBuffer manifest | padding | 4 KiB-aligned weight blob (layout in
// docs/artifact-format.md). Tensor bytes may be streamed from a callback during write(),
// so the compiler never holds the whole model in memory. Plain C++ (no MLIR, no LLVM),
// so runtime tests and fuzz-seed tools can make real artifacts.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/artifact/artifact_contents.h"
#include "core/base/status.h"

namespace ingot {

/// Receives one chunk of a tensor's bytes; returns an error to abort the write.
using TensorByteSink = std::function<Status(const void *data, uint64_t size)>;
/// Streams a tensor's bytes into `sink` in order, in chunks of any size; must emit
/// exactly the size given to addTensor. Called at most once, during write().
using TensorProducer = std::function<Status(const TensorByteSink &sink)>;

class ArtifactWriter {
public:
  ArtifactWriter();
  ~ArtifactWriter();
  ArtifactWriter(const ArtifactWriter &) = delete;
  ArtifactWriter &operator=(const ArtifactWriter &) = delete;

  /// Adds a tensor whose `size` bytes at `data` the caller keeps alive until write()
  /// returns. Returns the tensor's index in the manifest.
  int32_t addTensor(TensorSpec spec, const void *data, uint64_t size);
  /// Adds a tensor that owns its bytes.
  int32_t addTensor(TensorSpec spec, std::vector<uint8_t> bytes);
  /// Adds a tensor whose `size` bytes `producer` streams during write().
  int32_t addTensor(TensorSpec spec, uint64_t size, TensorProducer producer);
  /// Adds a tensor without bytes; only valid in a dummy-weights artifact. Its size is
  /// the packed size of its dtype and shape.
  int32_t addTensor(TensorSpec spec);

  void setModelConfig(ModelConfig config);
  void setTokenizer(Tokenizer tokenizer);
  /// Returns the kernel's index (for ProgramStep::kernel).
  int32_t addKernel(Kernel kernel);
  /// programs[0] is the main program. Returns the program's index.
  int32_t addProgram(Program program);
  /// Returns the variant's index (for ProgramStep::attentionVariant).
  int32_t addAttentionVariant(AttentionVariant variant);
  /// For stages that run after lowering (the CUDA attention kernels): links step `step` of
  /// program `program` to kernel `kernel`, and names variant `variant`'s device functions.
  /// Indices must exist (asserted); write() checks the kernel index.
  void setStepKernel(size_t program, size_t step, int32_t kernel);
  void setDeviceFunction(size_t variant, std::string name);
  /// Tensor-parallel world size (docs/tensor-parallel.md). When > 1, the blob is ordered
  /// replicated tensors (tp_rank -1) first, then rank by rank, and one shard per rank
  /// records the byte range of exactly that rank's tensors, so a rank maps only the
  /// replicated range and its own. A tensor name is unique per rank (a sharded tensor keeps
  /// its source name on every rank), and a program with a tp_rank may use only that rank's
  /// and replicated tensors; write() checks both.
  void setTensorParallel(int32_t worldSize);
  void setProvenance(Provenance provenance);
  /// Marks the artifact as dummy-weights: no blob is written, the runtime fills weights
  /// with pseudo-random values from `seed`. Tensor bytes given to addTensor are ignored.
  void setDummyWeights(uint64_t seed);

  size_t numTensors() const;
  const ArtifactContents &contents() const;

  /// Validates the contents and writes the artifact to `path` atomically (a temporary
  /// file in the same directory, renamed over `path` on success). Call once.
  Status write(const std::string &path);
  /// Same as write(), into memory (tests, fuzz seeds). Call once.
  StatusOr<std::vector<uint8_t>> writeToBuffer();

  // Hooks that let tests write artifacts a correct writer never would, so the reader's
  // checks beyond the checksums can be exercised.
  void setFormatVersionForTesting(uint16_t major, uint16_t minor);
  void overrideTensorOffsetForTesting(int32_t tensor, uint64_t offset);
  void overrideTensorSizeForTesting(int32_t tensor, uint64_t size);
  /// Writes what it is given: no checks, and programs keep their slots as set (-1: none).
  void skipValidationForTesting();

  class Output; // where bytes go: a file or a buffer (ArtifactWriter.cpp)

private:
  struct TensorSource;
  Status validate() const;
  Status writeTo(Output &out);

  ArtifactContents contents_;
  std::vector<TensorSource> sources_;
  uint16_t formatMajor_;
  uint16_t formatMinor_;
  std::map<int32_t, uint64_t> offsetOverrides_;
  std::map<int32_t, uint64_t> sizeOverrides_;
  bool skipValidation_ = false;
  bool written_ = false;
};

} // namespace ingot
