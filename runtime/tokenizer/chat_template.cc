// ChatTemplate: splits a template into text and tags, parses statements, renders.
#include "runtime/tokenizer/chat_template.h"

#include "runtime/tokenizer/jinja_expr.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ingot {

using jinja::ExprParser;
using jinja::ExprPtr;
using jinja::Scope;
using jinja::Value;

struct ChatTemplate::Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet } kind;
  std::string text;                // text, or the variable of set
  std::string attr;                // set ns.attr: the attribute
  std::vector<std::string> names;  // the loop variables of for (more than one unpack)
  ExprPtr expr;      // output, for's iterable, set's value
  std::vector<std::pair<ExprPtr, std::vector<std::unique_ptr<Node>>>> branches;  // if (null = else)
  std::vector<std::unique_ptr<Node>> body;
};

namespace {

using Node = ChatTemplate::Node;
using NodeList = std::vector<std::unique_ptr<Node>>;

/// A piece of the template after whitespace control: text, `{{ }}` or `{% %}`.
struct Segment {
  enum Kind { kText, kOutput, kStatement } kind;
  std::string content;
};

bool isBlank(char c) { return c == ' ' || c == '\t'; }
bool isSpace(char c) { return isBlank(c) || c == '\n' || c == '\r'; }

/// Where `close` ends a tag whose content starts at `from`: like Jinja's lexer, a `}}` inside
/// brackets or a string literal (`{{ {'a': {}} }}`) does not end it.
size_t findTagEnd(const std::string& src, size_t from, const std::string& close) {
  int depth = 0;
  for (size_t k = from; k < src.size(); ++k) {
    char c = src[k];
    if (depth == 0 && src.compare(k, close.size(), close) == 0) return k;
    if (c == '\'' || c == '"') {
      for (++k; k < src.size() && src[k] != c; ++k) {
        if (src[k] == '\\') ++k;
      }
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string::npos;
}

/// Splits source into segments applying `-` markers, trim_blocks and lstrip_blocks.
StatusOr<std::vector<Segment>> segment(const std::string& src) {
  std::vector<Segment> out;
  size_t pos = 0;
  bool stripNextLeading = false, trimNextNewline = false;
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' &&
           src[open + 1] != '%' && src[open + 1] != '#') {
      open = src.find('{', open + 1);
    }
    if (open != std::string::npos && open + 1 >= src.size()) open = std::string::npos;
    std::string text = src.substr(pos, (open == std::string::npos ? src.size() : open) - pos);
    bool atLineStart = pos == 0 || src[pos - 1] == '\n';  // where `text` begins
    if (stripNextLeading) {
      size_t k = 0;
      while (k < text.size() && isSpace(text[k])) ++k;
      text.erase(0, k);
      atLineStart = false;
    } else if (trimNextNewline) {  // trim_blocks: one newline after a block tag goes
      if (text.compare(0, 1, "\n") == 0) text.erase(0, 1), atLineStart = true;
      else if (text.compare(0, 2, "\r\n") == 0) text.erase(0, 2), atLineStart = true;
    }
    if (open == std::string::npos) {
      if (!text.empty()) out.push_back({Segment::kText, text});
      break;
    }
    char type = src[open + 1];
    bool block = type != '{';
    size_t inner = open + 2;
    bool stripBefore = inner < src.size() && src[inner] == '-';
    if (stripBefore || src[inner] == '+') ++inner;
    if (stripBefore) {
      while (!text.empty() && isSpace(text.back())) text.pop_back();
    } else if (block && src[open + 2] != '+') {
      // lstrip_blocks: blanks between a line start and a block tag go.
      size_t k = text.size();
      while (k > 0 && isBlank(text[k - 1])) --k;
      if (k == 0 ? atLineStart : text[k - 1] == '\n') text.erase(k);
    }
    if (!text.empty()) out.push_back({Segment::kText, text});
    const std::string close = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
    size_t end = type == '#' ? src.find(close, inner) : findTagEnd(src, inner, close);
    if (end == std::string::npos) {
      return invalidArgument("chat template: tag opened at offset " + std::to_string(open) +
                             " is never closed");
    }
    size_t contentEnd = end;
    stripNextLeading = end > inner && src[end - 1] == '-';
    if (stripNextLeading) --contentEnd;
    trimNextNewline = block;
    if (type != '#') {
      out.push_back({type == '{' ? Segment::kOutput : Segment::kStatement,
                     src.substr(inner, contentEnd - inner)});
    }
    pos = end + 2;
  }
  return out;
}

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segments) : s_(std::move(segments)) {}

  /// Parses nodes until a statement whose keyword is in `stops` (returned in *stop).
  Status parseBody(NodeList* out, std::initializer_list<const char*> stops, std::string* stop,
                   ExprParser** stopParser) {
    while (i_ < s_.size()) {
      const Segment& seg = s_[i_++];
      if (seg.kind == Segment::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->text = seg.content;
        out->push_back(std::move(n));
        continue;
      }
      INGOT_ASSIGN_OR_RETURN(std::vector<jinja::Token> tokens, jinja::lexExpression(seg.content));
      parsers_.push_back(std::make_unique<ExprParser>(std::move(tokens)));
      ExprParser& p = *parsers_.back();
      if (seg.kind == Segment::kOutput) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        INGOT_ASSIGN_OR_RETURN(n->expr, p.parseAll());
        out->push_back(std::move(n));
        continue;
      }
      std::string keyword = p.takeName();
      for (const char* s : stops) {
        if (keyword == s) {
          *stop = keyword;
          *stopParser = &p;
          return okStatus();
        }
      }
      auto n = std::make_unique<Node>();
      if (keyword == "if") {
        n->kind = Node::Kind::kIf;
        std::string next = "elif";
        ExprParser* cond = &p;
        while (next == "elif" || next == "if") {
          INGOT_ASSIGN_OR_RETURN(ExprPtr c, cond->parseAll());
          NodeList body;
          INGOT_RETURN_IF_ERROR(parseBody(&body, {"elif", "else", "endif"}, &next, &cond));
          n->branches.emplace_back(std::move(c), std::move(body));
        }
        if (next == "else") {
          NodeList body;
          INGOT_RETURN_IF_ERROR(parseBody(&body, {"endif"}, &next, &cond));
          n->branches.emplace_back(nullptr, std::move(body));
        }
        if (next != "endif") return invalidArgument("chat template: 'if' without 'endif'");
      } else if (keyword == "for") {
        n->kind = Node::Kind::kFor;
        do n->names.push_back(p.takeName()); while (p.acceptOp(","));
        if (!p.acceptName("in")) p.fail("expected 'in' in 'for'");
        n->expr = p.parseWithoutCondition();
        if (p.acceptName("if")) p.fail("unsupported syntax: 'for ... if' filter");
        if (p.acceptName("recursive")) p.fail("unsupported syntax: recursive loops");
        Status st = p.finish();
        if (!st.ok()) return invalidArgument(st.message() + " in: " + seg.content);
        std::string next;
        ExprParser* end = nullptr;
        INGOT_RETURN_IF_ERROR(parseBody(&n->body, {"endfor"}, &next, &end));
        if (next != "endfor") return invalidArgument("chat template: 'for' without 'endfor'");
      } else if (keyword == "set") {
        n->kind = Node::Kind::kSet;
        n->text = p.takeName();
        if (p.acceptOp(".")) n->attr = p.takeName();
        if (p.peek().text == ",") p.fail("unsupported syntax: multiple targets in 'set'");
        if (p.atEnd()) p.fail("unsupported statement: block 'set' (with 'endset')");
        else if (!p.acceptOp("=")) p.fail("expected '=' in 'set'");
        INGOT_ASSIGN_OR_RETURN(n->expr, p.parseAll());
      } else {
        return invalidArgument("chat template: unsupported statement '" + keyword + "'");
      }
      out->push_back(std::move(n));
    }
    if (stops.size() > 0) {
      return invalidArgument("chat template: missing '" + std::string(*(stops.end() - 1)) + "'");
    }
    return okStatus();
  }

 private:
  std::vector<Segment> s_;
  size_t i_ = 0;
  std::vector<std::unique_ptr<ExprParser>> parsers_;
};

