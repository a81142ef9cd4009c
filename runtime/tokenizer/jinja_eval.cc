// Jinja expressions for chat templates: the evaluator (operators, slices, calls).
#include <algorithm>
#include <cmath>

#include "runtime/tokenizer/jinja_builtins.h"
#include "runtime/tokenizer/jinja_expr.h"

namespace ingot::jinja {

namespace {

using K = Value::Kind;

StatusOr<Value> slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  std::vector<Value> items;
  std::vector<std::string> chars;
  if (obj.kind == K::kList) {
    items = *obj.list;
  } else if (obj.kind == K::kString) {
    for (size_t k = 0; k < obj.s.size();) {
      size_t len = 1;
      while (k + len < obj.s.size() && (static_cast<unsigned char>(obj.s[k + len]) & 0xC0) == 0x80) ++len;
      chars.push_back(obj.s.substr(k, len));
      k += len;
    }
  } else {
    return evalError("cannot slice " + obj.repr());
  }
  const int64_t n = static_cast<int64_t>(obj.kind == K::kList ? items.size() : chars.size());
  int64_t st = step && step->kind == K::kInt ? step->i : 1;
  if (st == 0) return evalError("slice step cannot be zero");
  auto bound = [&](const Value* v, int64_t dflt) {
    if (!v || v->kind != K::kInt) return dflt;
    int64_t x = v->i < 0 ? v->i + n : v->i;
    return st > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t b = bound(start, st > 0 ? 0 : n - 1), e = bound(stop, st > 0 ? n : -1);
  Value out = obj.kind == K::kList ? Value::emptyList() : Value::string("");
  for (int64_t k = b; st > 0 ? k < e : k > e; k += st) {
    if (obj.kind == K::kList) out.list->push_back(items[k]);
    else out.s += chars[k];
  }
  return out;
}

StatusOr<Value> arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "*" && a.kind == K::kString && b.kind == K::kInt) {
    std::string out;
    for (int64_t k = 0; k < b.i; ++k) out += a.s;
    return Value::string(out);
  }
  if (!a.isNumber() || !b.isNumber()) {
    return evalError("cannot apply '" + op + "' to " + a.repr() + " and " + b.repr());
  }
  const bool ints = a.kind != K::kFloat && b.kind != K::kFloat;
  const int64_t x = a.kind == K::kBool ? a.b : a.i, y = b.kind == K::kBool ? b.b : b.i;
  const double fx = a.asDouble(), fy = b.asDouble();
  if (op == "<") return Value::boolean(fx < fy);
  if (op == ">") return Value::boolean(fx > fy);
  if (op == "<=") return Value::boolean(fx <= fy);
  if (op == ">=") return Value::boolean(fx >= fy);
  if (op == "+") return ints ? Value::integer(x + y) : Value::number(fx + fy);
  if (op == "-") return ints ? Value::integer(x - y) : Value::number(fx - fy);
  if (op == "*") return ints ? Value::integer(x * y) : Value::number(fx * fy);
  if (op == "**") return ints && y >= 0 ? Value::integer(static_cast<int64_t>(std::pow(x, y)))
                                        : Value::number(std::pow(fx, fy));
  if (fy == 0) return evalError("division by zero");
  if (op == "/") return Value::number(fx / fy);
  if (op == "//") {
    if (!ints) return Value::number(std::floor(fx / fy));
    int64_t q = x / y;
    return Value::integer((x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q);
  }
  if (op == "%") {
    if (!ints) return Value::number(fx - fy * std::floor(fx / fy));
    int64_t r = x % y;
    return Value::integer(r != 0 && ((r < 0) != (y < 0)) ? r + y : r);
  }
  return evalError("unknown operator '" + op + "'");
}

/// Evaluates the arguments of `e` from index `from` into `out` and its keyword arguments
/// into `kw`.
Status evalArgs(const Expr& e, const std::vector<Scope>& scopes, size_t from,
                std::vector<Value>* out, std::map<std::string, Value>* kw) {
  for (size_t k = from; k < e.args.size(); ++k) {
    INGOT_ASSIGN_OR_RETURN(Value v, evaluate(*e.args[k], scopes));
    out->push_back(std::move(v));
  }
  for (const auto& [key, ex] : e.kwargs) {
    INGOT_ASSIGN_OR_RETURN(Value v, evaluate(*ex, scopes));
    (*kw)[key] = std::move(v);
  }
  return okStatus();
}

/// A variable: the innermost scope that defines it, else undefined.
StatusOr<Value> lookupVar(const Expr& e, const std::vector<Scope>& scopes) {
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    auto found = it->find(e.name);
    if (found != it->end()) return found->second;
  }
  return Value();
}

