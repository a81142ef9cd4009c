//===- WeightConversion.cpp - layout and dtype changes of imported weights -===//
#include "compiler/import/WeightConversion.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>

#include "compiler/import/LlamaTensorShapes.h"

namespace ingot::importer {

Status unpermuteRopeRows(std::vector<float> &values, const std::vector<int64_t> &shape,
                         int32_t heads) {
  if (shape.size() != 2)
    return invalidArgument("cannot undo the RoPE row permutation of a tensor of " +
                           std::to_string(shape.size()) + " dims with " +
                           std::to_string(heads) + " heads");
  return unpermuteRopeRowBytes(reinterpret_cast<uint8_t *>(values.data()), shape[0],
                               shape[1] * static_cast<int64_t>(sizeof(float)), heads);
}

Status unpermuteRopeRowBytes(uint8_t *bytes, int64_t rows, int64_t rowBytes, int32_t heads) {
  if (heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
    return invalidArgument("cannot undo the RoPE row permutation of a tensor of 2 dims with " +
                           std::to_string(heads) + " heads");
  const int64_t headDim = rows / heads, half = headDim / 2;
  std::vector<uint8_t> head(static_cast<size_t>(headDim * rowBytes));
  for (int64_t h = 0; h < heads; ++h) {
    uint8_t *base = bytes + h * headDim * rowBytes;
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(head.data() + (j * half + i) * rowBytes, base + (2 * i + j) * rowBytes,
                    static_cast<size_t>(rowBytes));
    std::memcpy(base, head.data(), head.size());
  }
  return okStatus();
}

uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value))
    return static_cast<uint16_t>((bits >> 16) | 0x40); // quiet NaN, sign kept
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t floatToF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t absBits = bits & 0x7FFFFFFF;
  if (absBits > 0x7F800000)
    return sign | 0x7E00; // NaN
  if (absBits >= 0x477FF000)
    return sign | 0x7C00; // rounds to infinity (>= 65520)
  if (absBits < 0x38800000) {
    // Subnormal half (or zero): value = m * 2^-24; round to nearest even.
    float a;
    std::memcpy(&a, &absBits, 4);
    float scaled = a * 16777216.0f; // 2^24, exact
    float rounded = std::nearbyint(scaled);
    return sign | static_cast<uint16_t>(rounded);
  }
  uint32_t mant = absBits & 0x7FFFFF;
  uint32_t exp = (absBits >> 23) - 127 + 15;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half; // may carry into the exponent, which is still correct
  return sign | static_cast<uint16_t>(half);
}

Status writeConverted(const std::vector<float> &values, schema::DType dtype,
                      const TensorByteSink &sink) {
  if (dtype == schema::DType::F32)
    return sink(values.data(), values.size() * sizeof(float));
  if (dtype != schema::DType::BF16 && dtype != schema::DType::F16)
    return invalidArgument("weights can be converted to f32, bf16 or f16 only");
  constexpr size_t kChunk = 1 << 16; // elements per write
  std::vector<uint16_t> chunk(kChunk);
  for (size_t start = 0; start < values.size(); start += kChunk) {
    size_t n = std::min(kChunk, values.size() - start);
    for (size_t i = 0; i < n; ++i)
      chunk[i] = dtype == schema::DType::BF16 ? floatToBf16(values[start + i])
                                              : floatToF16(values[start + i]);
    INGOT_RETURN_IF_ERROR(sink(chunk.data(), n * sizeof(uint16_t)));
  }
  return okStatus();
}

