// Jinja builtins for chat templates: filters, tests and string/mapping methods.
#include "runtime/tokenizer/jinja_builtins.h"

#include <cctype>
#include <cmath>

namespace ingot::jinja {

namespace {

using K = Value::Kind;

bool isStripped(unsigned char c, const std::string* chars) {
  return chars ? chars->find(static_cast<char>(c)) != std::string::npos : std::isspace(c) != 0;
}

std::string stripChars(const std::string& s, bool left, bool right, const std::string* chars) {
  size_t b = 0, e = s.size();
  if (left) while (b < e && isStripped(static_cast<unsigned char>(s[b]), chars)) ++b;
  if (right) while (e > b && isStripped(static_cast<unsigned char>(s[e - 1]), chars)) --e;
  return s.substr(b, e - b);
}

std::string mapChars(std::string s, int (*f)(int)) {
  for (char& c : s) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  return s;
}

std::string titleCase(std::string s) {
  bool start = true;
  for (char& c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
    start = !std::isalnum(u);
  }
  return s;
}

std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

}  // namespace

Value listOf(std::vector<Value> items) {
  Value v = Value::emptyList();
  *v.list = std::move(items);
  return v;
}

namespace {

/// The items `for` iterates and list-taking filters see: list elements or mapping keys.
StatusOr<std::vector<Value>> iterate(const Value& v) {
  if (v.kind == K::kList) return *v.list;
  if (v.kind == K::kMap) {
    std::vector<Value> keys;
    for (const auto& entry : *v.map) keys.push_back(Value::string(entry.first));
    return keys;
  }
  if (v.kind == K::kUndefined || v.kind == K::kNone) return std::vector<Value>();
  return evalError("cannot iterate over " + v.repr());
}


}  // namespace

StatusOr<bool> runTest(const std::string& name, const Value& v, const std::vector<Value>& args) {
  auto arg0 = [&]() -> StatusOr<Value> {
    if (args.empty()) return evalError("test '" + name + "' needs an argument");
    return args[0];
  };
  if (name == "defined") return v.kind != K::kUndefined;
  if (name == "undefined") return v.kind == K::kUndefined;
  if (name == "none") return v.kind == K::kNone;
  if (name == "string") return v.kind == K::kString;
  if (name == "number") return v.kind == K::kInt || v.kind == K::kFloat;
  if (name == "integer") return v.kind == K::kInt;
  if (name == "float") return v.kind == K::kFloat;
  if (name == "boolean") return v.kind == K::kBool;
  if (name == "true") return v.kind == K::kBool && v.b;
  if (name == "false") return v.kind == K::kBool && !v.b;
  if (name == "mapping") return v.kind == K::kMap;
  if (name == "iterable") return v.kind == K::kList || v.kind == K::kMap || v.kind == K::kString;
  if (name == "sequence") return v.kind == K::kList || v.kind == K::kMap || v.kind == K::kString;
  if (name == "odd" || name == "even") {
    if (v.kind != K::kInt) return evalError("test '" + name + "' of a non-integer");
    return (v.i % 2 != 0) == (name == "odd");
  }
  INGOT_ASSIGN_OR_RETURN(Value other, arg0());
  if (name == "eq" || name == "equalto") return equal(v, other);
  if (name == "ne") return !equal(v, other);
  if (name == "divisibleby") {
    if (v.kind != K::kInt || other.kind != K::kInt || other.i == 0) return evalError("bad divisibleby");
    return v.i % other.i == 0;
  }
  return evalError("unknown test '" + name + "'");
}

StatusOr<Value> applyFilter(const std::string& name, const Value& v, const std::vector<Value>& args,
                            const std::map<std::string, Value>& kwargs) {
  auto kw = [&](const char* key, size_t pos) -> const Value* {
    auto it = kwargs.find(key);
    if (it != kwargs.end()) return &it->second;
    return pos < args.size() ? &args[pos] : nullptr;
  };
  if (name == "length" || name == "count") {
    if (v.kind == K::kList) return Value::integer(static_cast<int64_t>(v.list->size()));
    if (v.kind == K::kMap) return Value::integer(static_cast<int64_t>(v.map->size()));
    return Value::integer(static_cast<int64_t>(codePointCount(v.text())));
  }
  if (name == "tojson") {
    const Value* indent = kw("indent", 0);
    return Value::string(toJson(v, indent && indent->kind == K::kInt ? static_cast<int>(indent->i) : -1));
  }
  if (name == "safe") return v;
  if (name == "string") return Value::string(v.text());
  if (name == "default" || name == "d") {
    const Value* fallback = kw("default_value", 0);
    const Value* boolean = kw("boolean", 1);
    bool useFallback = v.kind == K::kUndefined || (boolean && boolean->truthy() && !v.truthy());
    return useFallback ? (fallback ? *fallback : Value::string("")) : v;
  }
  if (name == "int") {
    if (v.kind == K::kInt) return v;
    if (v.kind == K::kFloat) return Value::integer(static_cast<int64_t>(v.f));
    if (v.kind == K::kBool) return Value::integer(v.b);
    try { return Value::integer(std::stoll(v.text())); } catch (...) { return Value::integer(0); }
  }
  if (name == "items") {
    if (v.kind == K::kUndefined) return Value::emptyList();
    if (v.kind != K::kMap) return evalError("filter 'items' of a non-mapping");
    std::vector<Value> pairs;
    for (const auto& [key, val] : *v.map) pairs.push_back(listOf({Value::string(key), val}));
    return listOf(std::move(pairs));
  }
  if (name == "list" || name == "first" || name == "last" || name == "join" || name == "select" ||
      name == "reject") {
    INGOT_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(v));
    if (name == "list") return listOf(std::move(items));
    if (name == "first") return items.empty() ? Value() : items.front();
    if (name == "last") return items.empty() ? Value() : items.back();
    if (name == "join") {
      const Value* sep = kw("d", 0);
      std::string out;
      for (size_t k = 0; k < items.size(); ++k) out += (k && sep ? sep->text() : "") + items[k].text();
      return Value::string(out);
    }
    std::vector<Value> kept;
    for (const Value& item : items) {
      bool pass = item.truthy();
      if (!args.empty()) {
        std::vector<Value> testArgs(args.begin() + 1, args.end());
        INGOT_ASSIGN_OR_RETURN(pass, runTest(args[0].text(), item, testArgs));
      }
      if (pass == (name == "select")) kept.push_back(item);
    }
    return listOf(std::move(kept));
  }
  std::string s = v.text();
  if (name == "trim") return Value::string(stripChars(s, true, true, nullptr));
  if (name == "upper") return Value::string(mapChars(s, std::toupper));
  if (name == "lower") return Value::string(mapChars(s, std::tolower));
  if (name == "title") return Value::string(titleCase(s));
  if (name == "capitalize") {
    s = mapChars(s, std::tolower);
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    return Value::string(s);
  }
  if (name == "replace") {
    if (args.size() < 2) return evalError("filter 'replace' needs two arguments");
    return Value::string(replaceAll(s, args[0].text(), args[1].text()));
  }
  if (name == "abs") {
    if (v.kind == K::kInt) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.kind == K::kFloat) return Value::number(std::fabs(v.f));
    return evalError("filter 'abs' of a non-number");
  }
  return evalError("unknown filter '" + name + "'");
}

