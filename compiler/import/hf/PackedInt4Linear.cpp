//===- PackedInt4Linear.cpp - GPTQ / AWQ int4 linear layers of a checkpoint ---===//
#include "compiler/import/hf/PackedInt4Linear.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <nlohmann/json.hpp>

namespace ingot::importer::hf {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// Nibble `i` (0..7) of a packed word.
inline uint8_t nibble(int32_t word, int i) {
  return static_cast<uint8_t>((static_cast<uint32_t>(word) >> (4 * i)) & 0xF);
}

/// Copies a tensor's bytes into an aligned vector (the mapping's offsets need not be).
template <typename T> std::vector<T> copyOut(const PackedLinear::Part &part) {
  std::vector<T> values(static_cast<size_t>(part.tensor->size / sizeof(T)));
  std::memcpy(values.data(), part.shard->bytes(*part.tensor), part.tensor->size);
  part.shard->releaseTensorPages(*part.tensor);
  return values;
}

Status parseUnchecked(const std::string &text, const std::string &where, bool &present,
                      PackedQuantConfig &config) {
  json c = json::parse(text, nullptr, /*allow_exceptions=*/false);
  present = false;
  if (c.is_discarded() || !c.is_object())
    return invalidArgument(where + ": not a JSON object");
  auto q = c.find("quantization_config");
  if (q == c.end() || q->is_null())
    return okStatus();
  if (!q->is_object())
    return invalidArgument(where + ": 'quantization_config' is not an object");
  const std::string at = where + ": quantization_config";
  std::string method = lower(q->value("quant_method", std::string()));
  if (method == "gptq")
    config.format = PackedFormat::Gptq;
  else if (method == "awq")
    config.format = PackedFormat::Awq;
  else
    return invalidArgument(at + ": quant_method '" + method +
                           "' is not supported (gptq and awq with 4 bits are)");
  // AutoAWQ's own quant_config.json spells bits and group size w_bit / q_group_size.
  int64_t bits = q->value("bits", q->value("w_bit", int64_t(0)));
  if (bits != kPackedBits)
    return invalidArgument(at + ": " + config.name() + " with bits " + std::to_string(bits) +
                           " is not supported (only 4-bit weights are imported)");
  config.groupSize = q->value("group_size", q->value("q_group_size", int64_t(128)));
  if (config.groupSize != -1 &&
      (config.groupSize <= 0 || config.groupSize % kNibblesPerWord != 0))
    return invalidArgument(at + ": group_size " + std::to_string(config.groupSize) +
                           " is not -1 or a positive multiple of 8");
  if (config.format == PackedFormat::Gptq) {
    std::string format = lower(q->value("checkpoint_format", std::string("gptq")));
    if (format == "gptq")
      config.zerosMinusOne = true;
    else if (format == "gptq_v2")
      config.zerosMinusOne = false;
    else
      return invalidArgument(at + ": GPTQ checkpoint_format '" + format +
                             "' is not supported (gptq and gptq_v2 are; marlin, bitblas and "
                             "other kernel-specific layouts are not)");
    config.descAct = q->value("desc_act", false);
  } else {
    std::string version = lower(q->value("version", std::string("gemm")));
    if (version != "gemm")
      return invalidArgument(at + ": AWQ version '" + version +
                             "' is not supported (only the GEMM layout is; GEMV, Marlin, "
                             "ExLlama and IPEX layouts are not)");
    if (!q->value("zero_point", true))
      return invalidArgument(at + ": AWQ without zero points (zero_point false) is not "
                                  "supported");
  }
  present = true;
  return okStatus();
}

} // namespace

Status parsePackedQuantConfig(const std::string &configText, const std::string &where,
                              bool &present, PackedQuantConfig &config) {
  try {
    return parseUnchecked(configText, where, present, config);
  } catch (const json::exception &e) {
    return invalidArgument(where + ": quantization_config: " + e.what());
  }
}

