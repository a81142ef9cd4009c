//===- AttentionRegionEmitter.cpp - Attention regions to CUDA C++ ---------===//
//
// One C++ statement per bytecode instruction, in program order, each preceded by the
// instruction's disassembly; semantics live in kernels/region_ops.h.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/AttentionRegionEmitter.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <vector>

#include "core/kernels/region_operands.h"
#include "core/region/mask_shapes.h"
#include "core/region/region_disassembler.h"

namespace ingot::codegen {
namespace {

using Op = RegionOpcode;

std::string reg(uint16_t r) { return "r" + std::to_string(r); }
std::string poisonFlag(uint16_t r) { return "p" + std::to_string(r); }

/// The C++ type that holds a register of type `t` (canonical bits for integers).
const char *containerType(RegionType t) {
  if (t == RegionType::kF32)
    return "float";
  if (t == RegionType::kI1)
    return "bool";
  return typeBitWidth(t) <= 32 ? "rgn::u32" : "rgn::u64";
}

std::string width(RegionType t) { return std::to_string(typeBitWidth(t)); }

/// An exact C++ spelling of an f32 constant: a hex-float literal, or its bits.
std::string floatLiteral(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  char buf[64];
  if ((bits & 0x7f800000u) == 0x7f800000u) {
    std::snprintf(buf, sizeof(buf), "rgn::bitsFloat(0x%08xu)", bits);
  } else {
    std::snprintf(buf, sizeof(buf), "%af /* %.9g */", static_cast<double>(f),
                  static_cast<double>(f));
  }
  return buf;
}

std::string intLiteral(RegionType t, uint64_t imm) {
  if (t == RegionType::kI1)
    return imm ? "true" : "false";
  char buf[32];
  std::snprintf(buf, sizeof(buf), typeBitWidth(t) <= 32 ? "%lluu" : "%llullu",
                static_cast<unsigned long long>(imm));
  return buf;
}

/// The helper call of a binary integer or float op; empty for ops handled elsewhere.
std::string binaryExpr(const RegionInstruction &in, const std::string &x,
                       const std::string &y, const std::string &p) {
  const std::string w = width(in.type);
  switch (in.opcode) {
  case Op::kAddI: return "rgn::addi<" + w + ">(" + x + ", " + y + ")";
  case Op::kSubI: return "rgn::subi<" + w + ">(" + x + ", " + y + ")";
  case Op::kMulI: return "rgn::muli<" + w + ">(" + x + ", " + y + ")";
  case Op::kDivSI: return "rgn::divsi<" + w + ">(" + x + ", " + y + ", err, false)";
  case Op::kRemSI: return "rgn::divsi<" + w + ">(" + x + ", " + y + ", err, true)";
  case Op::kDivUI: return "rgn::divui<" + w + ">(" + x + ", " + y + ", err, false)";
  case Op::kRemUI: return "rgn::divui<" + w + ">(" + x + ", " + y + ", err, true)";
  case Op::kAndI: return x + " & " + y;
  case Op::kOrI: return x + " | " + y;
  case Op::kXOrI: return x + " ^ " + y;
  case Op::kShLI: return "rgn::shli<" + w + ">(" + x + ", " + y + ", " + p + ")";
  case Op::kShRSI: return "rgn::shrsi<" + w + ">(" + x + ", " + y + ", " + p + ")";
  case Op::kShRUI: return "rgn::shrui<" + w + ">(" + x + ", " + y + ", " + p + ")";
  case Op::kMaxSI: return "rgn::maxsi<" + w + ">(" + x + ", " + y + ")";
  case Op::kMinSI: return "rgn::minsi<" + w + ">(" + x + ", " + y + ")";
  case Op::kMaxUI: return "rgn::maxui(" + x + ", " + y + ")";
  case Op::kMinUI: return "rgn::minui(" + x + ", " + y + ")";
  case Op::kAddF: return "rgn::addf(" + x + ", " + y + ")";
  case Op::kSubF: return "rgn::subf(" + x + ", " + y + ")";
  case Op::kMulF: return "rgn::mulf(" + x + ", " + y + ")";
  case Op::kDivF: return "rgn::divf(" + x + ", " + y + ")";
  case Op::kMaximumF: return "rgn::maximumf(" + x + ", " + y + ")";
  case Op::kMinimumF: return "rgn::minimumf(" + x + ", " + y + ")";
  case Op::kMaxNumF: return "rgn::maxnumf(" + x + ", " + y + ")";
  case Op::kMinNumF: return "rgn::minnumf(" + x + ", " + y + ")";
  case Op::kPowF: return "rgn::powf_(" + x + ", " + y + ")";
  case Op::kCopySign: return "rgn::copysignf_(" + x + ", " + y + ")";
  default: return "";
  }
}

std::string unaryExpr(Op op, const std::string &x, RegionType type) {
  switch (op) {
  case Op::kAbsI: return "rgn::absi<" + width(type) + ">(" + x + ")";
  case Op::kNegF: return "rgn::negf(" + x + ")";
  case Op::kAbsF: return "rgn::absf(" + x + ")";
  case Op::kSqrt: return "rgn::sqrtf_(" + x + ")";
  case Op::kRsqrt: return "rgn::rsqrtf_(" + x + ")";
  case Op::kExp: return "rgn::expf_(" + x + ")";
  case Op::kExp2: return "rgn::exp2f_(" + x + ")";
  case Op::kLog: return "rgn::logf_(" + x + ")";
  case Op::kLog2: return "rgn::log2f_(" + x + ")";
  case Op::kTanh: return "rgn::tanhf_(" + x + ")";
  case Op::kFloor: return "rgn::floorf_(" + x + ")";
  case Op::kCeil: return "rgn::ceilf_(" + x + ")";
  default: return "";
  }
}

std::string castExpr(const RegionInstruction &in, const std::string &x,
                     const std::string &p) {
  const std::string sw = width(in.src_type), dw = width(in.type);
  switch (in.opcode) {
  case Op::kIndexCast:
  case Op::kExtSI: return "rgn::sextTo<" + sw + ", " + dw + ">(" + x + ")";
  case Op::kIndexCastUI:
  case Op::kExtUI:
  case Op::kTruncI: return "rgn::zextTo<" + dw + ">(" + x + ")";
  case Op::kSIToFP: return "rgn::sitofp<" + sw + ">(" + x + ")";
  case Op::kUIToFP: return "rgn::uitofp(" + x + ")";
  case Op::kFPToSI: return "rgn::fptoi<" + dw + ", true>(" + x + ", " + p + ")";
  case Op::kFPToUI: return "rgn::fptoi<" + dw + ", false>(" + x + ", " + p + ")";
  default: return "";
  }
}

std::string compareExpr(const RegionInstruction &in, const std::string &x,
                        const std::string &y) {
  if (in.opcode == Op::kCmpF)
    return "rgn::cmpf<" + std::to_string(in.a8) + ">(" + x + ", " + y + ")";
  const std::string w = width(in.src_type);
  const std::string sx = "rgn::sext<" + w + ">(" + x + ")";
  const std::string sy = "rgn::sext<" + w + ">(" + y + ")";
  switch (static_cast<CmpIPredicate>(in.a8)) {
  case CmpIPredicate::kEq: return x + " == " + y;
  case CmpIPredicate::kNe: return x + " != " + y;
  case CmpIPredicate::kSlt: return sx + " < " + sy;
  case CmpIPredicate::kSle: return sx + " <= " + sy;
  case CmpIPredicate::kSgt: return sx + " > " + sy;
  case CmpIPredicate::kSge: return sx + " >= " + sy;
  case CmpIPredicate::kUlt: return x + " < " + y;
  case CmpIPredicate::kUle: return x + " <= " + y;
  case CmpIPredicate::kUgt: return x + " > " + y;
  case CmpIPredicate::kUge: return x + " >= " + y;
  }
  return "";
}

bool producesPoison(Op op) {
  return op == Op::kShLI || op == Op::kShRSI || op == Op::kShRUI || op == Op::kFPToSI ||
         op == Op::kFPToUI;
}
bool canTrap(Op op) {
  return op == Op::kDivSI || op == Op::kRemSI || op == Op::kDivUI || op == Op::kRemUI ||
         op == Op::kRegionLoad;
}

/// Emits the body of one function (mask or score) from its program.
class FunctionEmitter {
public:
  explicit FunctionEmitter(const RegionProgram &program)
      : program(program), mayPoison(program.registerCount(), false),
        used(program.registerCount(), false) {}

