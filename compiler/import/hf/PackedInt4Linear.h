//===- PackedInt4Linear.h - GPTQ / AWQ int4 linear layers of a checkpoint -*- C++ -*-===//
//
// Hugging Face checkpoints quantized with GPTQ (AutoGPTQ, GPTQModel, optimum) or AWQ
// (AutoAWQ, GEMM layout) store a linear layer W [N, K] (N outputs, K inputs) as four
// tensors next to where `<prefix>.weight` would be:
//
//   GPTQ  qweight I32 [K/8, N]   8 nibbles along K: input 8r + i in bits 4i..4i+3 of row r
//         qzeros  I32 [G, N/8]   8 nibbles along N: output 8c + i in bits 4i..4i+3
//         scales  F16 [G, N]
//         g_idx   I32 [K]        the group of each input (k / group unless act-order)
//   AWQ   qweight I32 [K, N/8]   8 nibbles along N, interleaved: nibble i holds output
//                                8c + kAwqNibbleOrder[i] (0, 2, 4, 6, 1, 3, 5, 7)
//         qzeros  I32 [G, N/8]   the same interleaving
//         scales  F16 [G, N]
//
// with G = K / group (1 for group_size -1) and w[n, k] = scale[g, n] * (q[k, n] - zero[g, n]),
// g = the group of input k. GPTQ's original ("v1", checkpoint_format "gptq", the default)
// stores zero - 1 in qzeros; "gptq_v2" stores the zero itself; AWQ stores the zero itself.
// This file validates those tensors, unpacks them into [N, K] integers, dequantizes them
// exactly in f32 and re-orders them into the artifact's int4 ZeroKind::Zero layout, bit for
// bit. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/import/ImportedModel.h"
#include "compiler/import/hf/SafetensorsFile.h"
#include "core/base/status.h"

namespace ingot::importer::hf {

/// Which packing a checkpoint uses.
enum class PackedFormat { Gptq, Awq };

/// Bits per weight of the layouts above: the only width this importer reads.
inline constexpr int kPackedBits = 4;
/// Nibbles per packed int32.
inline constexpr int64_t kNibblesPerWord = 8;
/// AWQ GEMM's nibble order: nibble i of a packed word holds output 8c + kAwqNibbleOrder[i]
/// (AutoAWQ packs columns 0, 2, 4, 6, 1, 3, 5, 7 so its GEMM kernel can unpack pairs).
inline constexpr int kAwqNibbleOrder[kNibblesPerWord] = {0, 2, 4, 6, 1, 3, 5, 7};

/// config.json's `quantization_config`, validated.
struct PackedQuantConfig {
  PackedFormat format = PackedFormat::Gptq;
  /// Inputs per group as written (-1: one group over all of K).
  int64_t groupSize = 128;
  /// GPTQ v1: qzeros hold zero - 1 (the decoder adds 1 and keeps 4 bits).
  bool zerosMinusOne = false;
  /// GPTQ `desc_act` (act-order): g_idx may send inputs to groups out of order.
  bool descAct = false;
  /// For messages: "GPTQ" / "AWQ".
  const char *name() const { return format == PackedFormat::Gptq ? "GPTQ" : "AWQ"; }
};

/// Parses the `quantization_config` object of config.json's text; `present` is false when
/// there is none. Refuses, naming the key and value, what cannot be read exactly: a
/// quant_method other than gptq / awq, bits other than 4, AWQ versions other than GEMM,
/// GPTQ checkpoint formats other than gptq / gptq_v2 (marlin, bitblas, ...), group sizes
/// that are not -1 or a positive multiple of 8.
Status parsePackedQuantConfig(const std::string &configText, const std::string &where,
                              bool &present, PackedQuantConfig &config);

/// The tensors of one packed linear layer; `gIdx.tensor` may be null (AWQ, some GPTQ).
struct PackedLinear {
  /// The weight's canonical name, e.g. "model.layers.0.mlp.down_proj.weight".
  std::string name;
  int64_t n = 0, k = 0;
  PackedQuantConfig config;
  struct Part {
    std::shared_ptr<const SafetensorsFile> shard;
    const SafetensorsTensor *tensor = nullptr;
  };
  Part qweight, qzeros, scales, gIdx;
  /// Inputs per group (K for group_size -1).
  int64_t groupSize() const { return config.groupSize < 0 ? k : config.groupSize; }
};

/// Checks each part's presence, dtype and shape against [n, k] and the config; messages
/// name the tensor, what it is and what was expected.
Status validatePackedLinear(const PackedLinear &linear);

/// A packed linear's integers in the dialect's [N, K] order.
struct UnpackedInt4 {
  int64_t n = 0, k = 0, groups = 0;
  /// [n * k] codes 0..15.
  std::vector<uint8_t> q;
  /// [n * groups] zero points 0..15.
  std::vector<uint8_t> zero;
  /// [n * groups] f16 bit patterns, copied.
  std::vector<uint16_t> scale;
  /// [k] the group of each input.
  std::vector<int32_t> groupOf;
};

/// Unpacks GPTQ tensors as stored (little-endian words; `gIdx` null: k / group).
/// Fails on a g_idx entry outside [0, groups).
Status unpackGptq(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales,
                  const int32_t *gIdx, int64_t n, int64_t k, int64_t group, bool zerosMinusOne,
                  UnpackedInt4 &out);

/// Unpacks AWQ GEMM tensors as stored.
void unpackAwq(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales, int64_t n,
               int64_t k, int64_t group, UnpackedInt4 &out);

/// Reads and unpacks a validated linear from its shards (messages name the tensor).
Status unpackPackedLinear(const PackedLinear &linear, UnpackedInt4 &out);

/// w = scale * (q - zero) into `out` [n, k], in f32. Exact: (q - zero) is an integer of
/// magnitude below 16 and an f16 scale has an 11-bit significand, so the product fits f32.
void dequantizeInt4(const UnpackedInt4 &unpacked, float *out);

/// True when input k belongs to group k / groupSize for every k (no act-order shuffle).
bool hasContiguousGroups(const UnpackedInt4 &unpacked, int64_t groupSize);

/// The artifact's int4 ZeroKind::Zero layout of contiguous groups (codes packed two per
/// byte, f16 scales copied, integer zeros as f16). Fails when the groups are not contiguous.
Status toInt4ZeroParts(const UnpackedInt4 &unpacked, int64_t groupSize, Int4ZeroParts &out);

} // namespace ingot::importer::hf
