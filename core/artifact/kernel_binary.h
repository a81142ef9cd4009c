// Picks which of a kernel's binaries (cubin per arch, or PTX) a given GPU should load.
#pragma once

#include <string>

#include "core/base/status.h"
#include "schemas/artifact_generated.h"

namespace ingot {

/// The device a kernel binary is chosen for: compute capability and a name for messages.
struct GpuTarget {
  int major = 0;  // e.g. 9 for an H100/H200
  int minor = 0;
  std::string name;  // e.g. "NVIDIA H200"
  /// The SIMT emulator's device (CudaDriver::emulated): it loads the "simt" source binary.
  bool emulated = false;
};

/// Chooses the binary to load for `gpu`, in this order (docs/artifact-format.md):
///   1. a cubin the device runs: the same major version and a minor version no newer
///      than the device's; an `a` target (sm_90a) runs only on exactly that version, an
///      `f` target (sm_100f) on its family (same major, minor >= its own). Among several,
///      the newest minor wins, then `a` over `f` over plain.
///   2. else PTX for a virtual arch the device can JIT (compute_XY with XY <= the device;
///      `compute_XYa` only on exactly XY), the newest first — normally generic compute_80.
///   3. else an error naming the GPU and the targets the artifact carries.
/// An emulated device (GpuTarget::emulated) takes the source binary (target "simt") and
/// nothing else; a GPU never takes it.
StatusOr<const schema::KernelBinaryDef*> selectKernelBinary(const schema::KernelDef& kernel,
                                                            const GpuTarget& gpu);

}  // namespace ingot
