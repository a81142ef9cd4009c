// Builds the generated paged attention kernels for this GPU with NVRTC and launches them
// through the driver API; shared by the GPU tests and the GPU benchmarks (bench/gpu).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "codegen/cuda/AttentionKernelSource.h"
#include "codegen/cuda/NvrtcCompiler.h"
#include "core/kernels/attention_params.h"
#include "core/kernels/region_operands.h"
#include "runtime/backend/cuda/cuda_driver.h"
#include "test/gpu/kernel_target.h"

namespace ingot {

/// Grid and block shape of one kernel launch.
struct LaunchGeometry {
  unsigned gx = 1, gy = 1, gz = 1, threads = 1;
};

/// Decode: one CTA per (kv head, request, split).
inline LaunchGeometry decodeGeometry(const attn::PagedAttentionParams &p) {
  return {static_cast<unsigned>(p.num_kv_heads), static_cast<unsigned>(p.num_requests),
          static_cast<unsigned>(p.num_splits), static_cast<unsigned>(codegen::kDecodeThreads)};
}
/// Split combine: one CTA per (token, head), a thread per output column.
inline LaunchGeometry combineGeometry(const attn::PagedAttentionParams &p, int headDim) {
  return {static_cast<unsigned>(p.num_tokens), static_cast<unsigned>(p.num_heads), 1u,
          static_cast<unsigned>(headDim)};
}
/// Prefill: one CTA per (row tile, kv head, request).
inline LaunchGeometry prefillGeometry(const attn::PagedAttentionParams &p) {
  return {static_cast<unsigned>(p.q_tiles), static_cast<unsigned>(p.num_kv_heads),
          static_cast<unsigned>(p.num_requests), static_cast<unsigned>(codegen::kPrefillThreads)};
}
/// Block mask: one CTA per (row tile, key tile, request x kv head).
inline LaunchGeometry blockMaskGeometry(const attn::PagedAttentionParams &p) {
  return {static_cast<unsigned>(p.q_tiles), static_cast<unsigned>(p.k_tiles),
          static_cast<unsigned>(p.num_requests * p.num_kv_heads),
          static_cast<unsigned>(codegen::kPrefillThreads)};
}

/// Sets p.q_tiles / p.k_tiles for a step whose longest request has `maxNewTokens` new
/// tokens (each `group` query rows) and `maxLen` KV slots: the extents of the block mask.
inline void setPrefillTiles(attn::PagedAttentionParams &p, int maxNewTokens, int group,
                            int maxLen) {
  const int rows = std::max(maxNewTokens * group, 1);
  p.q_tiles = (rows + codegen::kPrefillRowTile - 1) / codegen::kPrefillRowTile;
  p.k_tiles = (std::max(maxLen, 1) + codegen::kPrefillKeyTile - 1) / codegen::kPrefillKeyTile;
}

/// Launches kernel `name` of `module` with `args` (pointers to the parameters) on `stream`.
inline Status launchKernel(CudaDriver &cu, CUmodule module, const std::string &name,
                           const LaunchGeometry &g, void **args, CUstream stream = nullptr) {
  CUfunction fn = nullptr;
  INGOT_RETURN_IF_ERROR(
      cu.check("cuModuleGetFunction", cu.moduleGetFunction(&fn, module, name.c_str()))
          .withPrefix(name));
  return cu
      .check("cuLaunchKernel",
             cu.launchKernel(fn, g.gx, g.gy, g.gz, g.threads, 1, 1, 0, stream, args, nullptr))
      .withPrefix(name);
}

/// Decode attention of `variant` instance `in`: the split kernel, then the combine kernel
/// when p.num_splits > 1 (p's partial_* buffers must then hold num_splits partials).
inline Status launchDecode(CudaDriver &cu, CUmodule module, const std::string &variant,
                           const codegen::DecodeInstance &in, attn::PagedAttentionParams &p,
                           rgn::RegionOperands &ops, CUstream stream = nullptr) {
  void *args[] = {&p, &ops};
  INGOT_RETURN_IF_ERROR(launchKernel(cu, module, codegen::decodeKernelName(variant, in),
                                     decodeGeometry(p), args, stream));
  if (p.num_splits <= 1) return okStatus();
  void *cargs[] = {&p};
  return launchKernel(cu, module, codegen::combineKernelName(in.dtype, in.headDim),
                      combineGeometry(p, in.headDim), cargs, stream);
}

/// The block-mask kernel of `variant` instance `in`: fills p.block_classes (non-null) for
/// p.q_tiles x p.k_tiles tiles; computed once per step and read by every layer's prefill.
inline Status launchBlockMask(CudaDriver &cu, CUmodule module, const std::string &variant,
                              const codegen::PrefillInstance &in, attn::PagedAttentionParams &p,
                              rgn::RegionOperands &ops, CUstream stream = nullptr) {
  if (p.block_classes == nullptr) return invalidArgument("block mask: block_classes is null");
  void *args[] = {&p, &ops};
  return launchKernel(cu, module, codegen::blockMaskKernelName(variant, in), blockMaskGeometry(p),
                      args, stream);
}

/// Prefill attention of `variant` instance `in` (bf16), reading p.block_classes when set.
inline Status launchPrefill(CudaDriver &cu, CUmodule module, const std::string &variant,
                            const codegen::PrefillInstance &in, attn::PagedAttentionParams &p,
                            rgn::RegionOperands &ops, CUstream stream = nullptr) {
  void *args[] = {&p, &ops};
  return launchKernel(cu, module, codegen::prefillKernelName(variant, in), prefillGeometry(p), args,
                      stream);
}

}  // namespace ingot
