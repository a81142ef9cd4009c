// Jinja expressions for chat templates: the lexer and the parser.
#include "runtime/tokenizer/jinja_expr.h"

#include <cctype>
#include <set>

namespace ingot::jinja {

namespace {

// What the evaluator implements; anything else is a parse error naming it.
const std::set<std::string> kFilters = {
    "abs", "capitalize", "count", "d", "default", "first", "int", "items", "join", "last",
    "length", "list", "lower", "reject", "replace", "safe", "select", "string", "title", "tojson",
    "trim", "upper"};
const std::set<std::string> kTests = {
    "boolean", "defined", "divisibleby", "eq", "equalto", "even", "false", "float", "integer",
    "iterable", "mapping", "ne", "none", "number", "odd", "sequence", "string", "true",
    "undefined"};
const std::set<std::string> kFunctions = {"namespace", "raise_exception", "range"};
const std::set<std::string> kMethods = {
    "endswith", "get", "items", "keys", "lower", "lstrip", "replace", "rstrip", "split",
    "startswith", "strip", "title", "upper", "values"};

bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace

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
    } else if (isDigit(c)) {
      size_t j = i;
      while (j < src.size() && isDigit(src[j])) ++j;
      bool isFloat = j + 1 < src.size() && src[j] == '.' && isDigit(src[j + 1]);
      if (isFloat) {
        ++j;
        while (j < src.size() && isDigit(src[j])) ++j;
      }
      out.push_back({isFloat ? Token::kFloat : Token::kInt, src.substr(i, j - i)});
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
      static const char* kTwo[] = {"==", "!=", "<=", ">=", "//", "**"};
      std::string op(1, c);
      for (const char* two : kTwo) {
        if (src.compare(i, 2, two) == 0) op = two;
      }
      if (op.size() == 1 && std::string("()[]{}.,|~+-*/%<>=:").find(c) == std::string::npos) {
        return invalidArgument(std::string("chat template: unexpected character '") + c + "'");
      }
      out.push_back({Token::kOp, op});
      i += op.size();
    }
  }
  out.push_back({Token::kEnd, ""});
  return out;
}

bool ExprParser::acceptName(const char* n) {
  if (t_[p_].kind == Token::kName && t_[p_].text == n) { ++p_; return true; }
  return false;
}

bool ExprParser::acceptOp(const char* op) {
  if (t_[p_].kind == Token::kOp && t_[p_].text == op) { ++p_; return true; }
  return false;
}

std::string ExprParser::takeName() {
  if (t_[p_].kind != Token::kName) { fail("expected a name, got '" + t_[p_].text + "'"); return {}; }
  return t_[p_++].text;
}

StatusOr<ExprPtr> ExprParser::parseAll() {
  ExprPtr e = parseExpression();
  INGOT_RETURN_IF_ERROR(finish());
  return std::move(e);
}

Status ExprParser::finish() {
  if (error_.empty() && !atEnd()) fail("unexpected '" + t_[p_].text + "'");
  if (!error_.empty()) return invalidArgument("chat template: " + error_);
  return okStatus();
}

ExprPtr ExprParser::literal(Value v) {
  auto e = std::make_unique<Expr>();
  e->kind = ExprKind::kLiteral;
  e->literal = std::move(v);
  return e;
}

namespace {
ExprPtr makeExpr(ExprKind kind, std::string name = {}) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->name = std::move(name);
  return e;
}
}  // namespace

