//===- CompileCommand.cpp - `ingot compile` -------------------------------===//
#include "compiler/driver/CompileCommand.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>
#include <sys/resource.h>
#include <unistd.h>

#include "core/artifact/artifact_writer.h"
#include "core/artifact/draft_program.h"
#include "codegen/cuda/KernelCache.h"
#include "compiler/driver/AttentionKernels.h"
#include "compiler/driver/FusedKernels.h"
#include "compiler/driver/QuantKernels.h"
#include "compiler/driver/W8a8Kernels.h"
#include "compiler/transforms/KernelSelection.h"
#include "compiler/driver/Calibration.h"
#include "compiler/driver/CompileUsage.h"
#include "compiler/driver/SourceAnnotations.h"
#include "compiler/driver/ModuleToArtifact.h"
#include "compiler/driver/Pipeline.h"
#include "compiler/import/GgufImporter.h"
#include "compiler/import/HfImporter.h"
#include "compiler/import/LlamaModuleBuilder.h"
#include "compiler/import/hf/HfConfigModel.h"
#include "compiler/quant/WeightEncoders.h"
#include "dialects/ingot/IngotDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "core/base/version.h"
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

std::string humanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / double(1ull << 30));
  else
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / double(1ull << 20));
  return buf;
}

/// One line on what calibration did, for the compile summary.
std::string describeCalibration(const CalibrationResult &c) {
  double meanAlpha = 0.0;
  for (float a : c.alphas)
    meanAlpha += a;
  if (!c.alphas.empty())
    meanAlpha /= static_cast<double>(c.alphas.size());
  char line[320];
  int used = std::snprintf(line, sizeof(line),
                           "calibrated on %lld tokens (forward %.1f s, search %.1f s): ",
                           static_cast<long long>(c.tokens), c.forwardSeconds, c.searchSeconds);
  if (c.alphas.empty())
    used += std::snprintf(line + used, sizeof(line) - used, "no scale search");
  else
    used += std::snprintf(line + used, sizeof(line) - used,
                          "%zu scale groups, mean alpha %.2f, sampled output error %.3g -> %.3g",
                          c.alphas.size(), meanAlpha, c.unscaledError, c.error);
  std::snprintf(line + used, sizeof(line) - used,
                "; %zu weights with activation-weighted block scales", c.columnImportance.size());
  return line;
}

/// The compile summary's kernels line: "kernels: 4 (1 from cache) for sm_80 ..., 2.1 s".
std::string kernelSummary(const CudaKernelReport &report, const std::vector<std::string> &targets) {
  if (targets.empty())
    return std::string("kernels: none (") +
           (cudaCodegenAvailable() ? "--cuda-targets none" : "built without NVRTC") + ")";
  std::string line = "kernels: " + std::to_string(report.kernels) + " (" +
                     std::to_string(report.kernelsFromCache) + " from cache) for";
  for (const std::string &t : targets)
    line += " " + t;
  char tail[64];
  std::snprintf(tail, sizeof(tail), ", %zu NVRTC compiles, %.2f s", report.compiles,
                report.seconds);
  return line + tail;
}

mlir::DialectRegistry compilerRegistry() {
  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  return registry;
}

/// One `ingot compile`: its stages in order, each returning an exit code or kContinue, and
/// what they hand on.
class CompileRun {
public:
  CompileRun(const CompileOptions &options, std::ostream &out, std::ostream &err)
      : options(options), out(out), err(err), info(options.emitMlir.empty() ? out : err),
        context(compilerRegistry()),
        diagnostics(context, sourceMgr, err),
        quantGroupSize(options.quantGroupSize.value_or(quant::kGgmlQ4BlockSize)) {}

  int run();

private:
  /// A checkpoint (GGUF, Hugging Face directory or config alone) imported, calibrated
  /// when asked, and built into a module.
  int importCheckpoint();
  /// Reads the checkpoint at `path` (lazily: tensors are read when the artifact is written).
  int readCheckpoint(InputKind from, const std::string &path,
                     const std::optional<std::string> &weightDtype, const std::string &kvDtype);
  /// Calibrates the checkpoint as `settings` say (--calib, or what a printed module
  /// records); nothing without a text.
  int calibrate(const CalibrationSettings &settings);
  int buildModule();
  /// An `ingot` module read from its .mlir text; one printed from a checkpoint's compile
  /// names its checkpoint (kSourceAttr), which is read again for the weights.
  int parseModule();
  int readSourceOf(mlir::DictionaryAttr source);
  /// The pass pipeline; --emit-mlir prints its result.
  int runPipeline();
  /// The module lowered to an artifact with its CUDA kernels, written to the output.
  int lowerAndWrite();
  void printSummary();

