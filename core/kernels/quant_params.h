// Launch ABI of the quantized GEMV and GEMM kernels (codegen/cuda/kernels/quant_gemv.cuh, quant_gemm.cuh).
#pragma once
#ifndef INGOT_CORE_KERNELS_QUANT_PARAMS_H  // also a guard: the kernel sources inline these headers
#define INGOT_CORE_KERNELS_QUANT_PARAMS_H

// Plain C++ the host launcher and the device share: the weight formats, tile shapes, the
// parameter struct, grid sizes and the shape rules the backend checks when it loads a weight.

#include "core/kernels/abi.h"

namespace ingot {
namespace quantgemv {

/// Threads per CTA: 4 warps. Small CTAs keep many rows in flight per SM.
constexpr int kQuantWarps = 4;
constexpr int kQuantThreads = 32 * kQuantWarps;
/// Output rows per warp; with more than one, a single token's rows share each activation
/// load. A 4-bit weight byte meets 8 bytes of f32 activations per token, so with one row per
/// warp the L1 loads of x are 8x the weight stream, which may bound a decode GEMV before
/// DRAM does. 2 rows would halve that, but ptxas then spills at 56-128 registers whatever
/// the __launch_bounds__ minimum (QuantKernelsCompileTest, 2026-11-30): 1 until a GPU
/// measurement says the trade is worth a restructured loop.
constexpr int kQuantRowsPerWarp = 1;
constexpr int kQuantRowsPerCta = kQuantWarps * kQuantRowsPerWarp;
/// Tokens per pass over a weight row. 4 keeps a kernel at 54-64 registers without spills on
/// every default target (8 CTAs, 32 warps per SM streaming weights); an 8-token tile took
/// about 120 (4 CTAs per SM), and ptxas spilled when held to 96 or 80. A decode batch of 5-8
/// reads a row twice, the second time from L1 (a row is K / 2 bytes, 2 KiB at K = 4096).
constexpr int kQuantTileT = 4;

/// The weight formats; values equal ingot::QuantFormat (runtime/backend/cpu/quant_linear.h).
enum class Format : int { kInt4Min = 0, kInt4Zero = 1, kFp8 = 2, kNvfp4 = 3, kMxfp4 = 4 };
/// Int4 scale and zero/min element type; values equal ingot::GroupScaleType.
enum class ScaleType : int { kF16 = 0, kBF16 = 1, kF32 = 2 };

/// Launch parameters of every ingot_quant_gemv_* kernel (plain C++: the backend fills it).
/// Launch: grid (quantGemvGridSize(N), 1, 1), block (kQuantThreads, 1, 1), no dynamic
/// shared memory. checkQuantGemvParams lists what must hold.
struct QuantGemvParams {
  const unsigned char *codes;   ///< [N, rowBytes]: K bytes (fp8) or K / 2 (4-bit) per row
  /// int4: [N, K / block] of scale_type; nvfp4: f8E4M3FN bytes; mxfp4: f8E8M0FNU bytes;
  /// fp8: unused (null).
  const void *scales;
  const void *zeros;            ///< int4: the zeros or mins, [N, K / block] of scale_type
  const float *channel_scales;  ///< fp8: [N], or null for a per-tensor scale
  const float *x;               ///< [T, x_stride] f32, rows 16-byte aligned
  const float *bias;            ///< [N] or null
  float *y;                     ///< [T, y_stride] f32
  long x_stride;                ///< floats between tokens of x (a multiple of 4)
  long y_stride;                ///< floats between tokens of y
  int N, K, T;
  int block;                    ///< elements per scale along K: int4 group, 16, 32; K for fp8
  int scale_type;               ///< int4: a ScaleType, the one of the entry point's name
  float global_scale;           ///< multiplies every output (nvfp4 tensor / fp8 tensor scale)
};
// The host fills the struct the device reads: one layout on both (LP64).
static_assert(sizeof(QuantGemvParams) == 96, "QuantGemvParams layout changed");

/// CTAs of a launch over N output rows: ceil(N / kQuantRowsPerCta).
INGOT_ABI_HD constexpr unsigned quantGemvGridSize(int N) {
  return static_cast<unsigned>((N + kQuantRowsPerCta - 1) / kQuantRowsPerCta);
}

#if !defined(__CUDACC_RTC__)
/// Why a weight of format f, K columns and `block` cannot go through the kernel, or null
/// when it can: the shape half of checkQuantGemvParams, which the CUDA backend checks when
/// it loads a quantized linear (before any pointer exists). A row must be whole 8-byte code
/// chunks: K a multiple of 8 for fp8 (one byte a code; its activations, 4 per code word, are
/// then float4 loads of rows whose stride K is a multiple of 4), of 16 for the 4-bit formats;
/// block a power of two from 16 dividing K (int4, nvfp4 16, mxfp4 32), K for fp8.
inline const char *checkQuantGemvShape(Format f, int K, int block) {
  const bool fp8 = f == Format::kFp8, int4 = f == Format::kInt4Min || f == Format::kInt4Zero;
  if (K <= 0) return "quant gemv: K must be positive";
  if (fp8 && K % 8 != 0)
    return "quant gemv: an fp8 weight's K must be a multiple of 8 (8-byte code loads)";
  if (!fp8 && K % 16 != 0) return "quant gemv: K must be a multiple of 16";
  if (fp8 && block != K) return "quant gemv: an fp8 weight's block must be K";
  if (f == Format::kNvfp4 && block != 16) return "quant gemv: nvfp4 blocks are 16";
  if (f == Format::kMxfp4 && block != 32) return "quant gemv: mxfp4 blocks are 32";
  if (int4 && (block < 16 || (block & (block - 1)) != 0 || K % block != 0))
    return "quant gemv: the int4 group must be a power of two >= 16 dividing K";
  if (f == Format::kMxfp4 && K % 32 != 0) return "quant gemv: mxfp4 K must be a multiple of 32";
  return nullptr;
}

/// Why `p` cannot be launched with the kernel of (f, scale type in p), or null when it can:
/// checkQuantGemvShape, then the pointers: 8-byte aligned codes, 16-byte aligned x rows.
inline const char *checkQuantGemvParams(const QuantGemvParams &p, Format f) {
  const bool fp8 = f == Format::kFp8, int4 = f == Format::kInt4Min || f == Format::kInt4Zero;
  if (!p.codes || !p.x || !p.y) return "quant gemv: codes, x and y must be set";
  if (p.N <= 0 || p.K <= 0 || p.T <= 0) return "quant gemv: N, K and T must be positive";
  if (const char *shape = checkQuantGemvShape(f, p.K, p.block)) return shape;
  if (!fp8 && !p.scales) return "quant gemv: the block scales must be set";
  if (int4 && !p.zeros) return "quant gemv: the int4 zeros/mins must be set";
  if (int4 && (p.scale_type < 0 || p.scale_type > 2))
    return "quant gemv: scale_type must be f16 (0), bf16 (1) or f32 (2)";
  if (reinterpret_cast<unsigned long>(p.codes) % 8 != 0)
    return "quant gemv: codes must be 8-byte aligned";
  if (reinterpret_cast<unsigned long>(p.x) % 16 != 0 || p.x_stride % 4 != 0 ||
      p.x_stride < p.K)
    return "quant gemv: x rows must be 16-byte aligned (x_stride a multiple of 4, >= K)";
  if (p.y_stride < p.N) return "quant gemv: y_stride must be >= N";
  return nullptr;
}
#endif

}  // namespace quantgemv
namespace quantgemm {

using quantgemv::Format;
using quantgemv::QuantGemvParams;
using quantgemv::ScaleType;

/// Tokens per CTA tile: 64 keeps a 512-token prefill at 8 weight reads (from L2 after the
/// first) while a 64-token prompt still fills one tile.
constexpr int kGemmTileT = 64;
/// Outputs per CTA tile: 128 halves the activation traffic of a 64-wide tile (f32 x is
/// re-read once per N tile) at 30 KiB of double-buffered operands.
constexpr int kGemmTileN = 128;
/// K per step: two wmma k-steps; 16 codes per thread for the weight tile.
constexpr int kGemmTileK = 32;
/// Warps as 2 (tokens) x 4 (outputs), each owning a 32 x 32 sub-tile of 2 x 2 fragments.
constexpr int kGemmWarpsT = 2, kGemmWarpsN = 4;
constexpr int kGemmWarps = kGemmWarpsT * kGemmWarpsN;
constexpr int kGemmThreads = 32 * kGemmWarps;
constexpr int kGemmWarpT = kGemmTileT / kGemmWarpsT, kGemmWarpN = kGemmTileN / kGemmWarpsN;
constexpr int kGemmFrag = 16;  ///< wmma bf16 m16n16k16
/// Row pitch of the bf16 operand tiles: 8 elements (16 bytes) of padding make a row 80
/// bytes, so the 8 rows a fragment load reads fall on 8 distinct 16-byte bank groups; a
/// multiple of 8 elements as wmma requires.
constexpr int kGemmLd = kGemmTileK + 8;
/// Row pitch of the f32 epilogue tile (a multiple of 4 floats, as wmma requires).
constexpr int kGemmOutLd = kGemmTileN + 4;
constexpr int kGemmTileAElems = kGemmTileT * kGemmLd;  ///< activations, [tokens][k]
constexpr int kGemmTileBElems = kGemmTileN * kGemmLd;  ///< weights, [outputs][k]
constexpr int kGemmStageBytes = 2 * (kGemmTileAElems + kGemmTileBElems);
constexpr int kGemmOperandBytes = 2 * kGemmStageBytes;  ///< double-buffered
constexpr int kGemmEpilogueBytes = 4 * kGemmTileT * kGemmOutLd;
/// Static shared memory of one CTA (33 KiB: under the 48 KiB that needs no opt-in).
constexpr int kGemmSharedBytes =
    kGemmOperandBytes > kGemmEpilogueBytes ? kGemmOperandBytes : kGemmEpilogueBytes;
static_assert(kGemmSharedBytes <= 48 * 1024, "the GEMM's shared memory must be static");
/// Codes and activations each thread moves per K step.
constexpr int kGemmWeightsPerThread = kGemmTileN * kGemmTileK / kGemmThreads;
constexpr int kGemmActsPerThread = kGemmTileT * kGemmTileK / kGemmThreads;
static_assert(kGemmWeightsPerThread == 16 && kGemmActsPerThread == 8,
              "the stage functions move 16 codes and 8 activations per thread");

/// Token rows from which the backend runs the GEMM instead of the GEMV. The GEMV decodes
/// every weight once per 4-token tile and then spends one f32 FMA per weight per token on
/// the CUDA cores: at T = 32 that is 8 decode passes and 32 FMAs per weight, against one
/// decode and tensor-core products per 64-token tile here. Below about 32 tokens the GEMM's
/// grid (ceil(N / 128) CTAs per 64 tokens: 32 at N = 4096) leaves most SMs idle while the
/// GEMV's ceil(N / 4) CTAs still stream the weights at full bandwidth. An estimate from
/// the kernels' instruction counts, not yet a GPU measurement (test/gpu/quant_gemm_test.cc
/// prints both kernels at T = 16 .. 512 for that).
constexpr int kQuantGemmMinRows = 32;

/// CTAs of a launch: x over N tiles, y over token tiles.
INGOT_ABI_HD constexpr unsigned quantGemmGridX(int N) {
  return static_cast<unsigned>((N + kGemmTileN - 1) / kGemmTileN);
}
INGOT_ABI_HD constexpr unsigned quantGemmGridY(int T) {
  return static_cast<unsigned>((T + kGemmTileT - 1) / kGemmTileT);
}

#if !defined(__CUDACC_RTC__)
/// Why a weight of format f, K columns and `block` cannot go through the GEMM, or null when
/// it can: the GEMV's shape rules and K a multiple of 16, since a thread's stage reads 16
/// consecutive codes (16 fp8 bytes) and 8 activations from a column that is a multiple of
/// 16 below K; with K = 8 mod 16 (an fp8 weight the GEMV takes) the last step would read
/// past the row. The CUDA backend checks it at load and leaves such a weight on the GEMV.
inline const char *checkQuantGemmShape(Format f, int K, int block) {
  if (const char *gemv = quantgemv::checkQuantGemvShape(f, K, block)) return gemv;
  if (K % 16 != 0) return "quant gemm: K must be a multiple of 16 (16-code weight stages)";
  return nullptr;
}

/// checkQuantGemvParams with the GEMM's shape rule (checkQuantGemmShape).
inline const char *checkQuantGemmParams(const QuantGemvParams &p, Format f) {
  if (const char *gemv = quantgemv::checkQuantGemvParams(p, f)) return gemv;
  return checkQuantGemmShape(f, p.K, p.block);
}
#endif

}  // namespace quantgemm
}  // namespace ingot

#endif  // INGOT_CORE_KERNELS_QUANT_PARAMS_H
