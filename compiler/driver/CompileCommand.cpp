//===- CompileCommand.cpp - `ingot compile` -------------------------------===//
#include "compiler/driver/CompileCommand.h"

#include <chrono>
#include <ctime>

#include "compiler/artifact/ArtifactWriter.h"
#include "compiler/driver/ModuleToArtifact.h"
#include "compiler/driver/Pipeline.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "runtime/version.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "xxhash.h"

namespace ingot::compiler {
namespace {

std::string utcNow() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// Prints MLIR diagnostics to `err` as "file:line:col: error: message".
class DiagnosticPrinter {
public:
  DiagnosticPrinter(mlir::MLIRContext &context, llvm::SourceMgr &sourceMgr,
                    std::ostream &err)
      : stream(buffer), handler(sourceMgr, &context, stream), err(err) {}
  ~DiagnosticPrinter() { flush(); }
  void flush() {
    stream.flush();
    err << buffer;
    buffer.clear();
  }

private:
  std::string buffer;
  llvm::raw_string_ostream stream;
  mlir::SourceMgrDiagnosticHandler handler;
  std::ostream &err;
};

} // namespace

int runCompile(const CompileOptions &options, std::ostream &out, std::ostream &err) {
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(options.input, &errorMessage);
  if (!input) {
    err << "ingot compile: error: cannot read '" << options.input << "': " << errorMessage
        << "\n";
    return 1;
  }
  uint64_t sourceHash = XXH64(input->getBufferStart(), input->getBufferSize(), 0);

  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  DiagnosticPrinter diagnostics(context, sourceMgr, err);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module) {
    diagnostics.flush();
    err << "ingot compile: error: could not parse '" << options.input << "'\n";
    return 1;
  }
  if (mlir::failed(runCompilePipeline(*module))) {
    diagnostics.flush();
    err << "ingot compile: error: the pass pipeline failed on '" << options.input << "'\n";
    return 1;
  }
  if (options.emitMlir) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    os.flush();
    out << text << "\n";
    if (options.output.empty())
      return 0;
  }

  LoweringOptions lowering;
  lowering.weights = options.randomWeights ? WeightSource::Random : WeightSource::Dummy;
  lowering.seed = options.seed;
  lowering.provenance.compilerVersion = std::string("ingot ") + kVersion;
  lowering.provenance.options = options.commandLine;
  lowering.provenance.source = options.input;
  lowering.provenance.sourceXxh64 = sourceHash;
  lowering.provenance.created = utcNow();
  if (!options.randomWeights && !options.dummyWeights) {
    err << "ingot compile: error: '" << options.input
        << "' is IR without weights; pass --random-weights or --dummy-weights\n";
    return 2;
  }

  ArtifactWriter writer;
  if (mlir::failed(lowerModuleToArtifact(*module, lowering, writer))) {
    diagnostics.flush();
    err << "ingot compile: error: cannot lower '" << options.input << "' to an artifact\n";
    return 1;
  }
  Status status = writer.write(options.output);
  if (!status.ok()) {
    err << "ingot compile: error: " << status.message() << "\n";
    return 1;
  }
  out << "wrote " << options.output << " (" << writer.numTensors() << " tensors)\n";
  return 0;
}

} // namespace ingot::compiler