  const CompileOptions &options;
  std::ostream &out, &err;
  /// What the compile reports before the pass pipeline (group sizes, calibration): on
  /// stderr when --emit-mlir prints the module on stdout, so the printed module parses.
  std::ostream &info;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  InputKind kind = InputKind::Missing;
  std::vector<std::string> cudaTargets;
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  DiagnosticPrinter diagnostics;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  LoweringOptions lowering;
  std::unique_ptr<importer::ImportedModel> checkpoint;
  // --calib: the folded checkpoint (its tensors read through `checkpoint`'s) and the
  // channel weights its quantized tensors are encoded with.
  std::unique_ptr<CalibrationResult> calibration;
  uint64_t sourceHash = 0;
  int64_t quantGroupSize;
  const char *sourceLabel = nullptr; // what exactly-copied weights come from
  ArtifactWriter writer;
  LoweringReport report;
  CudaKernelReport kernels;
};

int CompileRun::run() {
  if (int rc = checkUsage(options, err); rc != kContinue)
    return rc;
  StatusOr<std::vector<std::string>> targets = parseCudaTargets(options.cudaTargets);
  if (!targets.ok()) {
    err << "ingot compile: error: " << targets.status().message() << "\n";
    return 2;
  }
  cudaTargets = *targets;
  kind = classifyInput(options.input);
  const bool isCheckpoint =
      kind == InputKind::Gguf || kind == InputKind::Directory || kind == InputKind::ConfigOnly;
  if (int rc = checkInputUsage(options, kind, isCheckpoint, err); rc != kContinue)
    return rc;
  if (int rc = isCheckpoint ? importCheckpoint() : parseModule(); rc != kContinue)
    return rc;
  if (options.dummyWeights)
    lowering.weights = WeightSource::Dummy;
  else if (kind == InputKind::ConfigOnly && options.randomWeights)
    lowering.weights = WeightSource::Random;
  if (int rc = runPipeline(); rc != kContinue)
    return rc;
  if (!options.emitMlir.empty() && options.output.empty())
    return 0;
  if (int rc = lowerAndWrite(); rc != kContinue)
    return rc;
  printSummary();
  return 0;
}

int CompileRun::readCheckpoint(InputKind from, const std::string &path,
                               const std::optional<std::string> &weightDtype,
                               const std::string &kvDtype) {
  StatusOr<schema::DType> dtype = importer::parseWeightDtype(weightDtype.value_or("bf16"));
  if (!dtype.ok()) {
    err << "ingot compile: error: " << dtype.status().message() << "\n";
    return 2;
  }
  // A config alone takes its torch_dtype unless --dtype is given.
  std::optional<schema::DType> configDtype;
  if (weightDtype)
    configDtype = *dtype;
  StatusOr<importer::ImportedModel> imported =
      from == InputKind::Gguf ? importer::importGguf(path,
                                                     importer::GgufImportOptions{*dtype})
      : from == InputKind::ConfigOnly
          ? importer::hf::importConfigOnly(path,
                                           importer::hf::ConfigModelOptions{configDtype})
          : importer::importHuggingFace(path, importer::HfImportOptions{*dtype});
  if (!imported.ok()) {
    err << "ingot compile: error: " << imported.status().message() << "\n";
    return 1;
  }
  // Checked after the import, so a bad config is reported as such.
  if (from == InputKind::ConfigOnly && !options.output.empty() && !options.dummyWeights &&
      !options.randomWeights) {
    err << "ingot compile: error: '" << path
        << "' is a model config without (safetensors) weights; pass --dummy-weights (the "
           "runtime fills seeded random weights) or --random-weights (written into the "
           "artifact)\n";
    return 2;
  }
  checkpoint = std::make_unique<importer::ImportedModel>(std::move(imported).value());
  if (kvDtype == "fp8") {
    checkpoint->config.kvDtype = schema::DType::F8E4M3FN;
  } else if (kvDtype != "f32") {
    err << "ingot compile: error: --kv-dtype must be f32 or fp8, got '" << kvDtype
        << "'\n";
    return 2;
  }
  // A GPTQ / AWQ checkpoint keeps its own group under --quant int4 unless --quant-group
  // is given (even at the default), which re-quantizes layers of another group.
  sourceLabel = sourceQuantization(*checkpoint).first;
  if (int64_t group = sourceQuantization(*checkpoint).second;
      options.quant == "int4" && group > 0 && group != quantGroupSize) {
    if (options.quantGroupSize) {
      info << "re-quantizing the " << sourceLabel << " checkpoint's group-" << group
          << " layers with --quant-group " << quantGroupSize << "\n";
    } else if (std::find(std::begin(quant::kInt4GroupSizes),
                         std::end(quant::kInt4GroupSizes),
                         group) != std::end(quant::kInt4GroupSizes)) {
      quantGroupSize = group;
      info << "using the " << sourceLabel << " checkpoint's group size " << group << "\n";
    } else {
      err << "ingot compile: warning: the " << sourceLabel << " checkpoint's group size "
          << group << " is not one of 32, 64, 128: its layers are re-quantized with group "
          << quantGroupSize << "\n";
    }
  }
  return kContinue;
}

