//===- SafetensorsFile.cpp - one memory-mapped .safetensors file ----------===//
#include "compiler/import/hf/SafetensorsFile.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace ingot::importer::hf {
namespace {

using nlohmann::json;

/// Bytes of the little-endian header-length prefix.
constexpr uint64_t kPrefixBytes = 8;

bool parseDtype(const std::string &name, SafetensorsDtype &out) {
  if (name == "F32")
    out = SafetensorsDtype::F32;
  else if (name == "F16")
    out = SafetensorsDtype::F16;
  else if (name == "BF16")
    out = SafetensorsDtype::BF16;
  else if (name == "I32")
    out = SafetensorsDtype::I32;
  else
    return false;
  return true;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else { // subnormal: normalise
    int shift = 0;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ff;
    bits = sign | (uint32_t(113 - shift) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Validates one header entry; the message names file and tensor.
Status parseEntry(const std::string &path, const std::string &name, const json &entry,
                  uint64_t dataSize, SafetensorsTensor &out) {
  auto fail = [&](const std::string &what) {
    return dataLoss(path + ": tensor '" + name + "': " + what);
  };
  if (!entry.is_object())
    return fail("header entry is not an object");
  auto dtype = entry.find("dtype");
  auto shape = entry.find("shape");
  auto offsets = entry.find("data_offsets");
  if (dtype == entry.end() || !dtype->is_string())
    return fail("missing string 'dtype'");
  if (shape == entry.end() || !shape->is_array())
    return fail("missing array 'shape'");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    return fail("'data_offsets' must be two non-negative integers");
  std::string dtypeName = dtype->get<std::string>();
  if (!parseDtype(dtypeName, out.dtype))
    return unimplemented(path + ": tensor '" + name + "' has dtype " + dtypeName +
                         ", which cannot be imported (F32, F16, BF16 and, for GPTQ/AWQ "
                         "packed weights, I32 can)");
  out.name = name;
  uint64_t elements = 1;
  for (const json &d : *shape) {
    if (!d.is_number_unsigned())
      return fail("shape dimensions must be non-negative integers");
    uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && elements > (uint64_t(1) << 62) / dim)
      return fail("shape is too large");
    elements *= dim;
    out.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
  if (begin > end || end > dataSize)
    return fail("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") lie outside the data section of " + std::to_string(dataSize) +
                " bytes (truncated file?)");
  uint64_t expected = elements * safetensorsItemSize(out.dtype);
  if (end - begin != expected)
    return fail("holds " + std::to_string(end - begin) + " bytes, but its shape and dtype need " +
                std::to_string(expected));
  out.fileOffset = begin; // made absolute by the caller
  out.size = expected;
  return okStatus();
}

} // namespace

const char *safetensorsDtypeName(SafetensorsDtype dtype) {
  switch (dtype) {
  case SafetensorsDtype::F32:
    return "F32";
  case SafetensorsDtype::F16:
    return "F16";
  case SafetensorsDtype::BF16:
    return "BF16";
  case SafetensorsDtype::I32:
    return "I32";
  }
  return "?";
}

uint64_t safetensorsItemSize(SafetensorsDtype dtype) {
  return dtype == SafetensorsDtype::F32 || dtype == SafetensorsDtype::I32 ? 4 : 2;
}

int64_t SafetensorsTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

StatusOr<SafetensorsFile> SafetensorsFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ioError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return ioError(path + ": not a regular file");
  }
  uint64_t fileSize = static_cast<uint64_t>(st.st_size);
  if (fileSize < kPrefixBytes) {
    ::close(fd);
    return dataLoss(path + ": truncated: " + std::to_string(fileSize) +
                    " bytes, shorter than the 8-byte header length");
  }
  void *mapped = mmap(nullptr, fileSize, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED)
    return ioError(path + ": cannot map: " + std::strerror(errno));

