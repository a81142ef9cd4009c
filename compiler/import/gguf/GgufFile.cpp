//===- GgufFile.cpp - Reads GGUF v2/v3 checkpoints through mmap --------------===//
//
// The parser reads the file front to back through a bounds-checked cursor. Counts read
// from the file are checked against the bytes that remain before anything is sized from
// them, and every size computation is overflow-checked, so a corrupt file yields an
// error, never an out-of-bounds read or a huge allocation.
//
//===----------------------------------------------------------------------===//
#include "compiler/import/gguf/GgufFile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compiler/import/gguf/Dequantize.h"

namespace ingot::gguf {

class GgufFile::Storage {
public:
  ~Storage() {
    if (mapping)
      ::munmap(mapping, mappedSize);
  }
  void *mapping = nullptr;
  size_t mappedSize = 0;
  std::vector<uint8_t> buffer;
};

namespace {

// Smallest encodings, used to bound counts by the bytes that remain.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;       // key length, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8; // name length, n_dims, type, offset
constexpr uint64_t kMinArrayBytes = 4 + 8;              // element type, count
constexpr uint64_t kStringLengthBytes = 8;

std::string quote(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 120))
    out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  if (s.size() > 120)
    out += "...";
  return out + "'";
}

std::string magicText(const uint8_t *p) {
  std::string out;
  for (int i = 0; i < 4; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7F) {
      out += static_cast<char>(p[i]);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", p[i]);
      out += buf;
    }
  }
  return out;
}

} // namespace

/// Reads and validates one file image into a GgufFile.
class GgufParser {
public:
  GgufParser(GgufFile &file) : file_(file), data_(file.data_), size_(file.size_) {}

  Status parse() {
    INGOT_RETURN_IF_ERROR(parseHeader());
    for (uint64_t i = 0; i < numKeyValues_; ++i) {
      where_ = "metadata key " + std::to_string(i + 1) + " of " + std::to_string(numKeyValues_);
      INGOT_RETURN_IF_ERROR(parseKeyValue());
    }
    where_.clear();
    INGOT_RETURN_IF_ERROR(indexMetadata());
    INGOT_RETURN_IF_ERROR(readAlignment());
    for (uint64_t i = 0; i < numTensors_; ++i) {
      where_ = "tensor info " + std::to_string(i + 1) + " of " + std::to_string(numTensors_);
      INGOT_RETURN_IF_ERROR(parseTensorInfo());
    }
    where_.clear();
    return checkTensorData();
  }

private:
  uint64_t remaining() const { return size_ - pos_; }

  Status fail(const std::string &detail) const {
    return dataLoss(file_.path_ + ": " + (where_.empty() ? "" : where_ + ": ") + detail);
  }
  Status truncated(const std::string &what) const {
    return dataLoss(file_.path_ + ": truncated " + (where_.empty() ? "" : "at " + where_ + " ") +
                    "(" + what + " at offset " + std::to_string(pos_) + ", file size " +
                    std::to_string(size_) + ")");
  }

  Status readU32(uint32_t *out, const char *what) {
    if (remaining() < 4)
      return truncated(what);
    *out = 0;
    for (int b = 0; b < 4; ++b)
      *out |= static_cast<uint32_t>(data_[pos_ + b]) << (8 * b);
    pos_ += 4;
    return okStatus();
  }
  Status readU64(uint64_t *out, const char *what) {
    if (remaining() < 8)
      return truncated(what);
    *out = 0;
    for (int b = 0; b < 8; ++b)
      *out |= static_cast<uint64_t>(data_[pos_ + b]) << (8 * b);
    pos_ += 8;
    return okStatus();
  }
  Status readString(std::string_view *out, const char *what) {
    uint64_t length;
    INGOT_RETURN_IF_ERROR(readU64(&length, what));
    if (length > remaining())
      return fail(std::string(what) + " of " + std::to_string(length) + " bytes at offset " +
                  std::to_string(pos_) + " extends past end of file (" +
                  std::to_string(remaining()) + " bytes remain)");
    *out = std::string_view(reinterpret_cast<const char *>(data_ + pos_), length);
    pos_ += length;
    return okStatus();
  }

