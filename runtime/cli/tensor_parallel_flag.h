// `--tp N` on the runtime commands (run, chat, bench, eval ppl, serve): a check that an
// artifact was compiled for the tensor-parallel world size the user expects.
#pragma once

#include <cstdint>
#include <string>

#include "core/artifact/artifact_reader.h"
#include "core/base/status.h"

namespace ingot {

/// Checks `--tp tp` against `artifact` (opened from `path`): 0 accepts any world size,
/// N > 0 must equal the artifact's (1 for an unsharded one). The ranks of a sharded
/// artifact run whatever the flag says; the flag only makes a deployment's assumption
/// explicit, so a script written for a --tp 2 artifact fails loudly on another.
/// The error names the flag, the artifact and both world sizes.
Status checkTensorParallelFlag(int32_t tp, const Artifact& artifact, const std::string& path);

}  // namespace ingot