Status renderNodes(const NodeList& nodes, std::vector<Scope>& scopes, std::string* out) {
  for (const auto& n : nodes) {
    switch (n->kind) {
      case Node::Kind::kText: *out += n->text; break;
      case Node::Kind::kOutput: {
        INGOT_ASSIGN_OR_RETURN(Value v, jinja::evaluate(*n->expr, scopes));
        *out += v.text();
        break;
      }
      case Node::Kind::kSet: {
        INGOT_ASSIGN_OR_RETURN(Value v, jinja::evaluate(*n->expr, scopes));
        if (n->attr.empty()) {
          scopes.back()[n->text] = std::move(v);
          break;
        }
        Value* target = nullptr;
        for (auto it = scopes.rbegin(); it != scopes.rend() && !target; ++it) {
          auto found = it->find(n->text);
          if (found != it->end()) target = &found->second;
        }
        if (!target || !target->isNamespace) {
          return invalidArgument("chat template: '" + n->text + "' is not a namespace()");
        }
        target->put(n->attr, std::move(v));
        break;
      }
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n->branches) {
          bool take = true;
          if (cond) {
            INGOT_ASSIGN_OR_RETURN(Value c, jinja::evaluate(*cond, scopes));
            take = c.truthy();
          }
          if (take) {
            INGOT_RETURN_IF_ERROR(renderNodes(body, scopes, out));
            break;
          }
        }
        break;
      case Node::Kind::kFor: {
        INGOT_ASSIGN_OR_RETURN(Value seq, jinja::evaluate(*n->expr, scopes));
        std::vector<Value> items;
        if (seq.kind == Value::Kind::kList) {
          items = *seq.list;
        } else if (seq.kind == Value::Kind::kMap) {
          for (const auto& entry : *seq.map) items.push_back(Value::string(entry.first));
        } else if (seq.kind != Value::Kind::kUndefined && seq.kind != Value::Kind::kNone) {
          return invalidArgument("chat template: 'for' over " + seq.repr());
        }
        const int64_t count = static_cast<int64_t>(items.size());
        for (int64_t k = 0; k < count; ++k) {
          Value loop = Value::emptyMap();
          loop.put("index", Value::integer(k + 1));
          loop.put("index0", Value::integer(k));
          loop.put("revindex", Value::integer(count - k));
          loop.put("revindex0", Value::integer(count - k - 1));
          loop.put("first", Value::boolean(k == 0));
          loop.put("last", Value::boolean(k + 1 == count));
          loop.put("length", Value::integer(count));
          loop.put("previtem", k > 0 ? items[k - 1] : Value());
          loop.put("nextitem", k + 1 < count ? items[k + 1] : Value());
          Scope scope{{"loop", loop}};
          if (n->names.size() == 1) {
            scope[n->names[0]] = items[k];
          } else {
            const Value& item = items[k];
            if (item.kind != Value::Kind::kList || item.list->size() != n->names.size()) {
              return invalidArgument("chat template: cannot unpack " + item.repr() + " into " +
                                     std::to_string(n->names.size()) + " loop variables");
            }
            for (size_t v = 0; v < n->names.size(); ++v) scope[n->names[v]] = (*item.list)[v];
          }
          scopes.push_back(std::move(scope));
          Status st = renderNodes(n->body, scopes, out);
          scopes.pop_back();
          INGOT_RETURN_IF_ERROR(st);
        }
        break;
      }
    }
  }
  return okStatus();
}

}  // namespace