StatusOr<Value> callMethod(const std::string& name, const Value& obj, const std::vector<Value>& args) {
  if (obj.kind == K::kMap) {
    if (name == "items") return applyFilter("items", obj, {}, {});
    if (name == "keys" || name == "values") {
      std::vector<Value> out;
      for (const auto& [key, val] : *obj.map) out.push_back(name == "keys" ? Value::string(key) : val);
      return listOf(std::move(out));
    }
    if (name == "get") {
      if (args.empty()) return evalError("'get' needs a key");
      const Value* found = obj.get(args[0].text());
      return found ? *found : args.size() > 1 ? args[1] : Value::none();
    }
  }
  if (obj.kind != K::kString) return evalError("method '" + name + "' of " + obj.repr());
  const std::string& s = obj.s;
  const std::string* chars = !args.empty() && args[0].kind == K::kString ? &args[0].s : nullptr;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::string(stripChars(s, name != "rstrip", name != "lstrip", chars));
  }
  if (name == "upper") return Value::string(mapChars(s, std::toupper));
  if (name == "lower") return Value::string(mapChars(s, std::tolower));
  if (name == "title") return Value::string(titleCase(s));
  if (name == "replace") {
    if (args.size() < 2) return evalError("'replace' needs two arguments");
    return Value::string(replaceAll(s, args[0].text(), args[1].text()));
  }
  if (name == "split") {
    std::vector<Value> parts;
    if (!chars) {
      size_t k = 0;
      while (true) {
        while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
        if (k >= s.size()) break;
        size_t e = k;
        while (e < s.size() && !std::isspace(static_cast<unsigned char>(s[e]))) ++e;
        parts.push_back(Value::string(s.substr(k, e - k)));
        k = e;
      }
    } else {
      if (chars->empty()) return evalError("empty separator");
      size_t k = 0;
      for (size_t pos; (pos = s.find(*chars, k)) != std::string::npos; k = pos + chars->size()) {
        parts.push_back(Value::string(s.substr(k, pos - k)));
      }
      parts.push_back(Value::string(s.substr(k)));
    }
    return listOf(std::move(parts));
  }
  if (!chars) return evalError("'" + name + "' takes one string argument");
  const std::string& p = *chars;
  bool r = p.size() <= s.size() && (name == "startswith" ? s.compare(0, p.size(), p) == 0
                                                         : s.compare(s.size() - p.size(), p.size(), p) == 0);
  return Value::boolean(r);
}

}  // namespace ingot::jinja
