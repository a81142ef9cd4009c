//===- CompileUsage.h - `ingot compile` options checked before any work -*- C++ -*-===//
//
// Usage errors of `ingot compile` (exit status 2, one line naming the flags), found
// before anything is read or built, and what kind of input a path is.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <ostream>
#include <string>

#include "compiler/driver/CompileCommand.h"

namespace ingot::compiler {

/// What a stage of `ingot compile` returns to go on (any other value is the exit status).
inline constexpr int kContinue = -1;

/// ConfigOnly: a Hugging Face config.json (a file, or a directory without weights).
enum class InputKind { Missing, Gguf, Directory, ConfigOnly, Mlir };

InputKind classifyInput(const std::string &path);

/// Option combinations refused before any input is read: 2 after printing the error to
/// `err`, else kContinue.
int checkUsage(const CompileOptions &options, std::ostream &err);

/// Those that depend on the kind of input (1 for a missing input), else kContinue.
int checkInputUsage(const CompileOptions &options, InputKind kind, bool isCheckpoint,
                    std::ostream &err);

} // namespace ingot::compiler
