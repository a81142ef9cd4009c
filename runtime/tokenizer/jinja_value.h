// Jinja values for chat templates: the dynamic value type, its Python-style text and JSON.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ingot::jinja {

/// A template value. Lists and mappings are shared (copies alias), as in Python; mappings
/// keep insertion order because `tojson` prints keys in that order (sort_keys=False).
struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kMap };
  using Entries = std::vector<std::pair<std::string, Value>>;

  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<std::vector<Value>> list;
  std::shared_ptr<Entries> map;
  bool isNamespace = false;  // made by namespace(): the only mapping `set x.y = ...` may change

  static Value none() { Value v; v.kind = Kind::kNone; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::kBool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::kInt; v.i = x; return v; }
  static Value number(double x) { Value v; v.kind = Kind::kFloat; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::kString; v.s = std::move(x); return v; }
  static Value emptyList();
  static Value emptyMap();

  bool isNumber() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  double asDouble() const { return kind == Kind::kFloat ? f : kind == Kind::kInt ? double(i) : double(b); }
  /// The value under `key` of a mapping, or null.
  const Value* get(const std::string& key) const;
  /// Sets `key` of a mapping (replacing in place, or appending).
  void put(const std::string& key, Value v);

  bool truthy() const;
  /// What `{{ v }}` prints: Python's str() of the value.
  std::string text() const;
  /// Python's repr() (how a value prints inside a list or mapping).
  std::string repr() const;
};

/// Jinja equality (numbers by value, lists and mappings element-wise).
bool equal(const Value& a, const Value& b);

/// Python's repr() of a float (shortest text that reads back the same).
std::string formatFloat(double x);

/// transformers' `tojson`: json.dumps(v, ensure_ascii=False, indent=indent) with indent < 0
/// meaning none (", " and ": " separators) and keys in insertion order.
std::string toJson(const Value& v, int indent);

/// Number of code points in UTF-8 text (Python's len of a str).
size_t codePointCount(const std::string& s);

}  // namespace ingot::jinja
