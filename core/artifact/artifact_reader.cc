// Artifact: opens a .ingot file read-only via mmap and validates it completely before use.
#include "core/artifact/artifact_reader.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/artifact/manifest_checks.h"

namespace ingot {

using artifact::kBlobAlignment;
using artifact::kHeaderSize;

/// The artifact's bytes: a read-only file mapping, or a page-aligned copy so tensors are
/// aligned in memory exactly as they would be in a mapping.
struct Artifact::Storage {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  void* mapping = nullptr;  // non-null when mmapped
  void* copy = nullptr;     // non-null when copied from memory

  ~Storage() {
    if (mapping) ::munmap(mapping, size);
    std::free(copy);
  }
};

namespace {

/// FlatBuffers offsets are 32-bit: a manifest at or above 2 GiB cannot be valid.
constexpr uint64_t kMaxManifestSize = (uint64_t{1} << 31) - 1;
/// Upper bound on tables the verifier visits; generous for large vocabularies/programs.
constexpr uint32_t kMaxVerifierTables = 1u << 26;

uint64_t readLE(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string versionText(uint64_t major, uint64_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

/// Explains why bytes that do not start with the magic are not an artifact.
Status notAnArtifact(const uint8_t* data, uint64_t size) {
  if (size == 0) return invalidArgument("not an Ingot artifact: the file is empty");
  if (size >= 4 && std::memcmp(data, "GGUF", 4) == 0)
    return invalidArgument(
        "not an Ingot artifact: this is a GGUF file (compile it with `ingot compile`)");
  std::string first;
  for (uint64_t i = 0; i < size && i < 8; ++i) {
    char buf[4];
    std::snprintf(buf, sizeof(buf), "%02x", data[i]);
    if (i) first += ' ';
    first += buf;
  }
  return invalidArgument("not an Ingot artifact (no INGOT magic; first bytes: " + first + ")");
}

}  // namespace

Artifact::Artifact() = default;
Artifact::Artifact(Artifact&&) noexcept = default;
Artifact& Artifact::operator=(Artifact&&) noexcept = default;
Artifact::~Artifact() = default;

StatusOr<Artifact> Artifact::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    Status error(errno == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                 std::string("cannot open: ") + std::strerror(errno));
    return error.withPrefix(path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status error = ioError(std::string("cannot stat: ") + std::strerror(errno));
    ::close(fd);
    return error.withPrefix(path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalidArgument("not a regular file").withPrefix(path);
  }
  auto storage = std::make_unique<Storage>();
  storage->size = static_cast<uint64_t>(st.st_size);
  if (storage->size > 0) {
    void* mapping = ::mmap(nullptr, storage->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      Status error = ioError(std::string("cannot mmap: ") + std::strerror(errno));
      ::close(fd);
      return error.withPrefix(path);
    }
    storage->mapping = mapping;
    storage->data = static_cast<const uint8_t*>(mapping);
  }
  ::close(fd);  // the mapping keeps the file alive
  return fromStorage(std::move(storage), path);
}

StatusOr<Artifact> Artifact::openFromMemory(const uint8_t* data, size_t size) {
  auto storage = std::make_unique<Storage>();
  if (size > 0) {
    // Exactly `size` bytes (not rounded up), so sanitizers catch any read past the end.
    if (::posix_memalign(&storage->copy, kBlobAlignment, size) != 0)
      return ioError("out of memory copying a " + std::to_string(size) + "-byte artifact");
    std::memcpy(storage->copy, data, size);
    storage->data = static_cast<const uint8_t*>(storage->copy);
    storage->size = size;
  }
  return fromStorage(std::move(storage), "<memory>");
}

StatusOr<Artifact> Artifact::openFromMemory(const std::vector<uint8_t>& bytes) {
  return openFromMemory(bytes.data(), bytes.size());
}

StatusOr<Artifact> Artifact::fromStorage(std::unique_ptr<Storage> storage,
                                         std::string source) {
  Artifact artifact;
  artifact.storage_ = std::move(storage);
  artifact.source_ = std::move(source);
  Status status = artifact.parse();
  if (!status.ok())
    return artifact.source_ == "<memory>" ? status : status.withPrefix(artifact.source_);
  return artifact;
}

Status Artifact::parse() {
  const uint8_t* data = storage_->data;
  const uint64_t size = storage_->size;

  // Magic, then the fixed header.
  if (size < sizeof(artifact::kMagic) ||
      std::memcmp(data, artifact::kMagic, sizeof(artifact::kMagic)) != 0)
    return notAnArtifact(data, size);
  if (size < kHeaderSize)
    return dataLoss("file truncated: " + std::to_string(size) + " bytes, shorter than the " +
                    std::to_string(kHeaderSize) + "-byte header");
  header_.format_major = static_cast<uint16_t>(readLE(data + 8, 2));
  header_.format_minor = static_cast<uint16_t>(readLE(data + 10, 2));
  // The version is checked before the header checksum: a newer format may lay out the
  // rest of the header differently, and the user needs the version message, not "corrupt".
  if (header_.format_major > artifact::kFormatMajor)
    return unimplemented("artifact format version " +
                         versionText(header_.format_major, header_.format_minor) +
                         " is newer than this runtime supports (" +
                         versionText(artifact::kFormatMajor, artifact::kFormatMinor) +
                         "); use a newer ingot");
  if (header_.format_major < artifact::kFormatMajor)
    return unimplemented("artifact format version " +
                         versionText(header_.format_major, header_.format_minor) +
                         " is not supported (this runtime reads " +
                         std::to_string(artifact::kFormatMajor) + ".x)");
  header_.flags = static_cast<uint32_t>(readLE(data + 12, 4));
  header_.manifest_offset = readLE(data + 16, 8);
  header_.manifest_size = readLE(data + 24, 8);
  header_.blob_offset = readLE(data + 32, 8);
  header_.blob_size = readLE(data + 40, 8);
  header_.manifest_xxh64 = readLE(data + 48, 8);
  header_.header_xxh64 = readLE(data + 56, 8);
  if (XXH64(data, 56, 0) != header_.header_xxh64)
    return dataLoss("header checksum mismatch: file is corrupt");

  // Extents of the manifest and the blob, overflow-safe.
  const uint64_t mOff = header_.manifest_offset;
  const uint64_t mSize = header_.manifest_size;
  if (mOff < kHeaderSize || mOff % 8 != 0)
    return dataLoss("invalid manifest offset " + std::to_string(mOff));
  if (mSize < 8 || mSize > kMaxManifestSize)
    return dataLoss("invalid manifest size " + std::to_string(mSize));
  if (mOff > size || mSize > size - mOff)
    return dataLoss("file truncated or corrupt: manifest [" + std::to_string(mOff) + ", " +
                    std::to_string(mOff + mSize) + ") extends past the end of the file (" +
                    std::to_string(size) + " bytes)");
  const bool noBlob = (header_.flags & artifact::kFlagNoBlob) != 0;
  const uint64_t bOff = header_.blob_offset;
  const uint64_t bSize = header_.blob_size;
  if (noBlob) {
    if (bOff != 0 || bSize != 0)
      return dataLoss("header says there is no blob but gives blob extents");
  } else {
    if (bOff % kBlobAlignment != 0)
      return dataLoss("blob offset " + std::to_string(bOff) + " is not a multiple of " +
                      std::to_string(kBlobAlignment));
    if (bOff < mOff + mSize)
      return dataLoss("blob offset " + std::to_string(bOff) + " overlaps the manifest");
    if (bOff > size || bSize > size - bOff)
      return dataLoss("file truncated: blob [" + std::to_string(bOff) + ", +" +
                      std::to_string(bSize) + ") extends past the end of the file (" +
                      std::to_string(size) + " bytes)");
  }

  // The manifest: checksum, identifier, FlatBuffers verifier, then semantics.
  const uint8_t* manifestBytes = data + mOff;
  if (XXH64(manifestBytes, mSize, 0) != header_.manifest_xxh64)
    return dataLoss("manifest checksum mismatch: file is corrupt");
  if (!schema::ManifestBufferHasIdentifier(manifestBytes))
    return dataLoss("manifest lacks the INGT file identifier: file is corrupt");
  flatbuffers::Verifier::Options options;
  options.max_tables = kMaxVerifierTables;
  flatbuffers::Verifier verifier(manifestBytes, static_cast<size_t>(mSize), options);
  if (!schema::VerifyManifestBuffer(verifier))
    return dataLoss("manifest fails FlatBuffers verification: file is corrupt");
  manifest_ = schema::GetManifest(manifestBytes);
  if (manifest_->dummy_weights() != noBlob)
    return dataLoss(std::string("header and manifest disagree about dummy weights (header ") +
                    (noBlob ? "has no blob" : "has a blob") + ")");
  hasBlob_ = !noBlob;
  blob_ = hasBlob_ ? data + bOff : nullptr;
  return checkManifest(*manifest_, bSize, hasBlob_);
}

uint64_t Artifact::fileSize() const { return storage_->size; }

size_t Artifact::numTensors() const {
  return manifest_->tensors() ? manifest_->tensors()->size() : 0;
}

const schema::TensorDef& Artifact::tensor(size_t i) const {
  return *manifest_->tensors()->Get(static_cast<flatbuffers::uoffset_t>(i));
}

std::optional<size_t> Artifact::findTensor(std::string_view name) const {
  for (size_t i = 0; i < numTensors(); ++i)
    if (tensor(i).name()->string_view() == name) return i;
  return std::nullopt;
}

ByteSpan Artifact::tensorBytes(size_t i) const {
  if (!hasBlob_ || i >= numTensors()) return {};
  const schema::TensorDef& t = tensor(i);
  return {blob_ + t.offset(), static_cast<size_t>(t.size())};
}

Status Artifact::verifyTensorChecksum(size_t i) const {
  if (i >= numTensors())
    return invalidArgument("tensor index " + std::to_string(i) + " out of range");
  if (!hasBlob_) return okStatus();
  const schema::TensorDef& t = tensor(i);
  ByteSpan bytes = tensorBytes(i);
  uint64_t actual = XXH64(bytes.data, bytes.size, 0);
  if (actual != t.xxh64())
    return dataLoss("tensor " + std::to_string(i) + " '" + displayName(t.name()) +
                    "': checksum mismatch (stored " + hex64(t.xxh64()) + ", computed " +
                    hex64(actual) + "): file is corrupt");
  return okStatus();
}

Status Artifact::verifyChecksums() const {
  for (size_t i = 0; i < numTensors(); ++i) {
    Status status = verifyTensorChecksum(i);
    if (!status.ok())
      return source_ == "<memory>" ? status : status.withPrefix(source_);
  }
  return okStatus();
}

}  // namespace ingot
