//===- QuantizedTensors.h - weights quantized while the artifact is written -*- C++ -*-===//
//
// The bytes of the tensors `ingot-quantize-weights` derives from checkpoint tensors (an
// `ingot.weight` with an `#ingot.encoding`): each source tensor is read and encoded once,
// when the first of its parts is written, and dropped once all its parts are written. The
// writer writes tensors in module order and a weight's parts are adjacent, so about one
// encoded tensor is alive at a time. A tensor-parallel module names each rank's slices of a
// part (cut by compiler/driver/ShardedTensors from the whole part), so each rank's parts
// share an encoding of their own: the source is encoded once per rank that uses it, never
// kept from one rank's blob range to the next. GGUF Q4_0 / Q4_1 tensors asked for as int4 with
// group 32, and GPTQ / AWQ layers asked for as int4 with their own group and zeros, are
// re-packed from their integers, bit for bit, instead of re-quantized.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/import/ImportedModel.h"
#include "compiler/quant/WeightEncoders.h"

namespace ingot::compiler {

/// Which tensor of an encoded weight an artifact tensor is.
enum class EncodedPart { Weight, Scale, Offset, GlobalScale };

class QuantizedTensors {
public:
  /// `scales` chooses NVFP4 / MXFP4 block scales (see quant::ScaleChoice).
  /// `columnImportance` (optional, from `--calib`, must outlive this): per weight name, the
  /// [K] weights of each input channel; such a weight gets blocks (and int4 ranges) of least
  /// activation-weighted error (ScaleChoice::MinError with quant::encodeWeight's columnWeights).
  explicit QuantizedTensors(
      const importer::ImportedModel &model,
      quant::ScaleChoice scales = quant::ScaleChoice::Absmax,
      const std::map<std::string, std::vector<float>> *columnImportance = nullptr);
  ~QuantizedTensors();

  /// The producer of `part` of checkpoint tensor `handle` under `encoding` (`group` for
  /// int4), the whole part (a shard slices it). Parts registered with the same `user` (a
  /// tensor-parallel rank, or -1 for replicated and unsharded tensors) share one encoding
  /// of the source. Fails when the source is not a matrix the encoding can hold, or when
  /// `dtype` and `shape` are not what the part is.
  StatusOr<TensorProducer> producer(uint64_t handle, quant::WeightEncoding encoding,
                                    int64_t group, EncodedPart part, schema::DType dtype,
                                    const std::vector<int64_t> &shape, int32_t user = -1);

  /// Distinct source weights registered so far that copy GGUF Q4 blocks or GPTQ / AWQ
  /// integers exactly.
  size_t numExact() const;

  /// True when `encoding` of `tensor` re-packs its GGUF blocks or GPTQ / AWQ integers
  /// instead of re-quantizing.
  static bool isExact(const importer::ImportedTensor &tensor, quant::WeightEncoding encoding,
                      int64_t group);

private:
  struct State;
  std::shared_ptr<State> state;
};

} // namespace ingot::compiler
