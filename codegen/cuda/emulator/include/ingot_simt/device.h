// Device prelude of the SIMT emulator: CUDA C++'s device built-ins for the host compiler.
#pragma once

// Force-included (-include) before every emulated kernel translation unit, the very text
// NVRTC compiles (compiled with __CUDACC__, __CUDACC_RTC__ and __CUDA_ARCH__ defined, as
// NVRTC defines them). It gives the host compiler what NVRTC has built in: the execution
// space qualifiers, threadIdx and friends, __shared__, barriers, warp collectives,
// atomics, the bit casts and correctly rounded intrinsics, the fast-math intrinsics and the
// vector types. The stand-in <cuda_bf16.h>, <cuda_fp16.h>, <cuda_fp8.h> and <mma.h> of this
// folder replace the toolkit's.
//
// Barriers, collectives and the instrumented accesses call the engine through the Thread
// record of the calling fiber (abi.h). `__shared__` declares a thread_local: the
// instrumentation pass (pass/SimtInstrument.cpp) moves every thread_local of the module into
// the block's shared arena at a fixed offset, between red zones, and emits the layout.
//
// Semantics that differ from a GPU, on purpose and documented (docs/simt-emulator.md):
// floating-point expressions are not contracted into FMAs (the GPU's --fmad=true does it
// where ptxas sees fit), approximate intrinsics (__expf, __fdividef, ...) are computed as
// their definition with f32 rounding, within their documented error bounds; the
// correctly rounded ones (__fadd_rn, __fmul_rn, __fdiv_rn, __fsqrt_rn, ...) are exact.

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ingot_simt/abi.h"

#define __host__
#define __device__
#define __global__
#define __shared__ thread_local
#define __constant__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
#define warpSize 32

namespace ingot {
namespace simt {

/// The calling thread's record, found from the frame address (abi.h). The pass leaves
/// accesses through it uninstrumented.
__attribute__((always_inline)) inline Thread *self() {
  const unsigned long frame = reinterpret_cast<unsigned long>(__builtin_frame_address(0));
  return reinterpret_cast<Thread *>((frame & ~(kStackRegionBytes - 1)) + kThreadRecordOffset);
}

__attribute__((always_inline)) inline Site site(const char *file, unsigned line) {
  return Site{file, line, 0u, nullptr};
}

// The engine's entry points are reached through Thread::ops, in functions of this namespace
// that are never inlined: the instrumentation pass leaves namespace ingot::simt alone, so
// the loads of the engine's table are not checked as device memory.

__attribute__((noinline)) inline unsigned warpCall(int op, unsigned mask, const void *in, void *out,
                                                   int a, int b, const char *file, unsigned line) {
  const Site s = site(file, line);
  Thread *t = self();
  return t->ops->warp(t, op, mask, in, out, a, b, &s);
}

__attribute__((noinline)) inline int barrier(int kind, int value, const char *file,
                                             unsigned line) {
  const Site s = site(file, line);
  Thread *t = self();
  return t->ops->barrier(t, kind, value, &s);
}

__attribute__((noinline)) inline unsigned activeMask(const char *file, unsigned line) {
  return warpCall(kWarpActiveMask, 0u, nullptr, nullptr, 0, 0, file, line);
}

__attribute__((noinline)) inline void trap(const char *what, const char *file, unsigned line) {
  const Site s = site(file, line);
  Thread *t = self();
  t->ops->trap(t, what, &s);
}

/// A 4- or 8-byte value through a warp collective of kind `op`.
template <class T>
__attribute__((always_inline)) inline T shuffle(int op, unsigned mask, T value, int a, int width,
                                                const char *file, unsigned line) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "shuffles move 4- or 8-byte values");
  unsigned long long in = 0, out = 0;
  memcpy(&in, &value, sizeof(T));
  warpCall(op, mask, &in, &out, a, width, file, line);
  T result;
  memcpy(&result, &out, sizeof(T));
  return result;
}

__attribute__((always_inline)) inline unsigned ballot(unsigned mask, int predicate,
                                                      const char *file, unsigned line) {
  return warpCall(kWarpBallot, mask, &predicate, nullptr, 0, 0, file, line);
}

/// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 on this lane's fragments (the
/// wrapper in codegen/cuda/kernels/ptx.cuh calls it under the emulator).
__attribute__((always_inline)) inline void mmaM16N8K16Bf16(float (&c)[4], const unsigned (&a)[4],
                                                           unsigned b0, unsigned b1,
                                                           const char *file = __builtin_FILE(),
                                                           unsigned line = __builtin_LINE()) {
  const unsigned b[2] = {b0, b1};
  const MmaFragments f{a, b, c};
  warpCall(kWarpMmaM16N8K16Bf16, 0xffffffffu, &f, nullptr, 0, 0, file, line);
}

template <class T>
__attribute__((always_inline)) inline T bitCast(const void *from) {
  T to;
  memcpy(&to, from, sizeof(T));
  return to;
}

}  // namespace simt
}  // namespace ingot

// ---- built-in variables ------------------------------------------------------------------
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(const ::ingot::simt::Dim3 &d) : x(d.x), y(d.y), z(d.z) {}
};
#define threadIdx (static_cast<const ::ingot::simt::Thread *>(::ingot::simt::self())->thread_idx)
#define blockIdx (static_cast<const ::ingot::simt::Thread *>(::ingot::simt::self())->block_idx)
#define blockDim (static_cast<const ::ingot::simt::Thread *>(::ingot::simt::self())->block_dim)
#define gridDim (static_cast<const ::ingot::simt::Thread *>(::ingot::simt::self())->grid_dim)

// ---- barriers and warp collectives ---------------------------------------------------------
inline void __syncthreads(const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  ::ingot::simt::barrier(::ingot::simt::kBarrierSync, 0, file, line);
}
inline int __syncthreads_or(int predicate, const char *file = __builtin_FILE(),
                            unsigned line = __builtin_LINE()) {
  return ::ingot::simt::barrier(::ingot::simt::kBarrierOr, predicate, file, line);
}
inline int __syncthreads_and(int predicate, const char *file = __builtin_FILE(),
                             unsigned line = __builtin_LINE()) {
  return ::ingot::simt::barrier(::ingot::simt::kBarrierAnd, predicate, file, line);
}
inline int __syncthreads_count(int predicate, const char *file = __builtin_FILE(),
                               unsigned line = __builtin_LINE()) {
  return ::ingot::simt::barrier(::ingot::simt::kBarrierCount, predicate, file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const char *file = __builtin_FILE(),
                       unsigned line = __builtin_LINE()) {
  ::ingot::simt::warpCall(::ingot::simt::kWarpSync, mask, nullptr, nullptr, 0, 0, file, line);
}
template <class T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32,
                     const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  return ::ingot::simt::shuffle(::ingot::simt::kWarpShflIdx, mask, var, srcLane, width, file, line);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32,
                        const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  return ::ingot::simt::shuffle(::ingot::simt::kWarpShflUp, mask, var, static_cast<int>(delta),
                                width, file, line);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32,
                          const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  return ::ingot::simt::shuffle(::ingot::simt::kWarpShflDown, mask, var, static_cast<int>(delta),
                                width, file, line);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32,
                         const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  return ::ingot::simt::shuffle(::ingot::simt::kWarpShflXor, mask, var, laneMask, width, file, line);
}
inline unsigned __ballot_sync(unsigned mask, int predicate, const char *file = __builtin_FILE(),
                              unsigned line = __builtin_LINE()) {
  return ::ingot::simt::ballot(mask, predicate, file, line);
}
inline int __any_sync(unsigned mask, int predicate, const char *file = __builtin_FILE(),
                      unsigned line = __builtin_LINE()) {
  return ::ingot::simt::ballot(mask, predicate, file, line) != 0u;
}
inline int __all_sync(unsigned mask, int predicate, const char *file = __builtin_FILE(),
                      unsigned line = __builtin_LINE()) {
  return ::ingot::simt::ballot(mask, predicate, file, line) == mask;
}
inline unsigned __activemask(const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  return ::ingot::simt::activeMask(file, line);
}
inline void __trap(const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  ::ingot::simt::trap("__trap()", file, line);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ---- atomics (compiled to host atomics, which the pass marks as such) ---------------------------
template <class T>
inline T __ingot_simt_cas(T *address, T compare, T value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;  // the old value, on success and failure alike
}
/// old = *address; *address = f(old); returns old (a compare-and-swap loop).
template <class T, class F>
inline T __ingot_simt_update(T *address, F f) {
  T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(address, &old, f(old), false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST)) {
  }
  return old;
}
/// Floats and doubles: the same loop on their bits.
template <class T, class Bits, class F>
inline T __ingot_simt_update_float(T *address, F f) {
  Bits *bits = reinterpret_cast<Bits *>(address);
  Bits old = __atomic_load_n(bits, __ATOMIC_SEQ_CST);
  for (;;) {
    const T value = f(::ingot::simt::bitCast<T>(&old));
    Bits next;
    memcpy(&next, &value, sizeof(next));
    if (__atomic_compare_exchange_n(bits, &old, next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      return ::ingot::simt::bitCast<T>(&old);
  }
}

#define INGOT_SIMT_INTEGER_ATOMICS(T)                                                          \
  inline T atomicCAS(T *a, T compare, T value) { return __ingot_simt_cas(a, compare, value); } \
  inline T atomicAdd(T *a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }       \
  inline T atomicSub(T *a, T v) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }       \
  inline T atomicExch(T *a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }     \
  inline T atomicAnd(T *a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }       \
  inline T atomicOr(T *a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }         \
  inline T atomicXor(T *a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); }       \
  inline T atomicMin(T *a, T v) {                                                              \
    return __ingot_simt_update(a, [v](T old) { return v < old ? v : old; });                  \
  }                                                                                            \
  inline T atomicMax(T *a, T v) {                                                              \
    return __ingot_simt_update(a, [v](T old) { return v > old ? v : old; });                  \
  }
