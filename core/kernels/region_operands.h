// Extra operands of an attention variant as generated mask/score functions see them (host and device).
#pragma once
#ifndef INGOT_CORE_KERNELS_REGION_OPERANDS_H  // also a guard: the kernel sources inline these headers
#define INGOT_CORE_KERNELS_REGION_OPERANDS_H

// Shared by the host (the launcher fills it, the host tests evaluate variants with it) and the
// device (kernels receive it by value as a kernel parameter). Plain C++: no CUDA headers, no
// standard headers, so NVRTC compiles it as is.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define INGOT_HD __host__ __device__ __forceinline__
#else
#define INGOT_HD inline
#endif

namespace ingot {
namespace rgn {

using u64 = unsigned long long;
using i64 = long long;
using u32 = unsigned int;

/// Most extra operands a variant may read; the emitter refuses regions that need more. Eight
/// operands of rank <= 4 keep RegionOperands at 328 bytes, well inside the 4 KiB of kernel
/// parameters every supported architecture accepts.
constexpr int kMaxRegionOperands = 8;
/// Highest rank of an extra operand (the bytecode allows 8; real variants use 1..3).
constexpr int kMaxRegionOperandRank = 4;

/// One dense row-major extra operand in device (or, in host tests, host) memory. i1 elements
/// take one byte each (any nonzero byte reads as true), as in the CPU backend.
struct RegionOperand {
  const void* data;
  i64 shape[kMaxRegionOperandRank];  ///< the first `rank` extents; the rest unused
};

/// What a region trapped on (bits of RegionOperands::error). The CPU bytecode stops with an
/// error status in the same cases; generated code instead finishes the call with a defined
/// result (mask: not visible; score: -inf, i.e. also dropped) and ORs the cause in here, so
/// the runtime can fail the step after the kernel with the same message class.
enum RegionError : u32 {
  kRegionErrorDivision = 1u,     ///< integer division/remainder by zero, or INT_MIN / -1
  kRegionErrorOutOfRange = 2u,   ///< a region_load index outside its operand
  kRegionErrorPoison = 4u,       ///< poison reached a region_load index or the yield
};

/// The extra operands of one attention op plus the error word. Passed by value.
struct RegionOperands {
  RegionOperand operand[kMaxRegionOperands];
  /// Where traps are reported (atomically on the device); may be null to ignore them.
  u32* error;
};

}  // namespace rgn
}  // namespace ingot

#endif  // INGOT_CORE_KERNELS_REGION_OPERANDS_H