int CompileRun::importCheckpoint() {
  if (int rc = readCheckpoint(kind, options.input, options.dtype, options.kvDtype); rc != kContinue)
    return rc;
  if (int rc = calibrate({options.calib, options.calibSearch.value_or("all"), options.quant,
                          options.calibTokens.value_or(kDefaultCalibTokens), quantGroupSize});
      rc != kContinue)
    return rc;
  return buildModule();
}

int CompileRun::calibrate(const CalibrationSettings &settings) {
  if (settings.text.empty())
    return kContinue;
  CalibrationOptions calib = calibrationOptions(settings);
  calib.recordInputs = options.calibrationForward;
  StatusOr<CalibrationResult> calibrated = calibrateCheckpoint(*checkpoint, calib);
  if (!calibrated.ok()) {
    err << "ingot compile: error: --calib " << settings.text << ": "
        << calibrated.status().message() << "\n";
    return 1;
  }
  calibration = std::make_unique<CalibrationResult>(std::move(calibrated).value());
  info << describeCalibration(*calibration) << "\n";
  return kContinue;
}

int CompileRun::buildModule() {
  std::string error;
  auto built = importer::buildLlamaModule(context, *checkpoint, error);
  if (failed(built)) {
    diagnostics.flush();
    err << "ingot compile: error: " << options.input << ": " << error << "\n";
    return 1;
  }
  module = std::move(*built);
  annotateSourceQuantization(*module, calibration ? calibration->model : *checkpoint);
  stampSource(*module, options, kind, calibration ? quantGroupSize : 0);
  lowering.weights = WeightSource::Checkpoint;
  lowering.checkpoint = calibration ? &calibration->model : checkpoint.get();
  if (calibration)
    lowering.quantColumnImportance = &calibration->columnImportance;
  if (::isatty(STDERR_FILENO))
    lowering.onTensorWritten = [&progress = err](size_t done, size_t total) {
      constexpr size_t kWidth = 40;
      size_t filled = total ? done * kWidth / total : kWidth;
      progress << "\r[" << std::string(filled, '#') << std::string(kWidth - filled, ' ') << "] "
          << done << "/" << total << " tensors" << (done == total ? "\n" : "")
          << std::flush;
    };
  sourceHash = checkpoint->sourceXxh64;
  return kContinue;
}

int CompileRun::parseModule() {
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
  if (auto source = (*module)->getAttrOfType<mlir::DictionaryAttr>(kSourceAttr))
    return readSourceOf(source);
  if (!options.output.empty() && !options.randomWeights && !options.dummyWeights) {
    err << "ingot compile: error: '" << options.input
        << "' is IR without weights; pass --random-weights or --dummy-weights\n";
    return 2;
  }
  lowering.weights = options.randomWeights ? WeightSource::Random : WeightSource::Dummy;
  return kContinue;
}

