//===- GgufFile.h - Reads GGUF v2/v3 checkpoints through mmap ----------------===//
//
// Opens a GGUF file read-only through mmap and validates its whole structure before
// returning it: header, every metadata key/value, every tensor info, the alignment and
// the extent of each tensor's data. A file that passes open() can be read without
// further bounds checks; every failure is one line naming the file and the problem.
// Tensor bytes stay in the mapping, so a caller streams one tensor at a time.
// Plain C++ (no MLIR, no LLVM).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler/import/gguf/GgmlType.h"
#include "compiler/import/gguf/GgufValue.h"
#include "core/base/status.h"

namespace ingot::gguf {

/// "GGUF" read as a little-endian u32.
inline constexpr uint32_t kGgufMagic = 0x46554747;
/// Alignment of tensor data when `general.alignment` is absent (GGUF spec).
inline constexpr uint32_t kDefaultAlignment = 32;
/// Most dimensions a tensor may have (ggml's GGML_MAX_DIMS).
inline constexpr uint32_t kMaxDims = 4;
/// Deepest nesting of arrays accepted in metadata (bounds the parser's recursion).
inline constexpr uint32_t kMaxArrayNesting = 8;

/// One metadata entry, in file order.
struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

/// One tensor as described by its tensor info.
struct GgufTensorInfo {
  std::string name;
  /// Dimensions in ggml order: ne[0] varies fastest (a [N, K] row-major matrix has
  /// ne = {K, N}). Between 0 and kMaxDims entries.
  std::vector<uint64_t> ne;
  GgmlType type = GgmlType::F32;
  /// Offset of the tensor's bytes from GgufFile::dataOffset().
  uint64_t offset = 0;
  uint64_t numElements = 0;
  uint64_t numBytes = 0;

  /// The dimensions outermost first (PyTorch / NumPy order): ne reversed.
  std::vector<int64_t> shape() const;
  /// Elements per row (ne[0]; 1 for a 0-d tensor).
  uint64_t rowLength() const { return ne.empty() ? 1 : ne[0]; }
};

class GgufFile {
public:
  /// Maps and validates the file at `path`.
  static StatusOr<GgufFile> open(const std::string &path);
  /// Validates an in-memory image (tests, fuzzing); `name` stands for the path in messages.
  static StatusOr<GgufFile> fromBuffer(std::vector<uint8_t> bytes, std::string name);

  GgufFile(GgufFile &&) noexcept;
  GgufFile &operator=(GgufFile &&) noexcept;
  GgufFile(const GgufFile &) = delete;
  GgufFile &operator=(const GgufFile &) = delete;
  ~GgufFile();

  const std::string &path() const { return path_; }
  /// 2 or 3.
  uint32_t version() const { return version_; }
  uint64_t fileSize() const { return size_; }
  /// `general.alignment`, or kDefaultAlignment when absent.
  uint32_t alignment() const { return alignment_; }
  /// File offset where the tensor data section starts (a multiple of alignment()).
  uint64_t dataOffset() const { return dataOffset_; }

  /// All metadata, in file order.
  const std::vector<GgufKeyValue> &metadata() const { return metadata_; }
  /// The value of `key`, or nullptr.
  const GgufValue *find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: kNotFound when the key is absent, kInvalidArgument when it has
  // another type ("<path>: key 'llama.block_count' has type string, expected u32") or
  // a value out of range. Integer getters accept any integer type whose value fits.
  StatusOr<std::string> getString(std::string_view key) const;
  StatusOr<uint32_t> getU32(std::string_view key) const;
  StatusOr<uint64_t> getU64(std::string_view key) const;
  StatusOr<int64_t> getI64(std::string_view key) const;
  StatusOr<float> getF32(std::string_view key) const;
  StatusOr<bool> getBool(std::string_view key) const;
  StatusOr<std::vector<std::string>> getStringArray(std::string_view key) const;
  StatusOr<std::vector<int64_t>> getIntArray(std::string_view key) const;
  StatusOr<std::vector<float>> getFloatArray(std::string_view key) const;

  /// All tensors, in file order.
  const std::vector<GgufTensorInfo> &tensors() const { return tensors_; }
  /// The tensor named `name`, or nullptr.
  const GgufTensorInfo *findTensor(std::string_view name) const;
  /// The tensor's numBytes bytes inside the mapping (valid while this object lives).
  const uint8_t *tensorData(const GgufTensorInfo &tensor) const;
  /// Dequantizes the whole tensor into `dst` (numElements floats).
  Status dequantizeTensor(const GgufTensorInfo &tensor, float *dst) const;

  /// Drops this process's mapping of the tensor's pages (they stay in the page cache), so
  /// streaming a model tensor by tensor keeps the resident set near one tensor.
  void releaseTensorPages(const GgufTensorInfo &tensor) const;

  /// Where the file's bytes live: an mmap of the file or an owned buffer.
  class Storage;

private:
  GgufFile();
  friend class GgufParser;
  template <typename T, typename F> StatusOr<T> getTyped(std::string_view key, F convert) const;

  std::unique_ptr<Storage> storage_;
  const uint8_t *data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t dataOffset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::unordered_map<std::string_view, size_t> keyIndex_;    // views into metadata_ keys
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensorIndex_; // views into tensors_ names
};

} // namespace ingot::gguf
