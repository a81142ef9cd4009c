// Self-speculation: an early-exit draft program cut from a lowered main program.
#pragma once

#include <cstdint>

#include "core/artifact/artifact_contents.h"
#include "core/base/status.h"

namespace ingot {

/// The main program's first `layers` decoder layers followed by its final norm and logits
/// head (LayerSkip-style early exit): role Draft, `layers` = 0 .. layers - 1, the same
/// buffers, weights (tensor indices: nothing is copied) and attention variant; its KV cache
/// holds `layers` layers. A decoder layer starts at the rms_norm (or add_rms_norm) whose
/// output the layer's kv_write depends on; the residual stream entering layer `layers` feeds
/// the final norm (an add_rms_norm start computes that stream: the draft runs it with the
/// final norm's weight). Errors when `layers` is not in [1, the model's layers) or the
/// program does not have this shape (one kv_write per layer, a logits step fed by a norm).
StatusOr<Program> earlyExitDraftProgram(const Program& main, int32_t layers);

}  // namespace ingot
