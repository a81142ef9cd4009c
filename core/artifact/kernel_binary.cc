// Picks which of a kernel's binaries (cubin per arch, or PTX) a given GPU should load.
#include "core/artifact/kernel_binary.h"

#include <cctype>
#include <optional>
#include <string_view>

#include "core/artifact/manifest_checks.h"

namespace ingot {
namespace {

/// A parsed target string: "sm_90a" -> {9, 0, 'a'}, "compute_80" -> {8, 0, 0}.
struct ParsedTarget {
  int major;
  int minor;
  char suffix;  // 0, 'a' or 'f'
  bool isVirtual;
};

std::optional<ParsedTarget> parseTarget(std::string_view target) {
  ParsedTarget parsed{0, 0, 0, false};
  if (target.substr(0, 3) == "sm_") {
    target.remove_prefix(3);
  } else if (target.substr(0, 8) == "compute_") {
    target.remove_prefix(8);
    parsed.isVirtual = true;
  } else {
    return std::nullopt;
  }
  if (!target.empty() && (target.back() == 'a' || target.back() == 'f')) {
    parsed.suffix = target.back();
    target.remove_suffix(1);
  }
  if (target.size() < 2 || target.size() > 4) return std::nullopt;
  int number = 0;
  for (char c : target) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    number = number * 10 + (c - '0');
  }
  parsed.major = number / 10;
  parsed.minor = number % 10;
  return parsed;
}

/// Whether code for `t` runs on a device of compute capability major.minor.
bool runsOn(const ParsedTarget& t, int major, int minor) {
  if (t.suffix == 'a') return t.major == major && t.minor == minor;
  if (!t.isVirtual) return t.major == major && t.minor <= minor;  // plain and `f` cubins
  return t.major < major || (t.major == major && t.minor <= minor);  // PTX JIT forward
}

int suffixRank(char suffix) { return suffix == 'a' ? 2 : suffix == 'f' ? 1 : 0; }

}  // namespace

StatusOr<const schema::KernelBinaryDef*> selectKernelBinary(const schema::KernelDef& kernel,
                                                            const GpuTarget& gpu) {
  const schema::KernelBinaryDef* best = nullptr;
  std::optional<ParsedTarget> bestTarget;
  bool bestIsCubin = false;
  std::string available;
  if (kernel.binaries()) {
    for (const schema::KernelBinaryDef* binary : *kernel.binaries()) {
      std::string_view name = binary->target()->string_view();
      if (!available.empty()) available += ", ";
      available += displayName(binary->target());
      if (gpu.emulated) {
        if (binary->format() == schema::BinaryFormat::Source && name == "simt" && !best)
          best = binary;
        continue;
      }
      std::optional<ParsedTarget> t = parseTarget(name);
      if (!t) continue;
      bool isCubin = binary->format() == schema::BinaryFormat::Cubin;
      bool isPtx = binary->format() == schema::BinaryFormat::Ptx;
      if ((!isCubin && !isPtx) || (isCubin && t->isVirtual)) continue;
      if (!runsOn(*t, gpu.major, gpu.minor)) continue;
      bool better = false;
      if (!best) {
        better = true;
      } else if (isCubin != bestIsCubin) {
        better = isCubin;
      } else if (t->major * 10 + t->minor != bestTarget->major * 10 + bestTarget->minor) {
        better = t->major * 10 + t->minor > bestTarget->major * 10 + bestTarget->minor;
      } else {
        better = suffixRank(t->suffix) > suffixRank(bestTarget->suffix);
      }
      if (better) {
        best = binary;
        bestTarget = t;
        bestIsCubin = isCubin;
      }
    }
  }
  if (best) return best;
  if (gpu.emulated)
    return failedPrecondition("kernel '" + displayName(kernel.name()) +
                              "' has no source for the SIMT emulator (target simt; compile the "
                              "artifact again with this ingot); the artifact carries: " +
                              (available.empty() ? std::string("nothing") : available));
  return failedPrecondition("kernel '" + displayName(kernel.name()) + "' has no binary for GPU " +
                            (gpu.name.empty() ? std::string("(unnamed)") : gpu.name) +
                            " (sm_" + std::to_string(gpu.major) + std::to_string(gpu.minor) +
                            "); the artifact carries: " +
                            (available.empty() ? std::string("nothing") : available));
}

}  // namespace ingot
