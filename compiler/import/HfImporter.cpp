//===- HfImporter.cpp - Hugging Face directories to an ImportedModel ------===//
#include "compiler/import/HfImporter.h"

#include <algorithm>
#include <fstream>

#include "compiler/import/LlamaTensorShapes.h"
#include "compiler/import/WeightConversion.h"
#include "compiler/import/hf/HfCheckpoint.h"
#include "xxhash.h"

namespace ingot::importer {
namespace {

/// xxh64 over config.json and each shard's header (name, dtype, shape, offsets): identifies
/// the checkpoint without reading gigabytes of weights.
uint64_t checkpointHash(const hf::HfCheckpoint &ckpt) {
  XXH64_state_t *state = XXH64_createState();
  XXH64_reset(state, 0);
  std::ifstream config(ckpt.directory + "/config.json", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  XXH64_update(state, text.data(), text.size());
  for (const hf::HfTensorRef &ref : ckpt.tensors) {
    const hf::SafetensorsTensor &t = *ref.tensor;
    XXH64_update(state, t.name.data(), t.name.size());
    XXH64_update(state, t.shape.data(), t.shape.size() * sizeof(int64_t));
    XXH64_update(state, &t.size, sizeof(t.size));
    // A few bytes of content so re-trained weights of the same shapes hash differently.
    XXH64_update(state, ref.shard->bytes(t), std::min<uint64_t>(t.size, 64));
  }
  for (const hf::PackedLinear &layer : ckpt.packedLinears)
    for (const hf::PackedLinear::Part *part :
         {&layer.qweight, &layer.qzeros, &layer.scales, &layer.gIdx}) {
      if (!part->tensor)
        continue;
      const hf::SafetensorsTensor &t = *part->tensor;
      XXH64_update(state, t.name.data(), t.name.size());
      XXH64_update(state, t.shape.data(), t.shape.size() * sizeof(int64_t));
      XXH64_update(state, part->shard->bytes(t), std::min<uint64_t>(t.size, 64));
    }
  uint64_t hash = XXH64_digest(state);
  XXH64_freeState(state);
  return hash;
}

/// A GPTQ / AWQ layer as the [N, K] weight the graph reads: dequantized exactly for float
/// artifacts, its integers re-ordered for an int4 one.
ImportedTensor packedTensor(const hf::PackedLinear &layer, schema::DType dtype) {
  ImportedTensor tensor;
  tensor.name = layer.name;
  tensor.shape = {layer.n, layer.k};
  tensor.dtype = dtype;
  tensor.sourceQuant =
      layer.config.format == hf::PackedFormat::Gptq ? SourceQuant::Gptq : SourceQuant::Awq;
  tensor.sourceGroupSize = layer.groupSize();
  tensor.readF32 = [layer](std::vector<float> &values) -> Status {
    hf::UnpackedInt4 unpacked;
    INGOT_RETURN_IF_ERROR(hf::unpackPackedLinear(layer, unpacked));
    values.resize(static_cast<size_t>(layer.n * layer.k));
    hf::dequantizeInt4(unpacked, values.data());
    return okStatus();
  };
  tensor.produce = [readF32 = tensor.readF32, dtype](const TensorByteSink &sink) -> Status {
    std::vector<float> values;
    INGOT_RETURN_IF_ERROR(readF32(values));
    return writeConverted(values, dtype, sink);
  };
  tensor.readInt4 = [layer](Int4ZeroParts &parts) -> Status {
    hf::UnpackedInt4 unpacked;
    INGOT_RETURN_IF_ERROR(hf::unpackPackedLinear(layer, unpacked));
    if (!hf::hasContiguousGroups(unpacked, layer.groupSize()))
      return invalidArgument(
          "GPTQ act-order (desc_act): its g_idx puts inputs in groups out of order, which the "
          "int4 format (contiguous groups of " + std::to_string(layer.groupSize()) +
          " inputs) cannot hold exactly; compile without --quant to dequantize it exactly, "
          "or with another --quant-group to re-quantize it");
    return hf::toInt4ZeroParts(unpacked, layer.groupSize(), parts);
  };
  return tensor;
}

} // namespace

StatusOr<ImportedModel> importHuggingFace(const std::string &dir, const HfImportOptions &options) {
  StatusOr<hf::HfCheckpoint> read = hf::readHfCheckpoint(dir);
  if (!read.ok())
    return read.status();
  hf::HfCheckpoint ckpt = std::move(read).value();

  ImportedModel model;
  model.source = dir;
  model.config = ckpt.config;
  model.features = ckpt.features;
  model.hasTokenizer = ckpt.hasTokenizer;
  model.tokenizer = std::move(ckpt.tokenizer);
  model.sourceXxh64 = checkpointHash(ckpt);
  for (const hf::HfTensorRef &ref : ckpt.tensors) {
    const hf::SafetensorsTensor *source = ref.tensor;
    // Norm weights and biases stay f32: they are tiny and precision-sensitive.
    schema::DType dtype = source->shape.size() == 1 ? schema::DType::F32 : options.weightDtype;
    ImportedTensor tensor;
    tensor.name = source->name;
    tensor.shape = source->shape;
    tensor.dtype = dtype;
    std::shared_ptr<const hf::SafetensorsFile> shard = ref.shard;
    const float shift =
        hasSuffix(source->name, "norm.weight") ? model.features.normWeightShift : 0.0f;
    tensor.readF32 = [shard, source, shift](std::vector<float> &values) -> Status {
      values.resize(static_cast<size_t>(source->numElements()));
      shard->toFloat(*source, values.data());
      shard->releaseTensorPages(*source);
      if (shift != 0.0f)
        for (float &v : values)
          v += shift;
      return okStatus();
    };
    tensor.produce = [readF32 = tensor.readF32, dtype](const TensorByteSink &sink) -> Status {
      std::vector<float> values;
      INGOT_RETURN_IF_ERROR(readF32(values));
      return writeConverted(values, dtype, sink);
    };
    StatusOr<std::vector<ImportedTensor>> parts = splitFused(tensor, model.config);
    if (!parts.ok())
      return parts.status();
    for (ImportedTensor &part : *parts)
      model.add(std::move(part));
  }
  for (const hf::PackedLinear &layer : ckpt.packedLinears)
    model.add(packedTensor(layer, options.weightDtype));
  return model;
}

} // namespace ingot::importer