  Status parseHeader() {
    if (size_ < 4)
      return dataLoss(file_.path_ + ": truncated in header (file has " + std::to_string(size_) +
                      " bytes)");
    uint32_t magic;
    INGOT_RETURN_IF_ERROR(readU32(&magic, "magic"));
    if (magic != kGgufMagic)
      return dataLoss(file_.path_ + ": not a GGUF file (magic '" + magicText(data_) +
                      "', expected 'GGUF')");
    where_ = "header";
    uint32_t version;
    INGOT_RETURN_IF_ERROR(readU32(&version, "version"));
    if (version != 2 && version != 3) {
      std::string hint;
      if (__builtin_bswap32(version) >= 1 && __builtin_bswap32(version) <= 3)
        hint = " (a big-endian file? only little-endian GGUF is supported)";
      return unimplemented(file_.path_ + ": unsupported GGUF version " + std::to_string(version) +
                           hint + "; this reader supports versions 2 and 3");
    }
    file_.version_ = version;
    INGOT_RETURN_IF_ERROR(readU64(&numTensors_, "tensor count"));
    INGOT_RETURN_IF_ERROR(readU64(&numKeyValues_, "metadata count"));
    where_.clear();
    // Every entry takes some bytes, so a count the rest of the file cannot hold is
    // corrupt. (Nothing is sized from these counts; this only words the error better.)
    if (numKeyValues_ > remaining() / kMinKeyValueBytes)
      return fail("header claims " + std::to_string(numKeyValues_) +
                  " metadata entries, more than the " + std::to_string(remaining()) +
                  " bytes after the header can hold (truncated or corrupt file)");
    if (numTensors_ > remaining() / kMinTensorInfoBytes)
      return fail("header claims " + std::to_string(numTensors_) + " tensors, more than the " +
                  std::to_string(remaining()) +
                  " bytes after the header can hold (truncated or corrupt file)");
    return okStatus();
  }

  Status parseKeyValue() {
    std::string_view key;
    INGOT_RETURN_IF_ERROR(readString(&key, "key"));
    where_ += " (" + quote(key) + ")";
    uint32_t rawType;
    INGOT_RETURN_IF_ERROR(readU32(&rawType, "value type"));
    GgufValue value;
    INGOT_RETURN_IF_ERROR(parseValue(rawType, /*depth=*/0, &value));
    file_.metadata_.push_back(GgufKeyValue{std::string(key), std::move(value)});
    return okStatus();
  }

