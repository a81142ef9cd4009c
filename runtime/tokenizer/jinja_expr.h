// Jinja expressions for chat templates: tokens, the expression AST, its parser and evaluator.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "runtime/tokenizer/jinja_value.h"

namespace ingot::jinja {

enum class ExprKind {
  kLiteral, kVar, kAttr, kIndex, kSlice, kNot, kNeg, kBinary, kFilter, kTest, kCall, kMethod,
  kCond, kList, kDict
};

/// An expression node. `args` holds the operands: for filters, tests and methods args[0] is
/// the subject; for slices args are (object, start, stop, step) with null for a missing part;
/// for dict literals keys and values alternate.
struct Expr {
  ExprKind kind;
  Value literal;
  std::string name;  // variable, attribute, operator, filter, test, function or method
  bool negated = false;
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;  // name=value arguments
};
using ExprPtr = std::unique_ptr<Expr>;

struct Token {
  enum Kind { kName, kString, kInt, kFloat, kOp, kEnd } kind;
  std::string text;
};

/// Splits a tag's text into tokens.
StatusOr<std::vector<Token>> lexExpression(const std::string& src);

/// Recursive-descent parser with Jinja's precedence. Statement parsing uses the token-level
/// helpers; the first error is kept and reported by finish()/parseAll().
class ExprParser {
 public:
  explicit ExprParser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  /// Parses one expression that must use all remaining tokens.
  StatusOr<ExprPtr> parseAll();
  /// Parses one (conditional) expression and leaves the rest.
  ExprPtr parseExpression();
  /// Parses one expression without a trailing `if ... else` (a for loop's iterable).
  ExprPtr parseWithoutCondition() { return parseOr(); }
  /// An error if something failed or tokens are left over.
  Status finish();

  const Token& peek() const { return t_[p_]; }
  bool atEnd() const { return t_[p_].kind == Token::kEnd; }
  bool acceptName(const char* n);
  bool acceptOp(const char* op);
  std::string takeName();
  void fail(const std::string& m) { if (error_.empty()) error_ = m; }

 private:
  static ExprPtr literal(Value v);
  static ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b);
  ExprPtr parseOr();
  ExprPtr parseAnd();
  ExprPtr parseNot();
  ExprPtr parseCompare();
  ExprPtr parseMath1();
  ExprPtr parseConcat();
  ExprPtr parseMath2();
  ExprPtr parsePow();
  ExprPtr parseUnary();
  ExprPtr parsePrimary();
  ExprPtr parsePostfix(ExprPtr e);
  ExprPtr parseSubscript(ExprPtr obj);
  void parseArgs(Expr* call);  // after '('

  std::vector<Token> t_;
  size_t p_ = 0;
  std::string error_;
};

/// Variables by name; the evaluator looks innermost-last.
using Scope = std::map<std::string, Value>;

/// Evaluates `e` in `scopes`. Errors name the problem (raise_exception's message, a bad
/// operand); out-of-range indexes and missing keys give undefined, as in Jinja.
StatusOr<Value> evaluate(const Expr& e, const std::vector<Scope>& scopes);

}  // namespace ingot::jinja
