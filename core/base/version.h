// The Ingot version string, shared by the CLI and the artifact provenance.
#pragma once

namespace ingot {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace ingot
