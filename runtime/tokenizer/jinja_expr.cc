// Jinja expressions for chat templates: lexer and evaluator.
#include "runtime/tokenizer/jinja_expr.h"

#include <algorithm>
#include <cctype>

namespace ingot::jinja {

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if ((a.kind == K::kInt || a.kind == K::kBool) && (b.kind == K::kInt || b.kind == K::kBool)) {
    return (a.kind == K::kInt ? a.i : a.b) == (b.kind == K::kInt ? b.i : b.b);
  }
  if (a.kind != b.kind) return false;
  if (a.kind == K::kString) return a.s == b.s;
  if (a.kind == K::kList) return a.list == b.list;
  if (a.kind == K::kMap) return a.map == b.map;
  return true;  // none == none, undefined == undefined
}

StatusOr<std::vector<Token>> lexExpression(const std::string& src) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < src.size()) {
    char c = src[i];
    if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < src.size() && (std::isalnum(static_cast<unsigned char>(src[j])) || src[j] == '_')) ++j;
      out.push_back({Token::kName, src.substr(i, j - i)});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
      out.push_back({Token::kInt, src.substr(i, j - i)});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string s;
      size_t j = i + 1;
      for (; j < src.size() && src[j] != c; ++j) {
        if (src[j] == '\\' && j + 1 < src.size()) {
          char e = src[++j];
          s += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        } else {
          s += src[j];
        }
      }
      if (j >= src.size()) return invalidArgument("chat template: unterminated string");
      out.push_back({Token::kString, s});
      i = j + 1;
    } else {
      static const char* kTwo[] = {"==", "!=", "<=", ">="};
      std::string op(1, c);
      for (const char* two : kTwo) {
        if (src.compare(i, 2, two) == 0) op = two;
      }
      if (op.size() == 1 && std::string("()[].,|~+-<>=:").find(c) == std::string::npos) {
        return invalidArgument(std::string("chat template: unexpected character '") + c + "'");
      }
      out.push_back({Token::kOp, op});
      i += op.size();
    }
  }
  out.push_back({Token::kEnd, ""});
  return out;
}

