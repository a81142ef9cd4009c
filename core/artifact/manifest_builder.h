//===- ManifestBuilder.h - ArtifactContents -> FlatBuffer manifest --------===//
#pragma once

#include <cstdint>
#include <vector>

#include "core/artifact/artifact_contents.h"

namespace ingot {

/// Serializes `contents` into a FlatBuffer manifest (file identifier "INGT"). Scalars
/// are always written (ForceDefaults), so the size depends only on names, shapes and
/// other variable-length data, never on offsets or checksums: the writer relies on this
/// to lay out the file before it knows the checksums.
std::vector<uint8_t> buildManifest(const ArtifactContents &contents,
                                   const std::vector<TensorPlacement> &placements,
                                   const std::vector<ShardRange> &shards);

} // namespace ingot
