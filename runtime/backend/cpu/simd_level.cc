// Run-time detection of the vector instruction set (cpuid through __builtin_cpu_supports).
#include "runtime/backend/cpu/simd_level.h"

#include <cstdlib>
#include <cstring>

namespace ingot {

SimdLevel detectSimdLevel() {
  SimdLevel level = SimdLevel::kScalar;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    level = SimdLevel::kAvx2;
  if (level == SimdLevel::kAvx2 && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    level = SimdLevel::kAvx512;
  if (level == SimdLevel::kAvx512 && __builtin_cpu_supports("avx512bf16"))
    level = SimdLevel::kAvx512Bf16;
#endif
  if (const char* env = std::getenv("INGOT_CPU_SIMD")) {
    SimdLevel wanted = level;
    if (std::strcmp(env, "scalar") == 0) wanted = SimdLevel::kScalar;
    if (std::strcmp(env, "avx2") == 0) wanted = SimdLevel::kAvx2;
    if (std::strcmp(env, "avx512") == 0) wanted = SimdLevel::kAvx512;
    if (wanted < level) level = wanted;
  }
  return level;
}

const char* simdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar: return "scalar";
    case SimdLevel::kAvx2: return "avx2";
    case SimdLevel::kAvx512: return "avx512";
    case SimdLevel::kAvx512Bf16: return "avx512bf16";
  }
  return "unknown";
}

}  // namespace ingot