/// `obj.name` and `obj[key]`: a mapping's entry or a list's item (negative counts from the end).
StatusOr<Value> evalSubscript(const Expr& e, const std::vector<Scope>& scopes) {
  INGOT_ASSIGN_OR_RETURN(Value obj, evaluate(*e.args[0], scopes));
  Value key = Value::string(e.name);
  if (e.kind == ExprKind::kIndex) { INGOT_ASSIGN_OR_RETURN(key, evaluate(*e.args[1], scopes)); }
  if (obj.kind == K::kMap && key.kind == K::kString) {
    const Value* found = obj.get(key.s);
    return found ? *found : Value();
  }
  if (obj.kind == K::kList && key.kind == K::kInt) {
    int64_t n = static_cast<int64_t>(obj.list->size());
    int64_t i = key.i < 0 ? key.i + n : key.i;
    return i < 0 || i >= n ? Value() : (*obj.list)[i];
  }
  if (obj.kind == K::kUndefined) return evalError("'" + key.text() + "' of an undefined value");
  return Value();
}

/// `obj[start:stop:step]`, any of the three omitted.
StatusOr<Value> evalSlice(const Expr& e, const std::vector<Scope>& scopes) {
  INGOT_ASSIGN_OR_RETURN(Value obj, evaluate(*e.args[0], scopes));
  Value parts[3];
  for (int k = 0; k < 3; ++k) {
    if (e.args[k + 1]) { INGOT_ASSIGN_OR_RETURN(parts[k], evaluate(*e.args[k + 1], scopes)); }
  }
  return slice(obj, e.args[1] ? &parts[0] : nullptr, e.args[2] ? &parts[1] : nullptr,
               e.args[3] ? &parts[2] : nullptr);
}

/// `not x` and `-x`.
StatusOr<Value> evalUnary(const Expr& e, const std::vector<Scope>& scopes) {
  INGOT_ASSIGN_OR_RETURN(Value v, evaluate(*e.args[0], scopes));
  if (e.kind == ExprKind::kNot) return Value::boolean(!v.truthy());
  if (v.kind == K::kInt) return Value::integer(-v.i);
  if (v.kind == K::kFloat) return Value::number(-v.f);
  return evalError("unary '-' of a non-number");
}

/// `a in b`: a substring, a list element or a mapping key.
StatusOr<Value> membership(const Value& a, const Value& b) {
  if (b.kind == K::kString && a.kind == K::kString) {
    return Value::boolean(b.s.find(a.s) != std::string::npos);
  }
  if (b.kind == K::kList) {
    for (const Value& v : *b.list) if (equal(v, a)) return Value::boolean(true);
    return Value::boolean(false);
  }
  if (b.kind == K::kMap && a.kind == K::kString) return Value::boolean(b.get(a.s) != nullptr);
  return evalError("'in' needs a string, list or mapping on the right");
}

/// A binary operator: short-circuit logic, concatenation, comparison, membership, arithmetic.
StatusOr<Value> evalBinary(const Expr& e, const std::vector<Scope>& scopes) {
  INGOT_ASSIGN_OR_RETURN(Value a, evaluate(*e.args[0], scopes));
  if (e.name == "and" && !a.truthy()) return a;
  if (e.name == "or" && a.truthy()) return a;
  INGOT_ASSIGN_OR_RETURN(Value b, evaluate(*e.args[1], scopes));
  if (e.name == "and" || e.name == "or") return b;
  if (e.name == "~") return Value::string(a.text() + b.text());
  if (e.name == "==") return Value::boolean(equal(a, b));
  if (e.name == "!=") return Value::boolean(!equal(a, b));
  if (e.name == "in") return membership(a, b);
  if (e.name == "+" && a.kind == K::kString && b.kind == K::kString) {
    return Value::string(a.s + b.s);
  }
  if (e.name == "+" && a.kind == K::kList && b.kind == K::kList) {
    Value v = listOf(*a.list);
    v.list->insert(v.list->end(), b.list->begin(), b.list->end());
    return v;
  }
  if (a.kind == K::kString && b.kind == K::kString && e.name.size() <= 2 && e.name[0] != '+' &&
      (e.name[0] == '<' || e.name[0] == '>')) {
    int c = a.s.compare(b.s);
    return Value::boolean(e.name == "<"    ? c < 0
                          : e.name == ">"  ? c > 0
                          : e.name == "<=" ? c <= 0
                                           : c >= 0);
  }
  return arithmetic(e.name, a, b);
}