  Status parseValue(uint32_t rawType, uint32_t depth, GgufValue *out) {
    if (!isKnownGgufValueType(rawType))
      return fail("unknown value type " + std::to_string(rawType));
    auto type = static_cast<GgufValueType>(rawType);
    if (type == GgufValueType::String) {
      std::string_view text;
      INGOT_RETURN_IF_ERROR(readString(&text, "string"));
      *out = GgufValue::string(text);
      return okStatus();
    }
    if (type != GgufValueType::Array) {
      uint32_t bytes = ggufScalarBytes(type);
      if (remaining() < bytes)
        return truncated(std::string(ggufValueTypeName(type)) + " value");
      if (type == GgufValueType::Bool && data_[pos_] > 1)
        return fail("bool value " + std::to_string(data_[pos_]) + " is neither 0 nor 1");
      *out = GgufValue::scalar(type, data_ + pos_);
      pos_ += bytes;
      return okStatus();
    }
    if (depth >= kMaxArrayNesting)
      return fail("arrays nested deeper than " + std::to_string(kMaxArrayNesting) + " levels");
    uint32_t rawElementType;
    uint64_t count;
    INGOT_RETURN_IF_ERROR(readU32(&rawElementType, "array element type"));
    INGOT_RETURN_IF_ERROR(readU64(&count, "array length"));
    if (!isKnownGgufValueType(rawElementType))
      return fail("array of unknown value type " + std::to_string(rawElementType));
    auto elementType = static_cast<GgufValueType>(rawElementType);
    uint64_t minElementBytes = elementType == GgufValueType::String  ? kStringLengthBytes
                               : elementType == GgufValueType::Array ? kMinArrayBytes
                                                                     : ggufScalarBytes(elementType);
    if (count > remaining() / minElementBytes)
      return fail("array of " + std::to_string(count) + " " + ggufValueTypeName(elementType) +
                  " elements at offset " + std::to_string(pos_) +
                  " extends past end of file (" + std::to_string(remaining()) + " bytes remain)");
    if (elementType == GgufValueType::String) {
      std::vector<std::string_view> strings;
      for (uint64_t i = 0; i < count; ++i) {
        std::string_view text;
        INGOT_RETURN_IF_ERROR(readString(&text, "array string"));
        strings.push_back(text);
      }
      *out = GgufValue::stringArray(std::move(strings));
    } else if (elementType == GgufValueType::Array) {
      std::vector<GgufValue> arrays;
      for (uint64_t i = 0; i < count; ++i) {
        GgufValue element;
        INGOT_RETURN_IF_ERROR(parseValue(rawElementType, depth + 1, &element));
        arrays.push_back(std::move(element));
      }
      *out = GgufValue::arrayOfArrays(std::move(arrays));
    } else {
      const uint8_t *raw = data_ + pos_;
      if (elementType == GgufValueType::Bool) {
        for (uint64_t i = 0; i < count; ++i)
          if (raw[i] > 1)
            return fail("bool array element " + std::to_string(i) + " has value " +
                        std::to_string(raw[i]) + ", neither 0 nor 1");
      }
      pos_ += count * minElementBytes; // bounded by remaining() above
      *out = GgufValue::scalarArray(elementType, raw, count);
    }
    return okStatus();
  }

  Status indexMetadata() {
    for (size_t i = 0; i < file_.metadata_.size(); ++i) {
      const std::string &key = file_.metadata_[i].key;
      if (!file_.keyIndex_.emplace(key, i).second)
        return fail("duplicate metadata key " + quote(key));
    }
    return okStatus();
  }

  Status readAlignment() {
    const GgufValue *value = file_.find("general.alignment");
    if (!value)
      return okStatus();
    StatusOr<uint32_t> alignment = value->asU32();
    if (!alignment.ok())
      return fail("key 'general.alignment' " + alignment.status().message());
    if (*alignment == 0 || (*alignment & (*alignment - 1)) != 0)
      return fail("general.alignment " + std::to_string(*alignment) + " is not a power of two");
    file_.alignment_ = *alignment;
    return okStatus();
  }

  Status parseTensorInfo() {
    GgufTensorInfo info;
    std::string_view name;
    INGOT_RETURN_IF_ERROR(readString(&name, "tensor name"));
    if (name.empty())
      return fail("tensor name is empty");
    info.name = std::string(name);
    where_ += " (" + quote(name) + ")";
    uint32_t numDims;
    INGOT_RETURN_IF_ERROR(readU32(&numDims, "dimension count"));
    if (numDims > kMaxDims)
      return fail("tensor has " + std::to_string(numDims) + " dimensions, at most " +
                  std::to_string(kMaxDims) + " are allowed");
    info.numElements = 1;
    for (uint32_t d = 0; d < numDims; ++d) {
      uint64_t extent;
      INGOT_RETURN_IF_ERROR(readU64(&extent, "dimensions"));
      // ggml stores extents as int64; an element count must fit int64 too.
      if (extent > static_cast<uint64_t>(INT64_MAX) ||
          __builtin_mul_overflow(info.numElements, extent, &info.numElements) ||
          info.numElements > static_cast<uint64_t>(INT64_MAX))
        return fail("tensor dimensions overflow (dimension " + std::to_string(d) + " is " +
                    std::to_string(extent) + ")");
      info.ne.push_back(extent);
    }
    uint32_t rawType;
    INGOT_RETURN_IF_ERROR(readU32(&rawType, "tensor type"));
    INGOT_RETURN_IF_ERROR(readU64(&info.offset, "tensor offset"));
    if (!isKnownGgmlType(rawType))
      return fail("unknown ggml type " + std::to_string(rawType));
    info.type = static_cast<GgmlType>(rawType);
    const uint32_t blockSize = ggmlBlockSize(info.type);
    if (info.rowLength() % blockSize != 0)
      return fail("rows of " + std::to_string(info.rowLength()) + " elements are not a whole number of " +
                  ggmlTypeName(info.type) + " blocks of " + std::to_string(blockSize));
    StatusOr<uint64_t> bytes = bytesForElements(info.type, info.numElements);
    if (!bytes.ok())
      return fail(bytes.status().message());
    info.numBytes = *bytes;
    if (info.offset % file_.alignment_ != 0)
      return fail("offset " + std::to_string(info.offset) + " is not a multiple of the alignment " +
                  std::to_string(file_.alignment_));
    file_.tensors_.push_back(std::move(info));
    return okStatus();
  }