ExprPtr ExprParser::binary(const std::string& op, ExprPtr a, ExprPtr b) {
  auto e = makeExpr(ExprKind::kBinary, op);
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

ExprPtr ExprParser::parseExpression() {
  ExprPtr then = parseOr();
  if (acceptName("if")) {
    auto e = makeExpr(ExprKind::kCond);
    e->args.push_back(std::move(then));
    e->args.push_back(parseOr());
    e->args.push_back(acceptName("else") ? parseExpression() : literal(Value()));
    return e;
  }
  return then;
}

ExprPtr ExprParser::parseOr() {
  ExprPtr e = parseAnd();
  while (acceptName("or")) e = binary("or", std::move(e), parseAnd());
  return e;
}

ExprPtr ExprParser::parseAnd() {
  ExprPtr e = parseNot();
  while (acceptName("and")) e = binary("and", std::move(e), parseNot());
  return e;
}

ExprPtr ExprParser::parseNot() {
  if (acceptName("not")) {
    auto e = makeExpr(ExprKind::kNot);
    e->args.push_back(parseNot());
    return e;
  }
  return parseCompare();
}

ExprPtr ExprParser::parseCompare() {
  ExprPtr e = parseMath1();
  while (true) {
    std::string op;
    for (const char* o : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (op.empty() && acceptOp(o)) op = o;
    }
    if (!op.empty()) { e = binary(op, std::move(e), parseMath1()); continue; }
    if (acceptName("in")) { e = binary("in", std::move(e), parseMath1()); continue; }
    if (t_[p_].kind == Token::kName && t_[p_].text == "not" && t_[p_ + 1].text == "in") {
      p_ += 2;
      auto n = makeExpr(ExprKind::kNot);
      n->args.push_back(binary("in", std::move(e), parseMath1()));
      e = std::move(n);
      continue;
    }
    return e;
  }
}

// Jinja binds `~` tighter than + and -, and looser than * / // %.
ExprPtr ExprParser::parseMath1() {
  ExprPtr e = parseConcat();
  while (true) {
    if (acceptOp("+")) e = binary("+", std::move(e), parseConcat());
    else if (acceptOp("-")) e = binary("-", std::move(e), parseConcat());
    else return e;
  }
}

ExprPtr ExprParser::parseConcat() {
  ExprPtr e = parseMath2();
  while (acceptOp("~")) e = binary("~", std::move(e), parseMath2());
  return e;
}

ExprPtr ExprParser::parseMath2() {
  ExprPtr e = parsePow();
  while (true) {
    std::string op;
    for (const char* o : {"*", "//", "/", "%"}) {
      if (op.empty() && acceptOp(o)) op = o;
    }
    if (op.empty()) return e;
    e = binary(op, std::move(e), parsePow());
  }
}

ExprPtr ExprParser::parsePow() {
  ExprPtr e = parseUnary();
  while (acceptOp("**")) e = binary("**", std::move(e), parseUnary());
  return e;
}

ExprPtr ExprParser::parseUnary() {
  if (acceptOp("-")) {
    auto e = makeExpr(ExprKind::kNeg);
    e->args.push_back(parseUnary());
    return e;
  }
  if (acceptOp("+")) return parseUnary();
  return parsePostfix(parsePrimary());
}

ExprPtr ExprParser::parsePrimary() {
  const Token t = t_[p_];
  if (t.kind == Token::kString) {
    ++p_;
    std::string s = t.text;
    while (t_[p_].kind == Token::kString) s += t_[p_++].text;  // adjacent literals join
    return literal(Value::string(s));
  }
  if (t.kind == Token::kInt) { ++p_; return literal(Value::integer(std::stoll(t.text))); }
  if (t.kind == Token::kFloat) { ++p_; return literal(Value::number(std::stod(t.text))); }
  if (t.kind == Token::kName) {
    ++p_;
    if (t.text == "true" || t.text == "True") return literal(Value::boolean(true));
    if (t.text == "false" || t.text == "False") return literal(Value::boolean(false));
    if (t.text == "none" || t.text == "None") return literal(Value::none());
    if (acceptOp("(")) {
      auto call = makeExpr(ExprKind::kCall, t.text);
      if (!kFunctions.count(t.text)) fail("unsupported function '" + t.text + "'");
      parseArgs(call.get());
      return call;
    }
    return makeExpr(ExprKind::kVar, t.text);
  }
  if (acceptOp("(")) {
    ExprPtr e = parseExpression();
    if (t_[p_].text == ",") fail("unsupported syntax: tuple literal");
    if (!acceptOp(")")) fail("expected ')'");
    return e;
  }
  if (acceptOp("[")) {
    auto list = makeExpr(ExprKind::kList);
    while (!acceptOp("]")) {
      if (atEnd() || !error_.empty()) { fail("unterminated list"); break; }
      list->args.push_back(parseExpression());
      if (t_[p_].text != "]" && !acceptOp(",")) fail("expected ',' or ']' in a list");
    }
    return list;
  }
  if (acceptOp("{")) {
    auto dict = makeExpr(ExprKind::kDict);
    while (!acceptOp("}")) {
      if (atEnd() || !error_.empty()) { fail("unterminated dict"); break; }
      dict->args.push_back(parseExpression());
      if (!acceptOp(":")) fail("expected ':' in a dict");
      dict->args.push_back(parseExpression());
      if (t_[p_].text != "}" && !acceptOp(",")) fail("expected ',' or '}' in a dict");
    }
    return dict;
  }
  fail(t.kind == Token::kEnd ? "expression ends early" : "unexpected '" + t.text + "'");
  if (!atEnd()) ++p_;
  return literal(Value());
}

void ExprParser::parseArgs(Expr* call) {
  while (!acceptOp(")")) {
    if (atEnd() || !error_.empty()) { fail("expected ')'"); return; }
    if (t_[p_].kind == Token::kName && t_[p_ + 1].kind == Token::kOp && t_[p_ + 1].text == "=") {
      std::string key = t_[p_].text;
      p_ += 2;
      call->kwargs.emplace_back(key, parseExpression());
    } else {
      if (!call->kwargs.empty()) fail("positional argument after a keyword argument");
      call->args.push_back(parseExpression());
    }
    if (t_[p_].text != ")" && !acceptOp(",")) fail("expected ',' or ')' in arguments");
  }
}

ExprPtr ExprParser::parseSubscript(ExprPtr obj) {  // after '['
  auto part = [&](const char* stop1, const char* stop2) -> ExprPtr {
    if (t_[p_].kind == Token::kOp && (t_[p_].text == stop1 || t_[p_].text == stop2)) return nullptr;
    return parseExpression();
  };
  ExprPtr start = part(":", "]");
  if (!acceptOp(":")) {
    if (!acceptOp("]")) fail("expected ']'");
    auto idx = makeExpr(ExprKind::kIndex);
    idx->args.push_back(std::move(obj));
    idx->args.push_back(start ? std::move(start) : literal(Value()));
    return idx;
  }
  auto slice = makeExpr(ExprKind::kSlice);
  slice->args.push_back(std::move(obj));
  slice->args.push_back(std::move(start));
  slice->args.push_back(part(":", "]"));
  slice->args.push_back(acceptOp(":") ? part("]", "]") : nullptr);
  if (!acceptOp("]")) fail("expected ']' after a slice");
  return slice;
}

ExprPtr ExprParser::parsePostfix(ExprPtr e) {
  while (error_.empty()) {
    if (acceptOp(".")) {
      std::string name = takeName();
      if (acceptOp("(")) {
        auto m = makeExpr(ExprKind::kMethod, name);
        if (!kMethods.count(name)) fail("unsupported method '" + name + "'");
        m->args.push_back(std::move(e));
        parseArgs(m.get());
        e = std::move(m);
      } else {
        auto a = makeExpr(ExprKind::kAttr, name);
        a->args.push_back(std::move(e));
        e = std::move(a);
      }
    } else if (acceptOp("[")) {
      e = parseSubscript(std::move(e));
    } else if (acceptOp("|")) {
      auto f = makeExpr(ExprKind::kFilter, takeName());
      if (!error_.empty()) return e;
      if (!kFilters.count(f->name)) fail("unsupported filter '" + f->name + "'");
      f->args.push_back(std::move(e));
      if (acceptOp("(")) parseArgs(f.get());
      e = std::move(f);
    } else if (acceptName("is")) {
      auto test = makeExpr(ExprKind::kTest);
      test->negated = acceptName("not");
      test->name = takeName();
      if (!error_.empty()) return e;
      if (!kTests.count(test->name)) fail("unsupported test '" + test->name + "'");
      test->args.push_back(std::move(e));
      if (acceptOp("(")) {
        parseArgs(test.get());
      } else if (t_[p_].kind == Token::kString || t_[p_].kind == Token::kInt ||
                 t_[p_].kind == Token::kFloat) {
        test->args.push_back(parsePrimary());  // `x is divisibleby 3`
      }
      e = std::move(test);
    } else {
      return e;
    }
  }
  return e;
}

}  // namespace ingot::jinja
