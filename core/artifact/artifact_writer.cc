//===- ArtifactWriter.cpp - Writes .ingot artifacts -------------------------===//
#include "core/artifact/artifact_writer.h"

#include <cassert>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <unistd.h>
#include <xxhash.h>

#include "core/artifact/manifest_builder.h"
#include "core/artifact/slot_plan.h"
#include "core/artifact/dtype_info.h"
#include "schemas/artifact_header.h"

namespace ingot {

using artifact::kBlobAlignment;
using artifact::kHeaderSize;

struct ArtifactWriter::TensorSource {
  enum class Kind { None, Span, Owned, Producer } kind = Kind::None;
  const void *data = nullptr;
  uint64_t size = 0;
  std::vector<uint8_t> owned;
  TensorProducer producer;
};

//===----------------------------------------------------------------------===//
// Outputs: a temporary file renamed into place, or a memory buffer.
//===----------------------------------------------------------------------===//

class ArtifactWriter::Output {
public:
  virtual ~Output() = default;
  virtual Status writeAt(uint64_t offset, const void *data, uint64_t size) = 0;
  /// Sets the final size and makes the result visible.
  virtual Status finish(uint64_t totalSize) = 0;
};

namespace {

std::string errnoText() { return std::strerror(errno); }

class FileOutput final : public ArtifactWriter::Output {
public:
  explicit FileOutput(std::string path)
      : path_(std::move(path)),
        tmpPath_(path_ + ".tmp-" + std::to_string(::getpid())) {}
  ~FileOutput() override {
    if (fd_ >= 0)
      ::close(fd_);
    if (!committed_)
      ::unlink(tmpPath_.c_str());
  }

  Status open() {
    fd_ = ::open(tmpPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0)
      return ioError("cannot create " + tmpPath_ + ": " + errnoText());
    return okStatus();
  }

