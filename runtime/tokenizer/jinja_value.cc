// Jinja values for chat templates: truthiness, equality, Python-style text and JSON.
#include "runtime/tokenizer/jinja_value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ingot::jinja {

Value Value::emptyList() {
  Value v;
  v.kind = Kind::kList;
  v.list = std::make_shared<std::vector<Value>>();
  return v;
}

Value Value::emptyMap() {
  Value v;
  v.kind = Kind::kMap;
  v.map = std::make_shared<Entries>();
  return v;
}

const Value* Value::get(const std::string& key) const {
  if (kind != Kind::kMap) return nullptr;
  for (const auto& [k, v] : *map) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Value::put(const std::string& key, Value v) {
  for (auto& [k, old] : *map) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  map->emplace_back(key, std::move(v));
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined: case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0;
    case Kind::kString: return !s.empty();
    case Kind::kList: return !list->empty();
    case Kind::kMap: return !map->empty();
  }
  return false;
}

std::string formatFloat(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string out = buf;
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

std::string Value::text() const {
  switch (kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b ? "True" : "False";
    case Kind::kInt: return std::to_string(i);
    case Kind::kFloat: return formatFloat(f);
    case Kind::kString: return s;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind) {
    case Kind::kString: {
      const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
      std::string out(1, quote);
      for (char c : s) {
        if (c == quote || c == '\\') out += '\\', out += c;
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else out += c;
      }
      return out + quote;
    }
    case Kind::kList: {
      std::string out = "[";
      for (size_t k = 0; k < list->size(); ++k) out += (k ? ", " : "") + (*list)[k].repr();
      return out + "]";
    }
    case Kind::kMap: {
      std::string out = "{";
      for (size_t k = 0; k < map->size(); ++k) {
        out += (k ? ", " : "") + Value::string((*map)[k].first).repr() + ": " + (*map)[k].second.repr();
      }
      return out + "}";
    }
    default: return text();
  }
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.isNumber() && b.isNumber()) return a.asDouble() == b.asDouble();
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kString: return a.s == b.s;
    case K::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    case K::kMap:
      if (a.map->size() != b.map->size()) return false;
      for (const auto& [key, v] : *a.map) {
        const Value* other = b.get(key);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    default: return true;  // none == none, undefined == undefined
  }
}

size_t codePointCount(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

namespace {

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // ensure_ascii=False: UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

void appendJson(const Value& v, int indent, int level, std::string* out) {
  using K = Value::Kind;
  const bool pretty = indent >= 0;
  auto newline = [&](int depth) {
    if (pretty) *out += "\n" + std::string(static_cast<size_t>(indent * depth), ' ');
  };
  const char* itemSep = pretty ? "," : ", ";
  switch (v.kind) {
    case K::kUndefined: case K::kNone: *out += "null"; return;
    case K::kBool: *out += v.b ? "true" : "false"; return;
    case K::kInt: *out += std::to_string(v.i); return;
    case K::kFloat:
      *out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity")
                                                         : formatFloat(v.f);
      return;
    case K::kString: *out += jsonString(v.s); return;
    case K::kList:
      if (v.list->empty()) { *out += "[]"; return; }
      *out += "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) *out += itemSep;
        newline(level + 1);
        appendJson((*v.list)[k], indent, level + 1, out);
      }
      newline(level);
      *out += "]";
      return;
    case K::kMap:
      if (v.map->empty()) { *out += "{}"; return; }
      *out += "{";
      for (size_t k = 0; k < v.map->size(); ++k) {
        if (k) *out += itemSep;
        newline(level + 1);
        *out += jsonString((*v.map)[k].first) + ": ";
        appendJson((*v.map)[k].second, indent, level + 1, out);
      }
      newline(level);
      *out += "}";
      return;
  }
}

}  // namespace

std::string toJson(const Value& v, int indent) {
  std::string out;
  appendJson(v, indent, 0, &out);
  return out;
}

}  // namespace ingot::jinja
