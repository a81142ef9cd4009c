// WeightStore: the CPU backend's view of an artifact's tensors (zero-copy, or dummy-filled).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/quant_linear.h"
#include "core/base/status.h"

namespace ingot {

/// A dense float tensor as the kernels read it.
struct WeightView {
  const void* data = nullptr;
  WeightType type = WeightType::kF32;
  std::vector<int64_t> shape;
  std::string name;

  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  int64_t cols() const { return shape.size() < 2 ? (shape.empty() ? 1 : shape[0]) : shape[1]; }
  int64_t elements() const;
  int64_t bytes() const { return elements() * (type == WeightType::kF32 ? 4 : 2); }
};

/// A quantized linear weight as the kernels read it, and where its parts come from.
struct QuantizedWeight {
  QuantMatrix matrix;
  std::string name;
  /// Manifest indices of its scale, zero/min and global-scale tensors (-1 where absent);
  /// a linear step lists them among its weights.
  int32_t scale_tensor = -1;
  int32_t zero_tensor = -1;
  int32_t global_scale_tensor = -1;
};

/// Storage of a dummy quantized weight (what fillDummyQuantized writes).
struct DummyQuantParts {
  std::vector<uint8_t> codes, scales, zeros;
  float scale = 1.0f;  ///< fp8 per-tensor / nvfp4 global scale
};

/// Resolves tensors by manifest index. With a blob, tensors point straight into the
/// artifact's mapping (no copy; the artifact must outlive the store). For a dummy-weights
/// artifact each tensor is generated once, in its own dtype, by fillDummyWeight() (dense)
/// or fillDummyQuantized() (a quantized weight with its scales).
class WeightStore {
 public:
  /// `tp_rank`: the tensor-parallel rank whose tensors this store may hand out (with the
  /// replicated ones, tp_rank -1); another rank's shard is an error naming it, so a rank
  /// never touches another's bytes. -1 (unsharded): only replicated tensors.
  explicit WeightStore(const Artifact& artifact, int32_t tp_rank = -1)
      : artifact_(artifact), tp_rank_(tp_rank) {}

  /// The tensor as a dense f32/f16/bf16 matrix or vector.
  StatusOr<WeightView> dense(int32_t index);
  /// The tensor converted to f32 (a copy owned by the store; for small vectors such as
  /// norm weights and biases). Errors as dense().
  StatusOr<const float*> asF32(int32_t index);
  /// Whether tensor `index` (in range) carries a quantization scheme.
  bool isQuantized(int32_t index) const;
  /// The quantized [N, K] weight `index`, its scheme checked against the formats the
  /// kernels run (u4 Int4Group with f16/bf16/f32 scale and zero/min, f8E4M3FN PerChannel
  /// or PerTensor, Nvfp4, Mxfp4; shapes and dtypes of every scale tensor; K a multiple of
  /// the block). Errors name the tensor.
  StatusOr<QuantizedWeight> quantized(int32_t index);
  /// Bytes of distinct tensors handed out by dense() (the weights a step reads).
  uint64_t denseBytes() const { return dense_bytes_; }

 private:
  /// An error unless tensor `index` (in range) is replicated or tp_rank_'s.
  Status checkRank(int32_t index) const;

  const Artifact& artifact_;
  const int32_t tp_rank_;
  std::map<int32_t, WeightView> views_;
  std::map<int32_t, std::vector<float>> f32_copies_;
  std::map<int32_t, QuantizedWeight> quantized_;
  std::vector<std::unique_ptr<uint8_t[]>> dummy_storage_;
  std::vector<std::unique_ptr<DummyQuantParts>> dummy_quantized_;
  uint64_t dense_bytes_ = 0;
};

/// The dummy-weights generator (DESIGN.md: "the runtime fills weights with seeded
/// pseudo-random values"). For each tensor a splitmix64 stream starts from
/// `seed ^ xxh64(name, seed 0)`; element i takes the next output's top 24 bits as
/// u in [0, 1) and becomes
///   rank-1 tensors (norm weights, biases): 1 + 0.1 * (2u - 1)
///   others ([N, K] matrices, tables):      (2u - 1) / sqrt(K)
/// rounded to the tensor's dtype (f32, f16 or bf16), so activations keep unit scale through
/// any depth. The same (seed, name, shape, dtype) gives the same bytes on every machine.
void fillDummyWeight(uint64_t seed, const std::string& name, const std::vector<int64_t>& shape,
                     WeightType type, void* out);

/// The quantized counterpart of fillDummyWeight: dequantized weights about uniform in
/// +-1/sqrt(K), like the dense ones. Each part draws u in [0, 1) as fillDummyWeight does,
/// from the stream of its own tensor name (codes: `name`; scales: `scale_name`; zeros:
/// `zero_name`):
///   int4 codes q = floor(16u); scale (2 / 15) a (0.75 + 0.5u); min -a (0.75 + 0.5u);
///        zero 7 + u (a = 1/sqrt(K); scale and zero/min in m.scale_type)
///   fp8  codes e4m3(448 (2u - 1)); channel scales a / 448 (0.75 + 0.5u); per-tensor a / 448
///   fp4  codes e2m1(6 (2u - 1)); nvfp4 block scales e4m3(0.75 + 0.5u), tensor scale a / 6;
///        mxfp4 block scales 2^round(log2(a / 6)) (no stream)
/// with e4m3/e2m1 rounding to nearest even. `m` gives the format, shape and block; the
/// codes, scales and zeros are written to `out` (sized here).
void fillDummyQuantized(uint64_t seed, const QuantMatrix& m, const std::string& name,
                        const std::string& scale_name, const std::string& zero_name,
                        DummyQuantParts* out);

}  // namespace ingot