  StatusOr<std::string> run();

private:
  /// "pN" for a register that may be poison, "false" for one that cannot.
  std::string poisonOf(uint16_t r) const { return mayPoison[r] ? poisonFlag(r) : "false"; }
  /// `a || b` of the poison flags of `regs`, simplified; "" when none may be poison.
  std::string anyPoison(const std::vector<uint16_t> &regs) const;
  Status emit(const RegionInstruction &in, std::ostringstream &os);

  const RegionProgram &program;
  std::vector<bool> mayPoison;
  std::vector<bool> used;
  bool needsErr = false;
};

std::string FunctionEmitter::anyPoison(const std::vector<uint16_t> &regs) const {
  std::string out;
  for (uint16_t r : regs)
    if (mayPoison[r])
      out += (out.empty() ? "" : " || ") + poisonFlag(r);
  return out;
}

Status FunctionEmitter::emit(const RegionInstruction &in, std::ostringstream &os) {
  const std::string d = reg(in.dst);
  const std::string t = containerType(in.type);
  const std::string x = reg(in.src[0]), y = reg(in.src[1]);
  const bool isMask = program.kind() == RegionKind::kMask;
  const std::vector<uint16_t> srcs(in.src, in.src + in.num_src);

  if (in.opcode == Op::kYield) {
    if (mayPoison[in.src[0]])
      os << "    if (" << poisonFlag(in.src[0]) << ") err |= rgn::kRegionErrorPoison;\n";
    if (needsErr)
      os << "    if (err != 0) {\n      rgn::report(ops, err);\n      return "
         << (isMask ? "false" : "rgn::bitsFloat(0xff800000u)") << ";\n    }\n";
    os << "    return " << x << ";\n";
    return okStatus();
  }

  // Poison flag of the result: the sources' (select: the condition's and the chosen
  // value's), plus the op's own for shifts and float-to-int casts.
  std::string poison;
  if (in.opcode == Op::kSelect) {
    const std::string c = poisonOf(in.src[0]);
    if (mayPoison[in.src[1]] || mayPoison[in.src[2]]) {
      poison = (c == "false" ? "" : c + " || ") + "(" + x + " ? " + poisonOf(in.src[1]) +
               " : " + poisonOf(in.src[2]) + ")";
    } else if (mayPoison[in.src[0]]) {
      poison = c;
    }
  } else if (in.opcode != Op::kRegionLoad) {
    poison = anyPoison(srcs);
  }
  const bool own = producesPoison(in.opcode);
  if (own || !poison.empty()) {
    mayPoison[in.dst] = true;
    os << "    " << (own ? "bool " : "const bool ") << poisonFlag(in.dst) << " = "
       << (poison.empty() ? "false" : poison) << ";\n";
  }
  const std::string p = poisonFlag(in.dst);

  std::string expr;
  switch (opcodeFormat(static_cast<uint8_t>(in.opcode))) {
  case RegionOpFormat::kConstant:
    expr = in.type == RegionType::kF32 ? floatLiteral(static_cast<uint32_t>(in.imm))
                                       : intLiteral(in.type, in.imm);
    break;
  case RegionOpFormat::kArgument: {
    static const char *const kMaskArgs[] = {"b", "h", "q", "kv"};
    static const char *const kScoreArgs[] = {"s", "b", "h", "q", "kv"};
    const char *name = isMask ? kMaskArgs[in.a8] : kScoreArgs[in.a8];
    expr = in.type == RegionType::kF32 ? std::string(name)
                                       : "static_cast<rgn::u64>(" + std::string(name) + ")";
    break;
  }
  case RegionOpFormat::kLoad: {
    std::vector<uint16_t> index;
    for (uint32_t k = 0; k < in.rank; ++k)
      index.push_back(program.loadIndices()[in.first_index + k]);
    std::string indexName = "nullptr";
    if (!index.empty()) {
      indexName = "i" + std::to_string(in.dst);
      os << "    const rgn::u64 " << indexName << "[" << index.size() << "] = {";
      for (size_t k = 0; k < index.size(); ++k)
        os << (k ? ", " : "") << reg(index[k]);
      os << "};\n";
    }
    if (std::string any = anyPoison(index); !any.empty())
      os << "    if (" << any << ") err |= rgn::kRegionErrorPoison;\n";
    const std::string args = "(ops, " + std::to_string(in.a8) + ", " + indexName + ", err)";
    expr = in.type == RegionType::kF32
               ? "rgn::loadF32<" + std::to_string(in.rank) + ">" + args
               : "rgn::loadInt<" + width(in.type) + ", " + std::to_string(in.rank) + ">" + args;
    break;
  }
  case RegionOpFormat::kBinary: expr = binaryExpr(in, x, y, p); break;
  case RegionOpFormat::kUnary: expr = unaryExpr(in.opcode, x, in.type); break;
  case RegionOpFormat::kCompare: expr = compareExpr(in, x, y); break;
  case RegionOpFormat::kSelect: expr = x + " ? " + y + " : " + reg(in.src[2]); break;
  case RegionOpFormat::kCast: expr = castExpr(in, x, p); break;
  default: break;
  }
  if (expr.empty())
    return internalError(std::string("CUDA region emitter: no lowering for opcode ") +
                         regionOpcodeName(in.opcode));
  // Integer helpers return u64; the container narrows (the value already fits).
  const bool narrows = t != "float" && t != "rgn::u64" && t != "bool" &&
                       expr.compare(0, 5, "rgn::") == 0;
  os << "    const " << t << " " << d << " = "
     << (narrows ? "static_cast<" + t + ">(" + expr + ")" : expr) << ";\n";
  if (!used[in.dst])
    os << "    (void)" << d << ";\n";
  return okStatus();
}

StatusOr<std::string> FunctionEmitter::run() {
  const auto &insts = program.instructions();
  for (const RegionInstruction &in : insts) {
    for (uint8_t k = 0; k < in.num_src; ++k)
      used[in.src[k]] = true;
    if (in.opcode == Op::kRegionLoad)
      for (uint32_t k = 0; k < in.rank; ++k)
        used[program.loadIndices()[in.first_index + k]] = true;
    if (canTrap(in.opcode) || producesPoison(in.opcode))
      needsErr = true;
  }
  // Annotate each statement with its instruction's disassembly: after the header line and
  // one line per operand, the listing has one line per instruction, in order.
  std::vector<std::string> listing;
  {
    std::istringstream text(disassembleRegion(program));
    for (std::string line; std::getline(text, line);)
      listing.push_back(line);
  }
  const size_t first = 1 + program.operandSpecs().size();
  std::ostringstream os;
  if (needsErr)
    os << "    rgn::u32 err = 0;\n";
  for (size_t n = 0; n < insts.size(); ++n) {
    if (first + n < listing.size())
      os << "    // " << listing[first + n] << "\n";
    INGOT_RETURN_IF_ERROR(emit(insts[n], os));
  }
  return os.str();
}

Status checkOperands(const RegionProgram *program) {
  if (program == nullptr)
    return okStatus();
  const auto &specs = program->operandSpecs();
  if (specs.size() > static_cast<size_t>(rgn::kMaxRegionOperands))
    return invalidArgument("CUDA attention variant: the region reads " +
                           std::to_string(specs.size()) +
                           " extra operands; the CUDA kernels support at most " +
                           std::to_string(rgn::kMaxRegionOperands));
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].rank > rgn::kMaxRegionOperandRank)
      return invalidArgument("CUDA attention variant: extra operand #" + std::to_string(i) +
                             " has rank " + std::to_string(specs[i].rank) +
                             "; the CUDA kernels support rank <= " +
                             std::to_string(rgn::kMaxRegionOperandRank));
  return okStatus();
}