/// `x | filter(...)`, `x is test(...)` and `x.method(...)`.
StatusOr<Value> evalApply(const Expr& e, const std::vector<Scope>& scopes) {
  INGOT_ASSIGN_OR_RETURN(Value v, evaluate(*e.args[0], scopes));
  std::vector<Value> args;
  std::map<std::string, Value> kwargs;
  INGOT_RETURN_IF_ERROR(evalArgs(e, scopes, 1, &args, &kwargs));
  if (e.kind == ExprKind::kFilter) return applyFilter(e.name, v, args, kwargs);
  if (e.kind == ExprKind::kMethod) return callMethod(e.name, v, args);
  INGOT_ASSIGN_OR_RETURN(bool r, runTest(e.name, v, args));
  return Value::boolean(r != e.negated);
}

/// range([start,] stop[, step]) as a list of integers.
StatusOr<Value> rangeOf(const std::vector<Value>& args) {
  if (args.empty() || args.size() > 3) return evalError("range takes 1 to 3 arguments");
  for (const Value& a : args) if (a.kind != K::kInt) return evalError("range of a non-integer");
  int64_t start = args.size() > 1 ? args[0].i : 0;
  int64_t stop = args.size() > 1 ? args[1].i : args[0].i;
  int64_t step = args.size() > 2 ? args[2].i : 1;
  if (step == 0) return evalError("range step cannot be zero");
  std::vector<Value> out;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    out.push_back(Value::integer(k));
  }
  return listOf(std::move(out));
}

/// A call of a global function: raise_exception, namespace or range.
StatusOr<Value> evalCall(const Expr& e, const std::vector<Scope>& scopes) {
  std::vector<Value> args;
  std::map<std::string, Value> kwargs;
  INGOT_RETURN_IF_ERROR(evalArgs(e, scopes, 0, &args, &kwargs));
  if (e.name == "raise_exception") {
    return evalError(args.empty() ? std::string("raise_exception") : args[0].text());
  }
  if (e.name == "namespace") {
    Value ns = Value::emptyMap();
    ns.isNamespace = true;
    for (const auto& [key, ex] : e.kwargs) ns.put(key, kwargs[key]);  // in written order
    return ns;
  }
  return rangeOf(args);
}

/// A list literal `[a, b, ...]`.
StatusOr<Value> evalList(const Expr& e, const std::vector<Scope>& scopes) {
  std::vector<Value> items;
  for (size_t k = 0; k < e.args.size(); ++k) {
    INGOT_ASSIGN_OR_RETURN(Value item, evaluate(*e.args[k], scopes));
    items.push_back(std::move(item));
  }
  return listOf(std::move(items));
}

/// A dict literal `{k: v, ...}` (keys must be strings).
StatusOr<Value> evalDict(const Expr& e, const std::vector<Scope>& scopes) {
  Value d = Value::emptyMap();
  for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
    INGOT_ASSIGN_OR_RETURN(Value key, evaluate(*e.args[k], scopes));
    INGOT_ASSIGN_OR_RETURN(Value val, evaluate(*e.args[k + 1], scopes));
    if (key.kind != K::kString) return evalError("dict keys must be strings");
    d.put(key.s, std::move(val));
  }
  return d;
}

}  // namespace

StatusOr<Value> evaluate(const Expr& e, const std::vector<Scope>& scopes) {
  switch (e.kind) {
    case ExprKind::kLiteral: return e.literal;
    case ExprKind::kVar: return lookupVar(e, scopes);
    case ExprKind::kAttr:
    case ExprKind::kIndex: return evalSubscript(e, scopes);
    case ExprKind::kSlice: return evalSlice(e, scopes);
    case ExprKind::kNot:
    case ExprKind::kNeg: return evalUnary(e, scopes);
    case ExprKind::kBinary: return evalBinary(e, scopes);
    case ExprKind::kFilter:
    case ExprKind::kTest:
    case ExprKind::kMethod: return evalApply(e, scopes);
    case ExprKind::kCall: return evalCall(e, scopes);
    case ExprKind::kCond: {
      INGOT_ASSIGN_OR_RETURN(Value c, evaluate(*e.args[1], scopes));
      return c.truthy() ? evaluate(*e.args[0], scopes) : evaluate(*e.args[2], scopes);
    }
    case ExprKind::kList: return evalList(e, scopes);
    case ExprKind::kDict: return evalDict(e, scopes);
  }
  return evalError("internal: unknown expression");
}

}  // namespace ingot::jinja
