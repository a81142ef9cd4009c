//===- AttentionKernelPlan.h - the CUDA kernels one attention shape needs -*- C++ -*-===//
//
// Which kernels an artifact ships for the attention steps of one variant and shape, with
// their launch metadata and translation units: what `ingot compile` hands to NVRTC. Plain
// C++ (no CUDA, no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/cuda/AttentionKernelSource.h"
#include "core/base/status.h"

namespace ingot::codegen {

/// The shape of an attention step that selects its kernels: element type of q, the KV pool
/// and the output (the kernels take one type for all three), head dim, and query heads per
/// kv head.
struct AttentionShape {
  AttentionDtype dtype = AttentionDtype::kBF16;
  int headDim = 128;
  int group = 1;
  /// The KV pool holds fp8 E4M3 codes with per-block-head scales (`--kv-dtype fp8`).
  bool kvFp8 = false;
};

/// One kernel to compile: its symbol (extern "C", also the KernelDef name), launch shape
/// (threads per block; all shared memory is static, so the dynamic amount is 0), and its
/// own translation unit (AttentionKernelSource::attentionKernelUnit).
struct AttentionKernelUnit {
  std::string name;
  AttentionKernelKind kind = AttentionKernelKind::kDecode;
  std::array<uint32_t, 3> blockDim = {1, 1, 1};
  uint32_t dynamicSharedBytes = 0;
  std::string source;
};

/// Why the kernels cannot take `shape` ("the kernels take ..."), or "" when they can: head
/// dim 32, 64 or 128 with 1..16 query heads per kv head, or 256 with 1..8 (f32 and bf16
/// both; at 256 the decode kernel also serves prefill).
std::string unsupportedAttentionShape(const AttentionShape &shape);

/// The kernels of variant `variantName` (a C identifier; its struct is emitted from the mask
/// and score bytecode, both may be empty) for `shape`: the split-KV decode kernel and its
/// combine kernel always (the decode kernel takes any number of new tokens per request, so
/// it also serves prefill), and for bf16 with head dim 64 or 128 the tensor-core prefill
/// (reading an fp8 pool where shape.kvFp8) and its block-mask kernel (the same for both
/// pool types). Fails on an unsupported shape or bytecode the emitter refuses.
StatusOr<std::vector<AttentionKernelUnit>>
attentionKernelUnits(const std::string &variantName, const std::vector<uint8_t> &maskBytecode,
                     const std::vector<uint8_t> &scoreBytecode, const AttentionShape &shape);

} // namespace ingot::codegen