namespace {

/// A fused tensor read once for all its parts: the first part to ask reads it (values or
/// Q4 blocks), each part copies its rows, and the copy is dropped once every part has taken
/// its rows (a later ask reads it again). Parts may ask from several threads.
template <class T> class FusedRows {
public:
  FusedRows(std::function<Status(std::vector<T> &)> read, int64_t totalRows, size_t parts)
      : read_(std::move(read)), totalRows_(totalRows), taken_(parts, false) {}

  /// Rows [first, first + count) of the fused tensor, for part `part`.
  Status rows(size_t part, int64_t first, int64_t count, std::vector<T> &out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!loaded_) {
      INGOT_RETURN_IF_ERROR(read_(all_));
      loaded_ = true;
      std::fill(taken_.begin(), taken_.end(), false);
    }
    const size_t perRow = all_.size() / static_cast<size_t>(totalRows_);
    out.assign(all_.begin() + first * perRow, all_.begin() + (first + count) * perRow);
    taken_[part] = true;
    if (std::all_of(taken_.begin(), taken_.end(), [](bool t) { return t; })) {
      std::vector<T>().swap(all_);
      loaded_ = false;
    }
    return okStatus();
  }

private:
  std::function<Status(std::vector<T> &)> read_;
  int64_t totalRows_;
  std::mutex mutex_;
  std::vector<T> all_;
  std::vector<bool> taken_;
  bool loaded_ = false;
};

} // namespace

StatusOr<std::vector<ImportedTensor>>
splitFusedRows(const ImportedTensor &fused,
               const std::vector<std::pair<std::string, int64_t>> &parts) {
  if (fused.shape.size() != 2)
    return invalidArgument("fused tensor '" + fused.name + "' is not a matrix");
  const int64_t cols = fused.shape[1];
  int64_t total = 0;
  for (const auto &part : parts)
    total += part.second;
  if (total != fused.shape[0])
    return invalidArgument("fused tensor '" + fused.name + "' has " +
                           std::to_string(fused.shape[0]) + " rows, its parts " +
                           std::to_string(total));
  const int64_t totalRows = fused.shape[0];
  auto values = std::make_shared<FusedRows<float>>(fused.readF32, totalRows, parts.size());
  std::shared_ptr<FusedRows<uint8_t>> blocks;
  if (fused.readBlocks)
    blocks = std::make_shared<FusedRows<uint8_t>>(fused.readBlocks, totalRows, parts.size());
  std::vector<ImportedTensor> out;
  int64_t first = 0;
  for (const auto &[name, rows] : parts) {
    const size_t index = out.size();
    ImportedTensor part;
    part.name = name;
    part.shape = {rows, cols};
    part.dtype = fused.dtype;
    part.readF32 = [values, index, first, rows](std::vector<float> &partValues) {
      return values->rows(index, first, rows, partValues);
    };
    part.produce = [read = part.readF32, dtype = fused.dtype](const TensorByteSink &sink) {
      std::vector<float> values;
      INGOT_RETURN_IF_ERROR(read(values));
      return writeConverted(values, dtype, sink);
    };
    // Q4_0 / Q4_1 blocks: a row is a whole number of blocks, so a part is a run of rows.
    if (blocks) {
      part.sourceQuant = fused.sourceQuant;
      part.readBlocks = [blocks, index, first, rows](std::vector<uint8_t> &partBlocks) {
        return blocks->rows(index, first, rows, partBlocks);
      };
    }
    first += rows;
    out.push_back(std::move(part));
  }
  return out;
}

StatusOr<std::vector<ImportedTensor>> splitFused(const ImportedTensor &tensor,
                                                const ModelConfig &config) {
  auto ends = [&](const char *suffix) { return hasSuffix(tensor.name, suffix); };
  const int64_t q = int64_t(config.numHeads) * config.headDim;
  const int64_t kv = int64_t(config.numKvHeads) * config.headDim;
  if (ends("self_attn.qkv_proj.weight")) {
    const std::string base = tensor.name.substr(0, tensor.name.size() - 15);
    return splitFusedRows(tensor, {{base + "q_proj.weight", q},
                                   {base + "k_proj.weight", kv},
                                   {base + "v_proj.weight", kv}});
  }
  if (ends("mlp.gate_up_proj.weight")) {
    const std::string base = tensor.name.substr(0, tensor.name.size() - 19);
    return splitFusedRows(tensor, {{base + "gate_proj.weight", config.intermediateSize},
                                   {base + "up_proj.weight", config.intermediateSize}});
  }
  return std::vector<ImportedTensor>{tensor};
}

} // namespace ingot::importer
