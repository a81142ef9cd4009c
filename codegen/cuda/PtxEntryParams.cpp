//===- PtxEntryParams.cpp - an entry point's parameter sizes from its PTX -===//
#include "codegen/cuda/PtxEntryParams.h"

#include <cctype>
#include <string>

namespace ingot::codegen {
namespace {

/// Bytes of a PTX scalar type token (".u64", ".f32", ...), 0 when it is none.
uint32_t scalarBytes(std::string_view type) {
  if (type.size() < 3 || type[0] != '.')
    return 0;
  const char kind = type[1];
  if (kind != 'u' && kind != 's' && kind != 'b' && kind != 'f')
    return 0;
  const std::string_view bits = type.substr(2);
  if (bits == "8")
    return kind == 'f' ? 0 : 1;
  if (bits == "16")
    return 2;
  if (bits == "32")
    return 4;
  if (bits == "64")
    return 8;
  return 0;
}

/// One `.param ...` declaration's size: its scalar type, times the array length if any.
std::optional<uint32_t> paramBytes(std::string_view decl) {
  uint32_t element = 0;
  size_t pos = 0;
  while (pos < decl.size()) {  // the declaration's tokens; the first scalar type counts
    while (pos < decl.size() && std::isspace(static_cast<unsigned char>(decl[pos])))
      ++pos;
    size_t end = pos;
    while (end < decl.size() && !std::isspace(static_cast<unsigned char>(decl[end])))
      ++end;
    if (element == 0)
      element = scalarBytes(decl.substr(pos, end - pos));
    pos = end;
  }
  if (element == 0)
    return std::nullopt;
  const size_t open = decl.rfind('[');
  if (open == std::string_view::npos)
    return element;
  const size_t close = decl.find(']', open);
  if (close == std::string_view::npos || close == open + 1)
    return std::nullopt;
  uint64_t count = 0;
  for (char c : decl.substr(open + 1, close - open - 1)) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || count > (1u << 20))
      return std::nullopt;
    count = count * 10 + static_cast<uint64_t>(c - '0');
  }
  return static_cast<uint32_t>(count * element);
}

bool isNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }

} // namespace

std::optional<std::vector<uint32_t>> ptxEntryParamBytes(std::string_view ptx,
                                                        std::string_view name) {
  // `.entry <name>(`, the name whole (not a prefix of a longer one).
  size_t at = 0;
  size_t open = std::string_view::npos;
  while ((at = ptx.find(".entry", at)) != std::string_view::npos) {
    size_t p = at + 6;
    at = p;
    while (p < ptx.size() && std::isspace(static_cast<unsigned char>(ptx[p])))
      ++p;
    if (ptx.substr(p, name.size()) != name)
      continue;
    p += name.size();
    if (p < ptx.size() && isNameChar(ptx[p]))
      continue;
    while (p < ptx.size() && std::isspace(static_cast<unsigned char>(ptx[p])))
      ++p;
    if (p < ptx.size() && ptx[p] == '(') {
      open = p;
      break;
    }
  }
  if (open == std::string_view::npos)
    return std::nullopt;
  const size_t close = ptx.find(')', open);
  if (close == std::string_view::npos)
    return std::nullopt;
  std::vector<uint32_t> sizes;
  std::string_view list = ptx.substr(open + 1, close - open - 1);
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view decl = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    const size_t param = decl.find(".param");
    if (param == std::string_view::npos) {
      if (decl.find_first_not_of(" \t\r\n") != std::string_view::npos)
        return std::nullopt;
      continue;  // `()`: no parameters
    }
    std::optional<uint32_t> bytes = paramBytes(decl.substr(param + 6));
    if (!bytes)
      return std::nullopt;
    sizes.push_back(*bytes);
  }
  return sizes;
}

} // namespace ingot::codegen
