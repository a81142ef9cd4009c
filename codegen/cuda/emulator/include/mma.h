// Stand-in for the CUDA toolkit's mma.h in SIMT-emulated device code: nvcuda::wmma for bf16 16x16x16.
#pragma once

// The fragments the kernels use (bf16 m16n16k16 A/B, f32 accumulators) hold 8 elements per
// lane. load_matrix_sync, store_matrix_sync and mma_sync are warp collectives of the
// engine (simt_warp.cc), which places elements by the PTX ISA's mma.m16n8k16 fragment
// layout (docs/simt-emulator.md); fill_fragment and element access are per lane, as on
// the GPU.

#include <cuda_bf16.h>

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment;

template <class Layout>
struct fragment<matrix_a, 16, 16, 16, __nv_bfloat16, Layout> {
  static constexpr int num_elements = 8;
  __nv_bfloat16 x[8];
};
template <class Layout>
struct fragment<matrix_b, 16, 16, 16, __nv_bfloat16, Layout> {
  static constexpr int num_elements = 8;
  __nv_bfloat16 x[8];
};
template <>
struct fragment<accumulator, 16, 16, 16, float, void> {
  static constexpr int num_elements = 8;
  float x[8];
};

template <class Use, int M, int N, int K, class T, class Layout, class V>
inline void fill_fragment(fragment<Use, M, N, K, T, Layout> &f, const V &value) {
  for (int i = 0; i < fragment<Use, M, N, K, T, Layout>::num_elements; ++i) f.x[i] = value;
}

namespace detail {
template <class L> struct IsRowMajor;
template <> struct IsRowMajor<row_major> { static constexpr int value = 1; };
template <> struct IsRowMajor<col_major> { static constexpr int value = 0; };

inline void memoryOp(int op, void *pointer, unsigned ldm, int use, int rowMajor, void *fragment,
                     const char *file, unsigned line) {
  ::ingot::simt::WmmaMemory in{pointer, ldm, use, rowMajor, fragment};
  ::ingot::simt::warpCall(op, 0xffffffffu, &in, nullptr, 0, 0, file, line);
}
}  // namespace detail

template <class Layout>
inline void load_matrix_sync(fragment<matrix_a, 16, 16, 16, __nv_bfloat16, Layout> &a,
                             const __nv_bfloat16 *p, unsigned ldm,
                             const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  detail::memoryOp(::ingot::simt::kWarpWmmaLoad, const_cast<__nv_bfloat16 *>(p), ldm,
                   ::ingot::simt::kWmmaA, detail::IsRowMajor<Layout>::value, a.x, file, line);
}
template <class Layout>
inline void load_matrix_sync(fragment<matrix_b, 16, 16, 16, __nv_bfloat16, Layout> &b,
                             const __nv_bfloat16 *p, unsigned ldm,
                             const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  detail::memoryOp(::ingot::simt::kWarpWmmaLoad, const_cast<__nv_bfloat16 *>(p), ldm,
                   ::ingot::simt::kWmmaB, detail::IsRowMajor<Layout>::value, b.x, file, line);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &c, const float *p,
                             unsigned ldm, layout_t layout, const char *file = __builtin_FILE(),
                             unsigned line = __builtin_LINE()) {
  detail::memoryOp(::ingot::simt::kWarpWmmaLoad, const_cast<float *>(p), ldm,
                   ::ingot::simt::kWmmaAcc, layout == mem_row_major, c.x, file, line);
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &c,
                              unsigned ldm, layout_t layout, const char *file = __builtin_FILE(),
                              unsigned line = __builtin_LINE()) {
  detail::memoryOp(::ingot::simt::kWarpWmmaStore, p, ldm, ::ingot::simt::kWmmaAcc,
                   layout == mem_row_major, const_cast<float *>(c.x), file, line);
}
template <class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c,
                     const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  // d may alias c: the engine reads every lane's c before it writes any d.
  ::ingot::simt::WmmaMmaFragments in{d.x, reinterpret_cast<const unsigned short *>(a.x),
                                     reinterpret_cast<const unsigned short *>(b.x), c.x};
  ::ingot::simt::warpCall(::ingot::simt::kWarpWmmaMma, 0xffffffffu, &in, nullptr, 0, 0, file, line);
}

}  // namespace wmma
}  // namespace nvcuda