StatusOr<ChatTemplate> ChatTemplate::parse(const std::string& source) {
  INGOT_ASSIGN_OR_RETURN(std::vector<Segment> segments, segment(source));
  TemplateParser parser(std::move(segments));
  auto root = std::make_shared<Node>();
  root->kind = Node::Kind::kIf;  // a root holding one unconditional branch
  NodeList body;
  std::string stop;
  ExprParser* stopParser = nullptr;
  INGOT_RETURN_IF_ERROR(parser.parseBody(&body, {}, &stop, &stopParser));
  root->branches.emplace_back(nullptr, std::move(body));
  return ChatTemplate(std::move(root));
}

StatusOr<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                           bool addGenerationPrompt, const std::string& bosToken,
                                           const std::string& eosToken) const {
  Value list = Value::emptyList();
  for (const ChatMessage& m : messages) {
    Value msg = Value::emptyMap();
    msg.put("role", Value::string(m.role));
    msg.put("content", Value::string(m.content));
    list.list->push_back(std::move(msg));
  }
  // What transformers' apply_chat_template passes when there are no tools or documents.
  return renderVariables({{"messages", list},
                          {"add_generation_prompt", Value::boolean(addGenerationPrompt)},
                          {"bos_token", Value::string(bosToken)},
                          {"eos_token", Value::string(eosToken)},
                          {"tools", Value::none()},
                          {"documents", Value::none()}});
}

StatusOr<std::string> ChatTemplate::renderVariables(
    const std::map<std::string, jinja::Value>& variables) const {
  std::vector<Scope> scopes(1, Scope(variables.begin(), variables.end()));
  std::string out;
  INGOT_RETURN_IF_ERROR(renderNodes(root_->branches[0].second, scopes, &out));
  return out;
}

StatusOr<std::vector<int32_t>> encodeChatPrompt(const ChatTemplate& tmpl, const Tokenizer& tokenizer,
                                                const std::vector<ChatMessage>& messages) {
  auto piece = [&](int32_t id) { return id >= 0 ? tokenizer.tokenPiece(id) : std::string(); };
  StatusOr<std::string> text = tmpl.render(messages, /*addGenerationPrompt=*/true,
                                           piece(tokenizer.bosId()), piece(tokenizer.eosId()));
  if (!text.ok()) return text.status().withPrefix("chat template");
  return tokenizer.encode(*text, /*addSpecial=*/false, /*parseSpecial=*/true);
}

}  // namespace ingot
