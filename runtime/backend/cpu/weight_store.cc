// WeightStore: zero-copy tensor views into the artifact mapping, or seeded dummy weights.
#include "runtime/backend/cpu/weight_store.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "core/artifact/dtype_info.h"
#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cpu/quant_linear_layout.h"

namespace ingot {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// u in [0, 1) from the next output of a splitmix64 stream (the top 24 bits).
float nextUnit(uint64_t& state) {
  return static_cast<float>(splitmix64(state) >> 40) * (1.0f / 16777216.0f);
}

uint64_t streamFor(uint64_t seed, const std::string& name) {
  return seed ^ XXH64(name.data(), name.size(), 0);
}

void putGroupValue(std::vector<uint8_t>& out, GroupScaleType type, int64_t i, float v) {
  if (type == GroupScaleType::kF32) {
    std::memcpy(&out[4 * i], &v, 4);
    return;
  }
  const uint16_t h = type == GroupScaleType::kF16 ? f32ToF16(v) : f32ToBf16(v);
  std::memcpy(&out[2 * i], &h, 2);
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<int64_t> shapeOf(const schema::TensorDef& def) {
  std::vector<int64_t> shape;
  if (def.shape()) shape.assign(def.shape()->begin(), def.shape()->end());
  return shape;
}

/// Per-format facts of a quantization kind: the code dtype and, for block formats, the
/// fixed block and scale dtype.
struct KindInfo {
  const char* name;
  schema::DType codes;
  int64_t block;  // 0: per-channel/per-tensor; -1: from the scheme (int4)
  schema::DType scales;
};

}  // namespace

void fillDummyQuantized(uint64_t seed, const QuantMatrix& m, const std::string& name,
                        const std::string& scale_name, const std::string& zero_name,
                        DummyQuantParts* out) {
  const float a = 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(m.K, 1)));
  const int64_t count = m.N * m.K, groups = m.groups();
  uint64_t state = streamFor(seed, name);
  out->codes.assign(m.N * m.rowBytes(), 0);
  for (int64_t i = 0; i < count; ++i) {
    const float u = nextUnit(state);
    uint8_t code = 0;
    switch (m.format) {
      case QuantFormat::kInt4Min:
      case QuantFormat::kInt4Zero: code = static_cast<uint8_t>(std::min(15.0f, 16.0f * u)); break;
      case QuantFormat::kFp8: code = f32ToE4m3fn(448.0f * (2.0f * u - 1.0f)); break;
      case QuantFormat::kNvfp4:
      case QuantFormat::kMxfp4: code = f32ToE2m1(6.0f * (2.0f * u - 1.0f)); break;
    }
    if (m.format == QuantFormat::kFp8) out->codes[i] = code;
    else out->codes[i / 2] |= static_cast<uint8_t>((i & 1) ? code << 4 : code);
  }
  uint64_t scaleState = streamFor(seed, scale_name), zeroState = streamFor(seed, zero_name);
  switch (m.format) {
    case QuantFormat::kInt4Min:
    case QuantFormat::kInt4Zero: {
      const int64_t bytes = m.scale_type == GroupScaleType::kF32 ? 4 : 2;
      out->scales.assign(m.N * groups * bytes, 0);
      out->zeros.assign(m.N * groups * bytes, 0);
      for (int64_t i = 0; i < m.N * groups; ++i) {
        putGroupValue(out->scales, m.scale_type, i,
                      2.0f / 15.0f * a * (0.75f + 0.5f * nextUnit(scaleState)));
        const float u = nextUnit(zeroState);
        putGroupValue(out->zeros, m.scale_type, i,
                      m.format == QuantFormat::kInt4Min ? -a * (0.75f + 0.5f * u) : 7.0f + u);
      }
      break;
    }
    case QuantFormat::kFp8:  // both per-channel scales and the per-tensor one
      out->scale = a / 448.0f;
      out->scales.assign(m.N * 4, 0);
      for (int64_t n = 0; n < m.N; ++n) {
        const float v = a / 448.0f * (0.75f + 0.5f * nextUnit(scaleState));
        std::memcpy(&out->scales[4 * n], &v, 4);
      }
      break;
    case QuantFormat::kNvfp4:
      out->scales.resize(m.N * groups);
      for (uint8_t& b : out->scales) b = f32ToE4m3fn(0.75f + 0.5f * nextUnit(scaleState));
      out->scale = a / 6.0f;
      break;
    case QuantFormat::kMxfp4:
      out->scales.assign(m.N * groups,
                         static_cast<uint8_t>(127 + std::lround(std::log2(a / 6.0f))));
      break;
  }
}

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
  // splitmix64 is counter-based (output i comes from state + (i + 1) * gamma), so a large
  // tensor fills in parallel chunks with the same values as one sequential pass.
  auto fill = [&](int64_t i0, int64_t i1) {
    uint64_t chunk = state + static_cast<uint64_t>(i0) * 0x9e3779b97f4a7c15ull;
    for (int64_t i = i0; i < i1; ++i) {
      const float u = static_cast<float>(splitmix64(chunk) >> 40) * (1.0f / 16777216.0f);
      const float v = (vector ? 1.0f : 0.0f) + amplitude * (2.0f * u - 1.0f);
      switch (type) {
        case WeightType::kF32: static_cast<float*>(out)[i] = v; break;
        case WeightType::kF16: static_cast<uint16_t*>(out)[i] = f32ToF16(v); break;
        case WeightType::kBF16: static_cast<uint16_t*>(out)[i] = f32ToBf16(v); break;
      }
    }
  };
  const int64_t workers =
      std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), count >> 22);
  if (workers <= 1) {
    fill(0, count);
    return;
  }
  std::vector<std::thread> threads;
  for (int64_t w = 1; w < workers; ++w)
    threads.emplace_back(fill, count * w / workers, count * (w + 1) / workers);
  fill(0, count / workers);
  for (std::thread& t : threads) t.join();
}

