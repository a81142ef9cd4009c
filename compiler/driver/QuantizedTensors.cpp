//===- QuantizedTensors.cpp - weights quantized while the artifact is written -===//
#include "compiler/driver/QuantizedTensors.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "core/artifact/dtype_info.h"

namespace ingot::compiler {
namespace {

using quant::WeightEncoding;

/// A source tensor under one encoding, for one user (a tensor-parallel rank or -1).
using EncodingKey = std::tuple<uint64_t, WeightEncoding, int64_t, int32_t>;

/// What a part must be for a source of [n, k].
struct PartLayout {
  schema::DType dtype;
  std::vector<int64_t> shape;
};

std::optional<PartLayout> partLayout(WeightEncoding encoding, int64_t group, EncodedPart part,
                                     int64_t n, int64_t k) {
  const int64_t blocks = k / quant::blockSizeOf(encoding, group, k);
  const bool int4 = encoding == WeightEncoding::Int4Min || encoding == WeightEncoding::Int4Zero;
  switch (part) {
  case EncodedPart::Weight:
    if (int4)
      return PartLayout{schema::DType::U4, {n, k}};
    if (encoding == WeightEncoding::Fp8PerChannel)
      return PartLayout{schema::DType::F8E4M3FN, {n, k}};
    return PartLayout{schema::DType::F4E2M1FN, {n, k}};
  case EncodedPart::Scale:
    switch (encoding) {
    case WeightEncoding::Int4Min:
    case WeightEncoding::Int4Zero:
      return PartLayout{schema::DType::F16, {n, blocks}};
    case WeightEncoding::Fp8PerChannel:
      return PartLayout{schema::DType::F32, {n}};
    case WeightEncoding::Nvfp4:
      return PartLayout{schema::DType::F8E4M3FN, {n, blocks}};
    case WeightEncoding::Mxfp4:
      return PartLayout{schema::DType::F8E8M0FNU, {n, blocks}};
    }
    break;
  case EncodedPart::Offset:
    if (int4)
      return PartLayout{schema::DType::F16, {n, blocks}};
    break;
  case EncodedPart::GlobalScale:
    if (encoding == WeightEncoding::Nvfp4)
      return PartLayout{schema::DType::F32, {1}};
    break;
  }
  return std::nullopt;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

} // namespace

struct QuantizedTensors::State {
  State(const importer::ImportedModel &model, quant::ScaleChoice scales,
        const std::map<std::string, std::vector<float>> *importance)
      : model(model), scales(scales), importance(importance) {}

  /// Encodes the source once; its parts are handed out of the entry's bytes.
  Status ensureEncoded(const EncodingKey &key) {
    Entry &entry = entries[key];
    if (entry.encoded)
      return okStatus();
    [[maybe_unused]] auto [handle, encoding, group, user] = key;
    const importer::ImportedTensor &tensor = model.tensors[handle];
    const std::vector<float> *columnWeights = nullptr;
    if (importance) {
      auto it = importance->find(tensor.name);
      if (it != importance->end())
        columnWeights = &it->second;
    }
    StatusOr<quant::EncodedWeight> encoded =
        encodeSource(tensor, encoding, group, scales, columnWeights);
    if (!encoded.ok())
      return encoded.status().withPrefix("tensor '" + tensor.name + "'");
    entry.bytes = std::move(encoded).value();
    entry.encoded = true;
    return okStatus();
  }

  static StatusOr<quant::EncodedWeight> encodeSource(const importer::ImportedTensor &tensor,
                                                     WeightEncoding encoding, int64_t group,
                                                     quant::ScaleChoice scales,
                                                     const std::vector<float> *columnWeights) {
    const int64_t n = tensor.shape[0], k = tensor.shape[1];
    if (isExact(tensor, encoding, group) && tensor.readInt4) {
      importer::Int4ZeroParts parts;
      INGOT_RETURN_IF_ERROR(tensor.readInt4(parts));
      quant::EncodedWeight out;
      out.weight = std::move(parts.weight);
      out.scale = std::move(parts.scale);
      out.offset = std::move(parts.zero);
      return out;
    }
    if (isExact(tensor, encoding, group)) {
      std::vector<uint8_t> blocks;
      INGOT_RETURN_IF_ERROR(tensor.readBlocks(blocks));
      return quant::repackGgmlQ4(blocks.data(), n, k,
                                 tensor.sourceQuant == importer::SourceQuant::GgufQ4_1);
    }
    if (!tensor.readF32)
      return invalidArgument("cannot be read as f32 to quantize it");
    std::vector<float> values;
    INGOT_RETURN_IF_ERROR(tensor.readF32(values));
    if (values.size() != static_cast<size_t>(n * k))
      return internalError("read " + std::to_string(values.size()) + " values for shape " +
                           shapeText(tensor.shape));
    if (columnWeights) {
      if (static_cast<int64_t>(columnWeights->size()) != k)
        return invalidArgument("has " + std::to_string(k) + " inputs but " +
                               std::to_string(columnWeights->size()) + " calibrated channels");
      return quant::encodeWeight(values.data(), n, k, encoding, group,
                                 quant::ScaleChoice::MinError, columnWeights->data());
    }
    return quant::encodeWeight(values.data(), n, k, encoding, group, scales);
  }