Status validatePackedLinear(const PackedLinear &linear) {
  const int64_t n = linear.n, k = linear.k;
  const bool gptq = linear.config.format == PackedFormat::Gptq;
  const std::string what = std::string(linear.config.name()) + " layer '" + linear.name + "'";
  if (n % kNibblesPerWord != 0 || k % kNibblesPerWord != 0)
    return invalidArgument(what + ": its shape [" + std::to_string(n) + ", " +
                           std::to_string(k) + "] is not a multiple of 8 in both dimensions");
  const int64_t group = linear.groupSize();
  if (k % group != 0)
    return invalidArgument(what + ": " + std::to_string(k) +
                           " inputs are not a multiple of the group size " +
                           std::to_string(group));
  const int64_t groups = k / group;
  const std::string prefix = linear.name.substr(0, linear.name.size() - 7); // minus ".weight"
  auto check = [&](const PackedLinear::Part &part, const char *suffix, SafetensorsDtype dtype,
                   std::vector<int64_t> shape) -> Status {
    if (!part.tensor)
      return invalidArgument(what + ": tensor '" + prefix + suffix + "' is missing");
    if (part.tensor->dtype != dtype)
      return invalidArgument(what + ": tensor '" + part.tensor->name + "' has dtype " +
                             safetensorsDtypeName(part.tensor->dtype) + ", expected " +
                             safetensorsDtypeName(dtype));
    if (part.tensor->shape != shape)
      return invalidArgument(what + ": tensor '" + part.tensor->name + "' has shape " +
                             shapeText(part.tensor->shape) + ", expected " + shapeText(shape) +
                             " for a [" + std::to_string(n) + ", " + std::to_string(k) +
                             "] weight with group size " + std::to_string(group));
    return okStatus();
  };
  INGOT_RETURN_IF_ERROR(check(linear.qweight, ".qweight", SafetensorsDtype::I32,
                              gptq ? std::vector<int64_t>{k / kNibblesPerWord, n}
                                   : std::vector<int64_t>{k, n / kNibblesPerWord}));
  INGOT_RETURN_IF_ERROR(
      check(linear.qzeros, ".qzeros", SafetensorsDtype::I32, {groups, n / kNibblesPerWord}));
  INGOT_RETURN_IF_ERROR(check(linear.scales, ".scales", SafetensorsDtype::F16, {groups, n}));
  if (linear.gIdx.tensor) {
    if (!gptq)
      return invalidArgument(what + ": tensor '" + linear.gIdx.tensor->name +
                             "' (g_idx) does not belong to the AWQ layout");
    INGOT_RETURN_IF_ERROR(check(linear.gIdx, ".g_idx", SafetensorsDtype::I32, {k}));
  }
  return okStatus();
}

Status unpackGptq(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales,
                  const int32_t *gIdx, int64_t n, int64_t k, int64_t group, bool zerosMinusOne,
                  UnpackedInt4 &out) {
  const int64_t groups = k / group;
  out.n = n, out.k = k, out.groups = groups;
  out.q.assign(static_cast<size_t>(n * k), 0);
  out.zero.assign(static_cast<size_t>(n * groups), 0);
  out.scale.assign(static_cast<size_t>(n * groups), 0);
  out.groupOf.resize(static_cast<size_t>(k));
  for (int64_t kk = 0; kk < k; ++kk) {
    const int32_t g = gIdx ? gIdx[kk] : static_cast<int32_t>(kk / group);
    if (g < 0 || g >= groups)
      return invalidArgument("g_idx[" + std::to_string(kk) + "] = " + std::to_string(g) +
                             " is not a group in [0, " + std::to_string(groups) + ")");
    out.groupOf[static_cast<size_t>(kk)] = g;
  }
  // qweight [K/8, N]: row r holds inputs 8r..8r+7 of every output.
  for (int64_t r = 0; r < k / kNibblesPerWord; ++r)
    for (int64_t col = 0; col < n; ++col) {
      const int32_t word = qweight[r * n + col];
      for (int i = 0; i < kNibblesPerWord; ++i)
        out.q[static_cast<size_t>(col * k + r * kNibblesPerWord + i)] = nibble(word, i);
    }
  // qzeros [G, N/8] along N; v1 stores zero - 1 (a zero of 0 wraps to 15 and back).
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < n / kNibblesPerWord; ++c) {
      const int32_t word = qzeros[g * (n / kNibblesPerWord) + c];
      for (int i = 0; i < kNibblesPerWord; ++i) {
        uint8_t z = nibble(word, i);
        if (zerosMinusOne)
          z = static_cast<uint8_t>((z + 1) & 0xF);
        out.zero[static_cast<size_t>((c * kNibblesPerWord + i) * groups + g)] = z;
      }
    }
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t col = 0; col < n; ++col)
      out.scale[static_cast<size_t>(col * groups + g)] = scales[g * n + col];
  return okStatus();
}

void unpackAwq(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales, int64_t n,
               int64_t k, int64_t group, UnpackedInt4 &out) {
  const int64_t groups = k / group, words = n / kNibblesPerWord;
  out.n = n, out.k = k, out.groups = groups;
  out.q.assign(static_cast<size_t>(n * k), 0);
  out.zero.assign(static_cast<size_t>(n * groups), 0);
  out.scale.assign(static_cast<size_t>(n * groups), 0);
  out.groupOf.resize(static_cast<size_t>(k));
  for (int64_t kk = 0; kk < k; ++kk)
    out.groupOf[static_cast<size_t>(kk)] = static_cast<int32_t>(kk / group);
  // qweight [K, N/8]: word c of row kk holds outputs 8c..8c+7 in the interleaved order.
  // Word column by word column, so the eight output rows it fills are written in order.
  for (int64_t c = 0; c < words; ++c) {
    uint8_t *rows[kNibblesPerWord];
    for (int i = 0; i < kNibblesPerWord; ++i)
      rows[i] = out.q.data() + (c * kNibblesPerWord + kAwqNibbleOrder[i]) * k;
    for (int64_t kk = 0; kk < k; ++kk) {
      const int32_t word = qweight[kk * words + c];
      for (int i = 0; i < kNibblesPerWord; ++i)
        rows[i][kk] = nibble(word, i);
    }
  }
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < words; ++c) {
      const int32_t word = qzeros[g * words + c];
      for (int i = 0; i < kNibblesPerWord; ++i)
        out.zero[static_cast<size_t>((c * kNibblesPerWord + kAwqNibbleOrder[i]) * groups + g)] =
            nibble(word, i);
    }
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t col = 0; col < n; ++col)
      out.scale[static_cast<size_t>(col * groups + g)] = scales[g * n + col];
}

