// Inline PTX of the kernels: one named wrapper per instruction, the only device code that is not CUDA C++.
#pragma once

// Every `asm` of the kernel sources lives here, each behind a wrapper named after its
// instruction. Under the SIMT emulator (INGOT_SIMT, codegen/cuda/emulator, which runs the
// device code on the CPU) a wrapper calls the emulator's implementation of its instruction
// instead: that branch is the only emulator-specific code in the kernels.

namespace ingot {
namespace ptx {

/// D = A (16x16 bf16, row-major) * B (16x8 bf16, column-major) + C with f32 accumulators,
/// in place on `c`: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32. A warp-wide
/// operation: every lane holds a fragment of each operand as the PTX ISA lays them out
/// ("Matrix Fragments for mma.m16n8k16 with floating point type").
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
#if defined(INGOT_SIMT)
  ::ingot::simt::mmaM16N8K16Bf16(c, a, b0, b1);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

}  // namespace ptx
}  // namespace ingot
