// SimdLevel: which vector instruction set the CPU backend's kernels use, chosen at run time.
#pragma once

namespace ingot {

/// Kernel flavours, from the portable fallback up. The build never assumes any of them
/// (no -march=native); kernels for each are compiled with function-level target
/// attributes and picked by detectSimdLevel().
enum class SimdLevel {
  kScalar = 0,  ///< portable C++ (whatever the baseline target gives)
  kAvx2 = 1,    ///< AVX2 + FMA + F16C, 8 f32 lanes
  kAvx512 = 2,  ///< AVX-512 F/BW/VL, 16 f32 lanes
  /// AVX-512 plus AVX512_BF16: bf16-weight linears multiply bf16-rounded activations
  /// (vdpbf16ps); everything else as kAvx512.
  kAvx512Bf16 = 3,
};

/// The best level this CPU supports; the environment variable INGOT_CPU_SIMD
/// (scalar|avx2|avx512|avx512bf16) lowers it (never raises it above what the CPU has).
SimdLevel detectSimdLevel();

/// "scalar", "avx2", "avx512", "avx512bf16".
const char* simdLevelName(SimdLevel level);

}  // namespace ingot
