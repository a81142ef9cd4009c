//===- SourceAnnotations.cpp - what an imported module records about its checkpoint -===//
#include "compiler/driver/SourceAnnotations.h"

#include <algorithm>
#include <filesystem>

#include "dialects/ingot/IngotDialect.h"
#include "mlir/IR/Builders.h"

namespace ingot::compiler {

/// Marks the weights whose checkpoint tensors are GGUF Q4_0 / Q4_1 blocks or GPTQ / AWQ
/// layers with the int4 scheme that holds them exactly (`source_quant`), so `--quant int4`
/// keeps their integers.
void annotateSourceQuantization(mlir::ModuleOp module, const importer::ImportedModel &model) {
  using mlir::ingot::QuantOffsetKind;
  module.walk([&](mlir::ingot::WeightOp op) {
    if (op.getHandle() >= model.tensors.size())
      return;
    importer::SourceQuant source = model.tensors[op.getHandle()].sourceQuant;
    if (source == importer::SourceQuant::None)
      return;
    // GPTQ / AWQ: w = scale * (q - zero) with the checkpoint's own group and integer zeros.
    const bool packed =
        source == importer::SourceQuant::Gptq || source == importer::SourceQuant::Awq;
    op.setSourceQuantAttr(mlir::ingot::QuantSchemeAttr::get(
        op.getContext(), mlir::ingot::QuantKind::Int4,
        packed ? model.tensors[op.getHandle()].sourceGroupSize : quant::kGgmlQ4BlockSize,
        source == importer::SourceQuant::GgufQ4_1 ? QuantOffsetKind::Min
                                                  : QuantOffsetKind::Zero));
  });
}

/// "GPTQ" / "AWQ" / "GGUF Q4" for a checkpoint holding such tensors (the first found),
/// and the group size of its GPTQ / AWQ layers (0 when none or when they differ).
std::pair<const char *, int64_t> sourceQuantization(const importer::ImportedModel &model) {
  const char *label = nullptr;
  int64_t group = -1;
  for (const importer::ImportedTensor &t : model.tensors) {
    if (t.sourceQuant == importer::SourceQuant::None)
      continue;
    const bool packed = t.sourceQuant == importer::SourceQuant::Gptq ||
                        t.sourceQuant == importer::SourceQuant::Awq;
    if (!label)
      label = t.sourceQuant == importer::SourceQuant::Gptq  ? "GPTQ"
              : t.sourceQuant == importer::SourceQuant::Awq ? "AWQ"
                                                             : "GGUF Q4";
    if (packed)
      group = group < 0 || group == t.sourceGroupSize ? t.sourceGroupSize : 0;
  }
  return {label, std::max<int64_t>(group, 0)};
}

void stampSource(mlir::ModuleOp module, const CompileOptions &options, InputKind kind,
                 int64_t calibGroup) {
  mlir::Builder b(module.getContext());
  std::error_code ec;
  std::filesystem::path path = std::filesystem::absolute(options.input, ec);
  llvm::SmallVector<mlir::NamedAttribute> fields = {
      b.getNamedAttr("path", b.getStringAttr(ec ? options.input : path.lexically_normal().string())),
      b.getNamedAttr("format", b.getStringAttr(kind == InputKind::Gguf        ? "gguf"
                                               : kind == InputKind::ConfigOnly ? "config"
                                                                               : "hf")),
      b.getNamedAttr("kv_dtype", b.getStringAttr(options.kvDtype))};
  if (options.dtype)
    fields.push_back(b.getNamedAttr("dtype", b.getStringAttr(*options.dtype)));
  if (calibGroup > 0) {
    std::filesystem::path text = std::filesystem::absolute(options.calib, ec);
    mlir::NamedAttribute calib[] = {
        b.getNamedAttr("text", b.getStringAttr(ec ? options.calib
                                                  : text.lexically_normal().string())),
        b.getNamedAttr("tokens", b.getI64IntegerAttr(
                                     options.calibTokens.value_or(kDefaultCalibTokens))),
        b.getNamedAttr("search", b.getStringAttr(options.calibSearch.value_or("all"))),
        b.getNamedAttr("quant", b.getStringAttr(options.quant)),
        b.getNamedAttr("group", b.getI64IntegerAttr(calibGroup))};
    fields.push_back(b.getNamedAttr("calib", b.getDictionaryAttr(calib)));
  }
  module->setAttr(kSourceAttr, b.getDictionaryAttr(fields));
}

CalibrationOptions calibrationOptions(const CalibrationSettings &settings) {
  CalibrationOptions calib;
  calib.textPath = settings.text;
  calib.maxTokens = settings.tokens;
  calib.encoding = settings.quant == "int4"    ? quant::WeightEncoding::Int4Min
                   : settings.quant == "nvfp4" ? quant::WeightEncoding::Nvfp4
                                               : quant::WeightEncoding::Mxfp4;
  calib.group = settings.group;
  calib.searchScales = settings.search != "clip";
  calib.weightedBlocks = settings.search != "scale";
  return calib;
}

StatusOr<CalibrationSettings> readCalibrationSettings(mlir::DictionaryAttr calib) {
  auto text = [&](const char *key) { return calib.getAs<mlir::StringAttr>(key); };
  auto number = [&](const char *key) { return calib.getAs<mlir::IntegerAttr>(key); };
  if (!text("text") || text("text").getValue().empty() || !text("search") || !text("quant") ||
      !number("tokens") || !number("group"))
    return invalidArgument(std::string(kSourceAttr) +
                           ".calib needs text, tokens, search, quant and group");
  CalibrationSettings r;
  r.text = text("text").str();
  r.search = text("search").str();
  r.quant = text("quant").str();
  r.tokens = number("tokens").getInt();
  r.group = number("group").getInt();
  return r;
}

std::string calibrationMismatch(mlir::ModuleOp module, const CalibrationSettings &recorded,
                                const std::string &quant, int64_t group) {
  bool quantized = false;
  module.walk([&](mlir::Operation *op) {
    if (auto l = llvm::dyn_cast<mlir::ingot::LinearOp>(op))
      quantized |= static_cast<bool>(l.getQuantAttr());
    if (auto g = llvm::dyn_cast<mlir::ingot::GatedLinearOp>(op))
      quantized |= static_cast<bool>(g.getQuantAttr());
  });
  if (quant.empty())
    return quantized ? "" : "this compile quantizes nothing (no --quant, no quantized linear)";
  if (quant != recorded.quant)
    return "this compile asks for --quant " + quant;
  if (quant == "int4" && group != recorded.group)
    return "this compile quantizes int4 with group " + std::to_string(group);
  return "";
}

} // namespace ingot::compiler
