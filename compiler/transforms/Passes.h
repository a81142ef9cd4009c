//===- Passes.h - passes of the ingot compiler ------------------*- C++ -*-===//
#pragma once

#include <memory>
#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace ingot::compiler {

#define GEN_PASS_DECL
#include "compiler/transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/transforms/Passes.h.inc"

} // namespace ingot::compiler
