//===- CompileCommand.cpp - `ingot compile` -------------------------------===//
#include "compiler/driver/CompileCommand.h"

#include <chrono>
#include <ctime>
#include <fstream>
#include <sys/resource.h>
#include <unistd.h>

#include "compiler/artifact/ArtifactWriter.h"
#include "compiler/artifact/DraftProgram.h"
#include "compiler/driver/ModuleToArtifact.h"
#include "compiler/driver/Pipeline.h"
#include "compiler/import/GgufImporter.h"
#include "compiler/import/HfImporter.h"
#include "compiler/import/LlamaModuleBuilder.h"
#include "compiler/quant/WeightEncoders.h"
#include "dialects/ingot/IngotDialect.h"
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

/// Peak resident set size of this process so far, in bytes.
uint64_t peakRssBytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024; // Linux reports KiB
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

enum class InputKind { Missing, Gguf, Directory, Mlir };

InputKind classifyInput(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // A directory opens as a stream on Linux but reads nothing; check for config.json.
    std::ifstream config(path + "/config.json");
    return config ? InputKind::Directory : InputKind::Missing;
  }
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::string(magic, 4) == "GGUF")
    return InputKind::Gguf;
  std::ifstream config(path + "/config.json");
  if (config)
    return InputKind::Directory;
  return InputKind::Mlir;
}

std::string humanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / double(1ull << 30));
  else
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / double(1ull << 20));
  return buf;
}

/// Marks the weights whose checkpoint tensors are GGUF Q4_0 / Q4_1 blocks with the int4
/// scheme that holds them exactly (`source_quant`), so `--quant int4` keeps the blocks.
void annotateSourceQuantization(mlir::ModuleOp module, const importer::ImportedModel &model) {
  using mlir::ingot::QuantOffsetKind;
  module.walk([&](mlir::ingot::WeightOp op) {
    if (op.getHandle() >= model.tensors.size())
      return;
    importer::SourceQuant source = model.tensors[op.getHandle()].sourceQuant;
    if (source == importer::SourceQuant::None)
      return;
    op.setSourceQuantAttr(mlir::ingot::QuantSchemeAttr::get(
        op.getContext(), mlir::ingot::QuantKind::Int4, quant::kGgmlQ4BlockSize,
        source == importer::SourceQuant::GgufQ4_0 ? QuantOffsetKind::Zero
                                                  : QuantOffsetKind::Min));
  });
}

} // namespace

