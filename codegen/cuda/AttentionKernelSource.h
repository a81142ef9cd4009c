//===- AttentionKernelSource.h - CUDA translation units for attention -*- C++ -*-===//
//
// Assembles the NVRTC translation unit of an attention variant: the kernel templates of
// codegen/cuda/kernels/ (embedded in the binary at build time), the variant struct from
// AttentionRegionEmitter, and one `extern "C"` kernel per instantiation, so the runtime
// finds each by a plain name. Plain C++ (no CUDA, no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "core/base/status.h"

namespace ingot::codegen {

/// Element type of q, the KV pool and the output of an attention kernel.
enum class AttentionDtype { kF32, kBF16 };

/// One decode-kernel instantiation: element type, head dim, query heads per kv head, and
/// whether the KV pool holds fp8 E4M3 codes with per-block-head scales (kernels/kv_fp8.cuh)
/// instead of `dtype`.
struct DecodeInstance {
  AttentionDtype dtype = AttentionDtype::kBF16;
  int headDim = 128;
  int group = 1;
  bool kvFp8 = false;
};

/// Threads per CTA of the decode kernel (kernels/paged_decode.cuh, DecodeTile::kThreads)
/// and its key tile (keys_per_split must be a multiple).
constexpr int kDecodeThreads = 128;
constexpr int kDecodeKeyTile = 32;

/// One prefill-kernel instantiation (bf16): head dim (64 or 128), query heads per kv head,
/// and whether the KV pool holds fp8 codes (as DecodeInstance::kvFp8).
struct PrefillInstance {
  int headDim = 128;
  int group = 1;
  bool kvFp8 = false;
};

/// Threads per CTA of the prefill and block-mask kernels, and their tile shape
/// (kernels/paged_prefill.cuh, PrefillTile: the same for head dims 64 and 128).
constexpr int kPrefillThreads = 128;
constexpr int kPrefillRowTile = 64;
constexpr int kPrefillKeyTile = 64;

/// "ingot_decode_<variant>_<dtype>_d<D>_g<G>", the kernel's symbol; with an fp8 KV pool
/// "ingot_decode_<variant>_<dtype>_kvfp8_d<D>_g<G>".
std::string decodeKernelName(const std::string &variant, const DecodeInstance &instance);
/// "ingot_decode_combine_<dtype>_d<D>": merges the splits (one CTA per (token, head), D
/// threads).
std::string combineKernelName(AttentionDtype dtype, int headDim);
/// "ingot_prefill_<variant>_bf16_d<D>_g<G>" (fp8 pool: "..._bf16_kvfp8_d<D>_g<G>"): grid
/// (row tiles, kv heads, requests).
std::string prefillKernelName(const std::string &variant, const PrefillInstance &instance);
/// "ingot_block_mask_<variant>_d<D>_g<G>": grid (row tiles, key tiles, requests x kv heads);
/// fills PagedAttentionParams::block_classes for the prefill kernel (it reads no KV, so one
/// serves both pool types).
std::string blockMaskKernelName(const std::string &variant, const PrefillInstance &instance);

/// The translation unit for `variantName` (a struct in `variantText`, e.g. the output of
/// emitAttentionVariantHeader) with a decode kernel per decode instance plus a combine
/// kernel per (dtype, head dim), and a prefill and a block-mask kernel per prefill instance.
/// Fails on an unsupported head dim (decode: 32, 64, 128, 256; prefill: 64, 128) or group
/// (1..16; 1..8 at head dim 256) and when there is no instance at all.
StatusOr<std::string> attentionKernelSource(const std::string &variantText,
                                            const std::string &variantName,
                                            const std::vector<DecodeInstance> &decode,
                                            const std::vector<PrefillInstance> &prefill = {});

/// The kernels attentionKernelSource instantiates.
enum class AttentionKernelKind { kDecode, kCombine, kPrefill, kBlockMask };

/// A translation unit holding exactly one kernel: `kind` for (dtype, headDim, group) of the
/// variant `variantName` (named as above). One kernel per unit gives one kernel per binary,
/// so an artifact's KernelDef carries only its own code, and a unit is cached on its own
/// (the combine unit does not contain the variant, so every variant shares it). Prefill and
/// block mask take bf16 only; the combine and block-mask kernels ignore `kvFp8` (f32
/// partials, no KV read) and the combine kernel `group`. Same checks as
/// attentionKernelSource.
StatusOr<std::string> attentionKernelUnit(const std::string &variantText,
                                          const std::string &variantName,
                                          AttentionKernelKind kind, AttentionDtype dtype,
                                          int headDim, int group, bool kvFp8 = false);

/// The embedded text of one kernel header ("codegen/cuda/kernels/paged_decode.cuh"), or
/// an empty string when there is none.
const std::string &embeddedKernelHeader(const std::string &path);

/// The header's text as a translation unit inlines it: a "// ---- <path>" marker and a
/// `#line 1 "<path>"` directive, then its lines with `#pragma once` and the includes of
/// other kernel headers blanked (the unit inlines those itself, in dependency order), so
/// NVRTC's messages and the SIMT emulator's diagnostics name the header and its own lines.
std::string inlinedKernelHeader(const std::string &path);

/// The marker and `#line` directive that start a unit's generated part (`what`, e.g.
/// "entry points"), after its inlined headers.
std::string generatedSection(const std::string &what);

} // namespace ingot::codegen