  Status checkTensorData() {
    const uint64_t alignment = file_.alignment_;
    const uint64_t dataOffset = (pos_ + alignment - 1) / alignment * alignment; // pos_ <= size_
    file_.dataOffset_ = dataOffset;
    if (file_.tensors_.empty())
      return okStatus();
    if (dataOffset > size_)
      return fail("truncated before the tensor data section (it starts at offset " +
                  std::to_string(dataOffset) + ", file size " + std::to_string(size_) + ")");
    const uint64_t dataSize = size_ - dataOffset;
    for (size_t i = 0; i < file_.tensors_.size(); ++i) {
      const GgufTensorInfo &t = file_.tensors_[i];
      if (t.offset > dataSize || t.numBytes > dataSize - t.offset)
        return fail("tensor " + quote(t.name) + " extends past end of file (" +
                    std::to_string(t.numBytes) + " bytes at data offset " + std::to_string(t.offset) +
                    ", the data section has " + std::to_string(dataSize) + " bytes)");
      if (!file_.tensorIndex_.emplace(t.name, i).second)
        return fail("duplicate tensor name " + quote(t.name) + " (tensor infos " +
                    std::to_string(file_.tensorIndex_[t.name] + 1) + " and " +
                    std::to_string(i + 1) + ")");
    }
    // No two tensors may share bytes.
    std::vector<size_t> order(file_.tensors_.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return file_.tensors_[a].offset < file_.tensors_[b].offset;
    });
    for (size_t i = 1; i < order.size(); ++i) {
      const GgufTensorInfo &prev = file_.tensors_[order[i - 1]];
      const GgufTensorInfo &next = file_.tensors_[order[i]];
      if (prev.numBytes > 0 && next.numBytes > 0 && prev.offset + prev.numBytes > next.offset)
        return fail("tensors " + quote(prev.name) + " and " + quote(next.name) + " overlap");
    }
    return okStatus();
  }

  GgufFile &file_;
  const uint8_t *data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t numTensors_ = 0;
  uint64_t numKeyValues_ = 0;
  std::string where_; // what is being parsed, for messages ("tensor info 3 of 10 ('x')")
};

std::vector<int64_t> GgufTensorInfo::shape() const {
  return std::vector<int64_t>(ne.rbegin(), ne.rend());
}

GgufFile::GgufFile() = default;
GgufFile::GgufFile(GgufFile &&) noexcept = default;
GgufFile &GgufFile::operator=(GgufFile &&) noexcept = default;
GgufFile::~GgufFile() = default;

StatusOr<GgufFile> GgufFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    Status status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                  path + ": cannot open: " + std::strerror(err));
    return status;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ioError(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return ioError(path + ": not a regular file");
  }
  GgufFile file;
  file.path_ = path;
  file.storage_ = std::make_unique<Storage>();
  file.size_ = static_cast<uint64_t>(st.st_size);
  if (file.size_ > 0) {
    void *mapping = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return ioError(path + ": cannot mmap: " + std::strerror(err));
    }
    file.storage_->mapping = mapping;
    file.storage_->mappedSize = file.size_;
    file.data_ = static_cast<const uint8_t *>(mapping);
  }
  ::close(fd);
  GgufParser parser(file);
  INGOT_RETURN_IF_ERROR(parser.parse());
  return file;
}