int runCompile(const CompileOptions &options, std::ostream &out, std::ostream &err) {
  auto start = std::chrono::steady_clock::now();
  if (options.quant.empty() && !options.quantSkip.empty()) {
    err << "ingot compile: error: --quant-skip needs --quant\n";
    return 2;
  }
  if (options.quant != "int4" && options.quantGroupSize != quant::kGgmlQ4BlockSize) {
    err << "ingot compile: error: --quant-group applies to --quant int4 only\n";
    return 2;
  }
  if (options.quantScales != "absmax" && options.quant != "nvfp4" && options.quant != "mxfp4") {
    err << "ingot compile: error: --quant-scales applies to --quant nvfp4 and mxfp4 only\n";
    return 2;
  }
  InputKind kind = classifyInput(options.input);
  if (kind == InputKind::Missing) {
    err << "ingot compile: error: cannot read '" << options.input << "'\n";
    return 1;
  }

  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  DiagnosticPrinter diagnostics(context, sourceMgr, err);
  mlir::OwningOpRef<mlir::ModuleOp> module;
  LoweringOptions lowering;
  std::unique_ptr<importer::ImportedModel> checkpoint;
  uint64_t sourceHash = 0;

  if (kind == InputKind::Gguf || kind == InputKind::Directory) {
    StatusOr<schema::DType> dtype = importer::parseWeightDtype(options.dtype);
    if (!dtype.ok()) {
      err << "ingot compile: error: " << dtype.status().message() << "\n";
      return 2;
    }
    StatusOr<importer::ImportedModel> imported =
        kind == InputKind::Gguf
            ? importer::importGguf(options.input, importer::GgufImportOptions{*dtype})
            : importer::importHuggingFace(options.input, importer::HfImportOptions{*dtype});
    if (!imported.ok()) {
      err << "ingot compile: error: " << imported.status().message() << "\n";
      return 1;
    }
    checkpoint = std::make_unique<importer::ImportedModel>(std::move(imported).value());
    std::string error;
    auto built = importer::buildLlamaModule(context, *checkpoint, error);
    if (failed(built)) {
      diagnostics.flush();
      err << "ingot compile: error: " << options.input << ": " << error << "\n";
      return 1;
    }
    module = std::move(*built);
    annotateSourceQuantization(*module, *checkpoint);
    lowering.weights = WeightSource::Checkpoint;
    lowering.checkpoint = checkpoint.get();
    if (::isatty(STDERR_FILENO))
      lowering.onTensorWritten = [&err](size_t done, size_t total) {
        constexpr size_t kWidth = 40;
        size_t filled = total ? done * kWidth / total : kWidth;
        err << "\r[" << std::string(filled, '#') << std::string(kWidth - filled, ' ') << "] "
            << done << "/" << total << " tensors" << (done == total ? "\n" : "")
            << std::flush;
      };
    sourceHash = checkpoint->sourceXxh64;
  } else {
    std::string errorMessage;
    std::unique_ptr<llvm::MemoryBuffer> input =
        mlir::openInputFile(options.input, &errorMessage);
    if (!input) {
      err << "ingot compile: error: cannot read '" << options.input << "': " << errorMessage
          << "\n";
      return 1;
    }
    sourceHash = XXH64(input->getBufferStart(), input->getBufferSize(), 0);
    sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
    if (!module) {
      diagnostics.flush();
      err << "ingot compile: error: could not parse '" << options.input << "'\n";
      return 1;
    }
    if (!options.output.empty() && !options.randomWeights && !options.dummyWeights) {
      err << "ingot compile: error: '" << options.input
          << "' is IR without weights; pass --random-weights or --dummy-weights\n";
      return 2;
    }
    lowering.weights = options.randomWeights ? WeightSource::Random : WeightSource::Dummy;
  }
  if (options.dummyWeights)
    lowering.weights = WeightSource::Dummy;

  PipelineOptions pipeline;
  pipeline.quant = options.quant;
  pipeline.quantGroupSize = options.quantGroupSize;
  pipeline.quantSkip = options.quantSkip;
  if (mlir::failed(runCompilePipeline(*module, pipeline))) {
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

  lowering.seed = options.seed;
  lowering.quantScales =
      options.quantScales == "mse" ? quant::ScaleChoice::MinError : quant::ScaleChoice::Absmax;
  lowering.provenance.compilerVersion = std::string("ingot ") + kVersion;
  lowering.provenance.options = options.commandLine;
  lowering.provenance.source = options.input;
  lowering.provenance.sourceXxh64 = sourceHash;
  lowering.provenance.created = utcNow();

  ArtifactWriter writer;
  LoweringReport report;
  if (mlir::failed(lowerModuleToArtifact(*module, lowering, writer, &report))) {
    diagnostics.flush();
    err << "ingot compile: error: cannot lower '" << options.input << "' to an artifact\n";
    return 1;
  }
  if (options.draftLayers > 0) {
    StatusOr<Program> draft =
        earlyExitDraftProgram(writer.contents().programs.at(0), options.draftLayers);
    if (!draft.ok()) {
      err << "ingot compile: error: " << draft.status().message() << "\n";
      return 1;
    }
    writer.addProgram(std::move(*draft));
  }
  Status status = writer.write(options.output);
  if (!status.ok()) {
    err << "ingot compile: error: " << status.message() << "\n";
    return 1;
  }

  // Parameters are the model's own: quantization scales are not counted.
  std::vector<bool> isScale(writer.contents().tensors.size(), false);
  for (const TensorSpec &t : writer.contents().tensors)
    for (int32_t i : {t.quant.scaleTensor, t.quant.zeroTensor, t.quant.globalScaleTensor})
      if (i >= 0 && static_cast<size_t>(i) < isScale.size())
        isScale[i] = true;
  uint64_t parameters = 0, bytes = 0;
  for (size_t i = 0; i < writer.contents().tensors.size(); ++i) {
    const TensorSpec &t = writer.contents().tensors[i];
    if (isScale[i])
      continue;
    uint64_t n = 1;
    for (int64_t d : t.shape)
      n *= static_cast<uint64_t>(d);
    parameters += n;
  }
  std::ifstream written(options.output, std::ios::binary | std::ios::ate);
  bytes = written ? static_cast<uint64_t>(written.tellg()) : 0;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char summary[256];
  std::snprintf(summary, sizeof(summary),
                "wrote %s: %zu tensors, %.1fM parameters, %s, %.2f s, peak memory %s\n",
                options.output.c_str(), writer.numTensors(), parameters / 1e6,
                humanBytes(bytes).c_str(), seconds, humanBytes(peakRssBytes()).c_str());
  out << summary;
  if (!options.quant.empty()) {
    std::snprintf(summary, sizeof(summary), "quantized %zu linear weights to %s",
                  report.quantizedWeights, options.quant.c_str());
    out << summary;
    if (report.exactQuantizedWeights > 0)
      out << " (" << report.exactQuantizedWeights << " copied exactly from GGUF Q4 blocks)";
    out << "\n";
  }
  return 0;
}

} // namespace ingot::compiler
