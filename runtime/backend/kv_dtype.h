// KvDtype: the element type of the paged KV cache, as a runtime option and a CLI value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/base/status.h"

namespace ingot {

/// How K and V rows are stored in the KV pool.
enum class KvDtype : uint8_t {
  kF32 = 0,
  /// OCP FP8 E4M3FN codes with one f32 scale per (block, layer, K/V, kv head): a quarter of
  /// f32's bytes (plus 4 bytes of scale per block-head), so a pool of the same size holds
  /// about 4x the tokens. Attention reads it back as f32.
  kFp8E4M3 = 1,
};

/// "f32" or "fp8" (the --kv-dtype values).
inline const char* kvDtypeName(KvDtype d) { return d == KvDtype::kFp8E4M3 ? "fp8" : "f32"; }

/// Parses a --kv-dtype value: f32 or fp8 (also fp8_e4m3); anything else is an error naming
/// the value and the choices.
inline StatusOr<KvDtype> parseKvDtype(const std::string& s) {
  if (s == "f32") return KvDtype::kF32;
  if (s == "fp8" || s == "fp8_e4m3") return KvDtype::kFp8E4M3;
  return invalidArgument("--kv-dtype must be f32 or fp8, got '" + s + "'");
}

/// A --kv-dtype flag's value: empty (the flag not given) = unset, i.e. the artifact's own
/// KV dtype; else parseKvDtype().
inline StatusOr<std::optional<KvDtype>> parseKvDtypeFlag(const std::string& s) {
  if (s.empty()) return std::optional<KvDtype>();
  StatusOr<KvDtype> d = parseKvDtype(s);
  if (!d.ok()) return d.status();
  return std::optional<KvDtype>(*d);
}

}  // namespace ingot
