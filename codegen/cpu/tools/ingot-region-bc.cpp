//===- ingot-region-bc.cpp - Show and run the CPU bytecode of attention regions ===//
//
// Parses a .mlir file, emits region bytecode for the mask and score region of
// every ingot.attention op, prints its disassembly and optionally evaluates it
// on a small (q, kv) grid; with --emit-cuda it prints the CUDA variant struct
// instead. Used by the lit tests under test/lit/codegen/.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/RegionBytecodeEmitter.h"
#include "codegen/cuda/AttentionRegionEmitter.h"
#include "dialects/ingot/IngotDialect.h"
#include "core/region/region_disassembler.h"
#include "core/region/region_program.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstring>
#include <map>

using namespace mlir;

/// The tool's own options, which --help lists alone (not the LLVM globals).
static llvm::cl::OptionCategory regionBcCategory("ingot-region-bc options");

static llvm::cl::opt<std::string>
    inputFilename(llvm::cl::Positional, llvm::cl::desc("<input .mlir>"),
                  llvm::cl::init("-"), llvm::cl::cat(regionBcCategory));
static llvm::cl::opt<std::string>
    evalMask("eval-mask",
             llvm::cl::desc("Evaluate each mask on a QxKV grid "
                            "and print it as rows of 0/1"),
             llvm::cl::value_desc("QxKV"), llvm::cl::cat(regionBcCategory));
static llvm::cl::opt<std::string>
    evalScore("eval-score",
              llvm::cl::desc("Evaluate each score region on a QxKV grid"),
              llvm::cl::value_desc("QxKV"), llvm::cl::cat(regionBcCategory));
static llvm::cl::opt<float>
    scoreInput("score-input", llvm::cl::desc("Score fed to --eval-score"),
               llvm::cl::init(1.0f), llvm::cl::cat(regionBcCategory));
static llvm::cl::opt<int64_t> batchIndex("b", llvm::cl::desc("Request index b"),
                                         llvm::cl::init(0),
                                         llvm::cl::cat(regionBcCategory));
static llvm::cl::opt<int64_t> headIndex("h", llvm::cl::desc("Head index h"),
                                        llvm::cl::init(0),
                                        llvm::cl::cat(regionBcCategory));
static llvm::cl::opt<int64_t>
    qOffset("q-offset",
            llvm::cl::desc("First query slot of the grid (rows are q-offset.."
                           "q-offset+Q-1)"),
            llvm::cl::init(0), llvm::cl::cat(regionBcCategory));
static llvm::cl::opt<std::string> emitCuda(
    "emit-cuda",
    llvm::cl::desc(
        "Print each attention op's CUDA variant struct (mask/score as "
        "__host__ __device__ functions) instead of the bytecode; the "
        "structs are named <prefix><n>, or <prefix> alone for a single op"),
    llvm::cl::value_desc("prefix"), llvm::cl::cat(regionBcCategory));
static llvm::cl::opt<bool> emitCudaHeader(
    "cuda-header",
    llvm::cl::desc("With --emit-cuda: print a self-contained header (banner, "
                   "#pragma once, include of region_ops.h)"),
    llvm::cl::cat(regionBcCategory));
static llvm::cl::list<std::string> operandValues(
    "operand",
    llvm::cl::desc("Contents of an extra operand for evaluation: "
                   "N=D0xD1x...:v0,v1,... (row-major; 'N=:v' for rank 0)"),
    llvm::cl::value_desc("spec"), llvm::cl::cat(regionBcCategory));

