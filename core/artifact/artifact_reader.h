// Artifact: opens a .ingot file read-only via mmap and validates it completely before use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "schemas/artifact_generated.h"
#include "schemas/artifact_header.h"

namespace ingot {

/// A read-only view of bytes owned by someone else (here: the artifact's mapping).
struct ByteSpan {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

/// An opened, validated artifact. After open() succeeds every index in the manifest is in
/// range and every tensor lies inside the blob, so accessors never need to re-check.
/// Movable, not copyable; pointers it hands out stay valid until it is destroyed.
class Artifact {
 public:
  /// Maps `path` read-only and validates header, manifest checksum, FlatBuffer and
  /// semantics. Errors are one line, prefixed with the path. Tensor checksums are not
  /// checked here (that reads every page); call verifyChecksums().
  static StatusOr<Artifact> open(const std::string& path);
  /// Same checks over bytes in memory (tests, fuzzing). The bytes are copied into a
  /// page-aligned buffer, so alignment matches a file mapping.
  static StatusOr<Artifact> openFromMemory(const uint8_t* data, size_t size);
  static StatusOr<Artifact> openFromMemory(const std::vector<uint8_t>& bytes);

  Artifact(Artifact&&) noexcept;
  Artifact& operator=(Artifact&&) noexcept;
  ~Artifact();

  /// The decoded fixed header.
  const artifact::Header& header() const { return header_; }
  const schema::Manifest& manifest() const { return *manifest_; }
  /// The path given to open(), or "<memory>".
  const std::string& source() const { return source_; }
  /// Size in bytes of the whole file.
  uint64_t fileSize() const;
  /// False for dummy-weights artifacts, which carry no blob.
  bool hasBlob() const { return hasBlob_; }

  size_t numTensors() const;
  /// The i-th tensor's manifest entry; i < numTensors().
  const schema::TensorDef& tensor(size_t i) const;
  /// Index of the tensor named `name`, or nullopt.
  std::optional<size_t> findTensor(std::string_view name) const;
  /// The i-th tensor's bytes inside the mapping; empty for dummy weights.
  ByteSpan tensorBytes(size_t i) const;

  /// Hashes the i-th tensor and compares with its stored xxh64.
  Status verifyTensorChecksum(size_t i) const;
  /// Hashes every tensor; the error names the first tensor whose bytes do not match.
  /// Ok without hashing anything for dummy weights.
  Status verifyChecksums() const;

 private:
  struct Storage;
  Artifact();
  static StatusOr<Artifact> fromStorage(std::unique_ptr<Storage> storage, std::string source);
  Status parse();

  std::unique_ptr<Storage> storage_;
  std::string source_;
  artifact::Header header_;
  const schema::Manifest* manifest_ = nullptr;
  const uint8_t* blob_ = nullptr;
  bool hasBlob_ = false;
};

}  // namespace ingot
