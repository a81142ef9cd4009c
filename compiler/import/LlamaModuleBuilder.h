//===- LlamaModuleBuilder.h - Llama-family serving step in the ingot dialect -*- C++ -*-===//
//
// Emits the serving-step function of a Llama-family model (Llama 2/3, SmolLM, Mistral,
// Qwen2 with q/k/v bias, tied or untied embeddings) from an ImportedModel: the same
// signature and op sequence as examples/models/tiny_llama.mlir, weights as references.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "compiler/import/ImportedModel.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace ingot::importer {

/// Builds the module; on failure `error` names what is missing or inconsistent.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildLlamaModule(mlir::MLIRContext &context, const ImportedModel &model, std::string &error);

} // namespace ingot::importer
