// Semantic checks of a verified manifest: every index in range, every tensor inside the blob.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/status.h"
#include "schemas/artifact_generated.h"

namespace ingot {

/// Checks what the FlatBuffers verifier cannot: 8-byte vector alignment, dtypes known, shapes non-negative, byte
/// sizes matching dtype and shape, tensors 4096-aligned and inside a blob of `blobSize`
/// bytes (skipped when `hasBlob` is false), quant/program/kernel/variant indices in
/// range, tokenizer arrays consistent, shard ranges inside the blob. The manifest must
/// already have passed the FlatBuffers verifier.
Status checkManifest(const schema::Manifest& manifest, uint64_t blobSize, bool hasBlob);

/// The step's param named `name`, or null.
const schema::ParamDef* findStepParam(const schema::ProgramStepDef& step, const char* name);

/// A manifest string made safe for a one-line message: control bytes escaped, at most
/// 120 characters. Manifest strings are untrusted input.
std::string displayName(const flatbuffers::String* s);

}  // namespace ingot
