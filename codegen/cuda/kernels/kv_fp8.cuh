// FP8 E4M3 KV cache on the GPU: code/scale math, the KV-write kernel body, the attention-side decode.
#pragma once
#include "core/kernels/kv_fp8_params.h"

// The pool is the CPU backend's (runtime/backend/cpu/kv_fp8.h, Fp8KvPool): codes in the f32
// pool's layout [num_blocks, num_layers, 2 (K, V), block_size, num_kv_heads, head_dim], one
// byte each, and one f32 scale per (block, layer, K/V, kv head) at
//   ((block * num_layers + layer) * 2 + kv) * num_kv_heads + head.
// An element reads back as e4m3(code) * scale; scales are powers of two in [2^-100, 2^110].
//
// The write reproduces the CPU's bytes exactly (kvWriteRowsFp8): a block-head's rows are
// appended one at a time in token order; a row at offset 0 resets the scale to 2^-100; a
// row whose absmax needs a larger scale first re-encodes the block-head's other rows to it.
// The host groups a step's tokens into runs (runtime/backend/cuda/step_pack.h,
// packKvRuns): the tokens writing one block, in token order. One warp appends one run of
// one (K/V, kv head) pair; different runs and pairs touch different block-heads and run
// in parallel. A warp's lanes own head-dim columns (lane, lane + 32, ...) of every row,
// so no lane reads what another lane wrote; only the absmax and the non-finite check
// cross lanes (warp reductions).
//
// The kernels are built with --use_fast_math (flush-to-zero, approximate division): the write
// therefore divides and multiplies only through correctly rounded intrinsics (__fdiv_rn,
// __frcp_rn, __fmul_rn), and every value FTZ flushes (an f32 subnormal K/V element, a ratio
// of scales below 2^-126) encodes to a signed zero code on the CPU as well, so the bytes
// agree.
//
// The math and appendKvRunFp8 are INGOT_KVFP8_HD, and appendKvRunFp8 takes its lanes as a
// policy: the device passes a warp (KvFp8LanesWarp), the host test one "lane" holding every
// column (KvFp8LanesHost) or 32 host threads with a barrier, so the host runs the very code
// the kernel runs (test/kernels/kv_fp8_write_host_test.cc, against the CPU pool's
// bytes). The warp policy, the kernel body and the attention-side decode (storeFp8Vec) are
// device-only.

#include "codegen/cuda/kernels/e4m3.cuh"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define INGOT_KVFP8_HD __host__ __device__ __forceinline__
#else
#include <cmath>  // fabsf, fmaxf on the host
#define INGOT_KVFP8_HD inline
#endif