/// Whether the mask yields `kv <= q && ...`: (a chain of andi over) a compare of the `kv`
/// and `q` arguments that holds only for kv <= q. Kernels then skip later keys without
/// evaluating the mask, as the CPU backend does, so both see the same evaluations.
bool impliesCausal(const RegionProgram *mask) {
  if (mask == nullptr)
    return false;
  const std::vector<const RegionInstruction *> def = registerDefinitions(*mask);
  std::function<bool(uint16_t, int)> implies = [&](uint16_t r, int depth) {
    const RegionInstruction *in = def[r];
    if (in == nullptr || depth > 16)
      return false;
    if (in->opcode == Op::kAndI && in->type == RegionType::kI1)
      return implies(in->src[0], depth + 1) || implies(in->src[1], depth + 1);
    return isCausalCompare(def, r);
  };
  const auto &insts = mask->instructions();
  return !insts.empty() && insts.back().opcode == Op::kYield && implies(insts.back().src[0], 0);
}

/// W when the mask yields (a chain of andi over) a window compare (windowCompareWidth,
/// as the CPU backend recognizes it): the smallest such W, or 0. Kernels then start at
/// the first query's window (blocks wholly before it are never read), as the CPU does.
int64_t maskWindow(const RegionProgram *mask) {
  if (mask == nullptr)
    return 0;
  const std::vector<const RegionInstruction *> def = registerDefinitions(*mask);
  std::function<int64_t(uint16_t, int)> window = [&](uint16_t reg, int depth) -> int64_t {
    const RegionInstruction *in = def[reg];
    if (in == nullptr || depth > 16)
      return 0;
    if (in->opcode == Op::kAndI && in->type == RegionType::kI1) {
      const int64_t a = window(in->src[0], depth + 1), b = window(in->src[1], depth + 1);
      return a > 0 && b > 0 ? std::min(a, b) : std::max(a, b);
    }
    return windowCompareWidth(def, reg);
  };
  const auto &insts = mask->instructions();
  return !insts.empty() && insts.back().opcode == Op::kYield ? window(insts.back().src[0], 0)
                                                            : 0;
}