StatusOr<GgufFile> GgufFile::fromBuffer(std::vector<uint8_t> bytes, std::string name) {
  GgufFile file;
  file.path_ = std::move(name);
  file.storage_ = std::make_unique<Storage>();
  file.storage_->buffer = std::move(bytes);
  file.data_ = file.storage_->buffer.data();
  file.size_ = file.storage_->buffer.size();
  GgufParser parser(file);
  INGOT_RETURN_IF_ERROR(parser.parse());
  return file;
}

const GgufValue *GgufFile::find(std::string_view key) const {
  auto it = keyIndex_.find(key);
  return it == keyIndex_.end() ? nullptr : &metadata_[it->second].value;
}

template <typename T, typename F>
StatusOr<T> GgufFile::getTyped(std::string_view key, F convert) const {
  const GgufValue *value = find(key);
  if (!value)
    return notFound(path_ + ": metadata key '" + std::string(key) + "' not found");
  auto result = convert(*value);
  if (!result.ok())
    return Status(result.status().code(),
                  path_ + ": key '" + std::string(key) + "' " + result.status().message());
  return T(std::move(result).value());
}

StatusOr<std::string> GgufFile::getString(std::string_view key) const {
  return getTyped<std::string>(key, [](const GgufValue &v) { return v.asString(); });
}
StatusOr<uint32_t> GgufFile::getU32(std::string_view key) const {
  return getTyped<uint32_t>(key, [](const GgufValue &v) { return v.asU32(); });
}
StatusOr<uint64_t> GgufFile::getU64(std::string_view key) const {
  return getTyped<uint64_t>(key, [](const GgufValue &v) { return v.asU64(); });
}
StatusOr<int64_t> GgufFile::getI64(std::string_view key) const {
  return getTyped<int64_t>(key, [](const GgufValue &v) { return v.asI64(); });
}
StatusOr<float> GgufFile::getF32(std::string_view key) const {
  return getTyped<float>(key, [](const GgufValue &v) { return v.asF32(); });
}
StatusOr<bool> GgufFile::getBool(std::string_view key) const {
  return getTyped<bool>(key, [](const GgufValue &v) { return v.asBool(); });
}
StatusOr<std::vector<std::string>> GgufFile::getStringArray(std::string_view key) const {
  return getTyped<std::vector<std::string>>(key,
                                            [](const GgufValue &v) { return v.asStringArray(); });
}
StatusOr<std::vector<int64_t>> GgufFile::getIntArray(std::string_view key) const {
  return getTyped<std::vector<int64_t>>(key, [](const GgufValue &v) { return v.asIntArray(); });
}
StatusOr<std::vector<float>> GgufFile::getFloatArray(std::string_view key) const {
  return getTyped<std::vector<float>>(key, [](const GgufValue &v) { return v.asFloatArray(); });
}

const GgufTensorInfo *GgufFile::findTensor(std::string_view name) const {
  auto it = tensorIndex_.find(name);
  return it == tensorIndex_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t *GgufFile::tensorData(const GgufTensorInfo &tensor) const {
  return data_ + dataOffset_ + tensor.offset;
}

Status GgufFile::dequantizeTensor(const GgufTensorInfo &tensor, float *dst) const {
  return dequantizeRows(tensor.type, tensorData(tensor), tensor.numElements, dst)
      .withPrefix(path_ + ": tensor '" + tensor.name + "'");
}

void GgufFile::releaseTensorPages(const GgufTensorInfo &tensor) const {
  if (!storage_ || !storage_->mapping)
    return;
  // Whole pages inside the tensor only: a neighbour's bytes may still be needed.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = dataOffset_ + tensor.offset;
  const uint64_t first = (begin + page - 1) / page * page;
  const uint64_t last = (begin + tensor.numBytes) / page * page;
  if (last > first)
    ::madvise(static_cast<uint8_t *>(storage_->mapping) + first, last - first, MADV_DONTNEED);
}

} // namespace ingot::gguf
