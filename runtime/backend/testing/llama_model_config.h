#pragma once
// Private to the test Llama builders (llama_program.cc, llama_program_tp.cc):
// kept out of llama_program.h so that tests which include the runtime's
// Tokenizer never see the compiler's artifact structs, which share its name.

#include "compiler/artifact/ArtifactContents.h"
#include "runtime/backend/testing/llama_program.h"

namespace ingot::testing {

/// The model config the builders write for `options`.
ModelConfig llamaModelConfig(const LlamaProgramOptions& options);

}  // namespace ingot::testing