bool readsArgument(const RegionProgram *program, uint8_t argument) {
  if (program == nullptr)
    return false;
  for (const RegionInstruction &in : program->instructions())
    if (in.opcode == Op::kArgument && in.a8 == argument)
      return true;
  return false;
}

/// `static constexpr unsigned char <name>[] = {...}` (one zero byte when empty, as C++
/// has no empty arrays) and its size.
std::string byteArray(const std::string &name, const std::vector<uint8_t> &bytes) {
  std::ostringstream os;
  os << "  static constexpr unsigned " << name << "Size = " << bytes.size() << ";\n";
  os << "  static constexpr unsigned char " << name << "[" << (bytes.empty() ? 1 : bytes.size())
     << "] = {";
  for (size_t i = 0; i < bytes.size(); ++i)
    os << (i % 16 == 0 ? "\n      " : " ") << unsigned(bytes[i]) << ",";
  os << (bytes.empty() ? "0" : "\n  ") << "};\n";
  return os.str();
}

StatusOr<std::string> emitStruct(const std::string &name, const RegionProgram *mask,
                                 const RegionProgram *score,
                                 const std::vector<uint8_t> &maskBytes,
                                 const std::vector<uint8_t> &scoreBytes) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return invalidArgument("CUDA attention variant: '" + name + "' is not a C++ identifier");
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return invalidArgument("CUDA attention variant: '" + name + "' is not a C++ identifier");
  if (mask != nullptr && mask->kind() != RegionKind::kMask)
    return invalidArgument("CUDA attention variant " + name + ": the mask program is a score");
  if (score != nullptr && score->kind() != RegionKind::kScore)
    return invalidArgument("CUDA attention variant " + name + ": the score program is a mask");
  INGOT_RETURN_IF_ERROR(checkOperands(mask));
  INGOT_RETURN_IF_ERROR(checkOperands(score));
  const RegionProgram *withOperands = mask != nullptr ? mask : score;
  if (mask != nullptr && score != nullptr) {
    const auto &a = mask->operandSpecs(), &b = score->operandSpecs();
    bool same = a.size() == b.size();
    for (size_t i = 0; same && i < a.size(); ++i)
      same = a[i].element_type == b[i].element_type && a[i].rank == b[i].rank;
    if (!same)
      return invalidArgument("CUDA attention variant " + name +
                             ": the mask and score regions disagree on the extra operands");
  }

  std::ostringstream os;
  os << "struct " << name << " {\n";
  os << "  static constexpr bool kHasMask = " << (mask ? "true" : "false") << ";\n";
  os << "  static constexpr bool kHasScore = " << (score ? "true" : "false") << ";\n";
  os << "  /// False when the mask ignores `h`: a GQA group can share one evaluation.\n";
  os << "  static constexpr bool kMaskReadsHead = "
     << (readsArgument(mask, 1) ? "true" : "false") << ";\n";
  os << "  /// W > 0: the mask hides every key more than W - 1 slots before its query.\n";
  os << "  static constexpr long long kMaskWindow = " << maskWindow(mask) << ";\n";
  os << "  /// The mask is `kv <= q && ...`: keys after the query's slot are hidden unevaluated.\n";
  os << "  static constexpr bool kMaskImpliesCausal = "
     << (impliesCausal(mask) ? "true" : "false") << ";\n";
  const size_t numOperands = withOperands ? withOperands->operandSpecs().size() : 0;
  os << "  static constexpr int kNumOperands = " << numOperands << ";\n";
  for (size_t i = 0; i < numOperands; ++i) {
    const RegionOperandSpec &spec = withOperands->operandSpecs()[i];
    os << "  // extra operand #" << i << ": " << regionTypeName(spec.element_type) << ", rank "
       << unsigned(spec.rank) << "\n";
  }
  os << "  static constexpr int kOperandRank[" << (numOperands ? numOperands : 1) << "] = {";
  for (size_t i = 0; i < numOperands; ++i)
    os << (i ? ", " : "") << unsigned(withOperands->operandSpecs()[i].rank);
  os << (numOperands ? "" : "0") << "};\n";
  os << "  // The region bytecode this struct was generated from.\n";
  os << byteArray("kMaskBytecode", maskBytes) << byteArray("kScoreBytecode", scoreBytes)
     << "\n";

  os << "  static INGOT_HD bool mask(const ::ingot::rgn::RegionOperands &ops, long long b,\n"
        "                            long long h, long long q, long long kv) {\n"
        "    namespace rgn = ::ingot::rgn;\n"
        "    (void)ops; (void)b; (void)h; (void)q; (void)kv;\n";
  if (mask != nullptr) {
    StatusOr<std::string> body = FunctionEmitter(*mask).run();
    if (!body.ok())
      return body.status();
    os << *body;
  } else {
    os << "    return true;\n";
  }
  os << "  }\n\n";
  os << "  static INGOT_HD float score(const ::ingot::rgn::RegionOperands &ops, float s,\n"
        "                              long long b, long long h, long long q, long long kv) {\n"
        "    namespace rgn = ::ingot::rgn;\n"
        "    (void)ops; (void)s; (void)b; (void)h; (void)q; (void)kv;\n";
  if (score != nullptr) {
    StatusOr<std::string> body = FunctionEmitter(*score).run();
    if (!body.ok())
      return body.status();
    os << *body;
  } else {
    os << "    return s;\n";
  }
  os << "  }\n};\n";
  return os.str();
}