namespace {

Status evalError(const std::string& m) { return invalidArgument("chat template: " + m); }

std::string stripChars(const std::string& s, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  if (right) while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

StatusOr<Value> evaluate(const Expr& e, const std::vector<Scope>& scopes) {
  using K = Value::Kind;
  auto arg = [&](size_t k) { return evaluate(*e.args[k], scopes); };
  switch (e.kind) {
    case ExprKind::kLiteral: return e.literal;
    case ExprKind::kVar:
      for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
        auto found = it->find(e.name);
        if (found != it->end()) return found->second;
      }
      return Value();
    case ExprKind::kAttr:
    case ExprKind::kIndex: {
      INGOT_ASSIGN_OR_RETURN(Value obj, arg(0));
      Value key = Value::string(e.name);
      if (e.kind == ExprKind::kIndex) { INGOT_ASSIGN_OR_RETURN(key, arg(1)); }
      if (obj.kind == K::kMap && key.kind == K::kString) {
        auto it = obj.map->find(key.s);
        return it == obj.map->end() ? Value() : it->second;
      }
      if (obj.kind == K::kList && key.kind == K::kInt) {
        int64_t n = static_cast<int64_t>(obj.list->size());
        int64_t i = key.i < 0 ? key.i + n : key.i;
        if (i < 0 || i >= n) return evalError("list index " + std::to_string(key.i) + " out of range");
        return (*obj.list)[i];
      }
      if (obj.kind == K::kUndefined) return evalError("'" + key.text() + "' of an undefined value");
      return Value();
    }
    case ExprKind::kNot: { INGOT_ASSIGN_OR_RETURN(Value v, arg(0)); return Value::boolean(!v.truthy()); }
    case ExprKind::kNeg: {
      INGOT_ASSIGN_OR_RETURN(Value v, arg(0));
      if (v.kind != K::kInt) return evalError("unary '-' of a non-number");
      return Value::integer(-v.i);
    }
    case ExprKind::kBinary: {
      INGOT_ASSIGN_OR_RETURN(Value a, arg(0));
      if (e.name == "and" && !a.truthy()) return a;
      if (e.name == "or" && a.truthy()) return a;
      INGOT_ASSIGN_OR_RETURN(Value b, arg(1));
      if (e.name == "and" || e.name == "or") return b;
      if (e.name == "~") return Value::string(a.text() + b.text());
      if (e.name == "==") return Value::boolean(equal(a, b));
      if (e.name == "!=") return Value::boolean(!equal(a, b));
      if (e.name == "in") {
        if (b.kind == K::kString && a.kind == K::kString) return Value::boolean(b.s.find(a.s) != std::string::npos);
        if (b.kind == K::kList) {
          for (const Value& v : *b.list) if (equal(v, a)) return Value::boolean(true);
          return Value::boolean(false);
        }
        if (b.kind == K::kMap && a.kind == K::kString) return Value::boolean(b.map->count(a.s) > 0);
        return evalError("'in' needs a string, list or mapping on the right");
      }
      if (e.name == "+" && a.kind == K::kString && b.kind == K::kString) return Value::string(a.s + b.s);
      if (e.name == "+" && a.kind == K::kList && b.kind == K::kList) {
        Value v = a;
        v.list = std::make_shared<std::vector<Value>>(*a.list);
        v.list->insert(v.list->end(), b.list->begin(), b.list->end());
        return v;
      }
      if (a.kind == K::kInt && b.kind == K::kInt) {
        if (e.name == "+") return Value::integer(a.i + b.i);
        if (e.name == "-") return Value::integer(a.i - b.i);
        if (e.name == "<") return Value::boolean(a.i < b.i);
        if (e.name == ">") return Value::boolean(a.i > b.i);
        if (e.name == "<=") return Value::boolean(a.i <= b.i);
        if (e.name == ">=") return Value::boolean(a.i >= b.i);
      }
      return evalError("cannot apply '" + e.name + "' to " + a.text() + " and " + b.text());
    }
    case ExprKind::kFilter: {
      INGOT_ASSIGN_OR_RETURN(Value v, arg(0));
      if (e.name == "length") {
        if (v.kind == K::kList) return Value::integer(static_cast<int64_t>(v.list->size()));
        if (v.kind == K::kMap) return Value::integer(static_cast<int64_t>(v.map->size()));
        return Value::integer(static_cast<int64_t>(v.text().size()));
      }
      std::string s = v.text();
      if (e.name == "trim") return Value::string(stripChars(s, true, true));
      for (char& c : s) c = static_cast<char>(e.name == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                                                : std::tolower(static_cast<unsigned char>(c)));
      return Value::string(s);
    }
    case ExprKind::kTest: {
      INGOT_ASSIGN_OR_RETURN(Value v, arg(0));
      bool r = e.name == "defined" ? v.kind != K::kUndefined
             : e.name == "undefined" ? v.kind == K::kUndefined
             : e.name == "none" ? v.kind == K::kNone : v.kind == K::kString;
      return Value::boolean(r != e.negated);
    }
    case ExprKind::kCall: {  // raise_exception(message)
      std::string message = "raise_exception";
      if (!e.args.empty()) { INGOT_ASSIGN_OR_RETURN(Value m, arg(0)); message = m.text(); }
      return evalError(message);
    }
    case ExprKind::kMethod: {
      INGOT_ASSIGN_OR_RETURN(Value obj, arg(0));
      if (obj.kind != K::kString) return evalError("method '" + e.name + "' of a non-string");
      if (e.name == "strip" || e.name == "lstrip" || e.name == "rstrip") {
        return Value::string(stripChars(obj.s, e.name != "rstrip", e.name != "lstrip"));
      }
      if (e.args.size() != 2) return evalError("'" + e.name + "' takes one argument");
      INGOT_ASSIGN_OR_RETURN(Value x, arg(1));
      const std::string& s = obj.s;
      const std::string& p = x.s;
      bool r = p.size() <= s.size() &&
               (e.name == "startswith" ? s.compare(0, p.size(), p) == 0
                                       : s.compare(s.size() - p.size(), p.size(), p) == 0);
      return Value::boolean(r);
    }
    case ExprKind::kCond: {
      INGOT_ASSIGN_OR_RETURN(Value c, arg(1));
      return c.truthy() ? arg(0) : arg(2);
    }
    case ExprKind::kList: {
      Value v;
      v.kind = K::kList;
      v.list = std::make_shared<std::vector<Value>>();
      for (size_t k = 0; k < e.args.size(); ++k) {
        INGOT_ASSIGN_OR_RETURN(Value item, arg(k));
        v.list->push_back(std::move(item));
      }
      return v;
    }
  }
  return evalError("internal: unknown expression");
}

}  // namespace ingot::jinja
