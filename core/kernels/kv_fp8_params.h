// Launch ABI of the FP8 KV-cache write kernel (codegen/cuda/kernels/kv_fp8.cuh).
#pragma once
#ifndef INGOT_CORE_KERNELS_KV_FP8_PARAMS_H  // also a guard: the kernel sources inline these headers
#define INGOT_CORE_KERNELS_KV_FP8_PARAMS_H

// Plain C++ the host launcher and the device share: the scale bounds, the error word's key
// encoding the host decodes, the parameter struct and the grid.

#include "core/kernels/abi.h"

namespace ingot {
namespace kvfp8 {

/// Scale bounds as powers of two (runtime/backend/cpu/kv_fp8.h, kFp8KvMin/MaxScaleExp).
constexpr int kKvFp8MinScaleExp = -100;
constexpr int kKvFp8MaxScaleExp = 110;
/// The error word's value when every row was finite (it keeps the least key).
constexpr unsigned long long kKvFp8NoError = ~0ull;

/// The error key of a non-finite row: the least key is what the host reports, so layer,
/// then K before V, then token order, as the CPU's check finds the first one. Bit 0 tells
/// NaN (1) from an infinity (0) for the row's first non-finite element.
INGOT_ABI_HD unsigned long long kvFp8ErrorKey(int layer, int kv, int token, bool nan) {
  return (static_cast<unsigned long long>(layer) << 40) |
         (static_cast<unsigned long long>(kv) << 39) |
         (static_cast<unsigned long long>(token) << 1) | (nan ? 1ull : 0ull);
}
INGOT_ABI_HD int kvFp8ErrorLayer(unsigned long long key) { return static_cast<int>(key >> 40); }
INGOT_ABI_HD int kvFp8ErrorKv(unsigned long long key) { return static_cast<int>((key >> 39) & 1u); }
INGOT_ABI_HD int kvFp8ErrorToken(unsigned long long key) {
  return static_cast<int>((key >> 1) & 0x3fffffffffull);
}
INGOT_ABI_HD bool kvFp8ErrorIsNaN(unsigned long long key) { return (key & 1u) != 0u; }

/// Launch parameters of ingot_fused_kv_write_fp8_f32 (plain C++: the backend fills it).
/// Block: W warps (any multiple of 32 threads; the artifact's fused kernels take 256).
/// Grid (kvFp8WriteGridX(num_kv_heads, W), kvFp8WriteGridY(max_runs), 1): warp w of CTA
/// (x, y) appends runs y, y + gridDim.y, ... < max_runs for item = x * W + w =
/// kv * num_kv_heads + head. Runs past the real ones are empty (run_starts[r] ==
/// run_starts[r + 1]).
struct KvFp8WriteParams {
  const float *k;             ///< [num_tokens, k_stride]: num_kv_heads heads of head_dim
  const float *v;             ///< [num_tokens, v_stride]
  unsigned char *codes;       ///< the pool's codes
  float *scales;              ///< the pool's scales
  const int *slot_mapping;    ///< [num_tokens]: KV slot (tokens in runs have one >= 0)
  const int *run_tokens;      ///< tokens grouped by the block they write, token order within
  const int *run_starts;      ///< [max_runs + 1]: run r is run_tokens[run_starts[r] ..)
  unsigned long long *error;  ///< the least kvFp8ErrorKey of a non-finite row; host sets ~0
  int k_stride, v_stride;     ///< elements between consecutive tokens
  int num_kv_heads;
  int head_dim;
  int num_layers;
  int layer;
  int block_size;
  int max_runs;               ///< entries of run_starts minus one
};
// The host fills the struct the device reads: one layout on both (LP64).
static_assert(sizeof(KvFp8WriteParams) == 96, "KvFp8WriteParams layout changed");

/// CTAs along x of the write kernel: every (K/V, kv head) item gets a warp.
INGOT_ABI_HD unsigned kvFp8WriteGridX(int num_kv_heads, int warps_per_cta) {
  return static_cast<unsigned>((2 * num_kv_heads + warps_per_cta - 1) / warps_per_cta);
}

/// CTAs along y: one per run, at most the grid's limit (the kernel strides over the rest).
INGOT_ABI_HD unsigned kvFp8WriteGridY(int max_runs) {
  return static_cast<unsigned>(max_runs < 1 ? 1 : max_runs > 65535 ? 65535 : max_runs);
}

}  // namespace kvfp8
}  // namespace ingot

#endif  // INGOT_CORE_KERNELS_KV_FP8_PARAMS_H
