// Launch parameters of the paged attention kernels, shared by the host launcher and the device.
#pragma once
#ifndef INGOT_CORE_KERNELS_ATTENTION_PARAMS_H  // also a guard: the kernel sources inline these headers
#define INGOT_CORE_KERNELS_ATTENTION_PARAMS_H

// Plain C++ (no CUDA headers) so a host-side launcher fills it without the toolkit. The KV
// layout is the CPU backend's (runtime/backend/cpu/paged_attention.h, KvCacheLayout):
//   kv_cache [num_blocks, num_layers, 2 (K, V), block_size, num_kv_heads, head_dim]
// and a request's KV slot s lives in block block_tables[b][s / block_size] at row
// s % block_size. Query tokens of request b are rows query_start[b] .. query_start[b+1]-1 of
// q/out; they occupy the request's last KV slots (the last one is seq_lens[b] - 1), which is
// the `q` a mask or score region sees.

namespace ingot {
namespace attn {

struct PagedAttentionParams {
  const void *q;             ///< [num_tokens, num_heads, head_dim] of the kernel's element type
  const void *kv_cache;      ///< the paged pool, same element type
  void *out;                 ///< [num_tokens, num_heads, head_dim]
  const int *block_tables;   ///< [num_requests, max_blocks]
  const int *seq_lens;       ///< [num_requests]: KV slots of each request, new tokens included
  const int *query_start;    ///< [num_requests + 1]
  /// Split-KV partial results, read by the combine kernel when num_splits > 1 (f32):
  /// partial_out [num_tokens, num_heads, num_splits, head_dim] (normalized per split),
  /// partial_max / partial_sum [num_tokens, num_heads, num_splits] (softmax max and sum).
  float *partial_out;
  float *partial_max;
  float *partial_sum;
  int num_requests;
  int num_tokens;
  int num_heads;
  int num_kv_heads;
  int num_layers;
  int layer;
  int block_size;
  int max_blocks;
  /// Split-KV: split s of a request covers keys [s * keys_per_split, (s+1) * keys_per_split).
  int num_splits;
  int keys_per_split;  ///< a multiple of the kernel's key tile
  float scale;         ///< score = scale * dot(q, k) before the score region
  /// Prefill only: the block mask (FlexAttention) of this step, [num_requests, num_kv_heads,
  /// q_tiles, k_tiles] classes (kTileEmpty / kTilePartial / kTileFull) of the (query-row
  /// tile, key tile) pairs, from the block-mask kernel; null: every tile is partial.
  unsigned char *block_classes;
  int q_tiles;
  int k_tiles;
  /// An fp8 pool (kernels instantiated with an fp8 KV cache, kernels/kv_fp8.cuh): kv_cache
  /// holds E4M3 codes and this one f32 scale per (block, layer, K/V, kv head); null for an
  /// f32 / bf16 pool.
  const float *kv_scales;
};

/// Classes of a (query tile, key tile) pair in the block mask.
enum TileClass : unsigned char {
  kTileEmpty = 0,    ///< the mask hides every pair: the tile is skipped, K/V not even read
  kTilePartial = 1,  ///< mixed: the mask runs per pair
  kTileFull = 2,     ///< the mask shows every pair: it is not evaluated
};

}  // namespace attn
}  // namespace ingot

#endif  // INGOT_CORE_KERNELS_ATTENTION_PARAMS_H
