// Jinja builtins for chat templates: the filters, tests and methods the evaluator calls.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "runtime/tokenizer/jinja_value.h"

namespace ingot::jinja {

/// An evaluation error ("chat template: " + m).
inline Status evalError(const std::string& m) { return invalidArgument("chat template: " + m); }

/// A list value holding `items`.
Value listOf(std::vector<Value> items);

/// `v is name(args...)`.
StatusOr<bool> runTest(const std::string& name, const Value& v, const std::vector<Value>& args);

/// `v | name(args..., kwargs...)`.
StatusOr<Value> applyFilter(const std::string& name, const Value& v, const std::vector<Value>& args,
                            const std::map<std::string, Value>& kwargs);

/// `obj.name(args...)` for the string and mapping methods templates use.
StatusOr<Value> callMethod(const std::string& name, const Value& obj, const std::vector<Value>& args);

}  // namespace ingot::jinja
