// WeightStore: zero-copy tensor views into the artifact mapping, or seeded dummy weights.
#include "runtime/backend/cpu/weight_store.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/backend/cpu/half_float.h"

namespace ingot {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

int64_t WeightView::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void fillDummyWeight(uint64_t seed, const std::string& name, const std::vector<int64_t>& shape,
                     WeightType type, void* out) {
  uint64_t state = seed ^ XXH64(name.data(), name.size(), 0);
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  const bool vector = shape.size() <= 1;
  const float amplitude =
      vector ? 0.1f : 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(shape.back(), 1)));
  for (int64_t i = 0; i < count; ++i) {
    const float u = static_cast<float>(splitmix64(state) >> 40) * (1.0f / 16777216.0f);
    const float v = (vector ? 1.0f : 0.0f) + amplitude * (2.0f * u - 1.0f);
    switch (type) {
      case WeightType::kF32: static_cast<float*>(out)[i] = v; break;
      case WeightType::kF16: static_cast<uint16_t*>(out)[i] = f32ToF16(v); break;
      case WeightType::kBF16: static_cast<uint16_t*>(out)[i] = f32ToBf16(v); break;
    }
  }
}

StatusOr<WeightView> WeightStore::dense(int32_t index) {
  auto it = views_.find(index);
  if (it != views_.end()) return it->second;
  if (index < 0 || static_cast<size_t>(index) >= artifact_.numTensors())
    return invalidArgument("weight index " + std::to_string(index) + " is out of range");
  const schema::TensorDef& def = artifact_.tensor(index);
  WeightView view;
  view.name = def.name()->str();
  if (def.quant() && def.quant()->kind() != schema::QuantKind::None)
    return unimplemented("tensor '" + view.name + "': quantized weights (" +
                         schema::EnumNameQuantKind(def.quant()->kind()) +
                         ") are not supported by the CPU backend yet");
  switch (def.dtype()) {
    case schema::DType::F32: view.type = WeightType::kF32; break;
    case schema::DType::F16: view.type = WeightType::kF16; break;
    case schema::DType::BF16: view.type = WeightType::kBF16; break;
    default:
      return unimplemented("tensor '" + view.name + "': dtype " +
                           schema::EnumNameDType(def.dtype()) +
                           " is not supported by the CPU backend yet");
  }
  if (def.shape()) view.shape.assign(def.shape()->begin(), def.shape()->end());
  for (int64_t d : view.shape)
    if (d <= 0) return invalidArgument("tensor '" + view.name + "' has an empty dimension");
  if (artifact_.hasBlob()) {
    ByteSpan span = artifact_.tensorBytes(index);
    if (static_cast<int64_t>(span.size) != view.bytes())
      return dataLoss("tensor '" + view.name + "' holds " + std::to_string(span.size) +
                      " bytes, its shape needs " + std::to_string(view.bytes()));
    view.data = span.data;
  } else {
    std::unique_ptr<uint8_t[]> bytes(new uint8_t[view.bytes()]);
    fillDummyWeight(artifact_.manifest().dummy_seed(), view.name, view.shape, view.type,
                    bytes.get());
    view.data = bytes.get();
    dummy_storage_.push_back(std::move(bytes));
  }
  dense_bytes_ += view.bytes();
  views_.emplace(index, view);
  return view;
}

StatusOr<const float*> WeightStore::asF32(int32_t index) {
  auto it = f32_copies_.find(index);
  if (it != f32_copies_.end()) return static_cast<const float*>(it->second.data());
  INGOT_ASSIGN_OR_RETURN(WeightView view, dense(index));
  std::vector<float> values(view.elements());
  for (int64_t i = 0; i < view.elements(); ++i) {
    switch (view.type) {
      case WeightType::kF32: values[i] = static_cast<const float*>(view.data)[i]; break;
      case WeightType::kF16: values[i] = f16ToF32(static_cast<const uint16_t*>(view.data)[i]); break;
      case WeightType::kBF16: values[i] = bf16ToF32(static_cast<const uint16_t*>(view.data)[i]); break;
    }
  }
  auto [pos, inserted] = f32_copies_.emplace(index, std::move(values));
  (void)inserted;
  return static_cast<const float*>(pos->second.data());
}

}  // namespace ingot
