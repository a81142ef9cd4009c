// Launch ABI of the fused elementwise kernels (codegen/cuda/kernels/fused_ops.cuh).
#pragma once
#ifndef INGOT_CORE_KERNELS_FUSED_PARAMS_H  // also a guard: the kernel sources inline these headers
#define INGOT_CORE_KERNELS_FUSED_PARAMS_H

// Plain C++ the host launcher and the device share: thread counts, grid sizes, parameter
// structs. The kernels and their math are in codegen; the runtime includes only this.

#include "core/kernels/abi.h"

namespace ingot {
namespace fused {

/// Threads per CTA of every fused kernel (the host test mirrors the reduction order).
constexpr int kFusedThreads = 256;

/// Most CTAs a launcher gives a grid-stride kernel (add, add_bias, to_bf16; silu_mul may use
/// it too): 4 x 65535, far more than enough to fill any GPU (132 SMs x 8 resident CTAs of
/// 256 threads on an H100), and the grid-stride loop covers any count beyond it.
constexpr long kFusedMaxGrid = 65535L * 4;

/// The launcher's grid for a grid-stride kernel over `count` elements:
/// min(ceil(count / kFusedThreads), kFusedMaxGrid), and at least 1.
INGOT_ABI_HD constexpr unsigned fusedGridSize(long count) {
  const long ctas = (count + kFusedThreads - 1) / kFusedThreads;
  return static_cast<unsigned>(ctas < 1 ? 1 : ctas > kFusedMaxGrid ? kFusedMaxGrid : ctas);
}

// ---- launch parameters (plain C++) -------------------------------------------------------

/// rope in place on q and k of each token, then k and v written to the paged pool.
/// One CTA per token; q/k/v rows are strided so they may be views of a fused qkv output.
struct RopeKvParams {
  void *q;                   ///< [num_tokens, q_stride]: num_heads heads of head_dim
  void *k;                   ///< [num_tokens, k_stride]: num_kv_heads heads
  const void *v;             ///< [num_tokens, v_stride]: num_kv_heads heads
  void *kv_cache;            ///< the paged pool (element type of q)
  const int *positions;      ///< [num_tokens]
  const int *slot_mapping;   ///< [num_tokens]: KV slot; negative = padding, not written
  const float *inv_freq;     ///< [rotary_dim / 2], precomputed on the host
  int num_tokens;
  int num_heads;
  int num_kv_heads;
  int head_dim;
  int rotary_dim;            ///< even, <= head_dim; dims past it pass through
  int q_stride, k_stride, v_stride;  ///< elements between consecutive tokens
  int num_layers;
  int layer;
  int block_size;
};

/// The error word the embedding kernel sets: 1 + index of a token outside the vocabulary
/// (the first one to get there), 0 when every token is valid.
struct EmbeddingParams {
  const int *tokens;         ///< [num_tokens]
  const void *table;         ///< [num_rows, dim]
  void *out;                 ///< [num_tokens, dim]
  unsigned *error;           ///< one word, zeroed by the host before the launch
  int num_tokens;
  int dim;
  int vocab_size;
  int vocab_start;
  int num_rows;
};

}  // namespace fused
}  // namespace ingot

#endif  // INGOT_CORE_KERNELS_FUSED_PARAMS_H
