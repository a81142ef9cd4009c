//===- SampleArtifact.h - Small, complete artifacts for tests and fuzz seeds ===//
//
// Fills an ArtifactWriter with a tiny Llama-like model that touches every part of the
// manifest: tensors of several dtypes and every quant scheme, a tokenizer, a kernel with
// a cubin and PTX, a program with steps, attention variants, TP info and provenance.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include "core/artifact/artifact_writer.h"

namespace ingot {

struct SampleOptions {
  /// Write no blob (the dummy-weights flag is set).
  bool dummyWeights = false;
  /// Tensor-parallel world size; with 2, some tensors get tp_rank 0 and 1.
  int32_t tpWorldSize = 1;
  /// Seed of the pseudo-random tensor bytes.
  uint64_t seed = 1;
  /// Stream tensor bytes through producer callbacks instead of owned buffers.
  bool streamTensors = false;
};

/// Adds the sample model to `writer`. Returns each tensor's bytes, by tensor index (also
/// for dummy weights, where they are not written).
std::vector<std::vector<uint8_t>> populateSampleArtifact(ArtifactWriter &writer,
                                                         const SampleOptions &options);

} // namespace ingot
