// Jinja expressions for chat templates: values, the expression AST and its parser.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace ingot::jinja {

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kString, kList, kMap };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  std::string s;
  std::shared_ptr<std::vector<Value>> list;
  std::shared_ptr<std::map<std::string, Value>> map;

  static Value none() { Value v; v.kind = Kind::kNone; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::kBool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::kInt; v.i = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::kString; v.s = std::move(x); return v; }

  bool truthy() const {
    switch (kind) {
      case Kind::kUndefined: case Kind::kNone: return false;
      case Kind::kBool: return b;
      case Kind::kInt: return i != 0;
      case Kind::kString: return !s.empty();
      case Kind::kList: return !list->empty();
      case Kind::kMap: return !map->empty();
    }
    return false;
  }
  std::string text() const {
    switch (kind) {
      case Kind::kUndefined: return "";
      case Kind::kNone: return "None";
      case Kind::kBool: return b ? "True" : "False";
      case Kind::kInt: return std::to_string(i);
      case Kind::kString: return s;
      default: return kind == Kind::kList ? "[...]" : "{...}";
    }
  }
};

/// Jinja equality (ints and bools compare by value, lists and maps by identity).
bool equal(const Value& a, const Value& b);

// ----------------------------------------------------------------------------- expressions

enum class ExprKind { kLiteral, kVar, kAttr, kIndex, kNot, kNeg, kBinary, kFilter, kTest, kCall,
                      kMethod, kCond, kList };

struct Expr {
  ExprKind kind;
  Value literal;
  std::string name;  // variable, attribute, operator, filter, test, function or method
  bool negated = false;
  std::vector<std::unique_ptr<Expr>> args;
};
using ExprPtr = std::unique_ptr<Expr>;

inline ExprPtr makeExpr(ExprKind kind, std::string name = {}) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->name = std::move(name);
  return e;
}

struct Token {
  enum Kind { kName, kString, kInt, kOp, kEnd } kind;
  std::string text;
};

class ExprParser {
 public:
  explicit ExprParser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  StatusOr<ExprPtr> parseAll() {
    auto e = parseCond();
    if (e && !atEnd()) fail("unexpected '" + t_[p_].text + "'");
    if (!error_.empty()) return invalidArgument("chat template: " + error_);
    return std::move(e);
  }
  /// For statements: the tokens left after what the statement consumed itself.
  const Token& peek() const { return t_[p_]; }
  bool atEnd() const { return t_[p_].kind == Token::kEnd; }
  bool acceptName(const char* n) {
    if (t_[p_].kind == Token::kName && t_[p_].text == n) { ++p_; return true; }
    return false;
  }
  std::string takeName() {
    if (t_[p_].kind != Token::kName) { fail("expected a name"); return {}; }
    return t_[p_++].text;
  }
  ExprPtr parseCond() {
    ExprPtr then = parseOr();
    if (then && acceptName("if")) {
      auto e = makeExpr(ExprKind::kCond);
      e->args.push_back(std::move(then));
      e->args.push_back(parseOr());
      e->args.push_back(acceptName("else") ? parseCond() : literal(Value()));
      return e;
    }
    return then;
  }
  const std::string& error() const { return error_; }