  Status writeAt(uint64_t offset, const void *data, uint64_t size) override {
    const char *p = static_cast<const char *>(data);
    while (size > 0) {
      ssize_t n = ::pwrite(fd_, p, size, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return ioError("write to " + tmpPath_ + " failed: " + errnoText());
      p += n;
      offset += static_cast<uint64_t>(n);
      size -= static_cast<uint64_t>(n);
    }
    return okStatus();
  }

  Status finish(uint64_t totalSize) override {
    if (::ftruncate(fd_, static_cast<off_t>(totalSize)) != 0)
      return ioError("cannot size " + tmpPath_ + ": " + errnoText());
    if (::fsync(fd_) != 0)
      return ioError("cannot flush " + tmpPath_ + ": " + errnoText());
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0)
      return ioError("cannot close " + tmpPath_ + ": " + errnoText());
    if (::rename(tmpPath_.c_str(), path_.c_str()) != 0)
      return ioError("cannot rename " + tmpPath_ + " to " + path_ + ": " + errnoText());
    committed_ = true;
    return okStatus();
  }

private:
  std::string path_;
  std::string tmpPath_;
  int fd_ = -1;
  bool committed_ = false;
};

class BufferOutput final : public ArtifactWriter::Output {
public:
  Status writeAt(uint64_t offset, const void *data, uint64_t size) override {
    if (offset + size > bytes.size())
      bytes.resize(offset + size, 0);
    if (size > 0)
      std::memcpy(bytes.data() + offset, data, size);
    return okStatus();
  }
  Status finish(uint64_t totalSize) override {
    bytes.resize(totalSize, 0);
    return okStatus();
  }
  std::vector<uint8_t> bytes;
};

uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

void putLE(uint8_t *dst, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    dst[i] = static_cast<uint8_t>(value >> (8 * i));
}

std::string quoted(const std::string &name) { return "'" + name + "'"; }

/// Where each rank's tensors lie in the blob of a tensor-parallel artifact.
std::vector<ShardRange> shardRanges(const ArtifactContents &contents,
                                    const std::vector<TensorPlacement> &placements) {
  std::vector<ShardRange> shards;
  if (contents.tpWorldSize <= 1)
    return shards;
  for (int32_t rank = 0; rank < contents.tpWorldSize; ++rank) {
    ShardRange shard{rank, 0, 0};
    bool any = false;
    uint64_t end = 0;
    for (size_t i = 0; i < contents.tensors.size(); ++i) {
      if (contents.tensors[i].tpRank != rank)
        continue;
      shard.blobOffset =
          any ? std::min(shard.blobOffset, placements[i].offset) : placements[i].offset;
      end = std::max(end, placements[i].offset + placements[i].size);
      any = true;
    }
    shard.blobSize = any ? end - shard.blobOffset : 0;
    shards.push_back(shard);
  }
  return shards;
}

/// The fixed header (artifact_header.h's layout) of an artifact with this manifest and blob.
void encodeHeader(uint8_t *header, uint16_t major, uint16_t minor, bool dummy,
                  const std::vector<uint8_t> &manifest, uint64_t blobOffset, uint64_t blobSize) {
  std::memcpy(header, artifact::kMagic, sizeof(artifact::kMagic));
  putLE(header + 8, major, 2);
  putLE(header + 10, minor, 2);
  putLE(header + 12, dummy ? artifact::kFlagNoBlob : 0, 4);
  putLE(header + 16, kHeaderSize, 8);
  putLE(header + 24, manifest.size(), 8);
  putLE(header + 32, blobOffset, 8);
  putLE(header + 40, dummy ? 0 : blobSize, 8);
  putLE(header + 48, XXH64(manifest.data(), manifest.size(), 0), 8);
  putLE(header + 56, XXH64(header, 56, 0), 8);
}

/// A program's buffers and steps as the slot planner sees them.
std::pair<std::vector<SlotBuffer>, std::vector<SlotStep>> slotView(const Program &program) {
  std::vector<SlotBuffer> buffers;
  for (const Buffer &b : program.buffers) {
    SlotBuffer sb;
    sb.activation = b.kind == schema::BufferKind::Activation;
    sb.width = 1;
    for (size_t d = 1; d < b.shape.size(); ++d)
      sb.width *= std::max<int64_t>(b.shape[d], 0);
    buffers.push_back(sb);
  }
  std::vector<SlotStep> steps;
  for (const ProgramStep &s : program.steps)
    steps.push_back({s.op, s.inputs, s.outputs});
  return {std::move(buffers), std::move(steps)};
}

/// Whether the program's activations carry slots (the compiler's plan) or none do.
bool hasSlots(const Program &program) {
  for (const Buffer &b : program.buffers)
    if (b.kind == schema::BufferKind::Activation && b.slot >= 0)
      return true;
  return false;
}

} // namespace

//===----------------------------------------------------------------------===//
// Collecting contents
//===----------------------------------------------------------------------===//

ArtifactWriter::ArtifactWriter()
    : formatMajor_(artifact::kFormatMajor), formatMinor_(artifact::kFormatMinor) {}
ArtifactWriter::~ArtifactWriter() = default;

int32_t ArtifactWriter::addTensor(TensorSpec spec, const void *data, uint64_t size) {
  TensorSource source;
  source.kind = TensorSource::Kind::Span;
  source.data = data;
  source.size = size;
  contents_.tensors.push_back(std::move(spec));
  sources_.push_back(std::move(source));
  return static_cast<int32_t>(contents_.tensors.size() - 1);
}

int32_t ArtifactWriter::addTensor(TensorSpec spec, std::vector<uint8_t> bytes) {
  TensorSource source;
  source.kind = TensorSource::Kind::Owned;
  source.size = bytes.size();
  source.owned = std::move(bytes);
  contents_.tensors.push_back(std::move(spec));
  sources_.push_back(std::move(source));
  return static_cast<int32_t>(contents_.tensors.size() - 1);
}

int32_t ArtifactWriter::addTensor(TensorSpec spec, uint64_t size,
                                  TensorProducer producer) {
  TensorSource source;
  source.kind = TensorSource::Kind::Producer;
  source.size = size;
  source.producer = std::move(producer);
  contents_.tensors.push_back(std::move(spec));
  sources_.push_back(std::move(source));
  return static_cast<int32_t>(contents_.tensors.size() - 1);
}

int32_t ArtifactWriter::addTensor(TensorSpec spec) {
  TensorSource source;
  source.size = packedByteSize(spec.dtype, spec.shape).value_or(0);
  contents_.tensors.push_back(std::move(spec));
  sources_.push_back(std::move(source));
  return static_cast<int32_t>(contents_.tensors.size() - 1);
}

void ArtifactWriter::setModelConfig(ModelConfig config) {
  contents_.config = std::move(config);
  contents_.hasConfig = true;
}
void ArtifactWriter::setTokenizer(Tokenizer tokenizer) {
  contents_.tokenizer = std::move(tokenizer);
  contents_.hasTokenizer = true;
}
int32_t ArtifactWriter::addKernel(Kernel kernel) {
  contents_.kernels.push_back(std::move(kernel));
  return static_cast<int32_t>(contents_.kernels.size() - 1);
}
int32_t ArtifactWriter::addProgram(Program program) {
  contents_.programs.push_back(std::move(program));
  return static_cast<int32_t>(contents_.programs.size() - 1);
}
int32_t ArtifactWriter::addAttentionVariant(AttentionVariant variant) {
  contents_.attentionVariants.push_back(std::move(variant));
  return static_cast<int32_t>(contents_.attentionVariants.size() - 1);
}
void ArtifactWriter::setStepKernel(size_t program, size_t step, int32_t kernel) {
  assert(program < contents_.programs.size() && step < contents_.programs[program].steps.size());
  contents_.programs[program].steps[step].kernel = kernel;
}
void ArtifactWriter::setDeviceFunction(size_t variant, std::string name) {
  assert(variant < contents_.attentionVariants.size());
  contents_.attentionVariants[variant].deviceFunction = std::move(name);
}
void ArtifactWriter::setTensorParallel(int32_t worldSize) {
  contents_.tpWorldSize = worldSize;
}
void ArtifactWriter::setProvenance(Provenance provenance) {
  contents_.provenance = std::move(provenance);
  contents_.hasProvenance = true;
}
void ArtifactWriter::setDummyWeights(uint64_t seed) {
  contents_.dummyWeights = true;
  contents_.dummySeed = seed;
}
size_t ArtifactWriter::numTensors() const { return contents_.tensors.size(); }
const ArtifactContents &ArtifactWriter::contents() const { return contents_; }

void ArtifactWriter::setFormatVersionForTesting(uint16_t major, uint16_t minor) {
  formatMajor_ = major;
  formatMinor_ = minor;
}
void ArtifactWriter::overrideTensorOffsetForTesting(int32_t tensor, uint64_t offset) {
  offsetOverrides_[tensor] = offset;
}
void ArtifactWriter::overrideTensorSizeForTesting(int32_t tensor, uint64_t size) {
  sizeOverrides_[tensor] = size;
}
void ArtifactWriter::skipValidationForTesting() { skipValidation_ = true; }

//===----------------------------------------------------------------------===//
// Validation: the writer refuses what the reader would refuse.
//===----------------------------------------------------------------------===//

Status ArtifactWriter::validate() const {
  const auto &tensors = contents_.tensors;
  int64_t numTensors = static_cast<int64_t>(tensors.size());
  if (numTensors > INT32_MAX)
    return invalidArgument("too many tensors");
  auto tensorIndexOk = [&](int32_t i) { return i == -1 || (i >= 0 && i < numTensors); };
  if (contents_.tpWorldSize < 1)
    return invalidArgument("tensor-parallel world size must be >= 1");

  // A name is unique among the tensors one rank sees: the replicated ones and its own.
  std::set<std::pair<std::string, int32_t>> names;
  std::set<std::string> replicatedNames, shardedNames;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec &t = tensors[i];
    const TensorSource &s = sources_[i];
    std::string what = "tensor " + std::to_string(i) + " " + quoted(t.name);
    if (t.name.empty())
      return invalidArgument("tensor " + std::to_string(i) + " has an empty name");
    if (!names.insert({t.name, t.tpRank}).second)
      return invalidArgument("duplicate tensor name " + quoted(t.name) +
                             (t.tpRank >= 0 ? " on rank " + std::to_string(t.tpRank) : ""));
    (t.tpRank < 0 ? replicatedNames : shardedNames).insert(t.name);
    if (replicatedNames.count(t.name) && shardedNames.count(t.name))
      return invalidArgument("tensor name " + quoted(t.name) +
                             " is both replicated and held by a rank");
    std::optional<uint64_t> expected = packedByteSize(t.dtype, t.shape);
    if (!expected)
      return invalidArgument(what + ": invalid dtype or shape");
    if (s.kind == TensorSource::Kind::None && !contents_.dummyWeights)
      return invalidArgument(what + " has no data (only dummy-weights artifacts may omit it)");
    if (s.kind != TensorSource::Kind::None && s.size != *expected)
      return invalidArgument(what + ": " + std::to_string(s.size) +
                             " bytes given, dtype and shape need " +
                             std::to_string(*expected));
    const QuantScheme &q = t.quant;
    for (int32_t ref : {q.scaleTensor, q.zeroTensor, q.globalScaleTensor})
      if (!tensorIndexOk(ref) || ref == static_cast<int32_t>(i))
        return invalidArgument(what + ": quant tensor index " + std::to_string(ref) +
                               " is out of range");
    if (q.kind != schema::QuantKind::None && q.scaleTensor < 0)
      return invalidArgument(what + ": quantized tensor has no scale tensor");
    if (t.tpRank < -1 || t.tpRank >= contents_.tpWorldSize)
      return invalidArgument(what + ": tp_rank " + std::to_string(t.tpRank) +
                             " outside world size " +
                             std::to_string(contents_.tpWorldSize));
  }