Status unpackPackedLinear(const PackedLinear &linear, UnpackedInt4 &out) {
  INGOT_RETURN_IF_ERROR(validatePackedLinear(linear));
  std::vector<int32_t> qweight = copyOut<int32_t>(linear.qweight);
  std::vector<int32_t> qzeros = copyOut<int32_t>(linear.qzeros);
  std::vector<uint16_t> scales = copyOut<uint16_t>(linear.scales);
  if (linear.config.format == PackedFormat::Awq) {
    unpackAwq(qweight.data(), qzeros.data(), scales.data(), linear.n, linear.k,
              linear.groupSize(), out);
    return okStatus();
  }
  std::vector<int32_t> gIdx;
  if (linear.gIdx.tensor)
    gIdx = copyOut<int32_t>(linear.gIdx);
  Status status = unpackGptq(qweight.data(), qzeros.data(), scales.data(),
                             gIdx.empty() ? nullptr : gIdx.data(), linear.n, linear.k,
                             linear.groupSize(), linear.config.zerosMinusOne, out);
  if (!status.ok())
    return status.withPrefix("tensor '" +
                             (linear.gIdx.tensor ? linear.gIdx.tensor->name : linear.name) + "'");
  return okStatus();
}

namespace {
float f16ToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff, bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {
    float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f); // 2^-24 steps
    return sign ? -magnitude : magnitude;
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
} // namespace

void dequantizeInt4(const UnpackedInt4 &u, float *out) {
  std::vector<float> scale(static_cast<size_t>(u.groups));
  std::vector<int> zero(static_cast<size_t>(u.groups));
  for (int64_t row = 0; row < u.n; ++row) {
    for (int64_t g = 0; g < u.groups; ++g) {
      scale[static_cast<size_t>(g)] = f16ToFloat(u.scale[static_cast<size_t>(row * u.groups + g)]);
      zero[static_cast<size_t>(g)] = u.zero[static_cast<size_t>(row * u.groups + g)];
    }
    const uint8_t *q = u.q.data() + row * u.k;
    float *w = out + row * u.k;
    for (int64_t kk = 0; kk < u.k; ++kk) {
      const size_t g = static_cast<size_t>(u.groupOf[static_cast<size_t>(kk)]);
      w[kk] = scale[g] * static_cast<float>(int(q[kk]) - zero[g]);
    }
  }
}

bool hasContiguousGroups(const UnpackedInt4 &u, int64_t groupSize) {
  for (int64_t kk = 0; kk < u.k; ++kk)
    if (u.groupOf[static_cast<size_t>(kk)] != kk / groupSize)
      return false;
  return true;
}

Status toInt4ZeroParts(const UnpackedInt4 &u, int64_t groupSize, Int4ZeroParts &out) {
  if (!hasContiguousGroups(u, groupSize))
    return invalidArgument("its groups are not contiguous runs of " +
                           std::to_string(groupSize) + " inputs");
  out.weight.assign(static_cast<size_t>((u.n * u.k + 1) / 2), 0);
  for (size_t i = 0; i < u.q.size(); ++i)
    out.weight[i / 2] |= static_cast<uint8_t>(u.q[i] << (4 * (i % 2)));
  out.scale.resize(u.scale.size() * 2);
  out.zero.resize(u.zero.size() * 2);
  // An integer 0..15 in f16: exponent 15 + e, the bits below the leading one shifted up.
  for (size_t i = 0; i < u.scale.size(); ++i) {
    out.scale[2 * i] = static_cast<uint8_t>(u.scale[i] & 0xFF);
    out.scale[2 * i + 1] = static_cast<uint8_t>(u.scale[i] >> 8);
    uint16_t bits = 0;
    if (uint32_t z = u.zero[i]) {
      int e = 31 - __builtin_clz(z);
      bits = static_cast<uint16_t>(((15 + e) << 10) | ((z << (10 - e)) & 0x3FF));
    }
    out.zero[2 * i] = static_cast<uint8_t>(bits & 0xFF);
    out.zero[2 * i + 1] = static_cast<uint8_t>(bits >> 8);
  }
  return okStatus();
}

} // namespace ingot::importer::hf