INGOT_SIMT_INTEGER_ATOMICS(int)
INGOT_SIMT_INTEGER_ATOMICS(unsigned)
INGOT_SIMT_INTEGER_ATOMICS(long long)
INGOT_SIMT_INTEGER_ATOMICS(unsigned long long)
#undef INGOT_SIMT_INTEGER_ATOMICS
inline unsigned short atomicCAS(unsigned short *a, unsigned short compare, unsigned short value) {
  return __ingot_simt_cas(a, compare, value);
}
inline unsigned atomicInc(unsigned *a, unsigned limit) {
  return __ingot_simt_update(a, [limit](unsigned old) { return old >= limit ? 0u : old + 1u; });
}
inline unsigned atomicDec(unsigned *a, unsigned limit) {
  return __ingot_simt_update(
      a, [limit](unsigned old) { return old == 0u || old > limit ? limit : old - 1u; });
}
inline float atomicAdd(float *a, float v) {
  return __ingot_simt_update_float<float, unsigned>(a, [v](float old) { return old + v; });
}
inline double atomicAdd(double *a, double v) {
  return __ingot_simt_update_float<double, unsigned long long>(a, [v](double old) { return old + v; });
}
inline float atomicExch(float *a, float v) {
  return __ingot_simt_update_float<float, unsigned>(a, [v](float) { return v; });
}