  SafetensorsFile file;
  file.filePath = path;
  file.base = static_cast<const uint8_t *>(mapped);
  file.mappedSize = fileSize;

  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | file.base[i];
  if (headerBytes > fileSize - kPrefixBytes)
    return dataLoss(path + ": header length " + std::to_string(headerBytes) +
                    " runs past the end of the " + std::to_string(fileSize) + "-byte file");
  if (headerBytes > kMaxHeaderBytes)
    return dataLoss(path + ": header length " + std::to_string(headerBytes) +
                    " exceeds the 100 MB limit");
  const char *text = reinterpret_cast<const char *>(file.base + kPrefixBytes);
  json header = json::parse(text, text + headerBytes, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return dataLoss(path + ": header is not a JSON object");

  uint64_t dataStart = kPrefixBytes + headerBytes;
  uint64_t dataSize = fileSize - dataStart;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__")
      continue;
    SafetensorsTensor tensor;
    Status status = parseEntry(path, it.key(), it.value(), dataSize, tensor);
    if (!status.ok())
      return status;
    tensor.fileOffset += dataStart;
    file.tensorList.push_back(std::move(tensor));
  }
  std::sort(file.tensorList.begin(), file.tensorList.end(),
            [](const SafetensorsTensor &a, const SafetensorsTensor &b) {
              return a.fileOffset < b.fileOffset ||
                     (a.fileOffset == b.fileOffset && a.size < b.size);
            });
  for (size_t i = 1; i < file.tensorList.size(); ++i) {
    const SafetensorsTensor &prev = file.tensorList[i - 1], &cur = file.tensorList[i];
    if (prev.size > 0 && cur.size > 0 && prev.fileOffset + prev.size > cur.fileOffset)
      return dataLoss(path + ": tensors '" + prev.name + "' and '" + cur.name +
                      "' overlap in the data section");
  }
  return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile &&other) noexcept { *this = std::move(other); }

SafetensorsFile &SafetensorsFile::operator=(SafetensorsFile &&other) noexcept {
  if (this != &other) {
    if (base)
      munmap(const_cast<uint8_t *>(base), mappedSize);
    filePath = std::move(other.filePath);
    tensorList = std::move(other.tensorList);
    base = other.base;
    mappedSize = other.mappedSize;
    other.base = nullptr;
    other.mappedSize = 0;
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (base)
    munmap(const_cast<uint8_t *>(base), mappedSize);
}

const SafetensorsTensor *SafetensorsFile::find(const std::string &name) const {
  for (const SafetensorsTensor &t : tensorList)
    if (t.name == name)
      return &t;
  return nullptr;
}

void SafetensorsFile::toFloat(const SafetensorsTensor &tensor, float *out) const {
  const uint8_t *p = bytes(tensor);
  int64_t n = tensor.numElements();
  switch (tensor.dtype) {
  case SafetensorsDtype::F32:
    std::memcpy(out, p, static_cast<size_t>(n) * 4);
    break;
  case SafetensorsDtype::BF16:
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits = uint32_t(p[2 * i] | (p[2 * i + 1] << 8)) << 16;
      std::memcpy(&out[i], &bits, 4);
    }
    break;
  case SafetensorsDtype::F16:
    for (int64_t i = 0; i < n; ++i)
      out[i] = halfToFloat(uint16_t(p[2 * i] | (p[2 * i + 1] << 8)));
    break;
  case SafetensorsDtype::I32:
    for (int64_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = static_cast<float>(v);
    }
    break;
  }
}

void SafetensorsFile::releaseTensorPages(const SafetensorsTensor &tensor) const {
  // The mapping is read-only and private, so dropping pages (even ones shared with a
  // neighbouring tensor) loses nothing: they are read back from the file on demand.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t begin = tensor.fileOffset / page * page;
  uint64_t end = std::min(mappedSize, (tensor.fileOffset + tensor.size + page - 1) / page * page);
  if (end > begin)
    madvise(const_cast<uint8_t *>(base) + begin, end - begin, MADV_DONTNEED);
}

} // namespace ingot::importer::hf