  auto inRange = [](int32_t i, size_t n, bool allowNone) {
    return (allowNone && i == -1) || (i >= 0 && static_cast<size_t>(i) < n);
  };
  for (size_t p = 0; p < contents_.programs.size(); ++p) {
    const Program &program = contents_.programs[p];
    if (program.tpRank < -1 || program.tpRank >= contents_.tpWorldSize)
      return invalidArgument("program " + std::to_string(p) + ": tp_rank " +
                             std::to_string(program.tpRank) + " outside world size " +
                             std::to_string(contents_.tpWorldSize));
    for (size_t s = 0; s < program.steps.size(); ++s) {
      const ProgramStep &step = program.steps[s];
      std::string what = "program " + std::to_string(p) + " step " + std::to_string(s);
      for (int32_t b : step.inputs)
        if (!inRange(b, program.buffers.size(), false))
          return invalidArgument(what + ": input buffer " + std::to_string(b) + " out of range");
      for (int32_t b : step.outputs)
        if (!inRange(b, program.buffers.size(), false))
          return invalidArgument(what + ": output buffer " + std::to_string(b) + " out of range");
      for (int32_t w : step.weights) {
        if (!inRange(w, tensors.size(), false))
          return invalidArgument(what + ": weight tensor " + std::to_string(w) + " out of range");
        int32_t owner = tensors[w].tpRank;
        if (program.tpRank >= 0 && owner >= 0 && owner != program.tpRank)
          return invalidArgument(what + ": weight tensor " + std::to_string(w) + " " +
                                 quoted(tensors[w].name) + " belongs to rank " +
                                 std::to_string(owner) + ", the program to rank " +
                                 std::to_string(program.tpRank));
      }
      if (!inRange(step.kernel, contents_.kernels.size(), true))
        return invalidArgument(what + ": kernel " + std::to_string(step.kernel) + " out of range");
      if (!inRange(step.attentionVariant, contents_.attentionVariants.size(), true))
        return invalidArgument(what + ": attention variant " +
                               std::to_string(step.attentionVariant) + " out of range");
    }
  }
  for (size_t p = 0; p < contents_.programs.size(); ++p) {
    const Program &program = contents_.programs[p];
    if (!hasSlots(program))
      continue;  // writeTo plans them
    auto [buffers, steps] = slotView(program);
    std::vector<int32_t> slots;
    for (const Buffer &b : program.buffers)
      slots.push_back(b.slot);
    Status checked = checkSlots(buffers, steps, slots);
    if (!checked.ok())
      return invalidArgument("program " + std::to_string(p) + ": " + checked.message());
  }
  for (const Kernel &k : contents_.kernels) {
    if (k.name.empty())
      return invalidArgument("a kernel has an empty name");
    for (const KernelBinary &b : k.binaries)
      if (b.target.empty())
        return invalidArgument("kernel " + quoted(k.name) + " has a binary without a target");
  }
  return okStatus();
}