namespace {

/// One extra operand's contents, as given with --operand.
struct OperandData {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

bool parseGrid(StringRef text, int64_t &rows, int64_t &cols) {
  auto [r, c] = text.split('x');
  return !r.getAsInteger(10, rows) && !c.getAsInteger(10, cols) && rows >= 0 &&
         cols >= 0;
}

bool parseOperand(StringRef spec, std::map<unsigned, OperandData> &out) {
  auto [number, rest] = spec.split('=');
  auto [dims, values] = rest.split(':');
  unsigned n;
  if (number.getAsInteger(10, n))
    return false;
  OperandData data;
  SmallVector<StringRef> parts;
  if (!dims.empty()) {
    dims.split(parts, 'x');
    for (StringRef d : parts) {
      int64_t extent;
      if (d.getAsInteger(10, extent) || extent < 0)
        return false;
      data.shape.push_back(extent);
    }
  }
  parts.clear();
  if (!values.empty())
    values.split(parts, ',');
  for (StringRef v : parts) {
    double value;
    if (v.trim().getAsDouble(value))
      return false;
    data.values.push_back(value);
  }
  out[n] = std::move(data);
  return true;
}

/// Bytes of an operand in the runtime's layout (i1 one byte per element).
std::vector<uint8_t> encodeOperand(const OperandData &data, ::ingot::RegionType type) {
  size_t size = ::ingot::operandElementSize(type);
  std::vector<uint8_t> bytes(data.values.size() * size);
  for (size_t i = 0; i < data.values.size(); ++i) {
    uint8_t *p = bytes.data() + i * size;
    double v = data.values[i];
    if (type == ::ingot::RegionType::kF32) {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
    } else {
      int64_t x = static_cast<int64_t>(v);
      if (type == ::ingot::RegionType::kI1)
        x = x != 0;
      std::memcpy(p, &x, size); // little-endian: the low bytes
    }
  }
  return bytes;
}

/// Emits, prints and (optionally) evaluates one region; false on any error.
bool processRegion(Operation *attention, unsigned number, Region &region,
                   ::ingot::RegionKind kind, ArrayRef<Type> extraTypes,
                   const std::map<unsigned, OperandData> &operands) {
  const bool isMask = kind == ::ingot::RegionKind::kMask;
  const char *name = isMask ? "mask" : "score";
  FailureOr<std::vector<uint8_t>> bytes =
      ::ingot::emitRegionBytecode(region, kind, extraTypes);
  if (failed(bytes))
    return false;
  ::ingot::StatusOr<::ingot::RegionProgram> program =
      ::ingot::decodeRegionBytecode(*bytes);
  if (!program.ok()) {
    attention->emitError() << program.status().message();
    return false;
  }
  llvm::outs() << "// attention #" << number << " " << name << ": "
               << bytes->size() << " bytes\n"
               << ::ingot::disassembleRegion(*program);

  const std::string &grid = isMask ? evalMask : evalScore;
  if (grid.empty())
    return true;
  int64_t rows = 0, cols = 0;
  if (!parseGrid(grid, rows, cols)) {
    llvm::errs() << "error: bad grid '" << grid << "' (expected QxKV)\n";
    return false;
  }
  // Operand views over the --operand contents.
  std::vector<std::vector<uint8_t>> storage;
  std::vector<::ingot::RegionOperandView> views;
  storage.reserve(program->operandSpecs().size());
  for (auto [i, spec] : llvm::enumerate(program->operandSpecs())) {
    auto it = operands.find(i);
    if (it == operands.end()) {
      views.push_back({spec.element_type, nullptr, spec.rank, nullptr});
      storage.emplace_back();
      continue;
    }
    int64_t elements = 1;
    for (int64_t d : it->second.shape)
      elements *= d;
    if (it->second.shape.size() != spec.rank ||
        static_cast<int64_t>(it->second.values.size()) != elements) {
      llvm::errs() << "error: --operand " << i << " needs rank "
                   << unsigned(spec.rank) << " and as many values as its shape "
                   << "holds\n";
      return false;
    }
    storage.push_back(encodeOperand(it->second, spec.element_type));
    views.push_back({spec.element_type, it->second.shape.data(), spec.rank,
                     storage.back().data()});
  }
  llvm::outs() << "// attention #" << number << " " << name << " at b="
               << batchIndex << " h=" << headIndex << ", rows q=" << qOffset
               << ".." << qOffset + rows - 1 << ", columns kv=0.." << cols - 1
               << "\n";
  for (int64_t q = qOffset; q < qOffset + rows; ++q) {
    std::string line;
    for (int64_t kv = 0; kv < cols; ++kv) {
      if (isMask) {
        auto visible = program->evalMask(batchIndex, headIndex, q, kv,
                                         views.data(), views.size());
        if (!visible.ok()) {
          llvm::outs().flush();
          llvm::errs() << "error: at q=" << q << " kv=" << kv << ": "
                       << visible.status().message() << "\n";
          return false;
        }
        line += *visible ? '1' : '0';
      } else {
        auto score = program->evalScore(scoreInput, batchIndex, headIndex, q,
                                        kv, views.data(), views.size());
        if (!score.ok()) {
          llvm::outs().flush();
          llvm::errs() << "error: at q=" << q << " kv=" << kv << ": "
                       << score.status().message() << "\n";
          return false;
        }
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%s%.6g", kv ? " " : "",
                      static_cast<double>(*score));
        line += buf;
      }
    }
    llvm::outs() << line << "\n";
  }
  return true;
}

/// Lowers the regions of `op` to bytecode and prints the CUDA variant struct.
bool emitCudaVariant(mlir::ingot::AttentionOp op, const std::string &name,
                     StringRef origin) {
  SmallVector<Type> extraTypes(op.getExtra().getTypes());
  std::vector<uint8_t> mask, score;
  if (op.hasMask()) {
    FailureOr<std::vector<uint8_t>> bytes = ::ingot::emitRegionBytecode(
        op.getMask(), ::ingot::RegionKind::kMask, extraTypes);
    if (failed(bytes))
      return false;
    mask = std::move(*bytes);
  }
  if (op.hasScore()) {
    FailureOr<std::vector<uint8_t>> bytes = ::ingot::emitRegionBytecode(
        op.getScore(), ::ingot::RegionKind::kScore, extraTypes);
    if (failed(bytes))
      return false;
    score = std::move(*bytes);
  }
  ::ingot::StatusOr<std::string> text =
      emitCudaHeader
          ? ::ingot::codegen::emitAttentionVariantHeader(name, mask, score, origin.str())
          : ::ingot::codegen::emitAttentionVariantStruct(name, mask, score);
  if (!text.ok()) {
    op->emitError() << text.status().message();
    return false;
  }
  llvm::outs() << *text;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::HideUnrelatedOptions(regionBcCategory);
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "Emit, disassemble and evaluate the CPU bytecode of ingot.attention "
      "mask/score regions\n");