 private:
  void fail(const std::string& m) { if (error_.empty()) error_ = m; }
  bool acceptOp(const char* op) {
    if (t_[p_].kind == Token::kOp && t_[p_].text == op) { ++p_; return true; }
    return false;
  }
  static ExprPtr literal(Value v) { auto e = makeExpr(ExprKind::kLiteral); e->literal = std::move(v); return e; }
  static ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = makeExpr(ExprKind::kBinary, op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }
  ExprPtr parseOr() {
    ExprPtr e = parseAnd();
    while (acceptName("or")) e = binary("or", std::move(e), parseAnd());
    return e;
  }
  ExprPtr parseAnd() {
    ExprPtr e = parseNot();
    while (acceptName("and")) e = binary("and", std::move(e), parseNot());
    return e;
  }
  ExprPtr parseNot() {
    if (acceptName("not")) { auto e = makeExpr(ExprKind::kNot); e->args.push_back(parseNot()); return e; }
    return parseCompare();
  }
  ExprPtr parseCompare() {
    ExprPtr e = parseConcat();
    while (true) {
      std::string op;
      for (const char* o : {"==", "!=", "<=", ">=", "<", ">"}) if (op.empty() && acceptOp(o)) op = o;
      if (!op.empty()) { e = binary(op, std::move(e), parseConcat()); continue; }
      if (acceptName("in")) { e = binary("in", std::move(e), parseConcat()); continue; }
      if (t_[p_].text == "not" && t_[p_ + 1].text == "in") {
        p_ += 2;
        auto n = makeExpr(ExprKind::kNot);
        n->args.push_back(binary("in", std::move(e), parseConcat()));
        e = std::move(n);
        continue;
      }
      if (acceptName("is")) {
        auto test = makeExpr(ExprKind::kTest);
        test->negated = acceptName("not");
        test->name = takeName();
        if (test->name != "defined" && test->name != "undefined" && test->name != "none" &&
            test->name != "string") {
          fail("unsupported test '" + test->name + "'");
        }
        test->args.push_back(std::move(e));
        e = std::move(test);
        continue;
      }
      return e;
    }
  }
  ExprPtr parseConcat() {
    ExprPtr e = parseAdd();
    while (acceptOp("~")) e = binary("~", std::move(e), parseAdd());
    return e;
  }
  ExprPtr parseAdd() {
    ExprPtr e = parseUnary();
    while (true) {
      if (acceptOp("+")) e = binary("+", std::move(e), parseUnary());
      else if (acceptOp("-")) e = binary("-", std::move(e), parseUnary());
      else return e;
    }
  }
  ExprPtr parseUnary() {
    if (acceptOp("-")) { auto e = makeExpr(ExprKind::kNeg); e->args.push_back(parseUnary()); return e; }
    return parsePostfix(parsePrimary());
  }
  ExprPtr parsePrimary() {
    const Token& t = t_[p_];
    if (t.kind == Token::kString) {
      ++p_;
      std::string s = t.text;
      while (t_[p_].kind == Token::kString) s += t_[p_++].text;  // adjacent literals join
      return literal(Value::string(s));
    }
    if (t.kind == Token::kInt) { ++p_; return literal(Value::integer(std::stoll(t.text))); }
    if (t.kind == Token::kName) {
      ++p_;
      if (t.text == "true" || t.text == "True") return literal(Value::boolean(true));
      if (t.text == "false" || t.text == "False") return literal(Value::boolean(false));
      if (t.text == "none" || t.text == "None") return literal(Value::none());
      if (acceptOp("(")) {
        auto call = makeExpr(ExprKind::kCall, t.text);
        if (t.text != "raise_exception") fail("unsupported function '" + t.text + "'");
        parseArgs(call.get());
        return call;
      }
      return makeExpr(ExprKind::kVar, t.text);
    }
    if (acceptOp("(")) {
      ExprPtr e = parseCond();
      if (!acceptOp(")")) fail("expected ')'");
      return e;
    }
    if (acceptOp("[")) {
      auto list = makeExpr(ExprKind::kList);
      while (!acceptOp("]")) {
        if (atEnd()) { fail("unterminated list"); break; }
        list->args.push_back(parseCond());
        acceptOp(",");
      }
      return list;
    }
    fail(t.kind == Token::kEnd ? "expression ends early" : "unexpected '" + t.text + "'");
    ++p_;
    return literal(Value());
  }
  void parseArgs(Expr* call) {  // after '('
    while (!acceptOp(")")) {
      if (atEnd()) { fail("expected ')'"); return; }
      call->args.push_back(parseCond());
      acceptOp(",");
    }
  }
  ExprPtr parsePostfix(ExprPtr e) {
    while (true) {
      if (acceptOp(".")) {
        std::string name = takeName();
        if (acceptOp("(")) {
          auto m = makeExpr(ExprKind::kMethod, name);
          if (name != "strip" && name != "lstrip" && name != "rstrip" && name != "startswith" &&
              name != "endswith") {
            fail("unsupported method '" + name + "'");
          }
          m->args.push_back(std::move(e));
          parseArgs(m.get());
          e = std::move(m);
        } else {
          auto a = makeExpr(ExprKind::kAttr, name);
          a->args.push_back(std::move(e));
          e = std::move(a);
        }
      } else if (acceptOp("[")) {
        auto idx = makeExpr(ExprKind::kIndex);
        idx->args.push_back(std::move(e));
        idx->args.push_back(parseCond());
        if (!acceptOp("]")) fail("expected ']'");
        e = std::move(idx);
      } else if (acceptOp("|")) {
        auto f = makeExpr(ExprKind::kFilter, takeName());
        if (f->name != "trim" && f->name != "length" && f->name != "upper" && f->name != "lower") {
          fail("unsupported filter '" + f->name + "'");
        }
        f->args.push_back(std::move(e));
        e = std::move(f);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  std::string error_;
};


/// Splits a tag's text into tokens.
StatusOr<std::vector<Token>> lexExpression(const std::string& src);

/// Evaluates `e` in `scopes` (innermost last). Errors name the problem (raise_exception's
/// message, a bad index).
using Scope = std::map<std::string, Value>;
StatusOr<Value> evaluate(const Expr& e, const std::vector<Scope>& scopes);

}  // namespace ingot::jinja
