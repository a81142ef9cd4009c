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

} // namespace ingot::compiler