// ---- loads, bit casts, integer intrinsics ----------------------------------------------------
template <class T>
inline T __ldg(const T *p) {
  return *p;
}
template <class T>
inline T __ldcs(const T *p) {
  return *p;
}
template <class T>
inline void __stcs(T *p, T v) {
  *p = v;
}
inline unsigned __float_as_uint(float x) { return ::ingot::simt::bitCast<unsigned>(&x); }
inline float __uint_as_float(unsigned x) { return ::ingot::simt::bitCast<float>(&x); }
inline int __float_as_int(float x) { return ::ingot::simt::bitCast<int>(&x); }
inline float __int_as_float(int x) { return ::ingot::simt::bitCast<float>(&x); }
inline long long __double_as_longlong(double x) { return ::ingot::simt::bitCast<long long>(&x); }
inline double __longlong_as_double(long long x) { return ::ingot::simt::bitCast<double>(&x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) { return __builtin_bitreverse32(x); }
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
inline int __mul24(int a, int b) { return (a << 8 >> 8) * (b << 8 >> 8); }
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= ((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
}

// ---- integer min/max (CUDA's device overloads) -----------------------------------------------
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline unsigned min(int a, unsigned b) { return min(static_cast<unsigned>(a), b); }
inline unsigned min(unsigned a, int b) { return min(a, static_cast<unsigned>(b)); }
inline unsigned max(int a, unsigned b) { return max(static_cast<unsigned>(a), b); }
inline unsigned max(unsigned a, int b) { return max(a, static_cast<unsigned>(b)); }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// ---- correctly rounded and fast-math float intrinsics ------------------------------------------
// The emulated TU builds with -ffp-contract=off: `a * b + c` stays two roundings here.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __frsqrt_rn(float a) { return static_cast<float>(1.0 / sqrt(static_cast<double>(a))); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __saturatef(float a) { return a != a ? 0.0f : a < 0.0f ? 0.0f : a > 1.0f ? 1.0f : a; }
/// ex2.approx of x * log2(e), as the GPU computes __expf (CUDA Math API: error
/// 2 + floor(abs(1.173 * x)) ulp, from the f32 product's rounding).
inline float __expf(float x) { return exp2f(x * 1.44269504088896341f); }
inline float __exp10f(float x) { return exp2f(x * 3.32192809488736235f); }
inline float __logf(float x) { return log2f(x) * 0.693147180559945309f; }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log2f(x) * 0.301029995663981195f; }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float *s, float *c) { *s = sinf(x), *c = cosf(x); }
inline float __powf(float x, float y) { return exp2f(y * log2f(x)); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rn(float x) { return static_cast<int>(nearbyintf(x)); }
inline int __float2int_rd(float x) { return static_cast<int>(floorf(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(ceilf(x)); }
inline unsigned __float2uint_rz(float x) { return static_cast<unsigned>(x); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(nearbyintf(x)); }

// ---- vector types (CUDA's sizes and alignments) ------------------------------------------------
#define INGOT_SIMT_VECTOR2(name, T, align)                                      \
  struct __attribute__((aligned(align))) name {                                 \
    T x, y;                                                                     \
  };                                                                            \
  inline name make_##name(T x, T y) { return name{x, y}; }
#define INGOT_SIMT_VECTOR3(name, T)                                             \
  struct name {                                                                 \
    T x, y, z;                                                                  \
  };                                                                            \
  inline name make_##name(T x, T y, T z) { return name{x, y, z}; }
#define INGOT_SIMT_VECTOR4(name, T, align)                                      \
  struct __attribute__((aligned(align))) name {                                 \
    T x, y, z, w;                                                               \
  };                                                                            \
  inline name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }
INGOT_SIMT_VECTOR2(char2, signed char, 2)
INGOT_SIMT_VECTOR4(char4, signed char, 4)
INGOT_SIMT_VECTOR2(uchar2, unsigned char, 2)
INGOT_SIMT_VECTOR4(uchar4, unsigned char, 4)
INGOT_SIMT_VECTOR2(short2, short, 4)
INGOT_SIMT_VECTOR4(short4, short, 8)
INGOT_SIMT_VECTOR2(ushort2, unsigned short, 4)
INGOT_SIMT_VECTOR4(ushort4, unsigned short, 8)
INGOT_SIMT_VECTOR2(int2, int, 8)
INGOT_SIMT_VECTOR3(int3, int)
INGOT_SIMT_VECTOR4(int4, int, 16)
INGOT_SIMT_VECTOR2(uint2, unsigned, 8)
INGOT_SIMT_VECTOR4(uint4, unsigned, 16)
INGOT_SIMT_VECTOR2(float2, float, 8)
INGOT_SIMT_VECTOR3(float3, float)
INGOT_SIMT_VECTOR4(float4, float, 16)
INGOT_SIMT_VECTOR2(longlong2, long long, 16)
INGOT_SIMT_VECTOR2(ulonglong2, unsigned long long, 16)
INGOT_SIMT_VECTOR2(double2, double, 16)
#undef INGOT_SIMT_VECTOR2
#undef INGOT_SIMT_VECTOR3
#undef INGOT_SIMT_VECTOR4
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

// ---- clocks -----------------------------------------------------------------------------------
inline long long clock64() { return static_cast<long long>(__builtin_readcyclecounter()); }
inline long clock() { return static_cast<long>(__builtin_readcyclecounter()); }
inline void __nanosleep(unsigned) {}

// ---- hooks the instrumentation pass calls (never instrumented themselves) ----------------------
extern "C" {
/// Before every instrumented load, store, atomic and memory intrinsic.
__attribute__((noinline, used)) inline void __ingot_simt_access(const void *address,
                                                               unsigned long long info,
                                                               const ::ingot::simt::Site *site) {
  ::ingot::simt::Thread *t = ::ingot::simt::self();
  t->ops->access(t, address, info, site);
}
/// At the start of every basic block with floating-point arithmetic: its operation count.
__attribute__((noinline, used)) inline void __ingot_simt_flops(unsigned long long n) {
  ::ingot::simt::self()->flops += n;
}
/// The block's shared arena (the pass rewrites every __shared__ array to an offset in it).
__attribute__((noinline, used)) inline unsigned char *__ingot_simt_shared_base() {
  return ::ingot::simt::self()->shared;
}
}