namespace ingot {
namespace kvfp8 {


/// 2^e as f32 for e in [-126, 127].
INGOT_KVFP8_HD float kvPow2(int e) {
  return e4m3::bitsToFloat(static_cast<unsigned>(e + 127) << 23);
}

/// The initial scale of every block-head: 2^-100.
INGOT_KVFP8_HD float kvFp8MinScale() { return kvPow2(kKvFp8MinScaleExp); }

/// An E4M3FN code as f32, exactly (e4m3::decode; the NaN codes, which a write never
/// produces, read as +-480). The attention kernels' gather decodes through it.
INGOT_KVFP8_HD float kvFp8Value(unsigned code) { return e4m3::decode(code); }

/// f32 -> E4M3FN (e4m3::encode: round to nearest even, saturating at +-448, NaN -> 0x7F),
/// bit for bit runtime/backend/cpu/quant_formats.h's f32ToE4m3fn, as the CPU pool encodes.
INGOT_KVFP8_HD unsigned kvFp8Code(float f) { return e4m3::encode(f); }

/// The scale a block-head needs for rows of largest magnitude `absmax` (finite, >= 0): the
/// smallest 2^e >= absmax / 448, clamped to [2^-100, 2^110]. fp8KvScaleFor of the CPU.
INGOT_KVFP8_HD float kvFp8ScaleFor(float absmax) {
  const float q = rn::div(absmax, 448.0f);
  if (!(q > 0.0f)) return kvFp8MinScale();
  const unsigned bits = e4m3::floatToBits(q);
  const int biased = static_cast<int>(bits >> 23);  // q >= 0: no sign bit
  // q = 1.m * 2^(biased - 127): the next power of two up unless m is 0. A subnormal q
  // (biased 0) is far below the minimum scale.
  int e = biased == 0 ? kKvFp8MinScaleExp : biased - 127 + ((bits & 0x7fffffu) != 0u);
  e = e < kKvFp8MinScaleExp ? kKvFp8MinScaleExp : e > kKvFp8MaxScaleExp ? kKvFp8MaxScaleExp : e;
  return kvPow2(e);
}



#if !defined(__CUDACC_RTC__)

/// The host's lanes: one lane holding every column; reductions are the value itself.
struct KvFp8LanesHost {
  int first() const { return 0; }
  int stride() const { return 1; }
  float max(float v) const { return v; }
  int min(int v) const { return v; }
  bool leader() const { return true; }
  void report(unsigned long long *error, unsigned long long key) const {
    if (key < *error) *error = key;
  }
};
#endif  // !__CUDACC_RTC__

/// Appends run `run` of item (kv, head) = (item / num_kv_heads, item % num_kv_heads): each
/// token's row in order, as the CPU's appendRow. A row holding a NaN or an infinity is
/// reported (Lanes::report) and ends the run there: the rows before it stay written and
/// the block-head's scale matches them, later rows of the run are not written.
template <class Lanes>
INGOT_KVFP8_HD void appendKvRunFp8(const KvFp8WriteParams &p, int item, int run,
                                   Lanes lanes) {
  const int begin = p.run_starts[run], end = p.run_starts[run + 1];
  if (begin >= end) return;
  const int H = p.num_kv_heads, D = p.head_dim, kv = item / H, head = item % H;
  const long rowStride = static_cast<long>(H) * D;
  const float *src = kv == 0 ? p.k : p.v;
  const long srcStride = kv == 0 ? p.k_stride : p.v_stride;
  const long block = p.slot_mapping[p.run_tokens[begin]] / p.block_size;  // int division
  const long bh = (block * p.num_layers + p.layer) * 2 + kv;
  unsigned char *rows = p.codes + bh * p.block_size * rowStride + static_cast<long>(head) * D;
  float *scaleAt = p.scales + bh * H + head;
  float scale = *scaleAt;
  for (int i = begin; i < end; ++i) {
    const int t = p.run_tokens[i];
    const int off = p.slot_mapping[t] % p.block_size;
    const float *x = src + t * srcStride + static_cast<long>(head) * D;
    float absmax = 0.0f;
    int firstBad = D;
    for (int d = lanes.first(); d < D; d += lanes.stride()) {
      const float a = fabsf(x[d]);
      if (!(a <= 3.402823466e38f) && d < firstBad) firstBad = d;  // NaN or infinity
      absmax = fmaxf(absmax, a);
    }
    firstBad = lanes.min(firstBad);
    if (firstBad < D) {
      if (lanes.leader()) lanes.report(p.error, kvFp8ErrorKey(p.layer, kv, t, x[firstBad] != x[firstBad]));
      break;
    }
    absmax = lanes.max(absmax);
    if (off == 0) scale = kvFp8MinScale();  // the block's first row: a new owner
    const float need = kvFp8ScaleFor(absmax);
    if (need > scale) {
      // old / new is 2^-k: exact for every code that stays normal at the new scale.
      const float ratio = rn::mul(scale, rn::rcp(need));
      for (int r = 0; r < p.block_size; ++r) {
        if (r == off) continue;
        unsigned char *row = rows + r * rowStride;
        for (int d = lanes.first(); d < D; d += lanes.stride())
          row[d] = static_cast<unsigned char>(kvFp8Code(rn::mul(kvFp8Value(row[d]), ratio)));
      }
      scale = need;
    }
    const float inv = rn::rcp(scale);  // a power of two: x * inv is x / scale exactly
    unsigned char *row = rows + off * rowStride;
    for (int d = lanes.first(); d < D; d += lanes.stride())
      row[d] = static_cast<unsigned char>(kvFp8Code(rn::mul(x[d], inv)));
  }
  if (lanes.leader()) *scaleAt = scale;
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

/// The device's lanes: a warp, lane L owning columns L, L + 32, ...
struct KvFp8LanesWarp {
  int lane;
  __device__ int first() const { return lane; }
  __device__ int stride() const { return 32; }
  __device__ float max(float v) const {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
  }
  __device__ int min(int v) const {
    for (int o = 16; o > 0; o >>= 1) v = ::min(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
  }
  __device__ bool leader() const { return lane == 0; }
  __device__ void report(unsigned long long *error, unsigned long long key) const {
    atomicMin(error, key);
  }
};

/// The kernel body: warp w of CTA (x, y) appends runs y, y + gridDim.y, ... for item
/// x * warps + w (a warp past the last item leaves at once, all its lanes together).
__device__ __forceinline__ void kvWriteFp8(const KvFp8WriteParams &p) {
  const int item = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
  if (item >= 2 * p.num_kv_heads) return;
  for (int run = static_cast<int>(blockIdx.y); run < p.max_runs; run += static_cast<int>(gridDim.y))
    appendKvRunFp8(p, item, run, KvFp8LanesWarp{static_cast<int>(threadIdx.x & 31)});
}

/// dst[i] = e4m3(code i of `raw`) * scale for the 16 codes of a 16-byte load: what the
/// attention kernels gather into shared memory instead of f32 rows.
__device__ __forceinline__ void storeFp8Vec(const uint4 raw, float scale, float *dst) {
  const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 16; ++i) dst[i] = kvFp8Value((w[i / 4] >> (8 * (i % 4))) & 0xffu) * scale;
}

#endif  // __CUDACC__ || __CUDACC_RTC__

}  // namespace kvfp8
}  // namespace ingot
