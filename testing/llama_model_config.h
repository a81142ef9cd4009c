#pragma once
// Private to the test Llama builders (llama_program.cc, llama_program_tp.cc):
// kept out of llama_program.h so that tests which include the runtime's
// Tokenizer never see the compiler's artifact structs, which share its name.

#include "core/artifact/artifact_contents.h"
#include "core/artifact/artifact_writer.h"
#include "testing/llama_program.h"

namespace ingot::testing {

/// The model config the builders write for `options`.
ModelConfig llamaModelConfig(const LlamaProgramOptions& options);

/// LlamaProgramOptions::fake_cuda_kernels: text "cubins" for the fake libcuda (every f32
/// fused kernel, every quantized GEMV, one decode and one combine kernel), the decode kernel
/// linked to every attention step of every program written so far. Every rank of a sharded
/// model keeps the model's query heads per kv head, so one decode kernel serves all ranks.
void addFakeCudaKernels(ArtifactWriter& writer, const LlamaProgramOptions& options);

}  // namespace ingot::testing
