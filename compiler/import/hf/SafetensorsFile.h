//===- SafetensorsFile.h - one memory-mapped .safetensors file -----*- C++ -*-===//
//
// The safetensors format (Hugging Face): an 8-byte little-endian header length N, N bytes
// of JSON mapping tensor names to {dtype, shape, data_offsets: [begin, end)} relative to the
// data section that follows, and an optional "__metadata__" object of strings. open()
// validates everything a reader later relies on, so tensor bytes can be used unchecked:
// offsets inside the data section, sizes equal to numel * itemsize, no two tensors
// overlapping. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace ingot::importer::hf {

/// Element types the importer reads. Others (other integers, f8, f64) are rejected by name.
/// I32 holds the packed nibbles, zero points and group indices of GPTQ / AWQ checkpoints.
enum class SafetensorsDtype { F32, F16, BF16, I32 };

/// "F32", "F16", "BF16", "I32".
const char *safetensorsDtypeName(SafetensorsDtype dtype);
/// Bytes per element.
uint64_t safetensorsItemSize(SafetensorsDtype dtype);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  std::vector<int64_t> shape;
  /// Absolute byte offset of the first element in the file.
  uint64_t fileOffset = 0;
  /// Bytes: numElements() * itemsize.
  uint64_t size = 0;
  int64_t numElements() const;
};

/// A validated, read-only mapping of one .safetensors file. Move-only; unmaps on destruction.
class SafetensorsFile {
public:
  /// Header lengths above this are rejected before allocation (the format's own readers
  /// cap the header at 100 MB).
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

  static StatusOr<SafetensorsFile> open(const std::string &path);

  SafetensorsFile(SafetensorsFile &&other) noexcept;
  SafetensorsFile &operator=(SafetensorsFile &&other) noexcept;
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;
  ~SafetensorsFile();

  const std::string &path() const { return filePath; }
  /// Tensors in data-offset order.
  const std::vector<SafetensorsTensor> &tensors() const { return tensorList; }
  /// The tensor named `name`, or nullptr.
  const SafetensorsTensor *find(const std::string &name) const;
  /// The tensor's bytes inside the mapping (valid while this object lives).
  const uint8_t *bytes(const SafetensorsTensor &tensor) const { return base + tensor.fileOffset; }
  /// Converts the tensor's elements to f32 into `out` (numElements() floats; I32 by value).
  void toFloat(const SafetensorsTensor &tensor, float *out) const;
  /// Drops this process's mapping of the tensor's pages (they stay in the page cache and
  /// fault back in if read again), so streaming tensor by tensor keeps the resident set
  /// near one tensor rather than the whole checkpoint.
  void releaseTensorPages(const SafetensorsTensor &tensor) const;

private:
  SafetensorsFile() = default;
  std::string filePath;
  const uint8_t *base = nullptr;
  uint64_t mappedSize = 0;
  std::vector<SafetensorsTensor> tensorList;
};

} // namespace ingot::importer::hf
