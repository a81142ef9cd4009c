// How a duration reads in messages.
#pragma once

#include <chrono>
#include <string>

namespace ingot {

/// "30 s" for whole seconds, else "250 ms": how timeouts read in error messages.
inline std::string durationText(std::chrono::milliseconds t) {
  return t.count() % 1000 == 0 ? std::to_string(t.count() / 1000) + " s"
                               : std::to_string(t.count()) + " ms";
}

}  // namespace ingot