  std::map<unsigned, OperandData> operands;
  for (const std::string &spec : operandValues) {
    if (!parseOperand(spec, operands)) {
      llvm::errs() << "error: bad --operand '" << spec
                   << "' (expected N=D0xD1:v0,v1,...)\n";
      return 1;
    }
  }

  DialectRegistry registry;
  registry.insert<mlir::ingot::IngotDialect, func::FuncDialect,
                  arith::ArithDialect, math::MathDialect>();
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::string error;
  auto file = openInputFile(inputFilename, &error);
  if (!file) {
    llvm::errs() << "error: " << error << "\n";
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  bool ok = true;
  unsigned number = 0;
  if (emitCuda.getNumOccurrences()) {
    unsigned count = 0;
    module->walk([&](mlir::ingot::AttentionOp) { ++count; });
    StringRef origin = llvm::sys::path::filename(inputFilename);
    module->walk([&](mlir::ingot::AttentionOp op) {
      std::string name = emitCuda;
      if (count > 1)
        name += std::to_string(number);
      ok &= emitCudaVariant(op, name, origin);
      ++number;
    });
    return ok ? 0 : 1;
  }
  module->walk([&](mlir::ingot::AttentionOp op) {
    SmallVector<Type> extraTypes(op.getExtra().getTypes());
    if (op.hasMask())
      ok &= processRegion(op, number, op.getMask(), ::ingot::RegionKind::kMask,
                          extraTypes, operands);
    if (op.hasScore())
      ok &= processRegion(op, number, op.getScore(), ::ingot::RegionKind::kScore,
                          extraTypes, operands);
    ++number;
  });
  return ok ? 0 : 1;
}