int CompileRun::readSourceOf(mlir::DictionaryAttr source) {
  auto text = [&](const char *key) {
    auto a = source.getAs<mlir::StringAttr>(key);
    return a ? a.getValue().str() : std::string();
  };
  auto calib = source.getAs<mlir::DictionaryAttr>("calib");
  if (auto calibrated = source.getAs<mlir::BoolAttr>("calibrated");
      !calib && calibrated && calibrated.getValue()) {
    err << "ingot compile: error: '" << options.input
        << "' was printed by a --calib compile of an older ingot, which did not record its "
           "calibration; compile the checkpoint with --calib instead\n";
    return 2;
  }
  const std::string format = text("format"), path = text("path");
  const InputKind from = format == "gguf"   ? InputKind::Gguf
                         : format == "hf"   ? InputKind::Directory
                         : format == "config" ? InputKind::ConfigOnly
                                              : InputKind::Missing;
  if (from == InputKind::Missing || path.empty()) {
    err << "ingot compile: error: '" << options.input << "': " << kSourceAttr
        << " needs a path and a format (gguf, hf or config)\n";
    return 2;
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (options.randomWeights || options.dummyWeights) {  // the weights are not needed
      lowering.weights = options.randomWeights ? WeightSource::Random : WeightSource::Dummy;
      return kContinue;
    }
    err << "ingot compile: error: '" << options.input << "' takes its weights from '" << path
        << "' (" << kSourceAttr << "), which does not exist; restore it, or pass "
        << "--random-weights or --dummy-weights\n";
    return 1;
  }
  const std::string dtype = text("dtype");
  if (int rc = readCheckpoint(from, path, dtype.empty() ? std::nullopt
                                                       : std::optional<std::string>(dtype),
                              text("kv_dtype").empty() ? "f32" : text("kv_dtype"));
      rc != kContinue)
    return rc;
  lowering.weights = options.randomWeights ? WeightSource::Random : WeightSource::Checkpoint;
  lowering.checkpoint = checkpoint.get();
  sourceHash = checkpoint->sourceXxh64;
  if (calib && !options.randomWeights && !options.dummyWeights) {
    // Calibrated again as the printing compile was, so the folded weights are the same.
    StatusOr<CalibrationSettings> recorded = readCalibrationSettings(calib);
    if (!recorded.ok()) {
      err << "ingot compile: error: '" << options.input << "': " << recorded.status().message()
          << "\n";
      return 2;
    }
    const CalibrationSettings &r = *recorded;
    if (std::string why = calibrationMismatch(*module, r, options.quant, quantGroupSize);
        !why.empty()) {
      err << "ingot compile: error: '" << options.input << "' was calibrated for --quant "
          << r.quant << (r.quant == "int4" ? " --quant-group " + std::to_string(r.group) : "")
          << ", but " << why << "; compile it with the flags it was printed with\n";
      return 2;
    }
    if (int rc = calibrate(r); rc != kContinue)
      return rc;
    lowering.checkpoint = &calibration->model;
    lowering.quantColumnImportance = &calibration->columnImportance;
  }
  return kContinue;
}

int CompileRun::runPipeline() {
  PipelineOptions pipeline;
  pipeline.quant = options.quant;
  pipeline.quantGroupSize = quantGroupSize;
  pipeline.quantSkip = options.quantSkip;
  pipeline.tensorParallel = options.tensorParallel;
  pipeline.cudaTargets = cudaTargets;
  const std::vector<std::string> stages = pipelineStageNames(pipeline);
  std::string emitAfter = options.emitMlir == "final" ? stages[stages.size() - 2] : options.emitMlir;
  if (!options.emitMlir.empty() &&
      std::find(stages.begin(), stages.end(), options.emitMlir) == stages.end()) {
    std::string list;
    for (const std::string &s : stages)
      list += (list.empty() ? "" : ", ") + s;
    err << "ingot compile: error: --emit-mlir: this compile has no stage '" << options.emitMlir
        << "' (its stages: " << list << ")\n";
    return 2;
  }
  PipelineObserver observer;
  observer.printAfterAll = options.printIrAfterAll;
  observer.afterStage = [&](const std::string &stage, mlir::ModuleOp m) {
    if (stage != emitAfter)
      return;
    std::string text;
    llvm::raw_string_ostream os(text);
    m.print(os);
    os.flush();
    out << text << "\n";
  };
  if (mlir::failed(runCompilePipeline(*module, pipeline, observer))) {
    diagnostics.flush();
    err << "ingot compile: error: the pass pipeline failed on '" << options.input << "'\n";
    return 1;
  }
  return kContinue;
}