Status WeightStore::checkRank(int32_t index) const {
  const schema::TensorDef& def = artifact_.tensor(index);
  if (def.tp_rank() < 0 || def.tp_rank() == tp_rank_) return okStatus();
  return invalidArgument("tensor '" + def.name()->str() + "' is tensor-parallel rank " +
                         std::to_string(def.tp_rank()) + "'s shard, not this rank's (" +
                         (tp_rank_ < 0 ? std::string("unsharded") : std::to_string(tp_rank_)) +
                         ")");
}

StatusOr<WeightView> WeightStore::dense(int32_t index) {
  auto it = views_.find(index);
  if (it != views_.end()) return it->second;
  if (index < 0 || static_cast<size_t>(index) >= artifact_.numTensors())
    return invalidArgument("weight index " + std::to_string(index) + " is out of range");
  INGOT_RETURN_IF_ERROR(checkRank(index));
  const schema::TensorDef& def = artifact_.tensor(index);
  WeightView view;
  view.name = def.name()->str();
  if (def.quant() && def.quant()->kind() != schema::QuantKind::None)
    return unimplemented("tensor '" + view.name + "' is quantized (" +
                         schema::EnumNameQuantKind(def.quant()->kind()) +
                         "): the CPU backend reads quantized weights only in linear layers");
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

bool WeightStore::isQuantized(int32_t index) const {
  if (index < 0 || static_cast<size_t>(index) >= artifact_.numTensors()) return false;
  const schema::QuantSchemeDef* q = artifact_.tensor(index).quant();
  return q && q->kind() != schema::QuantKind::None;
}

namespace {

using schema::DType;
using schema::QuantKind;

/// The scheme's kind checked against the codes' dtype, and the matrix's format and block.
StatusOr<KindInfo> quantFormat(const schema::TensorDef& def, QuantMatrix& m,
                               const std::string& what) {
  const schema::QuantSchemeDef& scheme = *def.quant();
  KindInfo kind;
  switch (scheme.kind()) {
    case QuantKind::Int4Group: kind = {"int4 group", DType::U4, -1, DType::Invalid}; break;
    case QuantKind::PerChannel: kind = {"per-channel fp8", DType::F8E4M3FN, 0, DType::F32}; break;
    case QuantKind::PerTensor: kind = {"per-tensor fp8", DType::F8E4M3FN, 0, DType::F32}; break;
    case QuantKind::Nvfp4: kind = {"nvfp4", DType::F4E2M1FN, 16, DType::F8E4M3FN}; break;
    case QuantKind::Mxfp4: kind = {"mxfp4", DType::F4E2M1FN, 32, DType::F8E8M0FNU}; break;
    default:
      return unimplemented(what + ": quantization kind " +
                           schema::EnumNameQuantKind(scheme.kind()) +
                           " is not supported by the CPU backend");
  }
  if (scheme.kind() == QuantKind::Int4Group && def.dtype() == DType::I4)
    return unimplemented(what + ": signed i4 int4 weights are not supported by the CPU backend "
                                "yet (u4 codes with a zero or min are)");
  if (def.dtype() != kind.codes)
    return invalidArgument(what + ": " + kind.name + " weights must be " + dtypeName(kind.codes) +
                           ", got " + dtypeName(def.dtype()));
  switch (scheme.kind()) {
    case QuantKind::Int4Group:
      if (scheme.zero_kind() == schema::ZeroKind::Min) m.format = QuantFormat::kInt4Min;
      else if (scheme.zero_kind() == schema::ZeroKind::Zero) m.format = QuantFormat::kInt4Zero;
      else return invalidArgument(what + ": int4 group quantization needs zero_kind Zero or Min");
      m.block = scheme.block_size();
      // The vector kernels give each lane 8 codes of one group and find a lane's group by
      // a shift: groups are powers of two, 16 and up.
      if (blockShift(m.block) < 4 || m.block > 4096)
        return invalidArgument(what + ": int4 group size " + std::to_string(m.block) +
                               " is not supported (a power of two from 16 to 4096)");
      break;
    case QuantKind::PerChannel:
    case QuantKind::PerTensor:
      m.format = QuantFormat::kFp8;
      m.block = m.K;
      break;
    case QuantKind::Nvfp4:
    case QuantKind::Mxfp4:
      m.format = scheme.kind() == QuantKind::Nvfp4 ? QuantFormat::kNvfp4 : QuantFormat::kMxfp4;
      m.block = kind.block;
      if (scheme.block_size() != 0 && scheme.block_size() != kind.block)
        return invalidArgument(what + ": " + kind.name + " blocks are " +
                               std::to_string(kind.block) + " elements, the scheme says " +
                               std::to_string(scheme.block_size()));
      break;
    default:
      break;
  }
  if (m.K % m.block != 0)
    return invalidArgument(what + ": K = " + std::to_string(m.K) + " is not a multiple of the " +
                           kind.name + " block size " + std::to_string(m.block));

  return kind;
}

/// The tensors a quantized weight reads besides its codes.
struct QuantParts {
  const schema::TensorDef* scale = nullptr;
  const schema::TensorDef* zero = nullptr;    ///< int4: zeros or mins
  const schema::TensorDef* global = nullptr;  ///< nvfp4: the tensor scale
};

/// The scale tensors the scheme names, each checked for dtype and shape; sets the int4
/// scale type.
StatusOr<QuantParts> quantParts(const Artifact& artifact, const schema::QuantSchemeDef& scheme,
                                const KindInfo& kind, QuantMatrix& m, const std::string& what) {
  const int64_t groups = m.groups();
  const bool int4 = scheme.kind() == QuantKind::Int4Group;
  const bool scalarScale = scheme.kind() == QuantKind::PerTensor;
  std::vector<int64_t> scaleShape = {m.N, groups};
  if (scheme.kind() == QuantKind::PerChannel) scaleShape = {m.N};
  auto part = [&](int32_t ref, const char* role,
                  bool wanted) -> StatusOr<const schema::TensorDef*> {
    if (!wanted) {
      if (ref >= 0)
        return invalidArgument(what + ": " + kind.name + " quantization takes no " + role +
                               " tensor, the scheme names #" + std::to_string(ref));
      return nullptr;
    }
    if (ref < 0 || static_cast<size_t>(ref) >= artifact.numTensors())
      return invalidArgument(what + ": the " + kind.name + " scheme has no " + role + " tensor");
    return &artifact.tensor(ref);
  };
  auto checkShape = [&](const schema::TensorDef& t, const char* role, bool scalar,
                        const std::vector<int64_t>& want) -> Status {
    const std::vector<int64_t> got = shapeOf(t);
    const bool ok = scalar ? (got.empty() || (got.size() == 1 && got[0] == 1)) : got == want;
    if (!ok)
      return invalidArgument(what + ": " + role + " '" + t.name()->str() + "' has shape " +
                             shapeText(got) + ", expected " +
                             (scalar ? std::string("[] or [1]") : shapeText(want)));
    return okStatus();
  };
  auto checkDtype = [&](const schema::TensorDef& t, const char* role, DType want) -> Status {
    if (t.dtype() != want)
      return invalidArgument(what + ": " + role + " '" + t.name()->str() + "' must be " +
                             dtypeName(want) + ", got " + dtypeName(t.dtype()));
    return okStatus();
  };
  INGOT_ASSIGN_OR_RETURN(const schema::TensorDef* scale,
                         part(scheme.scale_tensor(), "scale", true));
  INGOT_ASSIGN_OR_RETURN(const schema::TensorDef* zero,
                         part(scheme.zero_tensor(), "zero/min", int4));
  INGOT_ASSIGN_OR_RETURN(const schema::TensorDef* global,
                         part(scheme.global_scale_tensor(), "global scale",
                              scheme.kind() == QuantKind::Nvfp4));
  if (int4) {
    switch (scale->dtype()) {
      case DType::F16: m.scale_type = GroupScaleType::kF16; break;
      case DType::BF16: m.scale_type = GroupScaleType::kBF16; break;
      case DType::F32: m.scale_type = GroupScaleType::kF32; break;
      default:
        return invalidArgument(what + ": int4 group scale '" + scale->name()->str() +
                               "' must be f16, bf16 or f32, got " + dtypeName(scale->dtype()));
    }
    INGOT_RETURN_IF_ERROR(checkDtype(*zero, "int4 group zero/min", scale->dtype()));
    INGOT_RETURN_IF_ERROR(checkShape(*zero, "int4 group zero/min", false, scaleShape));
  } else {
    INGOT_RETURN_IF_ERROR(checkDtype(*scale, "scale", kind.scales));
  }
  INGOT_RETURN_IF_ERROR(checkShape(*scale, "scale", scalarScale, scaleShape));
  if (global) {
    INGOT_RETURN_IF_ERROR(checkDtype(*global, "global scale", DType::F32));
    INGOT_RETURN_IF_ERROR(checkShape(*global, "global scale", true, {}));
  }
  return QuantParts{scale, zero, global};
}

/// Points `q.matrix` at its codes and scales in the artifact's blob, each checked for size.
Status bindBlobBytes(const Artifact& artifact, int32_t index, const schema::TensorDef& def,
                     const QuantParts& parts, QuantizedWeight& q) {
  const schema::QuantSchemeDef& scheme = *def.quant();
  QuantMatrix& m = q.matrix;
  const schema::TensorDef* zero = parts.zero;
  const schema::TensorDef* global = parts.global;
  auto bytesOf = [&](int32_t ref, const schema::TensorDef& t) -> StatusOr<const uint8_t*> {
    const ByteSpan span = artifact.tensorBytes(ref);
    const std::optional<uint64_t> want = packedByteSize(t.dtype(), shapeOf(t));
    if (!want || span.size != *want)
      return dataLoss("tensor '" + t.name()->str() + "' holds " + std::to_string(span.size) +
                      " bytes, its shape needs " + std::to_string(want.value_or(0)));
    return span.data;
  };
  INGOT_ASSIGN_OR_RETURN(m.codes, bytesOf(index, def));
  INGOT_ASSIGN_OR_RETURN(const uint8_t* scaleBytes, bytesOf(q.scale_tensor, *parts.scale));
  if (scheme.kind() == QuantKind::PerTensor) {
    std::memcpy(&m.global_scale, scaleBytes, 4);
  } else if (scheme.kind() == QuantKind::PerChannel) {
    m.channel_scales = reinterpret_cast<const float*>(scaleBytes);
  } else {
    m.scales = scaleBytes;
  }
  if (zero) {
    INGOT_ASSIGN_OR_RETURN(m.zeros, bytesOf(q.zero_tensor, *zero));
  }
  if (global) {
    INGOT_ASSIGN_OR_RETURN(const uint8_t* g, bytesOf(q.global_scale_tensor, *global));
    std::memcpy(&m.global_scale, g, 4);
  }
  return okStatus();
}

}  // namespace

StatusOr<QuantizedWeight> WeightStore::quantized(int32_t index) {
  auto cached = quantized_.find(index);
  if (cached != quantized_.end()) return cached->second;
  if (!isQuantized(index))
    return invalidArgument("weight index " + std::to_string(index) + " is not a quantized tensor");
  INGOT_RETURN_IF_ERROR(checkRank(index));
  const schema::TensorDef& def = artifact_.tensor(index);
  const schema::QuantSchemeDef& scheme = *def.quant();
  QuantizedWeight q;
  q.name = def.name()->str();
  const std::string what = "tensor '" + q.name + "'";
  const std::vector<int64_t> shape = shapeOf(def);
  if (shape.size() != 2 || shape[0] <= 0 || shape[1] <= 0)
    return invalidArgument(what + ": a quantized weight must be an [N, K] matrix, got " +
                           shapeText(shape));
  QuantMatrix& m = q.matrix;
  m.N = shape[0];
  m.K = shape[1];
  INGOT_ASSIGN_OR_RETURN(const KindInfo kind, quantFormat(def, m, what));
  INGOT_ASSIGN_OR_RETURN(const QuantParts parts, quantParts(artifact_, scheme, kind, m, what));
  const schema::TensorDef* scale = parts.scale;
  const schema::TensorDef* zero = parts.zero;
  q.scale_tensor = scheme.scale_tensor();
  q.zero_tensor = zero ? scheme.zero_tensor() : -1;
  q.global_scale_tensor = parts.global ? scheme.global_scale_tensor() : -1;
  if (artifact_.hasBlob()) {
    INGOT_RETURN_IF_ERROR(bindBlobBytes(artifact_, index, def, parts, q));
  } else {
    auto dummy = std::make_unique<DummyQuantParts>();
    fillDummyQuantized(artifact_.manifest().dummy_seed(), m, q.name, scale->name()->str(),
                       zero ? zero->name()->str() : std::string(), dummy.get());
    m.codes = dummy->codes.data();
    if (scheme.kind() == QuantKind::PerTensor) {
      m.global_scale = dummy->scale;
    } else if (scheme.kind() == QuantKind::PerChannel) {
      m.channel_scales = reinterpret_cast<const float*>(dummy->scales.data());
    } else {
      m.scales = dummy->scales.data();
      if (scheme.kind() == QuantKind::Nvfp4) m.global_scale = dummy->scale;
    }
    if (zero) m.zeros = dummy->zeros.data();
    dummy_quantized_.push_back(std::move(dummy));
  }
  quantized_.emplace(index, q);
  return q;
}

}  // namespace ingot