/// Decodes `bytes` of a region of `kind`; nullopt-like empty program pointer when empty.
Status decode(const std::string &name, const std::vector<uint8_t> &bytes, RegionKind kind,
              std::optional<RegionProgram> &program) {
  if (bytes.empty())
    return okStatus();
  StatusOr<RegionProgram> decoded = decodeRegionBytecode(bytes);
  const char *what = kind == RegionKind::kMask ? "mask" : "score";
  if (!decoded.ok())
    return invalidArgument("CUDA attention variant " + name + ": the " + what +
                           " bytecode does not decode: " + decoded.status().message());
  program = std::move(decoded).value();
  return okStatus();
}

} // namespace

StatusOr<std::string> emitAttentionVariantStruct(const std::string &name,
                                                 const std::vector<uint8_t> &mask,
                                                 const std::vector<uint8_t> &score) {
  std::optional<RegionProgram> maskProgram, scoreProgram;
  INGOT_RETURN_IF_ERROR(decode(name, mask, RegionKind::kMask, maskProgram));
  INGOT_RETURN_IF_ERROR(decode(name, score, RegionKind::kScore, scoreProgram));
  return emitStruct(name, maskProgram ? &*maskProgram : nullptr,
                    scoreProgram ? &*scoreProgram : nullptr, mask, score);
}

StatusOr<std::string> emitAttentionVariantHeader(const std::string &name,
                                                 const std::vector<uint8_t> &mask,
                                                 const std::vector<uint8_t> &score,
                                                 const std::string &origin) {
  StatusOr<std::string> body = emitAttentionVariantStruct(name, mask, score);
  if (!body.ok())
    return body.status();
  return "// Attention variant " + name + " from " + origin +
         " (generated by codegen/cuda/AttentionRegionEmitter; do not edit).\n"
         "#pragma once\n\n#include \"codegen/cuda/kernels/region_ops.h\"\n\n" +
         *body;
}

} // namespace ingot::codegen