  /// Writes one part and forgets it; forgets the whole entry after its last part.
  Status emit(const EncodingKey &key, EncodedPart part, const TensorByteSink &sink) {
    INGOT_RETURN_IF_ERROR(ensureEncoded(key));
    Entry &entry = entries[key];
    std::vector<uint8_t> *bytes = nullptr;
    switch (part) {
    case EncodedPart::Weight: bytes = &entry.bytes.weight; break;
    case EncodedPart::Scale: bytes = &entry.bytes.scale; break;
    case EncodedPart::Offset: bytes = &entry.bytes.offset; break;
    case EncodedPart::GlobalScale: bytes = &entry.bytes.globalScale; break;
    }
    Status status = sink(bytes->data(), bytes->size());
    std::vector<uint8_t>().swap(*bytes);
    if (--entry.partsLeft == 0)
      entries.erase(key);
    return status;
  }

  struct Entry {
    int partsLeft = 0;
    bool encoded = false;
    quant::EncodedWeight bytes;
  };
  const importer::ImportedModel &model;
  const quant::ScaleChoice scales;
  const std::map<std::string, std::vector<float>> *importance;
  std::map<EncodingKey, Entry> entries;
  std::set<uint64_t> exactHandles;
};

QuantizedTensors::QuantizedTensors(
    const importer::ImportedModel &model, quant::ScaleChoice scales,
    const std::map<std::string, std::vector<float>> *columnImportance)
    : state(std::make_shared<State>(model, scales, columnImportance)) {}

QuantizedTensors::~QuantizedTensors() = default;

size_t QuantizedTensors::numExact() const { return state->exactHandles.size(); }

bool QuantizedTensors::isExact(const importer::ImportedTensor &tensor, WeightEncoding encoding,
                               int64_t group) {
  if (tensor.sourceQuant == importer::SourceQuant::Gptq ||
      tensor.sourceQuant == importer::SourceQuant::Awq)
    return tensor.readInt4 && encoding == WeightEncoding::Int4Zero &&
           group == tensor.sourceGroupSize;
  if (group != quant::kGgmlQ4BlockSize || !tensor.readBlocks)
    return false;
  return (tensor.sourceQuant == importer::SourceQuant::GgufQ4_1 &&
          encoding == WeightEncoding::Int4Min) ||
         (tensor.sourceQuant == importer::SourceQuant::GgufQ4_0 &&
          encoding == WeightEncoding::Int4Zero);
}

StatusOr<TensorProducer> QuantizedTensors::producer(uint64_t handle, WeightEncoding encoding,
                                                    int64_t group, EncodedPart part,
                                                    schema::DType dtype,
                                                    const std::vector<int64_t> &shape,
                                                    int32_t user) {
  const importer::ImportedModel &model = state->model;
  if (handle >= model.tensors.size())
    return invalidArgument("weight handle " + std::to_string(handle) +
                           " is not in the checkpoint (" + std::to_string(model.tensors.size()) +
                           " tensors)");
  const importer::ImportedTensor &tensor = model.tensors[handle];
  if (tensor.shape.size() != 2)
    return invalidArgument("cannot quantize '" + tensor.name + "' of shape " +
                           shapeText(tensor.shape) + ": only [N, K] matrices are quantized");
  const int64_t n = tensor.shape[0], k = tensor.shape[1];
  INGOT_RETURN_IF_ERROR(quant::checkEncodable(encoding, n, k, group)
                            .withPrefix("cannot quantize '" + tensor.name + "'"));
  std::optional<PartLayout> layout = partLayout(encoding, group, part, n, k);
  bool scalar = part == EncodedPart::GlobalScale && shape.empty();
  if (!layout || layout->dtype != dtype || (layout->shape != shape && !scalar))
    return invalidArgument("quantized tensor of '" + tensor.name + "' must be " +
                           (layout ? std::string(dtypeName(layout->dtype)) + " " +
                                         shapeText(layout->shape)
                                   : std::string("absent under this encoding")) +
                           ", the module says " + dtypeName(dtype) + " " + shapeText(shape));

  EncodingKey key{handle, encoding, group, user};
  ++state->entries[key].partsLeft;
  if (part == EncodedPart::Weight && isExact(tensor, encoding, group))
    state->exactHandles.insert(handle);
  return TensorProducer([state = state, key, part](const TensorByteSink &sink) {
    return state->emit(key, part, sink);
  });
}

} // namespace ingot::compiler
