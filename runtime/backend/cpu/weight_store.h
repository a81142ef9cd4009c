// WeightStore: the CPU backend's view of an artifact's tensors (zero-copy, or dummy-filled).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/artifact/artifact_reader.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/base/status.h"

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

/// Resolves tensors by manifest index. With a blob, f32/f16/bf16 tensors point straight
/// into the artifact's mapping (no copy; the artifact must outlive the store). For a
/// dummy-weights artifact each tensor is generated once, in its own dtype, by
/// fillDummyWeight(). Quantized tensors are refused ("not supported yet").
class WeightStore {
 public:
  explicit WeightStore(const Artifact& artifact) : artifact_(artifact) {}

  /// The tensor as a dense f32/f16/bf16 matrix or vector.
  StatusOr<WeightView> dense(int32_t index);
  /// The tensor converted to f32 (a copy owned by the store; for small vectors such as
  /// norm weights and biases). Errors as dense().
  StatusOr<const float*> asF32(int32_t index);
  /// Bytes of distinct tensors handed out by dense() (the weights a step reads).
  uint64_t denseBytes() const { return dense_bytes_; }

 private:
  const Artifact& artifact_;
  std::map<int32_t, WeightView> views_;
  std::map<int32_t, std::vector<float>> f32_copies_;
  std::vector<std::unique_ptr<uint8_t[]>> dummy_storage_;
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

}  // namespace ingot
