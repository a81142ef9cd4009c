// The marker of the kernel ABI headers' functions: plain inline C++ on the host,
// __host__ __device__ under NVRTC or nvcc.
#pragma once
#ifndef INGOT_CORE_KERNELS_ABI_H  // also a guard: the kernel sources inline these headers
#define INGOT_CORE_KERNELS_ABI_H

// The headers in core/kernels hold what a kernel's host launcher and its device code must
// agree on (parameter structs with their layout asserts, thread counts, grid sizes, launch
// checks) and nothing else; they include no CUDA header, so the runtime builds without the
// toolkit. The kernels themselves are in codegen/cuda/kernels.
#ifndef INGOT_ABI_HD
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define INGOT_ABI_HD __host__ __device__ __forceinline__
#else
#define INGOT_ABI_HD inline
#endif
#endif

#endif  // INGOT_CORE_KERNELS_ABI_H