/// The fused kernels of `selection`, as the kernel stage takes them.
FusedKernelSelection fusedKernelSelection(const KernelSelection &selection) {
  FusedKernelSelection fused;
  for (const std::string &type : selection.fusedTypes)
    fused.dtypes.push_back(type == "bf16" ? codegen::AttentionDtype::kBF16
                                          : codegen::AttentionDtype::kF32);
  fused.kvWriteFp8 = selection.fusedKvWriteFp8;
  fused.scale = selection.fusedScale;
  fused.geluMul = selection.fusedGeluMul;
  return fused;
}

int CompileRun::lowerAndWrite() {
  lowering.seed = options.seed;
  lowering.quantScales =
      options.quantScales == "mse" ? quant::ScaleChoice::MinError : quant::ScaleChoice::Absmax;
  lowering.provenance.compilerVersion = std::string("ingot ") + kVersion;
  lowering.provenance.options = options.commandLine;
  lowering.provenance.source = options.input;
  lowering.provenance.sourceXxh64 = sourceHash;
  lowering.provenance.created = utcNow();

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
  // The kernels ingot-select-kernels chose: attention steps carry their decode kernel's
  // name from lowering, the fused kernels' types and the attention shapes left to the CPU
  // are the module's.
  const KernelSelection selection = readKernelSelection(*module);
  for (const std::string &why : selection.cpuOnly)
    kernels.warnings.push_back("no CUDA kernels for " + why +
                               "; these steps run on the CPU backend only");
  const CudaKernelOptions kernelOptions{selection.targets,
                                        codegen::KernelCache::defaultDirectory()};
  Status kernelStatus = addAttentionKernels(writer, kernelOptions, &kernels);
  if (kernelStatus.ok())
    kernelStatus = addFusedKernels(writer, fusedKernelSelection(selection), kernelOptions,
                                   &kernels);
  StatusOr<std::vector<codegen::QuantGemvKernel>> quantKernels =
      quantGemvKernelsNamed(selection.quantKernels);
  if (kernelStatus.ok())
    kernelStatus = quantKernels.status();
  if (kernelStatus.ok())
    kernelStatus = addQuantKernels(writer, *quantKernels, kernelOptions, &kernels);
  if (kernelStatus.ok())
    kernelStatus = addW8a8Kernels(writer, selection.w8a8Kernels, kernelOptions, &kernels);
  if (!kernelStatus.ok()) {
    err << "ingot compile: error: " << kernelStatus.message() << "\n";
    return 1;
  }
  for (const std::string &w : kernels.warnings)
    err << "ingot compile: warning: " << w << "\n";
  Status status = writer.write(options.output);
  if (!status.ok()) {
    err << "ingot compile: error: " << status.message() << "\n";
    return 1;
  }

  return kContinue;
}

void CompileRun::printSummary() {
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
      out << " (" << report.exactQuantizedWeights << " copied exactly from "
          << (sourceLabel && std::string(sourceLabel) != "GGUF Q4"
                  ? std::string(sourceLabel) + " integers"
                  : std::string("GGUF Q4 blocks"))
          << ")";
    out << "\n";
  }
  out << kernelSummary(kernels, cudaTargets) << "\n";
  if (kind == InputKind::ConfigOnly && !checkpoint->hasTokenizer)
    out << "no tokenizer (none beside the config): ingot bench runs the artifact, ingot run "
           "and serve need one\n";
}

} // namespace

int runCompile(const CompileOptions &options, std::ostream &out, std::ostream &err) {
  CompileRun run(options, out, err);
  return run.run();
}

std::vector<std::string> compileStageNames() {
  PipelineOptions everyStage;
  everyStage.quant = "int4";
  everyStage.tensorParallel = 2;
  return pipelineStageNames(everyStage);
}

} // namespace ingot::compiler