//===----------------------------------------------------------------------===//
// Writing: lay out offsets, stream the blob while hashing, then write the manifest
// (same size: scalars are always stored) and the header at the front.
//===----------------------------------------------------------------------===//

Status ArtifactWriter::write(const std::string &path) {
  FileOutput out(path);
  INGOT_RETURN_IF_ERROR(out.open());
  return writeTo(out);
}

StatusOr<std::vector<uint8_t>> ArtifactWriter::writeToBuffer() {
  BufferOutput out;
  INGOT_RETURN_IF_ERROR(writeTo(out));
  return std::move(out.bytes);
}

Status ArtifactWriter::writeTo(Output &out) {
  if (written_)
    return failedPrecondition("ArtifactWriter::write may be called only once");
  written_ = true;
  if (!skipValidation_)
    INGOT_RETURN_IF_ERROR(validate());
  // Programs built without the compiler's plan (test builders, draft programs) get one;
  // tests that skip validation get exactly what they wrote.
  for (Program &program : contents_.programs) {
    if (skipValidation_ || hasSlots(program))
      continue;
    auto [buffers, steps] = slotView(program);
    const SlotPlan plan = planSlots(buffers, steps);
    for (size_t b = 0; b < program.buffers.size(); ++b)
      program.buffers[b].slot = plan.slot[b];
  }
  const bool dummy = contents_.dummyWeights;
  const size_t n = contents_.tensors.size();

  // Blob order: tensor order, or replicated tensors then rank by rank under TP.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i)
    order[i] = i;
  if (contents_.tpWorldSize > 1)
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return contents_.tensors[a].tpRank < contents_.tensors[b].tpRank;
    });

  std::vector<TensorPlacement> placements(n);
  uint64_t blobSize = 0;
  for (size_t i : order) {
    placements[i].size = sources_[i].size;
    if (dummy)
      continue;
    placements[i].offset = alignUp(blobSize, kBlobAlignment);
    blobSize = placements[i].offset + placements[i].size;
  }

  const std::vector<ShardRange> shards =
      dummy ? std::vector<ShardRange>{} : shardRanges(contents_, placements);

  const uint64_t reservedManifestSize =
      buildManifest(contents_, placements, shards).size();
  const uint64_t blobOffset =
      dummy ? 0 : alignUp(kHeaderSize + reservedManifestSize, kBlobAlignment);

  if (!dummy) {
    XXH64_state_t *state = XXH64_createState();
    if (!state)
      return internalError("out of memory creating an xxh64 state");
    struct StateFree {
      XXH64_state_t *s;
      ~StateFree() { XXH64_freeState(s); }
    } stateFree{state};
    for (size_t i : order) {
      const TensorSource &source = sources_[i];
      const std::string &name = contents_.tensors[i].name;
      XXH64_reset(state, 0);
      uint64_t written = 0;
      const uint64_t size = placements[i].size;
      const uint64_t base = blobOffset + placements[i].offset;
      TensorByteSink sink = [&](const void *data, uint64_t chunk) -> Status {
        if (chunk > size - written)
          return invalidArgument("tensor " + quoted(name) + ": producer emitted more than " +
                                 std::to_string(size) + " bytes");
        INGOT_RETURN_IF_ERROR(out.writeAt(base + written, data, chunk));
        XXH64_update(state, data, chunk);
        written += chunk;
        return okStatus();
      };
      switch (source.kind) {
      case TensorSource::Kind::Span:
        INGOT_RETURN_IF_ERROR(sink(source.data, source.size));
        break;
      case TensorSource::Kind::Owned:
        INGOT_RETURN_IF_ERROR(sink(source.owned.data(), source.owned.size()));
        break;
      case TensorSource::Kind::Producer:
        INGOT_RETURN_IF_ERROR(source.producer(sink));
        break;
      case TensorSource::Kind::None:
        return invalidArgument("tensor " + quoted(name) + " has no data");
      }
      if (written != size)
        return invalidArgument("tensor " + quoted(name) + ": producer emitted " +
                               std::to_string(written) + " of " + std::to_string(size) +
                               " bytes");
      placements[i].xxh64 = XXH64_digest(state);
    }
  }

  for (const auto &[index, offset] : offsetOverrides_)
    if (index >= 0 && static_cast<size_t>(index) < n)
      placements[index].offset = offset;
  for (const auto &[index, size] : sizeOverrides_)
    if (index >= 0 && static_cast<size_t>(index) < n)
      placements[index].size = size;

  std::vector<uint8_t> manifest = buildManifest(contents_, placements, shards);
  if (!dummy && kHeaderSize + manifest.size() > blobOffset)
    return internalError("manifest grew after layout (" + std::to_string(manifest.size()) +
                         " > " + std::to_string(reservedManifestSize) + " bytes)");
  INGOT_RETURN_IF_ERROR(out.writeAt(kHeaderSize, manifest.data(), manifest.size()));

  uint8_t header[kHeaderSize] = {};
  encodeHeader(header, formatMajor_, formatMinor_, dummy, manifest, blobOffset, blobSize);
  INGOT_RETURN_IF_ERROR(out.writeAt(0, header, kHeaderSize));

  const uint64_t total = dummy ? kHeaderSize + manifest.size() : blobOffset + blobSize;
  return out.finish(total);
}

} // namespace ingot
